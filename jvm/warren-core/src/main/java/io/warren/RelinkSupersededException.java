package io.warren;

/**
 * Linking to the peers was abandoned because a new re-link round started (a worker failed again); the library normally retries by itself, so this surfaces only when its deadline has passed.
 */
public class RelinkSupersededException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public RelinkSupersededException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public RelinkSupersededException(String message, Throwable cause) {
    super(message, cause);
  }
}

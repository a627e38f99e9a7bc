package io.warren;

/**
 * The tracker or a peer refused this worker because it could not prove it holds the job secret (or a peer failed to prove it).
 */
public class WarrenAuthException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WarrenAuthException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WarrenAuthException(String message, Throwable cause) {
    super(message, cause);
  }
}

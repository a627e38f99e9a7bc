package io.warren;

/**
 * A durable store failed earlier (a write or fsync error) and refuses further work until restarted.
 */
public class StoreFailedException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public StoreFailedException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public StoreFailedException(String message, Throwable cause) {
    super(message, cause);
  }
}

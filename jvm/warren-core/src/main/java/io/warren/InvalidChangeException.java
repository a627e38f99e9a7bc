package io.warren;

/**
 * A logged change of the data master does not fit the state it is replayed onto: snapshot and log do not belong together.
 */
public class InvalidChangeException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public InvalidChangeException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public InvalidChangeException(String message, Throwable cause) {
    super(message, cause);
  }
}

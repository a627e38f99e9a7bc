package io.warren;

/**
 * A peer or the tracker sent bytes that do not follow Warren's protocol.
 */
public class WarrenProtocolException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WarrenProtocolException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WarrenProtocolException(String message, Throwable cause) {
    super(message, cause);
  }
}

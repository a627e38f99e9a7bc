package io.warren.flink;

/** A Warren run on Flink cannot start or failed: the message says why and what to change. */
public class WarrenFlinkException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * A failure with a message for the user.
   *
   * @param message what failed and what to do about it
   * @param cause the underlying exception, or null
   */
  public WarrenFlinkException(String message, Throwable cause) {
    super(message, cause);
  }
}

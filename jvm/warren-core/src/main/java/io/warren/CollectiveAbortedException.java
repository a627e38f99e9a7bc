package io.warren;

/**
 * The collective was aborted because another worker failed, or this communicator already failed in an earlier call.
 */
public class CollectiveAbortedException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public CollectiveAbortedException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public CollectiveAbortedException(String message, Throwable cause) {
    super(message, cause);
  }
}

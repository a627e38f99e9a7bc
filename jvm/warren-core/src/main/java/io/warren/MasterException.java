package io.warren;

/**
 * The data master refused a request or could not serve it (a task-queue error that fits no other class); the message names the master.
 */
public class MasterException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public MasterException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public MasterException(String message, Throwable cause) {
    super(message, cause);
  }
}

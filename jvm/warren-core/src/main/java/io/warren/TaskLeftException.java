package io.warren;

/**
 * This task is not a member of its elastic job any more and will not be: it was removed and has left (a re-run of it, by Spark say, has nothing to do), or it was removed before there was room for it to join. Not a failure of the job: the task should end without a result.
 */
public class TaskLeftException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public TaskLeftException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public TaskLeftException(String message, Throwable cause) {
    super(message, cause);
  }
}

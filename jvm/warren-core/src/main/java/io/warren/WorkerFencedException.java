package io.warren;

/**
 * The tracker fenced this worker: it sent no heartbeat within the peer timeout (it was paused, frozen or cut off), so the job went on without it and a replacement took its place. Nothing it sends is accepted any more; the task should end.
 */
public class WorkerFencedException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WorkerFencedException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WorkerFencedException(String message, Throwable cause) {
    super(message, cause);
  }
}

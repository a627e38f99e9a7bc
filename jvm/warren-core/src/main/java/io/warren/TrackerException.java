package io.warren;

/**
 * The tracker reported a job-level failure (rendezvous deadline passed, a worker was lost).
 */
public class TrackerException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public TrackerException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public TrackerException(String message, Throwable cause) {
    super(message, cause);
  }
}

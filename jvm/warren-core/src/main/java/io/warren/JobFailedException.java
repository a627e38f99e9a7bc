package io.warren;

/**
 * Another worker failed with an error that cannot succeed on retry, and the tracker ended the
 * job: this worker's call fails rather than wait for a replacement that cannot come. The
 * message names that worker and its error, which is the one to fix. A re-run of this worker
 * has nothing to do, so runners do not retry it.
 */
public class JobFailedException extends TrackerException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message the failure, as reported by the native library
   */
  public JobFailedException(String message) {
    super(message);
  }
}

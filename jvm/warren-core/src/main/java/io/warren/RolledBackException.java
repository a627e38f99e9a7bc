package io.warren;

/**
 * Elastic membership: the view changed during a recovery (a lost worker that did not come back within the rejoin timeout was dropped) and this worker rolled back to the last committed checkpoint in the new view; the call did not run and the communicator stays usable: load the checkpoint and go on from its version.
 */
public class RolledBackException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public RolledBackException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public RolledBackException(String message, Throwable cause) {
    super(message, cause);
  }
}

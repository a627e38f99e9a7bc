package io.warren;

/**
 * Recovery cannot proceed: the data a restarted worker needs is held by no live worker (every replica of a local model lost, or calls from before the last checkpoint that were not bootstrap calls). Raised on every worker.
 */
public class RecoveryImpossibleException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public RecoveryImpossibleException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public RecoveryImpossibleException(String message, Throwable cause) {
    super(message, cause);
  }
}

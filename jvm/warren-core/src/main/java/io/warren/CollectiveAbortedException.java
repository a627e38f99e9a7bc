package io.warren;

/**
 * The collective was aborted because another worker failed, or this communicator already failed
 * in an earlier call. {@link #rank()} is the worker that aborted first and {@link #reason()} its
 * reason.
 */
public class CollectiveAbortedException extends WarrenException {
  private static final long serialVersionUID = 1L;

  private final int rank;
  private final String reason;

  /**
   * Creates the exception without fields ({@link #rank()} is -1).
   *
   * @param message what went wrong, as reported by the native library
   */
  public CollectiveAbortedException(String message) {
    this(message, (Throwable) null);
  }

  /**
   * Creates the exception with a cause, without fields.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public CollectiveAbortedException(String message, Throwable cause) {
    super(message, cause);
    this.rank = -1;
    this.reason = message;
  }

  /**
   * Creates the exception with its fields (as the native library does).
   *
   * @param message the full message
   * @param rank the rank that aborted first (this worker's own rank when its communicator
   *     failed in an earlier call)
   * @param reason that rank's reason
   */
  public CollectiveAbortedException(String message, int rank, String reason) {
    super(message);
    this.rank = rank;
    this.reason = reason;
  }

  /**
   * Creates the exception with its fields and a cause.
   *
   * @param message the full message
   * @param rank the rank that aborted first, or -1
   * @param reason that rank's reason
   * @param cause the underlying error
   */
  protected CollectiveAbortedException(String message, int rank, String reason, Throwable cause) {
    super(message, cause);
    this.rank = rank;
    this.reason = reason;
  }

  /**
   * The rank that aborted first.
   *
   * @return the rank, or -1 if this exception was created without one
   */
  public int rank() {
    return rank;
  }

  /**
   * The reason of the rank that aborted first.
   *
   * @return the reason
   */
  public String reason() {
    return reason;
  }
}

package io.warren;

/**
 * The link to a peer broke (its process died or closed the connection). {@link #rank()} and
 * {@link #taskId()} name the peer.
 */
public class PeerLostException extends WarrenException {
  private static final long serialVersionUID = 1L;

  private final int rank;
  private final String taskId;
  private final String reason;

  /**
   * Creates the exception without fields ({@link #rank()} is -1).
   *
   * @param message what went wrong, as reported by the native library
   */
  public PeerLostException(String message) {
    this(message, -1, null, message);
  }

  /**
   * Creates the exception with a cause, without fields ({@link #rank()} is -1).
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public PeerLostException(String message, Throwable cause) {
    super(message, cause);
    this.rank = -1;
    this.taskId = null;
    this.reason = message;
  }

  /**
   * Creates the exception with its fields (as the native library does).
   *
   * @param message the full message
   * @param rank the rank of the lost peer
   * @param taskId the task id of the lost peer, or {@code null} if not known
   * @param reason what the operating system or the protocol said
   */
  public PeerLostException(String message, int rank, String taskId, String reason) {
    super(message);
    this.rank = rank;
    this.taskId = taskId;
    this.reason = reason;
  }

  /**
   * The rank of the lost peer.
   *
   * @return the rank, or -1 if this exception was created without one
   */
  public int rank() {
    return rank;
  }

  /**
   * The task id of the lost peer.
   *
   * @return the task id, or {@code null} if not known where the error surfaced
   */
  public String taskId() {
    return taskId;
  }

  /**
   * What the operating system or the protocol said about the broken link.
   *
   * @return the reason
   */
  public String reason() {
    return reason;
  }
}

package io.warren;

/**
 * The link to a peer broke (its process died or closed the connection). The message names the peer's rank.
 */
public class PeerLostException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public PeerLostException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public PeerLostException(String message, Throwable cause) {
    super(message, cause);
  }
}

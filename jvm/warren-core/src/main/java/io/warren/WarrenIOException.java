package io.warren;

/**
 * An operating-system I/O error outside a peer link (a listening socket, a file, the tracker connection).
 */
public class WarrenIOException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WarrenIOException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WarrenIOException(String message, Throwable cause) {
    super(message, cause);
  }
}

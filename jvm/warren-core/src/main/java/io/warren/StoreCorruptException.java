package io.warren;

/**
 * A file of a durable store is damaged; the message names the file and byte offset.
 */
public class StoreCorruptException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public StoreCorruptException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public StoreCorruptException(String message, Throwable cause) {
    super(message, cause);
  }
}

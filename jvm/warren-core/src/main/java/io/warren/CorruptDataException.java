package io.warren;

/**
 * A data file (RecordIO or dmlc {@code .rec}) is corrupt or truncated; the message names the file, chunk and byte offset.
 */
public class CorruptDataException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public CorruptDataException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public CorruptDataException(String message, Throwable cause) {
    super(message, cause);
  }
}

package io.warren;

/**
 * A worker reported a dataset that differs from the one the data master already serves.
 */
public class DatasetMismatchException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public DatasetMismatchException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public DatasetMismatchException(String message, Throwable cause) {
    super(message, cause);
  }
}

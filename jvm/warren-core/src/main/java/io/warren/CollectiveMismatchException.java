package io.warren;

/**
 * Workers called a collective with different arguments (size, type, operator, root or call order). Thrown on every worker.
 */
public class CollectiveMismatchException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public CollectiveMismatchException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public CollectiveMismatchException(String message, Throwable cause) {
    super(message, cause);
  }
}

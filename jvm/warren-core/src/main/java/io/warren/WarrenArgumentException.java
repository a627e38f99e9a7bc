package io.warren;

/**
 * The native library rejected an argument (an operator not defined for the element type, a misaligned buffer, a root out of range).
 */
public class WarrenArgumentException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WarrenArgumentException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WarrenArgumentException(String message, Throwable cause) {
    super(message, cause);
  }
}

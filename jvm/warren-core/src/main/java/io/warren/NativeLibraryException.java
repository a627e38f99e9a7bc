package io.warren;

/**
 * Warren's native library could not be loaded. Thrown on first use (never from a static initializer), with the detected platform, every place that was tried, and what to do.
 */
public class NativeLibraryException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public NativeLibraryException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public NativeLibraryException(String message, Throwable cause) {
    super(message, cause);
  }
}

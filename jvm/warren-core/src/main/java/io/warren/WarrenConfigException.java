package io.warren;

/**
 * A setting is missing or malformed (a {@code WARREN_*} key, a tracker parameter).
 */
public class WarrenConfigException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WarrenConfigException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WarrenConfigException(String message, Throwable cause) {
    super(message, cause);
  }
}

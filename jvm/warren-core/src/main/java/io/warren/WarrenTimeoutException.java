package io.warren;

/**
 * A wait ran past its deadline ({@code WARREN_TIMEOUT_S} for a collective, {@code WARREN_CONNECT_TIMEOUT_S} for joining, or the timeout given to {@link Tracker#awaitCompletion}). The message names the peer rank or the task ids waited for.
 */
public class WarrenTimeoutException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WarrenTimeoutException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WarrenTimeoutException(String message, Throwable cause) {
    super(message, cause);
  }
}

package io.warren.runner;

/** A Warren run cannot start or failed: an invalid setting, a missing resource, a lost job. */
public class RunnerException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * A failure with a message for the user.
   *
   * @param message what failed and what to do about it
   * @param cause the underlying exception, or null
   */
  public RunnerException(String message, Throwable cause) {
    super(message, cause);
  }
}

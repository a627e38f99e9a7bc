package io.warren;

/**
 * Base class of every exception Warren throws (unchecked).

 <p>The native library maps each variant of its error type to one subclass, so callers can
 catch by class: {@link PeerLostException} when a peer died, {@link WarrenTimeoutException} when
 a deadline passed, and so on. After a collective fails, the {@link Communicator} is unusable:
 every later call throws {@link CollectiveAbortedException}; close it and create a new one.
 */
public class WarrenException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what went wrong, as reported by the native library
   */
  public WarrenException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public WarrenException(String message, Throwable cause) {
    super(message, cause);
  }
}

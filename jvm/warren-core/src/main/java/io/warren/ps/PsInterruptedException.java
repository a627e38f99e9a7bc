package io.warren.ps;

import io.warren.CollectiveAbortedException;
import io.warren.WarrenException;

/**
 * A parameter-server call (or connecting) was aborted because the calling thread was
 * interrupted ({@link Thread#interrupt()}, as Spark's task kill does). The thread's interrupt
 * flag is set again when this is thrown. The client is unusable afterwards: close it.
 */
public class PsInterruptedException extends WarrenException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what was interrupted
   * @param cause the native abort it caused
   */
  public PsInterruptedException(String message, CollectiveAbortedException cause) {
    super(message, cause);
  }
}

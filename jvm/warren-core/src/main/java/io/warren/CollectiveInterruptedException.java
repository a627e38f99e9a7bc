package io.warren;

/**
 * A collective call (or joining a job) was aborted because the calling thread was interrupted
 * ({@link Thread#interrupt()}, as Spark's task kill and Flink's task cancel do). The thread's
 * interrupt flag is set again when this is thrown. The communicator is unusable afterwards, as
 * after any failed call: {@link Communicator#abort() abort} it.
 */
public class CollectiveInterruptedException extends CollectiveAbortedException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception; {@link #rank()} and {@link #reason()} are those of {@code cause}.
   *
   * @param message what was interrupted
   * @param cause the native abort it caused
   */
  public CollectiveInterruptedException(String message, CollectiveAbortedException cause) {
    super(message, cause.rank(), cause.reason(), cause);
  }
}

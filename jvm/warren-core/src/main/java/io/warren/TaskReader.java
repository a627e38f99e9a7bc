package io.warren;

import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * A worker's iterator over the records of one pass: it obtains tasks from the {@link Master},
 * returns the records of their chunks, reports each task finished once its records are all
 * returned, and reports a task failed when one of its chunks cannot be read (corrupt, file
 * changed), then goes on with the next task. The iteration ends when the master says the pass
 * is over; {@link #startPass(long)} reads the next one. From {@link MasterClient#reader(long)}.
 *
 * <p>A task failed (or timed out) is handed out again, possibly to another worker, so a record
 * is read at least once per pass; exactly once when no task fails or times out.
 *
 * <p>{@link #hasNext()} throws when the master cannot be reached (after the client's retries),
 * when every remaining task failed ({@link MasterException}), or when no task came within the
 * idle timeout ({@link WarrenTimeoutException}); the iteration ends after it. Thread-safe (calls
 * are serialised); use one reader per thread for parallel reading.
 */
public final class TaskReader implements Iterator<byte[]>, AutoCloseable {
  private long handle;
  private byte[] next;
  private boolean ended;

  TaskReader(long handle) {
    this.handle = handle;
  }

  private long live() {
    if (handle == 0) {
      throw new IllegalStateException("TaskReader is closed");
    }
    return handle;
  }

  /**
   * Whether the pass has another record; may block while the master has no task to hand out
   * for the moment.
   *
   * @return false once the pass is over
   */
  @Override
  public synchronized boolean hasNext() {
    long h = live();
    if (next == null && !ended) {
      next = Native.taskReaderNext(h);
      ended = next == null;
    }
    return next != null;
  }

  /**
   * The next record of the pass.
   *
   * @return its bytes
   * @throws NoSuchElementException if the pass is over
   */
  @Override
  public synchronized byte[] next() {
    if (!hasNext()) {
      throw new NoSuchElementException("pass " + pass() + " is over");
    }
    byte[] r = next;
    next = null;
    return r;
  }

  /**
   * Starts reading pass {@code pass} once the previous one is over.
   *
   * @param pass the pass (the master's passes count from 0)
   * @throws IllegalStateException if records of the current pass remain unread
   */
  public synchronized void startPass(long pass) {
    long h = live();
    if (next != null || !ended) {
      throw new IllegalStateException("pass " + pass() + " is not over yet");
    }
    if (pass < 0) {
      throw new IllegalArgumentException("pass must not be negative, got " + pass);
    }
    Native.taskReaderStartPass(h, pass);
    ended = false;
  }

  /**
   * The pass being read.
   *
   * @return the pass
   */
  public synchronized long pass() {
    return Native.taskReaderCounts(live())[0];
  }

  /**
   * Tasks this reader reported finished.
   *
   * @return the count
   */
  public synchronized long tasksFinished() {
    return Native.taskReaderCounts(live())[1];
  }

  /**
   * Tasks this reader reported failed (a chunk could not be read).
   *
   * @return the count
   */
  public synchronized long tasksFailed() {
    return Native.taskReaderCounts(live())[2];
  }

  /**
   * Closes the reader's connection. Idempotent. A task it holds unfinished comes back to the
   * master's todo queue after its timeout.
   */
  @Override
  public synchronized void close() {
    long h = handle;
    if (h == 0) {
      return;
    }
    handle = 0;
    next = null;
    Native.taskReaderClose(h);
  }
}

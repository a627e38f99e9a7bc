package io.warren;

import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;

/**
 * The native handle of an object whose native side is thread-safe ({@link Tracker}, {@link
 * Master}): any number of calls use it at once (a read lock), and {@link #close} releases it
 * once, after the calls in flight (the write lock), so that no call ever sees a released
 * handle (the contract of {@code native/warren-jni/src/handle.rs}).
 *
 * <p>Public only for Warren's other packages ({@code io.warren.ps}: the parameter server's
 * handle); not an API.
 */
public final class SharedHandle {
  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private final String owner;
  private volatile long handle;

  /**
   * @param handle the native handle (not zero)
   * @param owner the class name used in "is closed" errors
   */
  public SharedHandle(long handle, String owner) {
    this.handle = handle;
    this.owner = owner;
  }

  /**
   * Throws if closed (for methods that only read state kept on the Java side).
   *
   * @throws IllegalStateException if {@link #close} was called
   */
  public void checkOpen() {
    if (handle == 0) {
      throw new IllegalStateException(owner + " is closed");
    }
  }

  /**
   * Runs a native call on the live handle; {@link #close} waits for it.
   *
   * @param call the call, given the handle
   * @param <T> what it returns
   * @return what it returned
   * @throws IllegalStateException if {@link #close} was called
   */
  public <T> T call(LongFunction<T> call) {
    lock.readLock().lock();
    try {
      checkOpen();
      return call.apply(handle);
    } finally {
      lock.readLock().unlock();
    }
  }

  /**
   * Whether {@link #close} was called.
   *
   * @return true once closed
   */
  public boolean isClosed() {
    return handle == 0;
  }

  /**
   * Releases the handle once, after the calls in flight; later calls do nothing.
   *
   * @param release the native release, given the handle
   */
  public void close(LongConsumer release) {
    lock.writeLock().lock();
    try {
      long h = handle;
      if (h == 0) {
        return;
      }
      handle = 0;
      release.accept(h);
    } finally {
      lock.writeLock().unlock();
    }
  }
}

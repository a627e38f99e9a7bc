package io.warren;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * One worker's membership in a Warren job: runs collectives (allreduce, broadcast, allgather,
 * barrier) with the other workers.
 *
 * <p>Not a singleton: several communicators can live in one JVM (one per Spark task, say), each
 * used by one thread at a time. Calls on one communicator are serialised; {@link #close()} from
 * another thread waits for a running call. Every collective must be called by every worker in
 * the same order with matching arguments, or all of them get a {@link
 * CollectiveMismatchException}. After a failed call the communicator is unusable (later calls
 * throw {@link CollectiveAbortedException}); close it.
 *
 * <p><b>Cancellation.</b> A call blocked in a collective returns when its peers arrive, when a
 * peer is lost, at {@code WARREN_TIMEOUT_S} (default 1800 s) at the latest, or when it is
 * cancelled, in two ways:
 *
 * <ul>
 *   <li>{@link #abort()} from another thread cancels the running call without waiting for the
 *       communicator's lock: the call throws {@link CollectiveAbortedException} within
 *       milliseconds, then {@code abort} frees the native resources;
 *   <li>{@link Thread#interrupt() interrupting} the thread inside a call (or joining in {@link
 *       #create(Map)}, or entering a call with its interrupt flag set) cancels it within about
 *       {@value InterruptWatcher#POLL_MS} ms: the call throws {@link
 *       CollectiveInterruptedException} with the thread's interrupt flag set. This is how
 *       Spark's task kill ({@code interruptOnCancel}) and Flink's task cancel stop a worker
 *       blocked in a collective.
 * </ul>
 *
 * <p>Either way the communicator is unusable afterwards (abort it), and its peers fail as for a
 * lost worker (in robust mode they wait for a new attempt of the same task instead).
 *
 * <pre>{@code
 * try (Communicator comm = Communicator.create(settings)) {
 *   float[] grad = computeGradient();
 *   comm.allreduce(grad, Op.SUM);
 * }
 * }</pre>
 *
 * <p>Every collective has a form with {@link CallOptions}: a bootstrap call, whose result a
 * restarted worker is served ({@code comm.allreduce(dims, Op.MAX, CallOptions.bootstrap())}),
 * or a tag every worker must pass alike.
 *
 * <p>Java arrays are copied into a buffer the communicator reuses while the collective runs
 * (holding a JNI critical region across a network wait would stall the garbage collector), in
 * pieces of 1 MiB that stay in the CPU cache; direct {@link ByteBuffer}s are used in place with
 * no copy.
 */
public final class Communicator implements AutoCloseable {
  private long handle;
  /** Cancels the running call without the object's lock; watches the calls for interrupts. */
  private final CallCanceller canceller;
  /** Set by {@link #close()}; read without the lock by rank(), worldSize(), isClosed(). */
  private volatile boolean closed;
  /** Re-read after a checkpoint and a roll-back (elastic jobs change the view then). */
  private volatile int rank;

  private volatile int worldSize;
  /** Told of each committed checkpoint; null for none. */
  private volatile CheckpointListener checkpointListener;

  private Communicator(long handle, CallCanceller canceller) {
    this.handle = handle;
    this.canceller = canceller;
    this.rank = Native.commRank(handle);
    this.worldSize = Native.commWorldSize(handle);
  }

  /**
   * Joins a job: registers with the tracker, gets a rank and connects to the neighbours.
   * Blocks until every worker has arrived (at most {@code WARREN_CONNECT_TIMEOUT_S}, default
   * 300 s).
   *
   * <p>Keys are the worker settings ({@code WARREN_TRACKER_URI}, {@code WARREN_TASK_ID}, {@code
   * WARREN_NUM_WORKERS}, {@code WARREN_JOB_SECRET}, {@code WARREN_ATTEMPT}, {@code
   * WARREN_TIMEOUT_S}, ...), usually {@link Tracker#workerSettings(String)}. An empty map makes a
   * world of one, which needs no tracker. {@code WARREN_JNI_ARRAY_ACCESS} chooses how arrays
   * reach a collective: {@code auto} (the default: pinned with no copy where G1 pins an array's
   * region only, from JDK 22; copied elsewhere), {@code copy} or {@code critical}.
   *
   * @param settings the worker settings
   * @return the communicator; close it when done
   * @throws WarrenConfigException if a setting is missing or malformed
   * @throws WarrenAuthException if the tracker refuses the job secret
   * @throws WarrenTimeoutException if the job could not be joined in time
   * @throws NativeLibraryException if the native library cannot be loaded
   */
  public static Communicator create(Map<String, String> settings) {
    Objects.requireNonNull(settings, "settings");
    NativeLoader.ensureLoaded();
    settings = ArrayAccess.resolved(settings);
    String[] keys = new String[settings.size()];
    String[] values = new String[settings.size()];
    int i = 0;
    for (Map.Entry<String, String> e : settings.entrySet()) {
      keys[i] = Objects.requireNonNull(e.getKey(), "a settings key is null");
      values[i] = Objects.requireNonNull(e.getValue(), () -> "the value of " + e.getKey());
      i++;
    }
    CallCanceller canceller = CallCanceller.create();
    long h =
        canceller.open(
            () -> Native.commCreate(keys, values, canceller.handle()),
            joined -> {
              // Leave the job as failed (abort, not close, which would tell the tracker this
              // worker finished and make it refuse the task's next attempt).
              CollectiveAbortedException cause =
                  new CollectiveAbortedException(
                      "the job was joined, then the calling thread was interrupted",
                      Native.commRank(joined),
                      CallCanceller.INTERRUPTED);
              Native.commAbort(joined);
              return cause;
            },
            cause -> interrupted("joining the job", cause),
            joinedHook);
    return new Communicator(h, canceller);
  }

  /**
   * Tests only: runs on the joining thread right after the native join returned, while the
   * interrupt watch is still open (to land an interrupt in that window deterministically).
   */
  static volatile java.util.function.Consumer<InterruptWatcher.Call> joinedHook;

  /** A native call on the live handle. */
  @FunctionalInterface
  private interface NativeCall<T> {
    T apply(long handle);
  }

  /** A native call on the live handle that returns nothing. */
  @FunctionalInterface
  private interface NativeRun {
    void apply(long handle);
  }

  private void run(NativeRun body) {
    call(
        h -> {
          body.apply(h);
          return null;
        });
  }

  /**
   * Runs one native call that may block on the peers (every collective goes through here; the
   * caller holds the object's lock). The {@link InterruptWatcher} sees the calling thread for
   * the length of the call: an interrupt cancels it, as does an interrupt already pending when
   * it starts, and the abort is thrown as a {@link CollectiveInterruptedException}.
   */
  private <T> T call(NativeCall<T> body) {
    long h = live();
    try {
      return canceller.call(() -> body.apply(h), e -> interrupted("the collective call", e));
    } catch (RolledBackException e) {
      readView(h);
      throw e;
    }
  }

  /** Reads the rank and world size of the current view (an elastic job changes them). */
  private void readView(long h) {
    rank = Native.commRank(h);
    worldSize = Native.commWorldSize(h);
  }

  /** The exception of a call aborted by an interrupt; sets the interrupt flag again. */
  private static CollectiveInterruptedException interrupted(
      String what, CollectiveAbortedException cause) {
    Thread.currentThread().interrupt();
    return new CollectiveInterruptedException(
        what + " was aborted because the calling thread was interrupted", cause);
  }

  /**
   * Runs one worker's part of a job: joins it ({@link #create(Map)}), runs {@code body}, and
   * leaves it: with {@link #close()} when {@code body} returns, with {@link #abort()} when it
   * throws, so that the tracker treats the worker as lost and a new attempt with the same task
   * id can take over (retry-one recovery). The exception is rethrown.
   *
   * <pre>{@code
   * double[] model = Communicator.run(settings, comm -> train(comm));
   * }</pre>
   *
   * @param settings the worker settings, as for {@link #create(Map)}
   * @param body the worker's work
   * @param <T> what {@code body} returns
   * @return what {@code body} returned
   * @throws WarrenException (a subclass) if joining, a collective or leaving fails
   */
  public static <T> T run(Map<String, String> settings, java.util.function.Function<Communicator, T> body) {
    Objects.requireNonNull(body, "body");
    Communicator comm = create(settings);
    T result;
    try {
      result = body.apply(comm);
    } catch (Throwable t) {
      comm.abort();
      throw t;
    }
    comm.close();
    return result;
  }

  /** The native handle (for the benchmark's Rust-side loop); throws if closed. */
  synchronized long nativeHandle() {
    return live();
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("Communicator is closed");
    }
  }

  private long live() {
    if (handle == 0) {
      throw new IllegalStateException("Communicator is closed");
    }
    return handle;
  }

  /**
   * This worker's rank. In an elastic job it changes with the view: after a {@link
   * #checkpoint} at which the view changed, and when a call throws {@link RolledBackException}.
   *
   * @return a number in {@code [0, worldSize())}
   * @throws IllegalStateException if the communicator is closed
   */
  public int rank() {
    checkOpen();
    return rank;
  }

  /**
   * The number of workers in the job (in an elastic job, in the current view; see {@link
   * #rank()}).
   *
   * @return at least 1
   * @throws IllegalStateException if the communicator is closed
   */
  public int worldSize() {
    checkOpen();
    return worldSize;
  }

  /**
   * Reduces {@code data} element-wise across all workers with {@code op}, in place; every
   * worker ends with the same bits. Arrays over 1 MiB are reduced in pieces of 1 MiB (setting
   * {@code WARREN_JNI_ARRAY_SEGMENT_BYTES}), so on failure some pieces may already hold the
   * result (a bootstrap call is always made whole).
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator (not bitwise: floats have none)
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public float[] allreduce(float[] data, Op op) {
    return allreduce(data, op, CallOptions.defaults());
  }

  /**
   * {@link #allreduce(float[], Op)} with call options (a bootstrap call, a tag).
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator (not bitwise: floats have none)
   * @param options the call options
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public synchronized float[] allreduce(float[] data, Op op, CallOptions options) {
    Objects.requireNonNull(data, "data");
    int code = opCode(op);
    Objects.requireNonNull(options, "options");
    run(p -> Native.commAllreduceF32(p, data, code, options.key(), options.tag()));
    return data;
  }

  /**
   * Reduces {@code data} element-wise across all workers with {@code op}, in place.
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator (not bitwise)
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public double[] allreduce(double[] data, Op op) {
    return allreduce(data, op, CallOptions.defaults());
  }

  /**
   * {@link #allreduce(double[], Op)} with call options (a bootstrap call, a tag).
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator (not bitwise)
   * @param options the call options
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public synchronized double[] allreduce(double[] data, Op op, CallOptions options) {
    Objects.requireNonNull(data, "data");
    int code = opCode(op);
    Objects.requireNonNull(options, "options");
    run(p -> Native.commAllreduceF64(p, data, code, options.key(), options.tag()));
    return data;
  }

  /**
   * Reduces {@code data} element-wise across all workers with {@code op}, in place (sums and
   * products wrap around).
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public int[] allreduce(int[] data, Op op) {
    return allreduce(data, op, CallOptions.defaults());
  }

  /**
   * {@link #allreduce(int[], Op)} with call options (a bootstrap call, a tag).
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator
   * @param options the call options
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public synchronized int[] allreduce(int[] data, Op op, CallOptions options) {
    Objects.requireNonNull(data, "data");
    int code = opCode(op);
    Objects.requireNonNull(options, "options");
    run(p -> Native.commAllreduceI32(p, data, code, options.key(), options.tag()));
    return data;
  }

  /**
   * Reduces {@code data} element-wise across all workers with {@code op}, in place (sums and
   * products wrap around).
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public long[] allreduce(long[] data, Op op) {
    return allreduce(data, op, CallOptions.defaults());
  }

  /**
   * {@link #allreduce(long[], Op)} with call options (a bootstrap call, a tag).
   *
   * @param data this worker's values; replaced by the result
   * @param op a reduction operator
   * @param options the call options
   * @return {@code data}, now holding the result
   * @throws WarrenException (a subclass) if the collective fails
   * @throws IllegalStateException if the communicator is closed
   */
  public synchronized long[] allreduce(long[] data, Op op, CallOptions options) {
    Objects.requireNonNull(data, "data");
    int code = opCode(op);
    Objects.requireNonNull(options, "options");
    run(p -> Native.commAllreduceI64(p, data, code, options.key(), options.tag()));
    return data;
  }

  /**
   * Reduces the remaining bytes of a direct buffer (from its position to its limit) in place,
   * with no copy. The bytes hold elements of {@code type} in native byte order: the buffer's
   * {@link ByteBuffer#order()} must be {@link ByteOrder#nativeOrder()}, its address aligned to
   * the element size and its remaining length a multiple of it. Position and limit are not
   * changed.
   *
   * @param buffer a direct buffer ({@link ByteBuffer#allocateDirect})
   * @param type the element type
   * @param op a reduction operator defined for {@code type}
   * @throws IllegalArgumentException if the buffer is not direct or not in native order
   * @throws WarrenArgumentException if the bytes are misaligned or not whole elements
   * @throws WarrenException (a subclass) if the collective fails
   */
  public void allreduce(ByteBuffer buffer, DataType type, Op op) {
    allreduce(buffer, type, op, CallOptions.defaults());
  }

  /**
   * {@link #allreduce(ByteBuffer, DataType, Op)} with call options (a bootstrap call, a tag).
   *
   * @param buffer a direct buffer ({@link ByteBuffer#allocateDirect}) in native byte order
   * @param type the element type
   * @param op a reduction operator defined for {@code type}
   * @param options the call options
   * @throws IllegalArgumentException if the buffer is not direct or not in native order
   * @throws WarrenArgumentException if the bytes are misaligned or not whole elements
   * @throws WarrenException (a subclass) if the collective fails
   */
  public synchronized void allreduce(ByteBuffer buffer, DataType type, Op op, CallOptions options) {
    checkDirect(buffer);
    if (buffer.order() != ByteOrder.nativeOrder()) {
      throw new IllegalArgumentException(
          "the buffer's byte order is "
              + buffer.order()
              + " but elements are reduced in native order "
              + ByteOrder.nativeOrder()
              + ": call buffer.order(ByteOrder.nativeOrder())");
    }
    Objects.requireNonNull(type, "type");
    int code = opCode(op);
    Objects.requireNonNull(options, "options");
    run(
        p ->
            Native.commAllreduceDirect(
                p,
                buffer,
                buffer.position(),
                buffer.remaining(),
                type.code(),
                code,
                options.key(),
                options.tag()));
  }

  /**
   * Broadcasts bytes from {@code root}: every worker gets the root's bytes, whose length only
   * the root needs to know.
   *
   * @param data the bytes to send on the root; ignored (may be null) on other workers
   * @param root the rank that sends
   * @return the root's bytes: on the root, {@code data} itself; elsewhere a new array
   * @throws WarrenException (a subclass) if the collective fails
   */
  public byte[] broadcast(byte[] data, int root) {
    return broadcast(data, root, CallOptions.defaults());
  }

  /**
   * {@link #broadcast(byte[], int)} with call options (a bootstrap call: a seed chosen by one
   * worker, say; a tag).
   *
   * @param data the bytes to send on the root; ignored (may be null) on other workers
   * @param root the rank that sends
   * @param options the call options
   * @return the root's bytes: on the root, {@code data} itself; elsewhere a new array
   * @throws WarrenException (a subclass) if the collective fails
   */
  public synchronized byte[] broadcast(byte[] data, int root, CallOptions options) {
    long h = live();
    if (root == rank) {
      Objects.requireNonNull(data, "data (on the root)");
    }
    Objects.requireNonNull(options, "options");
    return call(p -> Native.commBroadcast(p, data, root, options.key(), options.tag()));
  }

  /**
   * Broadcasts the remaining bytes of a direct buffer from {@code root}, in place; every worker
   * passes a buffer with the same number of remaining bytes. Position and limit are not
   * changed.
   *
   * @param buffer a direct buffer: the data on the root, overwritten elsewhere
   * @param root the rank that sends
   * @throws IllegalArgumentException if the buffer is not direct
   * @throws CollectiveMismatchException if the workers' lengths differ
   * @throws WarrenException (a subclass) if the collective fails
   */
  public void broadcast(ByteBuffer buffer, int root) {
    broadcast(buffer, root, CallOptions.defaults());
  }

  /**
   * {@link #broadcast(ByteBuffer, int)} with call options (a bootstrap call, a tag).
   *
   * @param buffer a direct buffer: the data on the root, overwritten elsewhere
   * @param root the rank that sends
   * @param options the call options
   * @throws IllegalArgumentException if the buffer is not direct
   * @throws CollectiveMismatchException if the workers' lengths differ
   * @throws WarrenException (a subclass) if the collective fails
   */
  public synchronized void broadcast(ByteBuffer buffer, int root, CallOptions options) {
    checkDirect(buffer);
    Objects.requireNonNull(options, "options");
    run(
        p ->
            Native.commBroadcastDirect(
                p, buffer, buffer.position(), buffer.remaining(), root, options.key(), options.tag()));
  }

  /**
   * Gathers every worker's bytes (lengths may differ) on every worker.
   *
   * @param mine this worker's bytes
   * @return one array per rank, in rank order ({@code result[rank()]} equals {@code mine})
   * @throws WarrenException (a subclass) if the collective fails
   */
  public synchronized byte[][] allgather(byte[] mine) {
    Objects.requireNonNull(mine, "mine");
    return call(p -> Native.commAllgather(p, mine));
  }

  /**
   * Returns once every worker has called {@code barrier}.
   *
   * @throws WarrenException (a subclass) if the collective fails
   */
  public synchronized void barrier() {
    run(p -> Native.commBarrier(p));
  }

  /**
   * Writes a line to the job's log on the tracker, prefixed with this worker's rank (in a world
   * of one, to the local log: SLF4J logger {@code io.warren.native.warren.engine}).
   *
   * <p>Not a collective: an interrupt of the calling thread neither aborts it nor cancels the
   * communicator (a progress thread stopped while it logs must not fail the job); the call
   * waits at most 30 s for the tracker, and the interrupt flag is left as it was.
   *
   * @param message the line
   * @throws WarrenException (a subclass) if the tracker cannot be reached
   */
  public synchronized void print(String message) {
    Objects.requireNonNull(message, "message");
    Native.commPrint(live(), message);
  }

  /**
   * Fails the whole job with an error that no re-run of this worker can mend, found outside
   * Warren's calls (a checkpoint this worker cannot decode, say), before the caller raises its
   * own exception. The tracker then holds the re-runs that register, instead of letting each
   * fail the same way until the engine's retries are used up; the engine's runner stops the job
   * (on Spark, once the task fails with an exception the runner knows as final). Every later
   * call of this communicator fails, and its links are closed, so that the peers' calls fail at
   * once. Not a collective; best effort: a tracker that cannot be
   * reached within two seconds is passed over.
   *
   * @param reason why the job cannot go on, for the tracker's log and the job's error
   */
  public synchronized void failJob(String reason) {
    Objects.requireNonNull(reason, "reason");
    Native.commFailJob(live(), reason);
  }

  /**
   * Latency statistics of the calls made so far: one entry per collective with count, median,
   * 99th percentile and maximum in microseconds. A call is timed on this worker from its start
   * to its return, so it includes waiting for slower workers (the last to arrive sees little
   * more than the transfer) and any recovery it waited through (a lost peer's replacement
   * joining and catching up); a checkpoint counts both its phases.
   *
   * @return a one-line summary
   */
  public synchronized String stats() {
    return Native.commStats(live());
  }

  // ---------------------------------------------------------------- retry-one recovery

  /**
   * Commits a checkpoint, a collective call every worker makes at the same point (typically
   * once per iteration). In robust mode (the default) both models stay in memory on the
   * workers (the local one also on {@code WARREN_LOCAL_REPLICAS} other workers, on other hosts
   * first),
   * so that a worker restarted with the same task id can {@link #loadCheckpoint() load} them;
   * with {@code WARREN_CHECKPOINT_DIR} they are also written to disk. The calls since the last
   * checkpoint are forgotten. Then the {@link #setCheckpointListener(CheckpointListener)
   * checkpoint listener}, if any, is called with the new version.
   *
   * @param global the global model, the same bytes on every worker
   * @param local this worker's own state, or null for none
   * @throws WarrenArgumentException if robust mode is off ({@code WARREN_ROBUST=0})
   * @throws WarrenException (a subclass) if the collective fails
   * @throws RuntimeException what the checkpoint listener threw (the checkpoint is committed)
   */
  public void checkpoint(byte[] global, byte[] local) {
    Objects.requireNonNull(global, "global");
    int version = 0;
    CheckpointListener listener;
    synchronized (this) {
      long h = live();
      run(p -> Native.commCheckpoint(p, global, local));
      readView(h);
      listener = checkpointListener;
      if (listener != null) {
        version = Native.commVersion(h);
      }
    }
    // Outside the lock: a slow listener (an upload) does not hold up another thread's stats()
    // or print() (the Spark runner's progress thread), and may itself call this communicator.
    if (listener != null) {
      listener.checkpointCommitted(version);
    }
  }

  /**
   * Sets the listener told of each checkpoint this communicator commits from now on (replacing
   * any previous one; null removes it). It is called by {@link #checkpoint(byte[], byte[])} in
   * the calling thread, with the version just committed, after the checkpoint is committed and
   * its durable file (if any) written, and before {@code checkpoint} returns; an exception it
   * throws propagates out of {@code checkpoint}, and the checkpoint stays committed. It runs
   * outside the communicator's lock. Not called by {@link #loadCheckpoint()}.
   *
   * <p>Since {@code checkpoint} is a collective call, no worker can commit the next checkpoint
   * before every worker has returned from this one, and so finished its listener: the Spark
   * runner relies on this to copy durable checkpoints to a remote file system.
   *
   * @param listener the listener, or null for none
   */
  public void setCheckpointListener(CheckpointListener listener) {
    this.checkpointListener = listener;
  }

  /**
   * Loads the latest checkpoint. Call it once after {@link #create} and the bootstrap calls:
   * on a fresh start it returns version 0 with empty models; in a worker restarted after a
   * failure it returns the checkpoint the others committed last, and the calls that follow
   * replay (from the others' result buffers) what the lost worker had done since it, until it
   * catches up with the survivors, who wait in their current call.
   *
   * @return the checkpoint
   * @throws RecoveryImpossibleException if no live copy of this worker's state is left
   * @throws WarrenException (a subclass) if the collective fails
   */
  public synchronized Checkpoint loadCheckpoint() {
    long h = live();
    byte[][] models = call(Native::commLoadCheckpoint);
    return new Checkpoint(Native.commVersion(h), models[0], models[1]);
  }

  /**
   * The number of checkpoints committed (or loaded) so far.
   *
   * @return 0 before the first checkpoint
   */
  public synchronized int version() {
    return Native.commVersion(live());
  }

  /**
   * How many recoveries (a lost worker re-linked and served) this worker has taken part in.
   *
   * @return 0 in a job without failures
   */
  public synchronized long recoveries() {
    return Native.commRecoveries(live());
  }

  /**
   * The last change of membership of an elastic job, once: non-null after the {@link #checkpoint}
   * at which the view changed (workers joined or were removed; this worker may have left) and
   * after a call threw {@link RolledBackException} (a lost worker was given up on), until it is
   * taken. {@link #rank()} and {@link #worldSize()} have already changed with it; a job re-shards
   * its data or rescales its learning rate here. Always null in a job that is not elastic.
   *
   * @return the change since the last call, or null if the view did not change
   * @throws IllegalStateException if the communicator is closed
   */
  public synchronized ViewChange takeViewChange() {
    String[] f = Native.commTakeViewChange(live());
    return f == null ? null : ViewChange.fromNative(f);
  }

  /**
   * Leaves the job <em>as failed</em>: frees the native resources and drops the links and the
   * tracker connection without telling the tracker this worker finished, so the tracker marks
   * it lost, the others wait for a replacement, and a new attempt with the same task id can
   * join. Use it on a task's failure path (in place of {@link #close()}, which would mark the
   * worker finished and make the tracker refuse the replacement). Idempotent; a no-op after
   * {@link #close()}; never throws a {@link WarrenException}.
   *
   * <p>Safe to call from any thread while another thread is inside a call: it cancels that call
   * first, without waiting for the communicator's lock (the call then fails with a {@link
   * CollectiveAbortedException} within milliseconds, and its peers see this worker leave), then
   * frees the native resources once the call has returned.
   */
  public void abort() {
    canceller.cancel("Communicator.abort() was called");
    synchronized (this) {
      long h = handle;
      if (h == 0) {
        return;
      }
      handle = 0;
      closed = true;
      canceller.close();
      Native.commAbort(h);
    }
  }

  /**
   * Why the tracker fenced this worker, if it did: it heard no heartbeat from it within the peer
   * timeout (a paused or frozen process, a cut network), or this worker heard nothing from the
   * tracker for that long and took itself for cut off. A fenced worker has been replaced: its
   * running and later calls fail with {@link WorkerFencedException}. A task whose thread may be
   * busy outside Warren's calls polls this (from another thread: it never blocks and takes no
   * lock the calls hold) to end the task at once rather than at its next call.
   *
   * @return the fence's reason, empty while not fenced (and after {@link #close()} or {@link
   *     #abort()})
   */
  public Optional<String> fenced() {
    return Optional.ofNullable(canceller.fenced());
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return true once closed
   */
  public boolean isClosed() {
    return closed;
  }

  /**
   * Leaves the job: tells the tracker this worker finished and closes the links. Idempotent;
   * the native resources are freed even if telling the tracker fails (then this throws). In
   * robust mode it first waits until every worker has reached {@code close}, serving the
   * replacement of a worker lost meanwhile (so a worker lost near the end is still recovered);
   * past that barrier it still serves the replacement of a worker lost before the tracker heard
   * it finish, returning once the tracker says every worker has finished.
   *
   * @throws WarrenException (a subclass) if the tracker could not be told, or a worker lost
   *     while waiting was not replaced in time
   */
  @Override
  public synchronized void close() {
    long h = handle;
    if (h == 0) {
      return;
    }
    handle = 0;
    closed = true;
    try {
      Native.commClose(h);
    } finally {
      canceller.close();
    }
  }

  @Override
  public String toString() {
    return "Communicator[rank " + rank + " of " + worldSize + (isClosed() ? ", closed]" : "]");
  }

  private static int opCode(Op op) {
    return Objects.requireNonNull(op, "op").code();
  }

  private static void checkDirect(ByteBuffer buffer) {
    Objects.requireNonNull(buffer, "buffer");
    if (!buffer.isDirect()) {
      throw new IllegalArgumentException(
          "the buffer must be direct (ByteBuffer.allocateDirect); for heap data use the array"
              + " overloads");
    }
    if (buffer.isReadOnly()) {
      throw new IllegalArgumentException("the buffer is read-only");
    }
  }
}

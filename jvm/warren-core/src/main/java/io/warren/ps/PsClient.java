package io.warren.ps;

import io.warren.CallCanceller;
import io.warren.CollectiveAbortedException;
import io.warren.TlsSettings;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.function.LongFunction;

/**
 * A trainer's connections to the parameter servers of one job (one to each server): pulls and
 * pushes are split per server and pipelined (every server's request is sent before any reply
 * is awaited).
 *
 * <pre>{@code
 * try (PsClient ps = PsClient.connect(uris, secret, trainerId)) {
 *   ps.define(job);                                  // the first definition wins
 *   for (long step = ps.step(); step < steps; step++) {
 *     float[] rows = ps.pullSparse("emb", keys);     // waits in sync/SSP for slower trainers
 *     ps.push(new PsGradients().sparse("emb", keys, grads(rows)));
 *   }
 *   ps.leave();
 * }
 * }</pre>
 *
 * <p>A server that goes away pauses the call: the client waits (until its call timeout, with a
 * progress line naming the server) for a server restarted at the same address, resynchronizes
 * and goes on; in sync mode it pushes again what the restarted server lost. A trainer that
 * connects again with the same id (a re-run task) goes on at the step the servers have ({@link
 * #step()}).
 *
 * <p>Every call can be cancelled: {@link Thread#interrupt() interrupting} the calling thread
 * (as Spark's task kill does) aborts it within about 250 ms with a {@link
 * PsInterruptedException} (interrupt flag set again), and {@link #abort()} from another thread
 * aborts the running call and closes the client. The client is unusable after a failed call.
 *
 * <p>Thread-safe (calls are serialised).
 */
public final class PsClient implements AutoCloseable {
  /** Default deadline of connecting to all servers (they may still be starting). */
  public static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(60);
  /** Default deadline of one call, a pull waiting for slower trainers or a server restart included. */
  public static final Duration DEFAULT_CALL_TIMEOUT = Duration.ofSeconds(600);

  private final List<String> uris;
  private final int trainer;
  private long handle; // guarded by this
  /** Cancels the running call without the object's lock; watches the calls for interrupts. */
  private final CallCanceller canceller;

  private PsClient(List<String> uris, int trainer, long handle, CallCanceller canceller) {
    this.uris = uris;
    this.trainer = trainer;
    this.handle = handle;
    this.canceller = canceller;
  }

  /**
   * Connects as trainer {@code trainer} with the default deadlines.
   *
   * @param uris the servers' addresses, server {@code i} at index {@code i}
   * @param secret the job secret
   * @param trainer the trainer id, 0 to the job's trainers - 1
   * @return the client; close it
   * @see #connect(List, String, int, Duration, Duration)
   */
  public static PsClient connect(List<String> uris, String secret, int trainer) {
    return connect(uris, secret, trainer, DEFAULT_CONNECT_TIMEOUT, DEFAULT_CALL_TIMEOUT);
  }

  /**
   * Connects an observer, whose pulls never wait and who cannot push (status, model dumps).
   *
   * @param uris the servers' addresses
   * @param secret the job secret
   * @return the client; close it
   */
  public static PsClient observer(List<String> uris, String secret) {
    return observer(uris, secret, TlsSettings.OFF);
  }

  /**
   * Connects an observer over TLS if {@code tls} says so (as the servers must).
   *
   * @param uris the servers' addresses
   * @param secret the job secret
   * @param tls encryption in transit ({@link TlsSettings#OFF}: plain TCP)
   * @return the client; close it
   */
  public static PsClient observer(List<String> uris, String secret, TlsSettings tls) {
    return open(uris, secret, -1, DEFAULT_CONNECT_TIMEOUT, DEFAULT_CALL_TIMEOUT, tls);
  }

  /**
   * Connects and authenticates to every server now, waiting for servers not listening yet.
   *
   * @param uris the servers' addresses, server {@code i} at index {@code i}
   * @param secret the job secret
   * @param trainer the trainer id, at least 0
   * @param connectTimeout how long connecting to all servers may take
   * @param callTimeout how long one call may take (waits for slower trainers and restarts
   *     included)
   * @return the client; close it
   * @throws io.warren.WarrenAuthException if a server refuses the secret
   * @throws io.warren.WarrenTimeoutException if a server cannot be reached in time (the
   *     message names it)
   * @throws io.warren.WarrenConfigException if a server is not the one its place in {@code
   *     uris} says
   * @throws PsInterruptedException if the thread was interrupted meanwhile
   */
  public static PsClient connect(
      List<String> uris, String secret, int trainer, Duration connectTimeout, Duration callTimeout) {
    return connect(uris, secret, trainer, connectTimeout, callTimeout, TlsSettings.OFF);
  }

  /**
   * Connects and authenticates to every server now, over TLS if {@code tls} says so (the
   * servers' settings must agree: a TLS client and a plain server refuse each other at once,
   * naming the mismatch).
   *
   * @param uris the servers' addresses, server {@code i} at index {@code i}
   * @param secret the job secret
   * @param trainer the trainer id, at least 0
   * @param connectTimeout how long connecting to all servers may take
   * @param callTimeout how long one call may take
   * @param tls encryption in transit ({@link TlsSettings#OFF}: plain TCP)
   * @return the client; close it
   * @throws io.warren.WarrenProtocolException if a server's TLS setting differs
   * @throws io.warren.WarrenConfigException if a certificate file cannot be read
   * @see #connect(List, String, int, Duration, Duration)
   */
  public static PsClient connect(
      List<String> uris,
      String secret,
      int trainer,
      Duration connectTimeout,
      Duration callTimeout,
      TlsSettings tls) {
    if (trainer < 0) {
      throw new IllegalArgumentException("trainer id must not be negative, got " + trainer);
    }
    return open(uris, secret, trainer, connectTimeout, callTimeout, tls);
  }

  private static PsClient open(
      List<String> uris,
      String secret,
      int trainer,
      Duration connectTimeout,
      Duration callTimeout,
      TlsSettings tls) {
    Objects.requireNonNull(uris, "uris");
    Objects.requireNonNull(secret, "secret");
    Objects.requireNonNull(tls, "tls");
    positive(connectTimeout, "connectTimeout");
    positive(callTimeout, "callTimeout");
    List<String> list = List.copyOf(uris);
    CallCanceller canceller = CallCanceller.create();
    long h =
        canceller.open(
            () ->
                PsNative.clientConnect(
                    new ClientConnectRequest(
                        list.toArray(new String[0]), secret, trainer, connectTimeout.toMillis(),
                        callTimeout.toMillis(), canceller.handle(), tls.flat())),
            connected -> {
              PsNative.clientClose(connected);
              return new CollectiveAbortedException(
                  "connected, then the calling thread was interrupted", -1, CallCanceller.INTERRUPTED);
            },
            cause -> interrupted("connecting to the parameter servers", cause),
            null);
    return new PsClient(list, trainer, h, canceller);
  }

  static void positive(Duration d, String what) {
    Objects.requireNonNull(d, what);
    if (d.toMillis() <= 0) {
      throw new IllegalArgumentException(what + " must be at least 1 ms, got " + d);
    }
  }

  private static PsInterruptedException interrupted(String what, CollectiveAbortedException cause) {
    Thread.currentThread().interrupt();
    return new PsInterruptedException(what + " was aborted because the calling thread was interrupted", cause);
  }

  /** Runs one native call (the caller holds the lock), cancelled if its thread is interrupted. */
  private <T> T call(String what, LongFunction<T> body) {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException("PsClient is closed");
    }
    return canceller.call(() -> body.apply(h), e -> interrupted(what, e));
  }

  private void run(String what, java.util.function.LongConsumer body) {
    call(
        what,
        h -> {
          body.accept(h);
          return null;
        });
  }

  /**
   * The servers' addresses.
   *
   * @return the addresses, server {@code i} at index {@code i}
   */
  public List<String> uris() {
    return uris;
  }

  /**
   * This client's trainer id (-1 for an observer).
   *
   * @return the id
   */
  public int trainer() {
    return trainer;
  }

  /**
   * Defines the job on every server: the first definition wins, the same again is a no-op.
   *
   * @param job the job
   * @throws io.warren.WarrenArgumentException if the servers hold a different job, or the job
   *     is invalid (an optimizer's hyper-parameter, this trainer's id not in it)
   */
  public synchronized void define(PsJob job) {
    Objects.requireNonNull(job, "job");
    run("defining the job", job::defineOn);
  }

  /** {@code [kind, size]} of {@code table}, or an exception naming it. */
  private long[] table(String table, boolean sparse) {
    Objects.requireNonNull(table, "table");
    long[] shape = call("looking up a table", h -> PsNative.clientTable(h, table));
    if (shape[0] < 0) {
      throw new io.warren.WarrenArgumentException("no table named \"" + table + "\" in the job (or no job defined yet)");
    }
    if ((shape[0] == 1) != sparse) {
      throw new io.warren.WarrenArgumentException(
          "table \"" + table + "\" is " + (sparse ? "dense: pull it by range" : "sparse: pull it by keys"));
    }
    return shape;
  }

  /**
   * Elements {@code start} to {@code start + count - 1} of a dense table. In sync and SSP
   * modes a trainer's pull waits until the slower trainers allow it.
   *
   * @param table the table
   * @param start the first element
   * @param count how many
   * @return the values
   * @throws io.warren.WarrenArgumentException if the table is unknown or sparse, or the range
   *     is outside it
   * @throws io.warren.WarrenTimeoutException if the servers did not answer within the call
   *     timeout (naming whom the pull waited for)
   */
  public synchronized float[] pullDense(String table, long start, int count) {
    float[] out = new float[count];
    pullDense(table, start, out, 0, count);
    return out;
  }

  /**
   * Pulls {@code count} elements of a dense table from {@code start} into {@code out} at
   * {@code offset}.
   *
   * @param table the table
   * @param start the first element
   * @param out where to write
   * @param offset the first index of {@code out} written
   * @param count how many
   */
  public synchronized void pullDense(String table, long start, float[] out, int offset, int count) {
    Objects.requireNonNull(out, "out");
    Objects.checkFromIndexSize(offset, count, out.length);
    run(
        "pulling " + table,
        h -> PsNative.clientPullDense(h, TablePull.dense(table, start, out, null, offset, count)));
  }

  /**
   * Pulls {@code out.remaining()} elements of a dense table from {@code start} straight into a
   * direct buffer (no Java array in between), from its position, which then moves past them.
   * If the buffer's floats are 4-byte aligned (as those of {@code
   * ByteBuffer.allocateDirect(..).asFloatBuffer()} are), the values are copied once, from the
   * reply as it arrived into the buffer.
   *
   * @param table the table
   * @param start the first element
   * @param out a direct, writable buffer in the platform's byte order
   */
  public synchronized void pullDense(String table, long start, FloatBuffer out) {
    writable(out);
    int n = out.remaining();
    run(
        "pulling " + table,
        h -> PsNative.clientPullDense(h, TablePull.dense(table, start, null, out, out.position(), n)));
    out.position(out.position() + n);
  }

  /**
   * The rows of {@code keys} of a sparse table, concatenated in the order of {@code keys}
   * (rows are created on their first pull).
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @return {@code keys.length * width} floats
   * @throws io.warren.WarrenArgumentException if the table is unknown or dense
   */
  public synchronized float[] pullSparse(String table, long[] keys) {
    Objects.requireNonNull(keys, "keys");
    long width = table(table, true)[1];
    float[] out = new float[Math.toIntExact(keys.length * width)];
    pullSparse(table, keys, out, 0);
    return out;
  }

  /**
   * Pulls the rows of {@code keys} of a sparse table into {@code out} from {@code offset}.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @param out where to write: {@code keys.length * width} floats from {@code offset}
   * @param offset the first index written
   */
  public synchronized void pullSparse(String table, long[] keys, float[] out, int offset) {
    Objects.requireNonNull(keys, "keys");
    Objects.requireNonNull(out, "out");
    int n = Math.toIntExact(keys.length * table(table, true)[1]);
    Objects.checkFromIndexSize(offset, n, out.length);
    run(
        "pulling " + table,
        h -> PsNative.clientPullSparse(h, TablePull.sparse(table, keys, out, null, offset, n)));
  }

  /**
   * Pulls the rows of {@code keys} of a sparse table straight into a direct buffer, from its
   * position, which then moves past them. If the buffer's floats are 4-byte aligned, the rows
   * are copied once, from the replies as they arrived into the buffer.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @param out a direct, writable buffer in the platform's byte order with room for the rows
   */
  public synchronized void pullSparse(String table, long[] keys, FloatBuffer out) {
    Objects.requireNonNull(keys, "keys");
    writable(out);
    int n = Math.toIntExact(keys.length * table(table, true)[1]);
    if (n > out.remaining()) {
      throw new IllegalArgumentException(keys.length + " rows need " + n + " floats; the buffer has " + out.remaining());
    }
    run(
        "pulling " + table,
        h -> PsNative.clientPullSparse(h, TablePull.sparse(table, keys, null, out, out.position(), n)));
    out.position(out.position() + n);
  }

  private static void writable(FloatBuffer b) {
    PsPulls.writable(b);
  }

  /**
   * Pulls several tables in one round trip: each server is asked once for all of them (a step
   * that reads embedding rows and a dense weight waits for one reply per server, not two). In
   * sync and SSP modes it waits as {@link #pullSparse(String, long[])} does. Each direct
   * buffer's position then moves past its values.
   *
   * @param pulls the pulls
   * @throws io.warren.WarrenArgumentException if a table is unknown or of the other kind, or a
   *     range is outside its table; nothing is sent then
   * @throws IllegalArgumentException if a pull's values do not fit where they go, or two pulls
   *     write to overlapping parts of one direct buffer; nothing is sent then
   */
  public synchronized void pull(PsPulls pulls) {
    Objects.requireNonNull(pulls, "pulls");
    int[] sizes = pulls.sizes(t -> table(t, true)[1]);
    run("pulling", h -> pulls.pullOn(h, sizes));
    pulls.advance(sizes);
  }

  /**
   * Pushes this step's gradients (every server gets this trainer's push of the step, empty if
   * none of the gradients is its); bad input fails before anything is sent.
   *
   * @param grads the gradients
   * @throws io.warren.WarrenArgumentException if a table is unknown or of the other kind, a
   *     range is outside its table, or a sparse gradient's length is not a multiple of the
   *     width; also for an observer
   */
  public synchronized void push(PsGradients grads) {
    Objects.requireNonNull(grads, "grads");
    run("pushing", grads::pushOn);
  }

  /** Leaves the job: this trainer holds nobody back any more (its pushes stay applied). */
  public synchronized void leave() {
    run("leaving", PsNative::clientLeave);
  }

  /**
   * The trainer's next step: its pushes so far (more than 0 for a trainer that connects again
   * and resumes a job).
   *
   * @return the step
   */
  public synchronized long step() {
    return call("step", PsNative::clientInfo)[0];
  }

  /**
   * This trainer's updates lost: the push a dead predecessor was making, at the servers it
   * missed (async and SSP; sync loses none).
   *
   * @return the count
   */
  public synchronized long lostUpdates() {
    return call("lostUpdates", PsNative::clientInfo)[1];
  }

  /**
   * Every server's state, asked over the network.
   *
   * @return the states, by server index
   */
  public synchronized List<PsStatus> status() {
    return PsStatus.parse(call("asking for the status", PsNative::clientStatus));
  }

  /**
   * Aborts the running call (from another thread; it fails within about 250 ms) and every
   * later one, then closes the client. Never waits for the running call to return before it
   * cancels it.
   */
  public void abort() {
    canceller.cancel("aborted");
    close();
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return true once closed
   */
  public synchronized boolean isClosed() {
    return handle == 0;
  }

  /** Closes the connections (after the running call, if any). Idempotent. */
  @Override
  public void close() {
    synchronized (this) {
      long h = handle;
      if (h == 0) {
        return;
      }
      handle = 0;
      PsNative.clientClose(h);
    }
    canceller.close();
  }

  @Override
  public String toString() {
    return "PsClient[" + (trainer < 0 ? "observer" : "trainer " + trainer) + ", servers " + uris + "]";
  }
}

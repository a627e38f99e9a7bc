package io.warren;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A worker's connection to the data {@link Master}: status, setting the dataset, and {@link
 * TaskReader}s over the records of the tasks it hands out. Calls that fail on the way
 * (connection reset, master restarting) are retried on a new connection until the call timeout.
 *
 * <pre>{@code
 * try (MasterClient client = MasterClient.connect(settings);  // master.workerSettings()
 *      TaskReader records = client.reader(0)) {
 *   while (records.hasNext()) { byte[] rec = records.next(); ... }
 * }
 * }</pre>
 *
 * <p>Thread-safe (calls are serialised); each {@link TaskReader} has its own connection, so
 * several threads read in parallel through one client's readers.
 */
public final class MasterClient implements AutoCloseable {
  /** Default deadline of one call, retries included: long enough for a master restart. */
  public static final Duration DEFAULT_CALL_TIMEOUT = Duration.ofSeconds(120);

  private final String address;
  private final String secret;
  private final Duration callTimeout;
  private final TlsSettings tls;
  private long handle;

  private MasterClient(
      String address, String secret, Duration callTimeout, TlsSettings tls, long handle) {
    this.address = address;
    this.secret = secret;
    this.callTimeout = callTimeout;
    this.tls = tls;
    this.handle = handle;
  }

  /**
   * Connects with the settings of {@link Master#workerSettings()} ({@code WARREN_MASTER_URI},
   * {@code WARREN_JOB_SECRET}, and the {@link TlsSettings} keys {@code WARREN_TLS*}); other
   * entries are ignored.
   *
   * @param settings the worker settings
   * @return the connected client; close it
   * @throws WarrenConfigException if a setting is missing
   * @throws WarrenAuthException if the secret is wrong
   * @throws WarrenTimeoutException if the master cannot be reached within the call timeout
   */
  public static MasterClient connect(Map<String, String> settings) {
    Objects.requireNonNull(settings, "settings");
    for (String k : List.of(Master.URI_KEY, Master.SECRET_KEY)) {
      if (settings.get(k) == null) {
        throw new WarrenConfigException("the master's worker settings lack " + k);
      }
    }
    return connect(
        settings.get(Master.URI_KEY),
        settings.get(Master.SECRET_KEY),
        DEFAULT_CALL_TIMEOUT,
        TlsSettings.fromSettings(settings));
  }

  /**
   * Connects and authenticates now, so that a wrong address or secret shows at once.
   *
   * @param address the master's {@code host:port}
   * @param secret the job secret
   * @param callTimeout how long one call may take, retries and reconnections included
   * @return the connected client; close it
   * @throws WarrenAuthException if the secret is wrong
   * @throws WarrenTimeoutException if the master cannot be reached within {@code callTimeout}
   */
  public static MasterClient connect(String address, String secret, Duration callTimeout) {
    return connect(address, secret, callTimeout, TlsSettings.OFF);
  }

  /**
   * Connects and authenticates now, over TLS if {@code tls} says so (the master's settings must
   * agree: a TLS client and a plain master refuse each other at once, naming the mismatch).
   *
   * @param address the master's {@code host:port}
   * @param secret the job secret
   * @param callTimeout how long one call may take, retries and reconnections included
   * @param tls encryption in transit ({@link TlsSettings#OFF}: plain TCP)
   * @return the connected client; close it
   * @throws WarrenAuthException if the secret is wrong
   * @throws WarrenProtocolException if the master's TLS setting differs
   * @throws WarrenConfigException if a certificate file cannot be read
   * @throws WarrenTimeoutException if the master cannot be reached within {@code callTimeout}
   */
  public static MasterClient connect(
      String address, String secret, Duration callTimeout, TlsSettings tls) {
    Objects.requireNonNull(address, "address");
    Objects.requireNonNull(secret, "secret");
    Objects.requireNonNull(tls, "tls");
    positive(callTimeout, "callTimeout");
    NativeLoader.ensureLoaded();
    long h = Native.mclientConnect(address, secret, callTimeout.toMillis(), tls.flat());
    return new MasterClient(address, secret, callTimeout, tls, h);
  }

  static void positive(Duration d, String what) {
    Objects.requireNonNull(d, what);
    if (d.toMillis() <= 0) {
      throw new IllegalArgumentException(what + " must be at least 1 ms, got " + d);
    }
  }

  private long live() {
    if (handle == 0) {
      throw new IllegalStateException("MasterClient is closed");
    }
    return handle;
  }

  /**
   * The master's address.
   *
   * @return {@code host:port}
   */
  public String address() {
    return address;
  }

  /**
   * The master's counts.
   *
   * @return the status
   */
  public synchronized MasterStatus status() {
    return MasterStatus.of(Native.mclientStatus(live()));
  }

  /**
   * Sets the dataset, as a master started without one expects from its first worker; the same
   * dataset again is a no-op.
   *
   * @param chunksPerTask chunks per task, at least 1
   * @param patterns glob patterns of the dataset's RecordIO files
   * @throws DatasetMismatchException if the master has another dataset
   * @throws WarrenArgumentException if a pattern matches no file
   */
  public synchronized void setDataset(int chunksPerTask, String... patterns) {
    if (chunksPerTask < 1) {
      throw new IllegalArgumentException("chunksPerTask must be at least 1, got " + chunksPerTask);
    }
    Native.mclientSetDataset(live(), patterns.clone(), chunksPerTask);
  }

  /**
   * A reader of pass {@code pass} on a new connection, waiting at most an hour for a task
   * while others are pending elsewhere (a task held by a dead worker comes back after its
   * timeout).
   *
   * @param pass the pass to read (0 first)
   * @return the reader; close it
   */
  public TaskReader reader(long pass) {
    return reader(pass, Duration.ofHours(1));
  }

  /**
   * A reader of pass {@code pass} on a new connection.
   *
   * @param pass the pass to read (0 first)
   * @param idleTimeout the longest wait for a task while others are pending elsewhere
   * @return the reader; close it
   */
  public TaskReader reader(long pass, Duration idleTimeout) {
    if (pass < 0) {
      throw new IllegalArgumentException("pass must not be negative, got " + pass);
    }
    positive(idleTimeout, "idleTimeout");
    synchronized (this) {
      live();
    }
    return new TaskReader(
        Native.taskReaderOpen(
            address, secret, pass, callTimeout.toMillis(), idleTimeout.toMillis(), tls.flat()));
  }

  /**
   * Asks once, without waiting, for a task of {@code pass} and reads its records, but does
   * not report it finished: call {@link #finish(MasterTask)} once its contribution is safe
   * (e.g. in a completed allreduce and checkpoint), or {@link #fail(MasterTask, String)}. A
   * task not reported within the master's task timeout goes back to the queue and is handed
   * out again (at least once per pass). A task whose chunk cannot be read is reported failed
   * here and the next one is asked for.
   *
   * @param pass the pass (0 first)
   * @return a task ({@link MasterTask.Kind#TASK}), or {@link MasterTask.Kind#NONE_NOW} while
   *     the remaining tasks are held by other workers, or {@link MasterTask.Kind#PASS_FINISHED}
   *     once the pass is over
   * @throws MasterException if every remaining task of the pass failed too often
   * @throws WarrenArgumentException if the master has not reached {@code pass}
   */
  public synchronized MasterTask getTask(long pass) {
    if (pass < 0) {
      throw new IllegalArgumentException("pass must not be negative, got " + pass);
    }
    long[] head = new long[4];
    byte[][] records = Native.mclientGetTask(live(), pass, head);
    return MasterTask.of(head, records);
  }

  /**
   * Reports {@code task} finished.
   *
   * @param task a task from {@link #getTask(long)} (of this client or another)
   * @return true if recorded; false if stale (it timed out and went back to the queue, or was
   *     reported already)
   */
  public synchronized boolean finish(MasterTask task) {
    return Native.mclientTaskFinished(live(), task.requireTask().id(), task.epoch()) != 0;
  }

  /**
   * Reports {@code task} failed, so that it is handed out again at once (it counts towards the
   * master's {@code maxFailures}).
   *
   * @param task a task from {@link #getTask(long)}
   * @param reason why, for the master's log
   * @return true if recorded; false if stale
   */
  public synchronized boolean fail(MasterTask task, String reason) {
    Objects.requireNonNull(reason, "reason");
    return Native.mclientTaskFailed(live(), task.requireTask().id(), task.epoch(), reason) != 0;
  }

  /** Closes the connection. Idempotent; open readers stay usable. */
  @Override
  public synchronized void close() {
    long h = handle;
    if (h == 0) {
      return;
    }
    handle = 0;
    Native.mclientClose(h);
  }
}

package io.warren;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The job's rendezvous point, run inside this JVM (on the Spark driver, say): workers register
 * with it, get stable ranks by task id and the addresses of their neighbours, and report when
 * they finish.
 *
 * <pre>{@code
 * try (Tracker tracker = Tracker.start(4, secret)) {
 *   // give each worker tracker.workerSettings(taskId) ...
 *   JobReport report = tracker.awaitCompletion(Duration.ofMinutes(30));
 * }
 * }</pre>
 *
 * <p>Thread-safe: {@link #awaitCompletion} can wait in one thread while others ask for worker
 * settings; {@link #close()} waits for running calls.
 */
public final class Tracker implements AutoCloseable {
  private final SharedHandle handle;
  private final String uri;
  private final TlsSettings tls;

  private Tracker(long handle, TlsSettings tls) {
    this.handle = new SharedHandle(handle, "Tracker");
    this.uri = Native.trackerUri(handle);
    this.tls = tls;
  }

  /**
   * Starts a tracker for {@code workers} workers on 127.0.0.1, on any free port, with the
   * default rendezvous deadline (600 s).
   *
   * @param workers the number of workers in the job
   * @param secret the job secret workers must prove they hold (not empty)
   * @return the running tracker; close it when the job is over
   * @throws WarrenConfigException if an argument is invalid
   * @throws WarrenIOException if the port cannot be bound
   * @throws NativeLibraryException if the native library cannot be loaded
   */
  public static Tracker start(int workers, String secret) {
    return start(workers, secret, "127.0.0.1", 0, Duration.ZERO);
  }

  /**
   * Starts a tracker.
   *
   * @param workers the number of workers in the job
   * @param secret the job secret workers must prove they hold (not empty)
   * @param host the address to bind and advertise (workers on other machines need a routable
   *     one)
   * @param port the port to bind, 0 for any free port
   * @param rendezvousTimeout how long all workers have to arrive; zero for the default (600 s)
   * @return the running tracker; close it when the job is over
   * @throws WarrenConfigException if an argument is invalid
   * @throws WarrenIOException if the port cannot be bound
   * @throws NativeLibraryException if the native library cannot be loaded
   */
  public static Tracker start(
      int workers, String secret, String host, int port, Duration rendezvousTimeout) {
    return start(workers, secret, host, port, rendezvousTimeout, null);
  }

  /**
   * Starts a tracker that fences a worker silent for {@code peerTimeout}: no heartbeat from it
   * (a paused or frozen process, a cut network link) for that long, and the others go on
   * without it, waiting for its replacement; {@link #takeFenced()} names it, for whoever runs
   * the workers to kill and re-run it.
   *
   * @param workers the number of workers in the job
   * @param secret the job secret workers must prove they hold (not empty)
   * @param host the address to bind and advertise
   * @param port the port to bind, 0 for any free port
   * @param rendezvousTimeout how long all workers have to arrive; zero for the default (600 s)
   * @param peerTimeout null for the default (30 s), zero for none (a hung worker then stalls
   *     the job until the call timeout)
   * @return the running tracker; close it when the job is over
   * @throws WarrenConfigException if an argument is invalid
   * @throws WarrenIOException if the port cannot be bound
   * @throws NativeLibraryException if the native library cannot be loaded
   */
  public static Tracker start(
      int workers,
      String secret,
      String host,
      int port,
      Duration rendezvousTimeout,
      Duration peerTimeout) {
    return builder(workers, secret)
        .host(host)
        .port(port)
        .rendezvousTimeout(rendezvousTimeout)
        .peerTimeout(peerTimeout)
        .start();
  }

  /**
   * A tracker to configure: TLS ({@link Builder#tls}), an elastic job ({@link
   * Builder#elastic}), and the settings of the {@code start} overloads, each with its default.
   *
   * <pre>{@code
   * Tracker t = Tracker.builder(4, secret).tls(TlsSettings.jobSecret())
   *     .elastic(new Tracker.Elastic(2, 4, Duration.ofSeconds(1))).start();
   * }</pre>
   *
   * @param workers the number of workers the job starts with
   * @param secret the job secret workers must prove they hold (not empty)
   * @return the builder
   */
  public static Builder builder(int workers, String secret) {
    return new Builder(workers, secret);
  }

  /** The settings of a tracker to start ({@link Tracker#builder}); not thread-safe. */
  public static final class Builder {
    private final int workers;
    private final String secret;
    private String host = "127.0.0.1";
    private int port;
    private Duration rendezvousTimeout = Duration.ZERO;
    private Duration peerTimeout;
    private TlsSettings tls = TlsSettings.OFF;
    private Elastic elastic;

    private Builder(int workers, String secret) {
      this.workers = workers;
      this.secret = Objects.requireNonNull(secret, "secret");
    }

    /**
     * The address to bind and advertise (default 127.0.0.1; workers on other machines need a
     * routable one).
     *
     * @param host the address
     * @return this builder
     */
    public Builder host(String host) {
      this.host = Objects.requireNonNull(host, "host");
      return this;
    }

    /**
     * The port to bind (default 0: any free port).
     *
     * @param port the port
     * @return this builder
     */
    public Builder port(int port) {
      this.port = port;
      return this;
    }

    /**
     * How long the first {@code workers} workers have to arrive (default zero: 600 s).
     *
     * @param timeout the deadline, zero for the default
     * @return this builder
     */
    public Builder rendezvousTimeout(Duration timeout) {
      this.rendezvousTimeout = Objects.requireNonNull(timeout, "rendezvousTimeout");
      return this;
    }

    /**
     * How long a worker may be silent (no heartbeat) before it is fenced ({@link
     * Tracker#takeFenced()} names it).
     *
     * @param timeout null for the default (30 s), zero for none (a hung worker then stalls the
     *     job until the call timeout)
     * @return this builder
     */
    public Builder peerTimeout(Duration timeout) {
      if (timeout != null && timeout.isNegative()) {
        throw new IllegalArgumentException("peerTimeout must not be negative, got " + timeout);
      }
      this.peerTimeout = timeout;
      return this;
    }

    /**
     * Encryption in transit (default {@link TlsSettings#OFF}: plain TCP); {@link
     * Tracker#workerSettings()} then carries the same settings, so the workers use TLS alike.
     *
     * @param tls the TLS settings
     * @return this builder
     */
    public Builder tls(TlsSettings tls) {
      this.tls = Objects.requireNonNull(tls, "tls");
      return this;
    }

    /**
     * Makes the job elastic within {@code limits} (see {@link Elastic}); default null: a fixed
     * world of {@code workers}.
     *
     * @param limits the limits, null for a fixed world
     * @return this builder
     */
    public Builder elastic(Elastic limits) {
      this.elastic = limits;
      return this;
    }

    /**
     * Starts the tracker: the job starts once {@code workers} workers have registered; an
     * elastic job's workers then join and leave at checkpoint boundaries.
     *
     * @return the running tracker; close it when the job is over
     * @throws WarrenConfigException if a setting is invalid ({@code workers} outside the
     *     elastic limits, say), or a certificate file cannot be read (the message names it)
     * @throws WarrenIOException if the port cannot be bound
     * @throws NativeLibraryException if the native library cannot be loaded
     */
    public Tracker start() {
      if (workers < 1) {
        throw new IllegalArgumentException("workers must be at least 1, got " + workers);
      }
      NativeLoader.ensureLoaded();
      long peerMillis =
          peerTimeout == null ? -1 : Math.max(peerTimeout.toMillis(), peerTimeout.isZero() ? 0 : 1);
      long[] limits =
          elastic == null
              ? new long[0]
              : new long[] {
                elastic.minWorkers(),
                elastic.maxWorkers(),
                elastic.rejoinTimeout() == null ? -1 : elastic.rejoinTimeout().toMillis(),
                elastic.admitArrivals() ? 1 : 0
              };
      return new Tracker(
          Native.trackerStart(
              workers, secret, host, port, rendezvousTimeout.toMillis(), peerMillis, tls.flat(), limits),
          tls);
    }
  }

  /**
   * The limits of an elastic job: it starts with the tracker's {@code workers} and may then
   * change size at checkpoint boundaries, within {@code [minWorkers, maxWorkers]}.
   *
   * @param minWorkers never fewer (a remove, or going on without a lost worker, below it is
   *     refused: the job then fails naming the missing tasks)
   * @param maxWorkers never more
   * @param rejoinTimeout a lost member whose replacement has not registered within this time
   *     is dropped from the view and the others roll back to their last checkpoint without it
   *     ({@link RolledBackException}); it rejoins at a later checkpoint when it registers
   *     again. Null: wait for the replacement as long as the workers' connect timeout allows
   * @param admitArrivals whether a task id that registers while the job runs, and was never a
   *     member, is added (at the next checkpoint boundary, if the job has room) without {@link
   *     Tracker#addWorker}; for launchers whose own tasks are the only holders of the secret (Spark's
   *     partitions arriving as slots free up). A removed task still needs {@link Tracker#restart}
   */
  public record Elastic(int minWorkers, int maxWorkers, Duration rejoinTimeout, boolean admitArrivals) {
    /**
     * Limits under which newcomers need {@link Tracker#addWorker}.
     *
     * @param minWorkers never fewer
     * @param maxWorkers never more
     * @param rejoinTimeout how long to wait for a lost member's replacement, null for the
     *     workers' connect timeout
     * @throws IllegalArgumentException as the full constructor
     */
    public Elastic(int minWorkers, int maxWorkers, Duration rejoinTimeout) {
      this(minWorkers, maxWorkers, rejoinTimeout, false);
    }

    /**
     * Checks the limits.
     *
     * @param minWorkers never fewer
     * @param maxWorkers never more
     * @param rejoinTimeout how long to wait for a lost member's replacement, null for the
     *     workers' connect timeout
     * @param admitArrivals whether newcomers join without {@link Tracker#addWorker}
     * @throws IllegalArgumentException if {@code minWorkers < 1}, {@code maxWorkers <
     *     minWorkers} or the rejoin timeout is negative
     */
    public Elastic {
      if (minWorkers < 1 || maxWorkers < minWorkers) {
        throw new IllegalArgumentException(
            "an elastic job needs 1 <= minWorkers <= maxWorkers, got " + minWorkers + " and " + maxWorkers);
      }
      if (rejoinTimeout != null && rejoinTimeout.isNegative()) {
        throw new IllegalArgumentException("rejoinTimeout must not be negative, got " + rejoinTimeout);
      }
    }
  }

  /**
   * One task of an elastic job, as {@link #list()} shows it.
   *
   * @param taskId the task id
   * @param state {@code running}, {@code joining}, {@code leaving}, {@code stopped} or {@code
   *     lost}
   * @param rank its rank in the current view, -1 if it is not a member
   */
  public record TaskInfo(String taskId, String state, int rank) {}

  /**
   * Every task of an elastic job, in task order: its state and its rank in the current view.
   *
   * @return the tasks
   * @throws TrackerException if the job is not elastic or has not started yet
   */
  public List<TaskInfo> list() {
    String[] flat = handle.call(Native::trackerList);
    List<TaskInfo> out = new ArrayList<>();
    for (int i = 0; i + 2 < flat.length; i += 3) {
      out.add(new TaskInfo(flat[i], flat[i + 1], flat[i + 2].isEmpty() ? -1 : Integer.parseInt(flat[i + 2])));
    }
    return out;
  }

  /**
   * Admits a new task id to an elastic job: it joins at checkpoint version {@code atVersion}
   * (or the first boundary after it) once its worker has registered.
   *
   * @param taskId the task id
   * @param atVersion the earliest checkpoint version, -1 for the next boundary
   * @throws TrackerException if refused (above the maximum, a known task, a version already
   *     decided), with the reason
   */
  public void addWorker(String taskId, int atVersion) {
    control("add", taskId, atVersion);
  }

  /**
   * Lets a member of an elastic job finish the current checkpoint interval and stop.
   *
   * @param taskId the task id
   * @param atVersion the earliest checkpoint version, -1 for the next boundary
   * @throws TrackerException if refused (below the minimum, not a member), with the reason
   */
  public void removeWorker(String taskId, int atVersion) {
    control("remove", taskId, atVersion);
  }

  /**
   * Brings a stopped (removed) or lost task of an elastic job back: it joins at {@code
   * atVersion} or later, once its worker has registered.
   *
   * @param taskId the task id
   * @param atVersion the earliest checkpoint version, -1 for the next boundary
   * @throws TrackerException if refused (not stopped, above the maximum), with the reason
   */
  public void restart(String taskId, int atVersion) {
    control("restart", taskId, atVersion);
  }

  private void control(String change, String taskId, int atVersion) {
    Objects.requireNonNull(taskId, "taskId");
    handle.call(h -> {
      Native.trackerControl(h, change, taskId, atVersion);
      return null;
    });
  }

  /**
   * The address workers connect to.
   *
   * @return {@code host:port}
   */
  public String uri() {
    handle.checkOpen();
    return uri;
  }

  /**
   * The settings every worker needs ({@code WARREN_TRACKER_URI}, {@code WARREN_NUM_WORKERS},
   * {@code WARREN_JOB_SECRET}, and the tracker's {@link TlsSettings} if it speaks TLS); add
   * {@code WARREN_TASK_ID} per worker, or use {@link #workerSettings(String)}.
   *
   * @return a new mutable map
   */
  public Map<String, String> workerSettings() {
    String[] flat = handle.call(Native::trackerWorkerEnv);
    Map<String, String> map = new LinkedHashMap<>();
    for (int i = 0; i + 1 < flat.length; i += 2) {
      map.put(flat[i], flat[i + 1]);
    }
    map.putAll(tls.workerSettings());
    return map;
  }

  /**
   * The tracker's TLS settings.
   *
   * @return what it was started with ({@link TlsSettings#OFF}: plain TCP)
   */
  public TlsSettings tls() {
    return tls;
  }

  /**
   * The settings of the worker with task id {@code taskId}: {@link #workerSettings()} plus
   * {@code WARREN_TASK_ID}. Ranks are ordered by task id and stay bound to it.
   *
   * @param taskId a stable identity of the worker (its Spark partition id, say)
   * @return a new mutable map
   */
  public Map<String, String> workerSettings(String taskId) {
    Objects.requireNonNull(taskId, "taskId");
    Map<String, String> map = workerSettings();
    map.put("WARREN_TASK_ID", taskId);
    return map;
  }

  /**
   * The workers fenced since the last call, oldest first: workers the tracker heard no
   * heartbeat from within the peer timeout (also one whose tracker connection closed and that
   * then fell silent), which the others already go on without. Kill the task attempt each one
   * names (it may still be alive, paused or cut off: anything it sends is refused) and run the
   * task again, as for a worker that died. By the time a fence is taken, a later attempt of
   * the same task may already run: leave that one alone.
   *
   * @return the fenced workers, possibly none
   */
  public List<Fenced> takeFenced() {
    List<Fenced> out = new ArrayList<>();
    for (String f : handle.call(Native::trackerTakeFenced)) {
      int colon = f.indexOf(':');
      out.add(new Fenced(f.substring(colon + 1), Integer.parseInt(f.substring(0, colon))));
    }
    return out;
  }

  /**
   * A worker the tracker fenced ({@link #takeFenced()}).
   *
   * @param taskId its task id
   * @param attempt the attempt number it registered with ({@code WARREN_ATTEMPT}): only that
   *     attempt is to be killed
   */
  public record Fenced(String taskId, int attempt) {}

  /**
   * Waits until every worker has closed its communicator.
   *
   * @param timeout how long to wait
   * @return how the job went
   * @throws TrackerException if the job failed (a worker was lost, the rendezvous deadline
   *     passed)
   * @throws WarrenTimeoutException if {@code timeout} passed first
   */
  public JobReport awaitCompletion(Duration timeout) {
    Objects.requireNonNull(timeout, "timeout");
    long[] r = handle.call(h -> Native.trackerWait(h, Math.max(0, timeout.toMillis())));
    return new JobReport((int) r[0], r[1], Duration.ofNanos(r[2]));
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return true once closed
   */
  public boolean isClosed() {
    return handle.isClosed();
  }

  /**
   * Stops the tracker; open worker connections are closed. Idempotent. Waits for running
   * calls (an {@link #awaitCompletion} returns at its timeout at the latest).
   */
  @Override
  public void close() {
    handle.close(Native::trackerClose);
  }

  @Override
  public String toString() {
    return "Tracker[" + uri + (isClosed() ? ", closed]" : "]");
  }
}

package io.warren;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The data master, run inside this JVM (on the Spark driver, say): it splits a RecordIO
 * dataset into tasks of chunks and hands them out to workers with todo / pending / done queues,
 * timeouts, retry counts and passes, kept in a durable store so that a restarted master loses
 * nothing. Workers read through {@link MasterClient#reader(long)}.
 *
 * <pre>{@code
 * try (Master master = Master.builder().dataset("/data/train-*.rio").chunksPerTask(4)
 *         .store("file:/tmp/job1-queue").secret(secret).start()) {
 *   // give each worker master.workerSettings() ...
 *   MasterStatus s = master.status();
 * }
 * }</pre>
 *
 * <p>Thread-safe; {@link #close()} waits for running calls and is idempotent.
 */
public final class Master implements AutoCloseable {
  /** Worker setting: the master's {@code host:port}. */
  public static final String URI_KEY = "WARREN_MASTER_URI";
  /** Worker setting: the job secret (the same key as the tracker's). */
  public static final String SECRET_KEY = "WARREN_JOB_SECRET";

  private final SharedHandle handle;
  private final String address;
  private final String secret;
  private final TlsSettings tls;

  private Master(long handle, String secret, TlsSettings tls) {
    this.handle = new SharedHandle(handle, "Master");
    this.secret = secret;
    this.tls = tls;
    this.address = Native.masterAddress(handle);
  }

  /**
   * A builder of a master; {@link Builder#store(String)} and {@link Builder#secret(String)} are
   * required.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /** The settings of a {@link Master} to start. */
  public static final class Builder {
    private final List<String> patterns = new ArrayList<>();
    private final Map<String, String> settings = new LinkedHashMap<>();
    private String secret;
    private TlsSettings tls = TlsSettings.OFF;

    private Builder() {}

    /**
     * Adds a glob pattern of the dataset's RecordIO files (call again for several). Without
     * any, the first worker's {@link MasterClient#setDataset} sets the dataset.
     *
     * @param glob e.g. {@code /data/train-*.rio}
     * @return this builder
     */
    public Builder dataset(String glob) {
      patterns.add(Objects.requireNonNull(glob, "glob"));
      return this;
    }

    /**
     * Chunks per task (default 1).
     *
     * @param n at least 1
     * @return this builder
     */
    public Builder chunksPerTask(int n) {
      if (n < 1) {
        throw new IllegalArgumentException("chunksPerTask must be at least 1, got " + n);
      }
      return set("chunksPerTask", Integer.toString(n));
    }

    /**
     * Where the queues are kept: {@code file:DIR} (a write-ahead log in DIR, locked while the
     * master runs) or {@code etcd:HOST:PORT[/PREFIX]} (a leader lock: a second master on the
     * same prefix waits, then takes over; only with a native library built with the Cargo
     * feature {@code etcd}, {@code make jvm-native WARREN_JNI_FEATURES=etcd}: otherwise
     * {@link #start()} fails with a configuration error naming the feature). Required.
     *
     * @param spec the store
     * @return this builder
     */
    public Builder store(String spec) {
      return set("store", Objects.requireNonNull(spec, "spec"));
    }

    /**
     * The job secret clients must prove they hold (not empty). Required.
     *
     * @param secret the secret
     * @return this builder
     */
    public Builder secret(String secret) {
      this.secret = Objects.requireNonNull(secret, "secret");
      return set("secret", secret);
    }

    /**
     * The address to bind and advertise (default {@code 127.0.0.1}; workers on other machines
     * need a routable one) and the port (0, the default, for any free port).
     *
     * @param host the address
     * @param port the port
     * @return this builder
     */
    public Builder bind(String host, int port) {
      if (port < 0 || port > 65535) {
        throw new IllegalArgumentException("port out of range: " + port);
      }
      set("host", Objects.requireNonNull(host, "host"));
      return set("port", Integer.toString(port));
    }

    /**
     * Failures or timeouts of a task in one pass before it is discarded (default 3).
     *
     * @param n the count
     * @return this builder
     */
    public Builder maxFailures(int n) {
      if (n < 0) {
        throw new IllegalArgumentException("maxFailures must not be negative, got " + n);
      }
      return set("maxFailures", Integer.toString(n));
    }

    /**
     * Lower bound of a task's timeout (default 30 s) and the timeout before any task has
     * completed (default 10 min): a task held by a dead worker comes back after it.
     *
     * @param minMillis lower bound, in milliseconds
     * @param initialMillis initial timeout, in milliseconds
     * @return this builder
     */
    public Builder timeouts(long minMillis, long initialMillis) {
      if (minMillis < 0 || initialMillis < 0) {
        throw new IllegalArgumentException("timeouts must not be negative");
      }
      set("minTimeoutMs", Long.toString(minMillis));
      return set("initialTimeoutMs", Long.toString(initialMillis));
    }

    /**
     * Whether a task hand-out is answered only once it is durable (default false). By
     * default a hand-out is answered at once and made durable with the next group commit
     * (the worker's report on it comes after it in the log); a master crash may then forget
     * hand-outs nobody has reported on, whose tasks are handed out again (at-least-once, as
     * after a timeout). True keeps every hand-out across a crash, at twice the durable round
     * trips per task.
     *
     * @param durable whether hand-outs wait for durability
     * @return this builder
     */
    public Builder durableHandOuts(boolean durable) {
      return set("durableHandOuts", Boolean.toString(durable));
    }

    /**
     * Encryption in transit (default {@link TlsSettings#OFF}: plain TCP); its clients must use
     * the same ({@link #workerSettings()} carries them).
     *
     * @param tls the TLS settings
     * @return this builder
     */
    public Builder tls(TlsSettings tls) {
      this.tls = Objects.requireNonNull(tls, "tls");
      return this;
    }

    private Builder set(String key, String value) {
      settings.put(key, value);
      return this;
    }

    /**
     * Opens the store (reloading what it holds), sets the dataset if one was given, binds and
     * starts serving.
     *
     * @return the running master; close it when the job is over
     * @throws WarrenConfigException if a setting is missing or invalid, or a certificate file
     *     cannot be read
     * @throws DatasetMismatchException if the store holds another dataset
     * @throws WarrenArgumentException if a pattern matches no file
     * @throws CorruptDataException if a file's chunk headers are damaged
     * @throws WarrenIOException if the store or the port cannot be opened
     * @throws NativeLibraryException if the native library cannot be loaded
     */
    public Master start() {
      NativeLoader.ensureLoaded();
      Map<String, String> all = new LinkedHashMap<>(settings);
      all.putAll(tls.workerSettings());
      String[] keys = all.keySet().toArray(new String[0]);
      String[] values = all.values().toArray(new String[0]);
      long h = Native.masterStart(patterns.toArray(new String[0]), keys, values);
      return new Master(h, secret, tls);
    }
  }

  /**
   * The address workers connect to.
   *
   * @return {@code host:port}
   */
  public String address() {
    handle.checkOpen();
    return address;
  }

  /**
   * The settings a worker needs to reach this master ({@link #URI_KEY}, {@link #SECRET_KEY},
   * and its {@link TlsSettings} if it speaks TLS); pass them to {@link
   * MasterClient#connect(Map)}.
   *
   * @return a new mutable map
   */
  public Map<String, String> workerSettings() {
    handle.checkOpen();
    Map<String, String> map = new LinkedHashMap<>();
    map.put(URI_KEY, address);
    map.put(SECRET_KEY, secret);
    map.putAll(tls.workerSettings());
    return map;
  }

  /**
   * The current counts.
   *
   * @return the status
   * @throws StoreFailedException if the store has failed (restart the master)
   */
  public MasterStatus status() {
    return MasterStatus.of(handle.call(Native::masterStatus));
  }

  /**
   * Why the master stopped working, if its store failed (it must then be restarted).
   *
   * @return the reason, or empty while it works
   */
  public Optional<String> failure() {
    return Optional.ofNullable(handle.call(Native::masterFailure));
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
   * Stops serving (open connections are closed) and releases the store once calls in flight
   * are done, so that another master may open it. Idempotent.
   */
  @Override
  public void close() {
    handle.close(Native::masterClose);
  }

  @Override
  public String toString() {
    return "Master[" + address + (isClosed() ? ", closed]" : "]");
  }
}

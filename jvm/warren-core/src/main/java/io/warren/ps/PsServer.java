package io.warren.ps;

import io.warren.NativeLoader;
import io.warren.SharedHandle;
import io.warren.TlsSettings;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * A parameter server run inside this JVM (the Spark driver, say): server {@code index} of a
 * job's {@code servers}, holding that share of every table, on its own threads. Trainers reach
 * it with {@link PsClient} at {@link #uri()}, proving they hold the job secret.
 *
 * <pre>{@code
 * try (PsServer s = PsServer.builder(secret, 0, 1).checkpoint(dir, 100, Duration.ofSeconds(30)).start()) {
 *   String uri = s.uri();  // give it to the trainers
 * }
 * }</pre>
 *
 * <p>With a checkpoint directory the server saves its shard (parameters, optimizer state,
 * trainers' clocks) there, and a server started again with the same index and directory (and
 * the same address: {@link Builder#bind(String, int)} with the first one's port) goes on from
 * its last checkpoint; trainers wait for it and, in sync mode, push again what it lost.
 *
 * <p>Thread-safe; {@link #close()} waits for running calls and is idempotent.
 */
public final class PsServer implements AutoCloseable {
  private final SharedHandle handle;
  private final int index;
  private final int servers;
  private final String uri;

  private PsServer(long handle, int index, int servers) {
    this.handle = new SharedHandle(handle, "PsServer");
    this.index = index;
    this.servers = servers;
    this.uri = PsNative.serverUri(handle);
  }

  /**
   * A builder of server {@code index} of {@code servers}.
   *
   * @param secret the job secret trainers must prove they hold (not empty)
   * @param index this server's index, below {@code servers}
   * @param servers the number of servers of the job
   * @return the builder
   */
  public static Builder builder(String secret, int index, int servers) {
    if (servers < 1 || index < 0 || index >= servers) {
      throw new IllegalArgumentException("server index " + index + " is not in 0.." + (servers - 1));
    }
    return new Builder(Objects.requireNonNull(secret, "secret"), index, servers);
  }

  /** The default of {@link Builder#threads(int)}. */
  public static final int DEFAULT_THREADS = 2;

  /** The settings of a {@link PsServer} to start. */
  public static final class Builder {
    private final String secret;
    private final int index;
    private final int servers;
    private String host = "127.0.0.1";
    private int port;
    private Duration pullTimeout = Duration.ofSeconds(300);
    private String checkpointDir;
    private long everySteps;
    private Duration every = Duration.ZERO;
    private TlsSettings tls = TlsSettings.OFF;
    private int threads = DEFAULT_THREADS;

    private Builder(String secret, int index, int servers) {
      this.secret = secret;
      this.index = index;
      this.servers = servers;
    }

    /**
     * The address to bind and advertise (default {@code 127.0.0.1}; trainers on other machines
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
      this.host = Objects.requireNonNull(host, "host");
      this.port = port;
      return this;
    }

    /**
     * The longest a trainer's pull waits for slower trainers (sync, SSP) before it fails
     * naming them (default 300 s).
     *
     * @param timeout at least 1 ms
     * @return this builder
     */
    public Builder pullTimeout(Duration timeout) {
      PsClient.positive(timeout, "pullTimeout");
      this.pullTimeout = timeout;
      return this;
    }

    /**
     * Checkpoints the shard to {@code dir} (a sub-directory per server index) every {@code
     * everySteps} steps or {@code every} time, whichever comes first (0 / zero: not by that
     * measure); a checkpoint found there is loaded at start.
     *
     * @param dir the directory (local)
     * @param everySteps steps between checkpoints, at least 0
     * @param every time between checkpoints
     * @return this builder
     */
    public Builder checkpoint(Path dir, long everySteps, Duration every) {
      if (everySteps < 0 || every.isNegative()) {
        throw new IllegalArgumentException("checkpoint intervals must not be negative");
      }
      if (everySteps == 0 && every.isZero()) {
        throw new IllegalArgumentException("a checkpoint needs a step count or an interval");
      }
      this.checkpointDir = dir.toString();
      this.everySteps = everySteps;
      this.every = every;
      return this;
    }

    /**
     * Encryption in transit (default {@link TlsSettings#OFF}: plain TCP); the trainers must
     * connect with the same ({@link PsClient#connect(List, String, int, Duration, Duration,
     * TlsSettings)}).
     *
     * @param tls the TLS settings
     * @return this builder
     */
    public Builder tls(TlsSettings tls) {
      this.tls = Objects.requireNonNull(tls, "tls");
      return this;
    }

    /**
     * The threads serving connections (default {@link #DEFAULT_THREADS}). A shard's rows are
     * worked on by one thread at a time; more threads read and write several trainers' frames
     * at once, which a dense model's large frames gain from.
     *
     * @param threads at least 1
     * @return this builder
     */
    public Builder threads(int threads) {
      if (threads < 1) {
        throw new IllegalArgumentException("a parameter server needs at least one thread, not " + threads);
      }
      this.threads = threads;
      return this;
    }

    /**
     * Loads a checkpoint if there is one, binds and starts serving.
     *
     * @return the running server; close it when the job is over
     * @throws io.warren.WarrenConfigException if the secret is empty, a checkpoint there
     *     belongs to another server, or a certificate file cannot be read
     * @throws io.warren.WarrenIOException if the port or the directory cannot be opened
     * @throws io.warren.NativeLibraryException if the native library cannot be loaded
     */
    public PsServer start() {
      NativeLoader.ensureLoaded();
      long h =
          PsNative.serverStart(
              new ServerStartRequest(
                  secret, index, servers, host, port, pullTimeout.toMillis(), checkpointDir,
                  everySteps, every.toMillis(), tls.flat(), threads));
      return new PsServer(h, index, servers);
    }
  }

  /**
   * The address trainers connect to.
   *
   * @return {@code host:port}
   */
  public String uri() {
    return uri;
  }

  /**
   * This server's index.
   *
   * @return the index
   */
  public int index() {
    return index;
  }

  /**
   * The number of servers of the job.
   *
   * @return the count
   */
  public int servers() {
    return servers;
  }

  /**
   * The server's state now.
   *
   * @return the state
   * @throws IllegalStateException if closed
   */
  public PsStatus status() {
    return PsStatus.parse(handle.call(PsNative::serverStatus)).get(0);
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
   * Stops serving: open connections are closed (trainers then wait for a server at this
   * address, until their call timeout), and a checkpoint being written finishes. Idempotent.
   */
  @Override
  public void close() {
    handle.close(PsNative::serverClose);
  }

  @Override
  public String toString() {
    return "PsServer[" + index + " of " + servers + " at " + uri + (isClosed() ? ", closed]" : "]");
  }
}

package io.warren.runner;

import io.warren.TlsSettings;
import io.warren.ps.PsServer;
import io.warren.ps.PsStatus;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;

/**
 * The parameter servers of one {@code trainPS} run, in this process (the Spark driver, the
 * Flink client), the same on every engine: server {@code i} of {@link #count()} at {@code
 * uris().get(i)}, all with the run's secret, {@code ps.*} settings and encryption in transit.
 * {@link #restart} stops a server and starts it again at the same address from its last
 * checkpoint ({@code ps.checkpointDir}); {@link #trainers()} is what the trainers need to
 * connect, serializable, for the tasks.
 *
 * <p>Thread-safe; {@link #close()} is idempotent.
 */
public final class PsServers implements AutoCloseable {
  /** A server's time between checkpoints when {@code ps.checkpointEvery} is 0. */
  public static final Duration DEFAULT_CHECKPOINT_INTERVAL = Duration.ofSeconds(60);

  private final int count;
  private final String secret;
  private final String host;
  private final PsSettings settings;
  private final TlsSettings tls;
  private final PsServer[] servers;
  private final int[] ports;
  private final List<String> uris;
  private boolean closed; // guarded by this

  private PsServers(int count, String secret, String host, PsSettings settings, TlsSettings tls) {
    this.count = count;
    this.secret = secret;
    this.host = host;
    this.settings = settings;
    this.tls = tls;
    this.servers = new PsServer[count];
    this.ports = new int[count];
    List<String> u = new ArrayList<>();
    try {
      for (int i = 0; i < count; i++) {
        servers[i] = start(i, 0);
        String uri = servers[i].uri();
        ports[i] = Integer.parseInt(uri.substring(uri.lastIndexOf(':') + 1));
        u.add(uri);
      }
    } catch (RuntimeException | Error e) {
      close();
      throw e;
    }
    this.uris = List.copyOf(u);
  }

  /**
   * Starts {@code count} servers with a new random secret.
   *
   * @param count the number of servers, at least 1
   * @param host the address they bind and advertise (the engine's default when {@code
   *     ps.host} is not set)
   * @param settings the run's {@code ps.*} settings
   * @param tls encryption in transit
   * @return the running servers; close them at the end of the run
   * @throws io.warren.WarrenIOException if a port or a checkpoint directory cannot be opened
   */
  public static PsServers start(int count, String host, PsSettings settings, TlsSettings tls) {
    return start(count, UUID.randomUUID().toString(), host, settings, tls);
  }

  /**
   * Starts {@code count} servers.
   *
   * @param count the number of servers, at least 1
   * @param secret the run's job secret, which the trainers must hold
   * @param host the address they bind and advertise
   * @param settings the run's {@code ps.*} settings
   * @param tls encryption in transit
   * @return the running servers; close them at the end of the run
   * @throws io.warren.WarrenIOException if a port or a checkpoint directory cannot be opened
   */
  public static PsServers start(int count, String secret, String host, PsSettings settings, TlsSettings tls) {
    if (count < 1) {
      throw new IllegalArgumentException("numServers must be at least 1, got " + count);
    }
    return new PsServers(
        count,
        Objects.requireNonNull(secret, "secret"),
        Objects.requireNonNull(host, "host"),
        Objects.requireNonNull(settings, "settings"),
        Objects.requireNonNull(tls, "tls"));
  }

  private PsServer start(int i, int port) {
    PsServer.Builder b =
        PsServer.builder(secret, i, count)
            .bind(host, port)
            .pullTimeout(settings.pullTimeout())
            .tls(tls)
            .threads(settings.threads());
    // ps.checkpointEvery=0: by time (and by the size of the log, which the server watches itself).
    long steps = settings.checkpointEvery();
    Duration every = steps == 0 ? DEFAULT_CHECKPOINT_INTERVAL : Duration.ZERO;
    settings.checkpointDir().ifPresent(d -> b.checkpoint(Paths.get(d), steps, every));
    return b.start();
  }

  /**
   * The number of servers.
   *
   * @return the count
   */
  public int count() {
    return count;
  }

  /**
   * The servers' addresses, server {@code i} at index {@code i}; a restarted server keeps its
   * address.
   *
   * @return the addresses ({@code host:port})
   */
  public List<String> uris() {
    return uris;
  }

  /**
   * What a trainer needs to connect: the addresses, the secret, the timeouts and TLS.
   *
   * @return the trainers' side of the run, serializable
   */
  public PsTrainers trainers() {
    return new PsTrainers(uris, secret, settings.connectTimeout(), settings.callTimeout(), tls);
  }

  /**
   * Server {@code i}'s state now.
   *
   * @param i the server's index
   * @return its state
   * @throws IllegalStateException once the servers are closed
   */
  public synchronized PsStatus status(int i) {
    if (closed) {
      throw new IllegalStateException("the parameter servers of this run are stopped");
    }
    return servers[i].status();
  }

  /**
   * Stops server {@code i} and starts it again at the same address, from its last checkpoint if
   * {@code ps.checkpointDir} is set (else empty: the trainers then find a server that lost the
   * job); trainers wait for it meanwhile. Does nothing once the servers are closed.
   *
   * @param i the server's index
   * @throws io.warren.WarrenIOException if the port cannot be bound again
   */
  public synchronized void restart(int i) {
    if (closed) {
      return;
    }
    servers[i].close();
    servers[i] = start(i, ports[i]);
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return true once closed
   */
  public synchronized boolean isClosed() {
    return closed;
  }

  /** Stops every server. Idempotent. */
  @Override
  public synchronized void close() {
    closed = true;
    for (PsServer s : servers) {
      if (s != null) {
        s.close();
      }
    }
  }
}

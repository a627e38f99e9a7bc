package io.warren.ps;

/**
 * The settings of {@link PsNative#serverStart}, one object instead of a dozen positional
 * arguments. Read field by field by {@code native/warren-jni/src/ps_request.rs}: a field's
 * name and type are part of the native interface.
 */
final class ServerStartRequest {
  /** The job's shared secret. */
  final String secret;
  /** This server's index, from 0. */
  final int index;
  /** The number of servers of the job. */
  final int servers;
  /** The address to bind. */
  final String host;
  /** The port to bind (0: any free port). */
  final int port;
  /** How long a pull waits for the step it asks for, in milliseconds. */
  final long pullTimeoutMs;
  /** Where checkpoints are written and loaded from (null: no checkpoints). */
  final String checkpointDir;
  /** A checkpoint every this many steps (0: not by steps). */
  final long everySteps;
  /** A checkpoint every this many milliseconds (0: not by time). */
  final long everyMs;
  /** The TLS settings as key/value pairs (null: plain TCP). */
  final String[] tls;
  /** Threads serving connections. */
  final int threads;

  /**
   * A request with these settings; each parameter sets the field of the same name.
   *
   * @param secret the job's shared secret
   * @param index this server's index
   * @param servers the number of servers
   * @param host the address to bind
   * @param port the port to bind (0: any free port)
   * @param pullTimeoutMs the pull timeout in milliseconds
   * @param checkpointDir the checkpoint directory, or null
   * @param everySteps steps between checkpoints (0: not by steps)
   * @param everyMs milliseconds between checkpoints (0: not by time)
   * @param tls the TLS settings as key/value pairs, or null
   * @param threads threads serving connections
   */
  ServerStartRequest(
      String secret,
      int index,
      int servers,
      String host,
      int port,
      long pullTimeoutMs,
      String checkpointDir,
      long everySteps,
      long everyMs,
      String[] tls,
      int threads) {
    this.secret = secret;
    this.index = index;
    this.servers = servers;
    this.host = host;
    this.port = port;
    this.pullTimeoutMs = pullTimeoutMs;
    this.checkpointDir = checkpointDir;
    this.everySteps = everySteps;
    this.everyMs = everyMs;
    this.tls = tls;
    this.threads = threads;
  }
}

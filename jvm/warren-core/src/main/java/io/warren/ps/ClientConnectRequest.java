package io.warren.ps;

/**
 * The settings of {@link PsNative#clientConnect}, one object instead of positional arguments.
 * Read field by field by {@code native/warren-jni/src/ps_request.rs}: a field's name and type
 * are part of the native interface.
 */
final class ClientConnectRequest {
  /** The servers' addresses, server {@code i} at {@code uris[i]}. */
  final String[] uris;
  /** The job's shared secret. */
  final String secret;
  /** This trainer's id (-1: an observer). */
  final int trainer;
  /** How long to wait for servers still starting, in milliseconds. */
  final long connectTimeoutMs;
  /** How long one call may take, in milliseconds. */
  final long callTimeoutMs;
  /** The native cancel handle that cancels the connection and every later call. */
  final long cancelHandle;
  /** The TLS settings as key/value pairs (null: plain TCP). */
  final String[] tls;

  /**
   * A request with these settings; each parameter sets the field of the same name.
   *
   * @param uris the servers' addresses
   * @param secret the job's shared secret
   * @param trainer this trainer's id (-1: an observer)
   * @param connectTimeoutMs the connect timeout in milliseconds
   * @param callTimeoutMs the call timeout in milliseconds
   * @param cancelHandle the native cancel handle
   * @param tls the TLS settings as key/value pairs, or null
   */
  ClientConnectRequest(
      String[] uris,
      String secret,
      int trainer,
      long connectTimeoutMs,
      long callTimeoutMs,
      long cancelHandle,
      String[] tls) {
    this.uris = uris;
    this.secret = secret;
    this.trainer = trainer;
    this.connectTimeoutMs = connectTimeoutMs;
    this.callTimeoutMs = callTimeoutMs;
    this.cancelHandle = cancelHandle;
    this.tls = tls;
  }
}

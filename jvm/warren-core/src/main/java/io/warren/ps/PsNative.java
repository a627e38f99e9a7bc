package io.warren.ps;

/**
 * The native declarations of the parameter server, one per export of {@code
 * native/warren-jni/src/ps.rs}. Handles are {@code Box} pointers owned by {@link PsServer} and
 * {@link PsClient}, which serialise calls on a handle and release it once. Call {@link
 * io.warren.NativeLoader#ensureLoaded()} before any of these. An export with more than a handle
 * and a name takes one request object ({@link ServerStartRequest}, {@link ClientConnectRequest},
 * {@link DefineRequest}, {@link TablePull}, {@link PiecesRequest}), whose fields the native side
 * reads once ({@code native/warren-jni/src/ps_request.rs}).
 */
final class PsNative {
  private PsNative() {}

  /** Starts a server; see {@link ServerStartRequest}. */
  static native long serverStart(ServerStartRequest request);

  static native String serverUri(long handle);

  static native long[] serverStatus(long handle);

  static native void serverClose(long handle);

  /** Connects a client; see {@link ClientConnectRequest}. */
  static native long clientConnect(ClientConnectRequest request);

  /** Defines the job on every server; see {@link DefineRequest}. */
  static native void clientDefine(long handle, DefineRequest request);

  /** {@code [kind (0 dense, 1 sparse, -1 unknown table), length or width]} of a table. */
  static native long[] clientTable(long handle, String table);

  /** Pulls a range of a dense table; see {@link TablePull#dense}. */
  static native void clientPullDense(long handle, TablePull request);

  /** Pulls rows of a sparse table; see {@link TablePull#sparse}. */
  static native void clientPullSparse(long handle, TablePull request);

  /** Pulls several tables in one round trip; see {@link PiecesRequest}. */
  static native void clientPull(long handle, PiecesRequest request);

  /** Pushes a step's gradients; see {@link PiecesRequest}. */
  static native void clientPush(long handle, PiecesRequest request);

  static native void clientLeave(long handle);

  static native long[] clientStatus(long handle);

  /** {@code [next step, lost updates, servers]}. */
  static native long[] clientInfo(long handle);

  static native void clientClose(long handle);
}

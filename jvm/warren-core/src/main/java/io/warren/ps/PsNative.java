package io.warren.ps;

import java.nio.FloatBuffer;

/**
 * The native declarations of the parameter server, one per export of {@code
 * native/warren-jni/src/ps.rs}. Handles are {@code Box} pointers owned by {@link PsServer} and
 * {@link PsClient}, which serialise calls on a handle and release it once. Call {@link
 * io.warren.NativeLoader#ensureLoaded()} before any of these.
 */
final class PsNative {
  private PsNative() {}

  static native long serverStart(
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
      int threads);

  static native String serverUri(long handle);

  static native long[] serverStatus(long handle);

  static native void serverClose(long handle);

  static native long clientConnect(
      String[] uris,
      String secret,
      int trainer,
      long connectTimeoutMs,
      long callTimeoutMs,
      long cancelHandle,
      String[] tls);

  static native void clientDefine(
      long handle,
      int trainers,
      String mode,
      long staleness,
      String[] names,
      int[] kinds,
      long[] sizes,
      float[] scales,
      long[] seeds,
      String[] optimizers,
      long[] expectedRows);

  /** {@code [kind (0 dense, 1 sparse, -1 unknown table), length or width]} of a table. */
  static native long[] clientTable(long handle, String table);

  static native void clientPullDense(
      long handle, String table, long start, float[] out, FloatBuffer buf, int offset, int count);

  static native void clientPullSparse(
      long handle, String table, long[] keys, float[] out, FloatBuffer buf, int offset, int count);

  static native void clientPull(
      long handle,
      String[] tables,
      long[] starts,
      long[][] keys,
      long[][] ends,
      float[][] arrays,
      FloatBuffer[] buffers,
      int[] positions,
      int[] counts);

  static native void clientPush(
      long handle,
      String[] tables,
      long[] offsets,
      long[][] keys,
      long[][] ends,
      float[][] arrays,
      FloatBuffer[] buffers,
      int[] positions,
      int[] counts);

  static native void clientLeave(long handle);

  static native long[] clientStatus(long handle);

  /** {@code [next step, lost updates, servers]}. */
  static native long[] clientInfo(long handle);

  static native void clientClose(long handle);
}

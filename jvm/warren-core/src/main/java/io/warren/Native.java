package io.warren;

import java.nio.ByteBuffer;

/**
 * The native declarations, one per export of {@code libwarren_jni}. Handles are {@code Box}
 * pointers owned by {@link Communicator}, {@link Tracker}, {@link Master} and the other
 * handle classes, which serialise calls on a handle
 * and release it once. Call {@link NativeLoader#ensureLoaded()} before any of these.
 */
final class Native {
  private Native() {}

  static native void init(int logLevel);

  static native void setLogLevel(int logLevel);

  static native String version();

  /** A cancel handle for {@link #commCreate}; released by {@link #cancelFree}. */
  static native long cancelCreate();

  /** Cancels the communicator of a cancel handle; never blocks. */
  static native void cancel(long cancelHandle, String reason);

  static native void cancelFree(long cancelHandle);

  /** Why the communicator of a cancel handle was fenced, or null; never blocks. */
  static native String cancelFenced(long cancelHandle);

  static native long commCreate(String[] keys, String[] values, long cancelHandle);

  static native int commRank(long handle);

  static native int commWorldSize(long handle);

  // The collectives take the call options as {@code key} (null: not a bootstrap call; else the
  // bootstrap key) and {@code tag} (0: none), see CallOptions.

  static native void commAllreduceF32(long handle, float[] data, int op, String key, int tag);

  static native void commAllreduceF64(long handle, double[] data, int op, String key, int tag);

  static native void commAllreduceI32(long handle, int[] data, int op, String key, int tag);

  static native void commAllreduceI64(long handle, long[] data, int op, String key, int tag);

  static native void commAllreduceDirect(
      long handle, ByteBuffer buf, long offset, long length, int dtype, int op, String key, int tag);

  static native byte[] commBroadcast(long handle, byte[] data, int root, String key, int tag);

  static native void commBroadcastDirect(
      long handle, ByteBuffer buf, long offset, long length, int root, String key, int tag);

  static native byte[][] commAllgather(long handle, byte[] mine);

  static native void commBarrier(long handle);

  static native void commPrint(long handle, String message);

  static native void commFailJob(long handle, String reason);

  static native String commStats(long handle);

  /** Benchmark diagnostic: nanoseconds for {@code iters} f32 sum allreduces run in Rust. */
  static native long commBenchAllreduceF32(long handle, int elems, int iters);

  static native void commCheckpoint(long handle, byte[] global, byte[] local);

  /** {global, local}; local is null when the worker had none. */
  static native byte[][] commLoadCheckpoint(long handle);

  static native int commVersion(long handle);

  static native long commRecoveries(long handle);

  /**
   * The last view change, once, or null: {@code [oldEpoch, newEpoch, task, newRank ("" if it
   * left), oldWorld, old members..., new members...]}.
   */
  static native String[] commTakeViewChange(long handle);

  static native void commClose(long handle);

  static native void commAbort(long handle);

  /**
   * peerTimeoutMillis: negative for the default (30 s), 0 for no heartbeats; tls: {@link
   * TlsSettings#flat()}.
   */
  static native long trackerStart(
      int workers,
      String secret,
      String host,
      int port,
      long rendezvousMillis,
      long peerTimeoutMillis,
      String[] tls,
      long[] elasticLimits);

  /** Flattened {@code [task, state, rank ("" if none), ...]}. */
  static native String[] trackerList(long handle);

  /** change: add, remove, restart or give-up; atVersion negative for the next boundary. */
  static native void trackerControl(long handle, String change, String task, long atVersion);

  static native String[] trackerTakeFenced(long handle);

  static native String trackerUri(long handle);

  static native String[] trackerWorkerEnv(long handle);

  static native long[] trackerWait(long handle, long timeoutMillis);

  static native void trackerClose(long handle);

  static native long rioWriterCreate(String path, int compressor, long maxChunkBytes);

  static native void rioWriterWrite(long handle, byte[] data, int offset, int length);

  static native long rioWriterRecords(long handle);

  static native void rioWriterClose(long handle);

  static native long rioReaderOpen(String path, long fromRecord, long toRecord);

  static native byte[] rioReaderNext(long handle);

  static native void rioReaderClose(long handle);

  /** Dataset glob patterns, then settings as in {@link Master.Builder} (TLS as WARREN_TLS* keys). */
  static native long masterStart(String[] patterns, String[] keys, String[] values);

  static native String masterAddress(long handle);

  /** {@code [hasDataset, pass, tasks, todo, pending, done, failed]}. */
  static native long[] masterStatus(long handle);

  static native String masterFailure(long handle);

  static native void masterClose(long handle);

  /** tls: {@link TlsSettings#flat()}. */
  static native long mclientConnect(
      String address, String secret, long callTimeoutMillis, String[] tls);

  static native long[] mclientStatus(long handle);

  static native void mclientSetDataset(long handle, String[] patterns, int chunksPerTask);

  /**
   * One task of {@code pass}, without waiting; {@code out} gets {@code [kind, id, epoch, pass]}
   * (kind 0 a task, 1 none now, 2 pass finished) and a task's records are returned, else null.
   */
  static native byte[][] mclientGetTask(long handle, long pass, long[] out);

  /** 1 if recorded, 0 if stale. */
  static native int mclientTaskFinished(long handle, long id, long epoch);

  /** 1 if recorded, 0 if stale. */
  static native int mclientTaskFailed(long handle, long id, long epoch, String reason);

  static native void mclientClose(long handle);

  /** tls: {@link TlsSettings#flat()}. */
  static native long taskReaderOpen(
      String address,
      String secret,
      long pass,
      long callTimeoutMillis,
      long idleTimeoutMillis,
      String[] tls);

  static native byte[] taskReaderNext(long handle);

  static native void taskReaderStartPass(long handle, long pass);

  /** {@code [pass, tasksFinished, tasksFailed]}. */
  static native long[] taskReaderCounts(long handle);

  static native void taskReaderClose(long handle);
}

package io.warren.ps;

import java.nio.FloatBuffer;

/**
 * The pieces of a multi-table push ({@link PsNative#clientPush}) or pull ({@link
 * PsNative#clientPull}): piece {@code i} is table {@code tables[i]}, from element {@code
 * firsts[i]} (a dense piece) or the rows of {@code keys[i]} (a sparse piece, bagged if {@code
 * ends[i]} is not null), with {@code counts[i]} floats of {@code arrays[i]} from {@code
 * positions[i]}, or of the direct buffer {@code buffers[i]} if {@code arrays[i]} is null.
 *
 * <p>This is the per-step path, so the pieces stay as arrays, read whole by the native side
 * (a few JNI calls per call, not per piece), and the floats are read and written in place. The
 * fields are read by {@code native/warren-jni/src/ps_request.rs}: a field's name and type are
 * part of the native interface.
 */
final class PiecesRequest {
  /** Each piece's table. */
  final String[] tables;
  /** Each dense piece's first element (ignored for a sparse piece). */
  final long[] firsts;
  /** Each sparse piece's keys (null: a dense piece). */
  final long[][] keys;
  /** Where each bag of a bagged piece's keys ends (null: not bagged). */
  final long[][] ends;
  /** Each piece's array (null: its buffer). */
  final float[][] arrays;
  /** Each piece's direct buffer, used where its array is null. */
  final FloatBuffer[] buffers;
  /** Each piece's first index of its array or first element of its buffer. */
  final int[] positions;
  /** Each piece's number of floats. */
  final int[] counts;

  /**
   * A request with these pieces; each parameter sets the field of the same name.
   *
   * @param tables each piece's table
   * @param firsts each dense piece's first element
   * @param keys each sparse piece's keys, or null
   * @param ends each bagged piece's bags' ends, or null
   * @param arrays each piece's array, or null
   * @param buffers each piece's direct buffer, or null
   * @param positions each piece's first index or element
   * @param counts each piece's number of floats
   */
  PiecesRequest(
      String[] tables,
      long[] firsts,
      long[][] keys,
      long[][] ends,
      float[][] arrays,
      FloatBuffer[] buffers,
      int[] positions,
      int[] counts) {
    this.tables = tables;
    this.firsts = firsts;
    this.keys = keys;
    this.ends = ends;
    this.arrays = arrays;
    this.buffers = buffers;
    this.positions = positions;
    this.counts = counts;
  }
}

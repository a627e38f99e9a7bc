package io.warren.ps;

import java.nio.FloatBuffer;

/**
 * One pull of one table, as {@link PsNative#clientPullDense} and {@link
 * PsNative#clientPullSparse} take it: what to pull (a dense range from {@code start}, or the
 * rows of {@code keys}) and where to write it ({@code count} floats of {@code array} from
 * {@code offset}, or of the direct {@code buffer} from element {@code offset} if {@code array}
 * is null). The floats are written in place; only this small object is read field by field,
 * by {@code native/warren-jni/src/ps_request.rs} (a field's name and type are part of the
 * native interface).
 */
final class TablePull {
  /** The table. */
  final String table;
  /** A dense pull's first element (unused by a sparse pull). */
  final long start;
  /** A sparse pull's keys (null for a dense pull). */
  final long[] keys;
  /** The array written into, or null. */
  final float[] array;
  /** The direct buffer written into if {@code array} is null. */
  final FloatBuffer buffer;
  /** The first index of {@code array}, or element of {@code buffer}, written. */
  final int offset;
  /** How many floats are written. */
  final int count;

  private TablePull(String table, long start, long[] keys, float[] array, FloatBuffer buffer, int offset, int count) {
    this.table = table;
    this.start = start;
    this.keys = keys;
    this.array = array;
    this.buffer = buffer;
    this.offset = offset;
    this.count = count;
  }

  /**
   * A dense pull of {@code count} elements from {@code start} into {@code array} at {@code
   * offset}, or into {@code buffer} from element {@code offset} if {@code array} is null.
   *
   * @param table the table
   * @param start the first element
   * @param array the array written into, or null
   * @param buffer the direct buffer written into, or null
   * @param offset the first index or element written
   * @param count how many floats
   * @return the request
   */
  static TablePull dense(String table, long start, float[] array, FloatBuffer buffer, int offset, int count) {
    return new TablePull(table, start, null, array, buffer, offset, count);
  }

  /**
   * A sparse pull of the rows of {@code keys}, {@code count} floats, into {@code array} at
   * {@code offset}, or into {@code buffer} from element {@code offset} if {@code array} is null.
   *
   * @param table the table
   * @param keys the rows' keys
   * @param array the array written into, or null
   * @param buffer the direct buffer written into, or null
   * @param offset the first index or element written
   * @param count how many floats
   * @return the request
   */
  static TablePull sparse(String table, long[] keys, float[] array, FloatBuffer buffer, int offset, int count) {
    return new TablePull(table, 0, keys, array, buffer, offset, count);
  }
}

package io.warren.ps;

import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Objects;

/**
 * One step's gradients of a trainer, for {@link PsClient#push(PsGradients)}: pieces of dense
 * tables and rows of sparse tables, from {@code float[]}s or direct {@code FloatBuffer}s
 * (read in place, without a copy into a Java array). The arrays and buffers are read during
 * the push, not before: do not change them until it returns.
 *
 * <pre>{@code
 * ps.push(new PsGradients().sparse("emb", keys, grads).dense("bias", 0, biasGrad));
 * }</pre>
 */
public final class PsGradients {
  private final TablePieces pieces = new TablePieces();

  /** No gradients yet (a push of none still counts as the trainer's step). */
  public PsGradients() {}

  private PsGradients add(String table, long offset, long[] k, float[] a, FloatBuffer b, int position, int count) {
    pieces.add(table, offset, k, a, b, position, count);
    return this;
  }

  /**
   * Gradients of elements {@code offset} to {@code offset + values.length - 1} of a dense table.
   *
   * @param table the table
   * @param offset the first element
   * @param values one per element
   * @return this
   */
  public PsGradients dense(String table, long offset, float[] values) {
    Objects.requireNonNull(values, "values");
    return add(table, offset, null, values, null, 0, values.length);
  }

  /**
   * Gradients of elements {@code offset} on of a dense table: the {@code remaining()} floats
   * of {@code values} from its position (which does not move).
   *
   * @param table the table
   * @param offset the first element
   * @param values a direct buffer in the platform's byte order
   * @return this
   */
  public PsGradients dense(String table, long offset, FloatBuffer values) {
    direct(values);
    return add(table, offset, null, null, values, values.position(), values.remaining());
  }

  /**
   * Gradients of the rows {@code keys} of a sparse table: {@code values} holds one row of the
   * table's width per key, in the order of {@code keys}; a key given twice has its rows summed.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @param values the rows, concatenated
   * @return this
   */
  public PsGradients sparse(String table, long[] keys, float[] values) {
    Objects.requireNonNull(keys, "keys");
    Objects.requireNonNull(values, "values");
    return add(table, 0, keys, values, null, 0, values.length);
  }

  /**
   * Gradients of the rows {@code keys} of a sparse table, from the {@code remaining()} floats of
   * {@code values} (position unchanged).
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @param values a direct buffer in the platform's byte order holding the rows
   * @return this
   */
  public PsGradients sparse(String table, long[] keys, FloatBuffer values) {
    Objects.requireNonNull(keys, "keys");
    direct(values);
    return add(table, 0, keys, null, values, values.position(), values.remaining());
  }

  /**
   * The gradient of sums of rows of a sparse table (see {@link PsPulls#sparseBags(String, long[],
   * long[], float[])}): {@code values} holds one row of the table's width per bag of {@code
   * keys}, bag {@code b} ending at key {@code ends[b]}; a bag's row counts for every key of the
   * bag, and a key given twice has its rows summed.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned), bag by bag
   * @param ends where each bag ends in {@code keys}
   * @param values a row per bag, concatenated
   * @return this
   */
  public PsGradients sparseBags(String table, long[] keys, long[] ends, float[] values) {
    Objects.requireNonNull(keys, "keys");
    Objects.requireNonNull(ends, "ends");
    Objects.requireNonNull(values, "values");
    pieces.add(table, 0, keys, ends, values, null, 0, values.length);
    return this;
  }

  /**
   * {@link #sparseBags(String, long[], long[], float[])} from the {@code remaining()} floats of
   * a direct buffer (position unchanged).
   *
   * @param table the table
   * @param keys the rows' keys (unsigned), bag by bag
   * @param ends where each bag ends in {@code keys}
   * @param values a direct buffer in the platform's byte order holding a row per bag
   * @return this
   */
  public PsGradients sparseBags(String table, long[] keys, long[] ends, FloatBuffer values) {
    Objects.requireNonNull(keys, "keys");
    Objects.requireNonNull(ends, "ends");
    direct(values);
    pieces.add(table, 0, keys, ends, null, values, values.position(), values.remaining());
    return this;
  }

  /** Checks that {@code b} can be read in place. */
  static void direct(FloatBuffer b) {
    Objects.requireNonNull(b, "buffer");
    if (!b.isDirect()) {
      throw new IllegalArgumentException(
          "the FloatBuffer is not direct: use ByteBuffer.allocateDirect(n).order(ByteOrder.nativeOrder()).asFloatBuffer(), or a float[]");
    }
    if (b.order() != ByteOrder.nativeOrder()) {
      throw new IllegalArgumentException("the FloatBuffer is " + b.order() + ", not the platform's " + ByteOrder.nativeOrder());
    }
  }

  /**
   * How many table pieces were added.
   *
   * @return the count
   */
  public int size() {
    return pieces.size();
  }

  /** Pushes these gradients through the native client {@code handle}. */
  void pushOn(long handle) {
    pieces.callOn(handle, PsNative::clientPush, pieces.countArray());
  }
}

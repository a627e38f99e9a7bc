package io.warren.ps;

import java.nio.FloatBuffer;
import java.util.Objects;
import java.util.function.ToLongFunction;

/**
 * One step's pulls from several tables, for {@link PsClient#pull(PsPulls)}: each server is
 * asked once for all of them (one round trip, not one per table). Each pull writes into its
 * own {@code float[]} or direct {@code FloatBuffer} (written in place when its floats are
 * 4-byte aligned); two pulls may share an array or a buffer where their parts do not overlap.
 *
 * <pre>{@code
 * float[] rows = new float[keys.length * width];
 * float[] bias = new float[1];
 * ps.pull(new PsPulls().sparse("emb", keys, rows).dense("bias", 0, bias));
 * }</pre>
 */
public final class PsPulls {
  /** Their counts are -1 for a sparse pull, whose size the table's width gives. */
  private final TablePieces pieces = new TablePieces();

  /** No pulls yet. */
  public PsPulls() {}

  private PsPulls add(String table, long start, long[] k, float[] a, FloatBuffer b, int position, int count) {
    pieces.add(table, start, k, a, b, position, count);
    return this;
  }

  /**
   * Elements {@code start} to {@code start + out.length - 1} of a dense table, into {@code out}.
   *
   * @param table the table
   * @param start the first element
   * @param out where they go
   * @return this
   */
  public PsPulls dense(String table, long start, float[] out) {
    Objects.requireNonNull(out, "out");
    return dense(table, start, out, 0, out.length);
  }

  /**
   * Elements {@code start} to {@code start + count - 1} of a dense table, into {@code out} from
   * {@code offset}.
   *
   * @param table the table
   * @param start the first element
   * @param out where they go
   * @param offset the first index written
   * @param count how many elements
   * @return this
   */
  public PsPulls dense(String table, long start, float[] out, int offset, int count) {
    Objects.requireNonNull(out, "out");
    Objects.checkFromIndexSize(offset, count, out.length);
    return add(table, start, null, out, null, offset, count);
  }

  /**
   * {@code out.remaining()} elements of a dense table from {@code start}, into a direct buffer
   * from its position, which moves past them once the pull is done.
   *
   * @param table the table
   * @param start the first element
   * @param out a direct, writable buffer in the platform's byte order
   * @return this
   */
  public PsPulls dense(String table, long start, FloatBuffer out) {
    writable(out);
    return add(table, start, null, null, out, out.position(), out.remaining());
  }

  /**
   * The rows of {@code keys} of a sparse table, concatenated in the order of {@code keys}, into
   * {@code out} from index 0.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @param out where they go: room for {@code keys.length * width} floats
   * @return this
   */
  public PsPulls sparse(String table, long[] keys, float[] out) {
    return sparse(table, keys, out, 0);
  }

  /**
   * The rows of {@code keys} of a sparse table into {@code out} from {@code offset}.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @param out where they go: room for {@code keys.length * width} floats from {@code offset}
   * @param offset the first index written
   * @return this
   */
  public PsPulls sparse(String table, long[] keys, float[] out, int offset) {
    Objects.requireNonNull(keys, "keys");
    Objects.requireNonNull(out, "out");
    Objects.checkIndex(offset, out.length + 1);
    return add(table, 0, keys, out, null, offset, -1);
  }

  /**
   * The rows of {@code keys} of a sparse table into a direct buffer from its position, which
   * moves past them once the pull is done.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned)
   * @param out a direct, writable buffer in the platform's byte order with room for the rows
   * @return this
   */
  public PsPulls sparse(String table, long[] keys, FloatBuffer out) {
    Objects.requireNonNull(keys, "keys");
    writable(out);
    return add(table, 0, keys, null, out, out.position(), -1);
  }

  /**
   * The sum of each bag's rows of a sparse table (an embedding bag), into {@code out} from index
   * 0, bag by bag: bag {@code b} holds the keys {@code ends[b - 1]} to {@code ends[b] - 1} of
   * {@code keys} (bag 0 from key 0); an empty bag sums to zeros. Each server sums its rows of a
   * bag and sends one row per bag, not one per key; the client adds the servers' sums in server
   * order. Push the bags' gradient with {@link PsGradients#sparseBags(String, long[], long[],
   * float[])}.
   *
   * <pre>{@code
   * // 4 keys an example: example e's keys are keys[4 * e] to keys[4 * e + 3].
   * long[] ends = LongStream.rangeClosed(1, examples).map(e -> 4 * e).toArray();
   * float[] sums = new float[examples * width];
   * ps.pull(new PsPulls().sparseBags("emb", keys, ends, sums));
   * }</pre>
   *
   * @param table the table
   * @param keys the rows' keys (unsigned), bag by bag
   * @param ends where each bag ends in {@code keys}: non-decreasing, the last {@code keys.length}
   * @param out where the sums go: room for {@code ends.length * width} floats
   * @return this
   */
  public PsPulls sparseBags(String table, long[] keys, long[] ends, float[] out) {
    Objects.requireNonNull(keys, "keys");
    Objects.requireNonNull(ends, "ends");
    Objects.requireNonNull(out, "out");
    pieces.add(table, 0, keys, ends, out, null, 0, -1);
    return this;
  }

  /**
   * {@link #sparseBags(String, long[], long[], float[])} into a direct buffer from its position,
   * which moves past the sums once the pull is done.
   *
   * @param table the table
   * @param keys the rows' keys (unsigned), bag by bag
   * @param ends where each bag ends in {@code keys}
   * @param out a direct, writable buffer in the platform's byte order with room for the sums
   * @return this
   */
  public PsPulls sparseBags(String table, long[] keys, long[] ends, FloatBuffer out) {
    Objects.requireNonNull(keys, "keys");
    Objects.requireNonNull(ends, "ends");
    writable(out);
    pieces.add(table, 0, keys, ends, null, out, out.position(), -1);
    return this;
  }

  /**
   * How many pulls were added.
   *
   * @return the count
   */
  public int size() {
    return pieces.size();
  }

  static void writable(FloatBuffer b) {
    PsGradients.direct(b);
    if (b.isReadOnly()) {
      throw new IllegalArgumentException("the FloatBuffer is read-only");
    }
  }

  /**
   * Each pull's number of floats, a sparse pull's from its table's width ({@code width}, which
   * also checks the table is sparse), checked to fit where it goes.
   */
  int[] sizes(ToLongFunction<String> width) {
    int n = pieces.size();
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      int count = pieces.counts.get(i);
      if (count < 0) {
        long[] k = pieces.keys.get(i);
        long[] e = pieces.ends.get(i);
        String table = pieces.tables.get(i);
        int rows = e != null ? e.length : k.length;
        count = Math.toIntExact(rows * width.applyAsLong(table));
        float[] a = pieces.arrays.get(i);
        int room = a != null ? a.length - pieces.positions.get(i) : pieces.buffers.get(i).remaining();
        if (count > room) {
          String what = e != null ? " bags" : " rows";
          throw new IllegalArgumentException(
              rows + what + " of table \"" + table + "\" need " + count + " floats; there is room for " + room);
        }
      }
      out[i] = count;
    }
    return out;
  }

  /** Pulls through the native client {@code handle}, pull {@code i} being {@code sizes[i]} floats. */
  void pullOn(long handle, int[] sizes) {
    pieces.callOn(handle, PsNative::clientPull, sizes);
  }

  /** Moves each buffer's position past the floats pulled into it. */
  void advance(int[] sizes) {
    for (int i = 0; i < sizes.length; i++) {
      FloatBuffer b = pieces.buffers.get(i);
      if (b != null) {
        b.position(pieces.positions.get(i) + sizes[i]);
      }
    }
  }
}

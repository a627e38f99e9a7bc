package io.warren.ps;

import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Pieces of tables as parallel lists, sent to the native push and pull as one {@link
 * PiecesRequest}: entry {@code i} is a table, its first element (a dense piece), its keys (a
 * sparse piece; else null), where its bags of keys end (a bagged sparse piece; else null), and
 * its floats: {@code count} of them, of a {@code float[]} or else a direct buffer, from a
 * position.
 */
final class TablePieces {
  final List<String> tables = new ArrayList<>();
  final List<Long> firsts = new ArrayList<>();
  final List<long[]> keys = new ArrayList<>();
  final List<long[]> ends = new ArrayList<>();
  final List<float[]> arrays = new ArrayList<>();
  final List<FloatBuffer> buffers = new ArrayList<>();
  final List<Integer> positions = new ArrayList<>();
  final List<Integer> counts = new ArrayList<>();

  void add(String table, long first, long[] k, float[] a, FloatBuffer b, int position, int count) {
    add(table, first, k, null, a, b, position, count);
  }

  void add(String table, long first, long[] k, long[] e, float[] a, FloatBuffer b, int position, int count) {
    tables.add(Objects.requireNonNull(table, "table"));
    firsts.add(first);
    keys.add(k);
    ends.add(e);
    arrays.add(a);
    buffers.add(b);
    positions.add(position);
    counts.add(count);
  }

  int size() {
    return tables.size();
  }

  /** The native push or pull: the pieces as one request, after the client's handle. */
  @FunctionalInterface
  interface Native {
    void call(long handle, PiecesRequest request);
  }

  /** Calls {@code nat} on the client {@code handle} with these pieces, {@code counts} floats each. */
  void callOn(long handle, Native nat, int[] counts) {
    nat.call(
        handle,
        new PiecesRequest(
            tableArray(),
            firstArray(),
            keys.toArray(new long[0][]),
            ends.toArray(new long[0][]),
            floatArrays(),
            bufferArray(),
            positionArray(),
            counts));
  }

  private String[] tableArray() {
    return tables.toArray(new String[0]);
  }

  private long[] firstArray() {
    return firsts.stream().mapToLong(Long::longValue).toArray();
  }

  private float[][] floatArrays() {
    return arrays.toArray(new float[0][]);
  }

  private FloatBuffer[] bufferArray() {
    return buffers.toArray(new FloatBuffer[0]);
  }

  private int[] positionArray() {
    return positions.stream().mapToInt(Integer::intValue).toArray();
  }

  int[] countArray() {
    return counts.stream().mapToInt(Integer::intValue).toArray();
  }
}

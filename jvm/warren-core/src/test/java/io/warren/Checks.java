package io.warren;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Runs every collective with every element type and operator on one communicator and compares
 * the results with a serial computation over all ranks' inputs. Used by the in-JVM thread tests
 * and by {@link WorkerMain} in separate JVMs; throws {@link AssertionError} on a difference.
 */
final class Checks {
  private Checks() {}

  /** Element counts: odd sizes, and one above the ring threshold (256 KiB). */
  static final int[] LENGTHS = {1, 1001, 70_001};

  static void all(Communicator comm) {
    for (int len : LENGTHS) {
      arrays(comm, len);
      directBuffers(comm, len);
    }
    broadcasts(comm);
    allgather(comm);
    comm.barrier();
  }

  // ---- inputs and the serial reference ----------------------------------------------------

  static long mix(long x) {
    x += 0x9E3779B97F4A7C15L;
    x = (x ^ (x >>> 30)) * 0xBF58476D1CE4E5B9L;
    x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
    return x ^ (x >>> 31);
  }

  /** Input of {@code rank} at index {@code i} for integer type {@code t}, normalised. */
  static long intInput(DataType t, int rank, int i) {
    return norm(t, mix(rank * 1_000_003L + i));
  }

  /** Input for floats: small multiples of 0.5, so sums and products of up to 4 are exact. */
  static double floatInput(int rank, int i) {
    return (Math.floorMod(mix(rank * 1_000_003L + i), 13) - 6) * 0.5;
  }

  static long norm(DataType t, long x) {
    switch (t) {
      case I8:
        return (byte) x;
      case U8:
        return x & 0xFFL;
      case I16:
        return (short) x;
      case U16:
        return x & 0xFFFFL;
      case I32:
        return (int) x;
      case U32:
        return x & 0xFFFF_FFFFL;
      default:
        return x;
    }
  }

  static long combine(DataType t, Op op, long a, long b) {
    boolean unsigned64 = t == DataType.U64;
    switch (op) {
      case SUM:
        return norm(t, a + b);
      case PROD:
        return norm(t, a * b);
      case MIN:
        return (unsigned64 ? Long.compareUnsigned(a, b) : Long.compare(a, b)) <= 0 ? a : b;
      case MAX:
        return (unsigned64 ? Long.compareUnsigned(a, b) : Long.compare(a, b)) >= 0 ? a : b;
      case BIT_AND:
        return a & b;
      case BIT_OR:
        return a | b;
      case BIT_XOR:
        return a ^ b;
      default:
        throw new AssertionError(op);
    }
  }

  static double combine(Op op, double a, double b) {
    switch (op) {
      case SUM:
        return a + b;
      case PROD:
        return a * b;
      case MIN:
        return Math.min(a, b);
      case MAX:
        return Math.max(a, b);
      default:
        throw new AssertionError(op);
    }
  }

  static long expectedInt(DataType t, Op op, int world, int i) {
    long acc = intInput(t, 0, i);
    for (int r = 1; r < world; r++) {
      acc = combine(t, op, acc, intInput(t, r, i));
    }
    return acc;
  }

  static double expectedFloat(Op op, int world, int i) {
    double acc = floatInput(0, i);
    for (int r = 1; r < world; r++) {
      acc = combine(op, acc, floatInput(r, i));
    }
    return acc;
  }

  static void check(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  // ---- the checks ---------------------------------------------------------------------------

  static void arrays(Communicator comm, int len) {
    int me = comm.rank();
    int world = comm.worldSize();
    for (Op op : Op.values()) {
      if (op.supports(DataType.F32)) {
        float[] f = new float[len];
        double[] d = new double[len];
        for (int i = 0; i < len; i++) {
          f[i] = (float) floatInput(me, i);
          d[i] = floatInput(me, i);
        }
        comm.allreduce(f, op);
        comm.allreduce(d, op);
        for (int i = 0; i < len; i++) {
          double want = expectedFloat(op, world, i);
          check(f[i] == (float) want, "float[] " + op + " len " + len + " at " + i + ": " + f[i] + " != " + want);
          check(d[i] == want, "double[] " + op + " len " + len + " at " + i + ": " + d[i] + " != " + want);
        }
      }
      int[] ints = new int[len];
      long[] longs = new long[len];
      for (int i = 0; i < len; i++) {
        ints[i] = (int) intInput(DataType.I32, me, i);
        longs[i] = intInput(DataType.I64, me, i);
      }
      comm.allreduce(ints, op);
      comm.allreduce(longs, op);
      for (int i = 0; i < len; i++) {
        check(ints[i] == (int) expectedInt(DataType.I32, op, world, i), "int[] " + op + " len " + len + " at " + i);
        check(longs[i] == expectedInt(DataType.I64, op, world, i), "long[] " + op + " len " + len + " at " + i);
      }
    }
  }

  static void put(ByteBuffer b, DataType t, int i, int rank) {
    int at = b.position() + i * t.size();
    switch (t) {
      case I8:
      case U8:
        b.put(at, (byte) intInput(t, rank, i));
        break;
      case I16:
      case U16:
        b.putShort(at, (short) intInput(t, rank, i));
        break;
      case I32:
      case U32:
        b.putInt(at, (int) intInput(t, rank, i));
        break;
      case I64:
      case U64:
        b.putLong(at, intInput(t, rank, i));
        break;
      case F32:
        b.putFloat(at, (float) floatInput(rank, i));
        break;
      case F64:
        b.putDouble(at, floatInput(rank, i));
        break;
      default:
        throw new AssertionError(t);
    }
  }

  static long getInt(ByteBuffer b, DataType t, int i) {
    int at = b.position() + i * t.size();
    switch (t.size()) {
      case 1:
        return norm(t, b.get(at));
      case 2:
        return norm(t, b.getShort(at));
      case 4:
        return norm(t, b.getInt(at));
      default:
        return b.getLong(at);
    }
  }

  static void directBuffers(Communicator comm, int len) {
    int me = comm.rank();
    int world = comm.worldSize();
    // 16 spare bytes before the data: the position is honoured (8 keeps every type aligned).
    ByteBuffer b = ByteBuffer.allocateDirect(8 + len * 8 + 8).order(ByteOrder.nativeOrder());
    for (DataType t : DataType.values()) {
      for (Op op : Op.values()) {
        if (!op.supports(t)) {
          continue;
        }
        b.clear();
        b.position(8).limit(8 + len * t.size());
        for (int i = 0; i < len; i++) {
          put(b, t, i, me);
        }
        comm.allreduce(b, t, op);
        check(b.position() == 8 && b.limit() == 8 + len * t.size(), "position/limit changed");
        for (int i = 0; i < len; i++) {
          String where = "buffer " + t + " " + op + " len " + len + " at " + i;
          if (t == DataType.F32) {
            check(b.getFloat(8 + 4 * i) == (float) expectedFloat(op, world, i), where);
          } else if (t == DataType.F64) {
            check(b.getDouble(8 + 8 * i) == expectedFloat(op, world, i), where);
          } else {
            check(getInt(b, t, i) == expectedInt(t, op, world, i), where);
          }
        }
      }
    }
  }

  static byte[] pattern(int rank, int n) {
    byte[] out = new byte[n];
    for (int i = 0; i < n; i++) {
      out[i] = (byte) mix(rank * 7919L + i);
    }
    return out;
  }

  static void broadcasts(Communicator comm) {
    int me = comm.rank();
    int world = comm.worldSize();
    for (int root = 0; root < world; root++) {
      byte[] mine = me == root ? pattern(root, 1000 + root) : null;
      byte[] got = comm.broadcast(mine, root);
      check(Arrays.equals(got, pattern(root, 1000 + root)), "broadcast(byte[]) from " + root);
      if (me == root) {
        check(got == mine, "the root gets its own array back");
      }
    }
    byte[] empty = comm.broadcast(me == 0 ? new byte[0] : null, 0);
    check(empty.length == 0, "empty broadcast");

    int root = world - 1;
    ByteBuffer b = ByteBuffer.allocateDirect(300_000);
    b.position(5).limit(5 + 299_000);
    byte[] want = pattern(root, 299_000);
    if (me == root) {
      b.duplicate().put(want);
    }
    comm.broadcast(b, root);
    byte[] got = new byte[299_000];
    b.duplicate().get(got);
    check(Arrays.equals(got, want), "broadcast(ByteBuffer) from " + root);
  }

  static void allgather(Communicator comm) {
    int me = comm.rank();
    int world = comm.worldSize();
    byte[][] all = comm.allgather(pattern(me, me * 3));
    check(all.length == world, "allgather returns one array per rank");
    for (int r = 0; r < world; r++) {
      check(Arrays.equals(all[r], pattern(r, r * 3)), "allgather block of rank " + r);
    }
  }
}

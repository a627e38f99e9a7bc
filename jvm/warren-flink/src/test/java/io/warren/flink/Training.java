package io.warren.flink;

import io.warren.Checkpoint;
import io.warren.Communicator;
import io.warren.Op;
import io.warren.RolledBackException;
import io.warren.ViewChange;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The tests' training: logistic regression by full-batch gradient descent over partitions made
 * from a seed, with a checkpoint per iteration, and hooks to fail, slow down or block a worker.
 * A result row is {@code [task id, attempt, resumed-from version, weights...]}.
 */
final class Training {
  static final int DIMS = 4;
  static final int ROWS = 200;
  static final long SEED = 42;

  /** Per-run counters shared by the workers of this JVM (a MiniCluster runs in it). */
  static final Map<String, AtomicInteger> ITERATIONS = new ConcurrentHashMap<>();

  /** Per-run result rows by task id, filled by {@link #collect}. */
  static final Map<String, Map<Integer, double[]>> RESULTS = new ConcurrentHashMap<>();

  /** Per-run end times (nanoTime) of the worker bodies, by task id and attempt. */
  static final Map<String, Map<String, Long>> ENDED = new ConcurrentHashMap<>();

  private Training() {}

  /** The rows of one partition: {@code [label, x1..xDIMS]}, labels from fixed true weights. */
  static List<double[]> partition(int p, int n) {
    SplittableRandom r = new SplittableRandom(SEED * 1_000_003L + p);
    List<double[]> rows = new ArrayList<>();
    for (int i = 0; i < ROWS; i++) {
      double[] row = new double[DIMS + 1];
      double z = 0.3;
      for (int d = 0; d < DIMS; d++) {
        row[d + 1] = r.nextGaussian();
        z += (d % 2 == 0 ? 1.5 : -2.0) * row[d + 1];
      }
      row[0] = r.nextDouble() < 1 / (1 + Math.exp(-z)) ? 1 : 0;
      rows.add(row);
    }
    return rows;
  }

  /**
   * What a worker does besides training.
   *
   * @param run the run's key in the static maps
   * @param iters iterations
   * @param failTask the task that throws on its attempt 0 (-1: none)
   * @param failAt the iteration it throws at
   * @param sleepMs a pause per iteration (room for a test to act mid-run)
   * @param blockTask a task that sleeps a minute before its first allreduce (-1: none)
   * @param hangTask a task whose thread hangs (sleeps ten minutes) on its attempt 0 at the
   *     start of iteration {@code hangAt}, outside Warren's calls (-1: none)
   * @param hangAt the iteration it hangs at
   */
  record Plan(
      String run, int iters, int failTask, int failAt, long sleepMs, int blockTask, int hangTask, int hangAt)
      implements java.io.Serializable {
    Plan(String run, int iters, int failTask, int failAt, long sleepMs, int blockTask) {
      this(run, iters, failTask, failAt, sleepMs, blockTask, -1, -1);
    }

    static Plan clean(String run, int iters) {
      return new Plan(run, iters, -1, -1, 0, -1);
    }
  }

  /** Per-run times (nanoTime) of events: {@code "hung"}, {@code "interrupted"}, and {@code
   * "task/attempt/iteration"} when that worker committed that iteration's checkpoint. */
  static final Map<String, Map<String, Long>> EVENTS = new ConcurrentHashMap<>();

  private static void event(Plan plan, String what) {
    EVENTS.computeIfAbsent(plan.run(), k -> new ConcurrentHashMap<>()).putIfAbsent(what, System.nanoTime());
  }

  /** One worker: the weights after {@code plan.iters()} iterations, with its identity. */
  static double[] train(Communicator comm, int task, int attempt, List<double[]> rows, Plan plan)
      throws InterruptedException {
    try {
      Checkpoint ckpt = comm.loadCheckpoint();
      double[] w = new double[DIMS + 1];
      if (ckpt.version() > 0) {
        ByteBuffer.wrap(ckpt.global()).asDoubleBuffer().get(w);
      }
      if (task == plan.blockTask()) {
        Thread.sleep(60_000);
      }
      for (int it = ckpt.version(); it < plan.iters(); it++) {
        if (task == plan.hangTask() && attempt == 0 && it == plan.hangAt()) {
          event(plan, "hung");
          try {
            Thread.sleep(600_000);
          } catch (InterruptedException e) {
            event(plan, "interrupted");
            throw e;
          }
        }
        if (task == plan.failTask() && attempt == 0 && it == plan.failAt()) {
          throw new IllegalStateException("injected failure of task " + task + " at iteration " + it);
        }
        double[] g = new double[DIMS + 2];
        for (double[] row : rows) {
          double z = w[0];
          for (int d = 0; d < DIMS; d++) {
            z += w[d + 1] * row[d + 1];
          }
          double err = 1 / (1 + Math.exp(-z)) - row[0];
          g[0] += err;
          for (int d = 0; d < DIMS; d++) {
            g[d + 1] += err * row[d + 1];
          }
          g[DIMS + 1] += 1;
        }
        comm.allreduce(g, Op.SUM);
        for (int d = 0; d <= DIMS; d++) {
          w[d] -= 0.5 * g[d] / g[DIMS + 1];
        }
        ByteBuffer b = ByteBuffer.allocate(8 * w.length);
        b.asDoubleBuffer().put(w);
        comm.checkpoint(b.array(), null);
        ITERATIONS.computeIfAbsent(plan.run(), k -> new AtomicInteger()).incrementAndGet();
        if (plan.hangTask() >= 0) {
          event(plan, task + "/" + attempt + "/" + it);
        }
        if (plan.sleepMs() > 0) {
          Thread.sleep(plan.sleepMs());
        }
      }
      double[] out = new double[3 + w.length];
      out[0] = task;
      out[1] = attempt;
      out[2] = ckpt.version();
      System.arraycopy(w, 0, out, 3, w.length);
      return out;
    } finally {
      ENDED.computeIfAbsent(plan.run(), k -> new ConcurrentHashMap<>()).put(task + "/" + attempt, System.nanoTime());
    }
  }

  /** Per-run view changes the workers saw: {@code "task/attempt"} to "old->new world sizes". */
  static final Map<String, Map<String, List<String>>> VIEWS = new ConcurrentHashMap<>();

  /**
   * One worker of an elastic run: {@link #train}'s iterations, going on from the last checkpoint
   * with the workers left after a {@link RolledBackException} (a lost worker dropped from the
   * view); the gradient is the mean over the members' rows (the row count is allreduced).
   */
  static double[] trainElastic(Communicator comm, int task, int attempt, List<double[]> rows, Plan plan)
      throws InterruptedException {
    Checkpoint ckpt = comm.loadCheckpoint();
    int resumed = ckpt.version();
    double[] w = new double[DIMS + 1];
    if (ckpt.version() > 0) {
      ByteBuffer.wrap(ckpt.global()).asDoubleBuffer().get(w);
    }
    int it = ckpt.version();
    List<String> views =
        VIEWS.computeIfAbsent(plan.run(), k -> new ConcurrentHashMap<>())
            .computeIfAbsent(task + "/" + attempt, k -> java.util.Collections.synchronizedList(new ArrayList<>()));
    while (it < plan.iters()) {
      try {
        double[] g = new double[DIMS + 2];
        for (double[] row : rows) {
          double z = w[0];
          for (int d = 0; d < DIMS; d++) {
            z += w[d + 1] * row[d + 1];
          }
          double err = 1 / (1 + Math.exp(-z)) - row[0];
          g[0] += err;
          for (int d = 0; d < DIMS; d++) {
            g[d + 1] += err * row[d + 1];
          }
          g[DIMS + 1] += 1;
        }
        comm.allreduce(g, Op.SUM);
        for (int d = 0; d <= DIMS; d++) {
          w[d] -= 0.5 * g[d] / g[DIMS + 1];
        }
        ByteBuffer b = ByteBuffer.allocate(8 * w.length);
        b.asDoubleBuffer().put(w);
        comm.checkpoint(b.array(), null);
        ViewChange c = comm.takeViewChange();
        if (c != null) {
          views.add(c.oldWorldSize() + "->" + c.newWorldSize());
        }
        ITERATIONS.computeIfAbsent(plan.run(), k -> new AtomicInteger()).incrementAndGet();
        it++;
        if (plan.sleepMs() > 0) {
          Thread.sleep(plan.sleepMs());
        }
      } catch (RolledBackException e) {
        Checkpoint back = comm.loadCheckpoint();
        it = back.version();
        java.util.Arrays.fill(w, 0);
        if (it > 0) {
          ByteBuffer.wrap(back.global()).asDoubleBuffer().get(w);
        }
        ViewChange c = comm.takeViewChange();
        views.add("rolled back to " + it + (c == null ? "" : ": " + c.oldWorldSize() + "->" + c.newWorldSize()));
      }
    }
    double[] out = new double[3 + w.length];
    out[0] = task;
    out[1] = attempt;
    out[2] = resumed;
    System.arraycopy(w, 0, out, 3, w.length);
    return out;
  }

  /** The weights of a result row. */
  static double[] weights(double[] result) {
    double[] w = new double[result.length - 3];
    System.arraycopy(result, 3, w, 0, w.length);
    return w;
  }

  /** Stores a result row under its run and task id; the identity map of a forward sink. */
  static double[] collect(String run, double[] result) {
    RESULTS.computeIfAbsent(run, k -> new ConcurrentHashMap<>()).put((int) result[0], result);
    return result;
  }
}

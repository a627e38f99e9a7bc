package io.warren.flink;

import io.warren.ps.PsClient;
import io.warren.ps.PsGradients;
import io.warren.ps.PsJob;
import io.warren.ps.PsOptimizer;
import io.warren.ps.PsPulls;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The tests' parameter-server training: sparse logistic regression over hashed categorical
 * features (a sparse table {@code w}, one float per key, beside a dense bias {@code b}), sync
 * SGD, a mini-batch per step. A row is {@code [label, key1..keyFIELDS]}; a result is {@code
 * [trainer id, attempt, resumed-at step, lost updates, model...]} with the model (every key of
 * {@code w}, then {@code b}) from trainer 0 only.
 */
final class PsTraining {
  static final int FIELDS = 6;
  static final int VOCAB = 200;
  static final int BITS = 10;
  static final int ROWS = 600;
  static final int BATCH = 50;
  static final long SEED = 20251125L;
  static final int HEAD = 4;

  /** Per-run pushes of every trainer of this JVM (a MiniCluster runs in it). */
  static final Map<String, AtomicInteger> PUSHES = new ConcurrentHashMap<>();

  /** Per-run result rows by trainer id, filled by {@link #collect}. */
  static final Map<String, Map<Integer, float[]>> RESULTS = new ConcurrentHashMap<>();

  private PsTraining() {}

  /**
   * What a trainer does besides training.
   *
   * @param run the run's key in the static maps
   * @param steps steps
   * @param failTrainer the trainer that throws on its attempt 0 (-1: none)
   * @param failAt the step it throws at, before its pull
   * @param sleepMs a pause per step (room for a test to act mid-run)
   */
  record Plan(String run, int steps, int failTrainer, int failAt, long sleepMs) implements java.io.Serializable {
    static Plan clean(String run, int steps) {
      return new Plan(run, steps, -1, -1, 0);
    }
  }

  static PsJob job(int trainers) {
    return PsJob.builder(trainers)
        .sync()
        .sparse("w", 1, 1L << BITS, PsJob.zeros(), PsOptimizer.sgd(0.5f))
        .dense("b", 1, PsJob.zeros(), PsOptimizer.sgd(0.5f))
        .build();
  }

  private static long key(int field, int value) {
    long h = ((long) field << 32 | value) * 0x9e3779b97f4a7c15L;
    h ^= h >>> 29;
    return h & ((1L << BITS) - 1);
  }

  /** The rows of partition {@code p}: labels from a hidden model over the features. */
  static List<double[]> partition(int p, int n) {
    SplittableRandom truth = new SplittableRandom(SEED);
    double[][] weight = new double[FIELDS][VOCAB];
    for (double[] f : weight) {
      for (int v = 0; v < VOCAB; v++) {
        f[v] = truth.nextDouble() * 2 - 1;
      }
    }
    SplittableRandom r = new SplittableRandom(SEED * 31 + p + 1);
    List<double[]> rows = new ArrayList<>();
    for (int i = 0; i < ROWS; i++) {
      double[] row = new double[1 + FIELDS];
      double z = 0;
      for (int f = 0; f < FIELDS; f++) {
        int v = r.nextInt(VOCAB);
        z += weight[f][v];
        row[1 + f] = key(f, v);
      }
      row[0] = r.nextDouble() < 1 / (1 + Math.exp(-z)) ? 1 : 0;
      rows.add(row);
    }
    return rows;
  }

  /** One trainer, from the servers' step on. */
  static float[] train(PsClient ps, int trainer, int attempt, int trainers, List<double[]> rows, Plan plan)
      throws InterruptedException {
    ps.define(job(trainers));
    long resumedAt = ps.step();
    for (long step = resumedAt; step < plan.steps(); step++) {
      if (trainer == plan.failTrainer() && attempt == 0 && step == plan.failAt()) {
        throw new IllegalStateException("injected failure of trainer " + trainer + " at step " + step);
      }
      int first = (int) ((step * BATCH) % rows.size());
      TreeSet<Long> keySet = new TreeSet<>();
      for (int i = 0; i < BATCH; i++) {
        double[] row = rows.get((first + i) % rows.size());
        for (int f = 0; f < FIELDS; f++) {
          keySet.add((long) row[1 + f]);
        }
      }
      long[] keys = keySet.stream().mapToLong(Long::longValue).toArray();
      Map<Long, Integer> at = new HashMap<>();
      for (int i = 0; i < keys.length; i++) {
        at.put(keys[i], i);
      }
      float[] w = new float[keys.length];
      float[] bias = new float[1];
      ps.pull(new PsPulls().sparse("w", keys, w).dense("b", 0, bias));
      float[] gw = new float[keys.length];
      float gb = 0;
      for (int i = 0; i < BATCH; i++) {
        double[] row = rows.get((first + i) % rows.size());
        double z = bias[0];
        for (int f = 0; f < FIELDS; f++) {
          z += w[at.get((long) row[1 + f])];
        }
        float err = (float) ((1 / (1 + Math.exp(-z)) - row[0]) / BATCH);
        for (int f = 0; f < FIELDS; f++) {
          gw[at.get((long) row[1 + f])] += err;
        }
        gb += err;
      }
      ps.push(new PsGradients().sparse("w", keys, gw).dense("b", 0, new float[] {gb}));
      PUSHES.computeIfAbsent(plan.run(), k -> new AtomicInteger()).incrementAndGet();
      if (plan.sleepMs() > 0) {
        Thread.sleep(plan.sleepMs());
      }
    }
    float[] model = new float[0];
    if (trainer == 0) {
      // sync: this pull waits for every trainer's last push
      long[] all = new long[1 << BITS];
      for (int k = 0; k < all.length; k++) {
        all[k] = k;
      }
      float[] w = ps.pullSparse("w", all);
      model = new float[w.length + 1];
      System.arraycopy(w, 0, model, 0, w.length);
      model[w.length] = ps.pullDense("b", 0, 1)[0];
    }
    float[] out = new float[HEAD + model.length];
    out[0] = trainer;
    out[1] = attempt;
    out[2] = resumedAt;
    out[3] = ps.lostUpdates();
    System.arraycopy(model, 0, out, HEAD, model.length);
    return out;
  }

  /** The model of trainer 0's result row. */
  static float[] model(float[] result) {
    float[] m = new float[result.length - HEAD];
    System.arraycopy(result, HEAD, m, 0, m.length);
    return m;
  }

  /** Stores a result row under its run and trainer id; the identity map of a forward sink. */
  static float[] collect(String run, float[] result) {
    RESULTS.computeIfAbsent(run, k -> new ConcurrentHashMap<>()).put((int) result[0], result);
    return result;
  }
}

package io.warren.examples.data;

import java.util.SplittableRandom;

/**
 * The synthetic rows of the logistic-regression examples: Gaussian features, a trailing 1 for
 * the intercept, and labels drawn from a logistic model with known weights. A partition's rows
 * depend only on the seed, the shape and the partition id, so a restarted task makes the same
 * rows and the Spark and Flink examples train on the same data, with the same arithmetic
 * ({@link #accumulate}, {@link #correct}).
 */
public final class LogisticData {
  private LogisticData() {}

  /**
   * The true weights of the problem (the features' then the intercept's), uniform in [-1, 1).
   *
   * @param features features per row
   * @param seed the data's seed
   * @return {@code features + 1} weights
   */
  public static double[] trueWeights(int features, long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    double[] w = new double[features + 1];
    for (int j = 0; j < w.length; j++) {
      w[j] = r.nextDouble(-1.0, 1.0);
    }
    return w;
  }

  /**
   * How many of the {@code rows} partition {@code pid} of {@code partitions} holds (the first
   * {@code rows % partitions} hold one more).
   *
   * @param rows rows in all
   * @param partitions partitions in all
   * @param pid the partition
   * @return its row count
   */
  public static int rowCount(int rows, int partitions, int pid) {
    return rows / partitions + (pid < rows % partitions ? 1 : 0);
  }

  /**
   * Partition {@code pid}'s rows in one array: {@code n} rows of {@code features + 1} values
   * row-major (the last value of a row is 1, for the intercept), then the {@code n} labels (0
   * or 1).
   *
   * @param rows rows in all
   * @param partitions partitions in all
   * @param features features per row
   * @param seed the data's seed
   * @param pid the partition
   * @return {@code [x..., y...]}, {@code n * (features + 2)} values
   */
  public static double[] generate(int rows, int partitions, int features, long seed, int pid) {
    int n = rowCount(rows, partitions, pid);
    int d = features + 1;
    double[] wt = trueWeights(features, seed);
    SplittableRandom r = new SplittableRandom(seed * 1000003L + pid);
    double[] xy = new double[n * d + n];
    for (int i = 0; i < n; i++) {
      double z = 0.0;
      for (int j = 0; j < d; j++) {
        double v = j == features ? 1.0 : r.nextGaussian();
        xy[i * d + j] = v;
        z += v * wt[j];
      }
      xy[n * d + i] = r.nextDouble() < 1.0 / (1.0 + Math.exp(-3.0 * z)) ? 1.0 : 0.0;
    }
    return xy;
  }

  /**
   * Adds the log-loss gradient at {@code w} of the {@code n} rows of {@code xy} (as {@link
   * #generate} lays them out, {@code d} values a row) to {@code buf[0..d)} and their log loss
   * to {@code buf[d]}. Plain loops in a fixed order: every run, worker and engine gets the same
   * bits.
   *
   * @param xy the rows, then the labels
   * @param n the rows
   * @param d values per row (features + 1)
   * @param w the weights (at least {@code d})
   * @param buf where the sums go (at least {@code d + 1})
   */
  public static void accumulate(double[] xy, int n, int d, double[] w, double[] buf) {
    for (int i = 0; i < n; i++) {
      double z = margin(xy, i, d, w);
      double y = xy[n * d + i];
      double g = 1.0 / (1.0 + Math.exp(-z)) - y;
      for (int j = 0; j < d; j++) {
        buf[j] += g * xy[i * d + j];
      }
      buf[d] += z > 0 ? Math.log1p(Math.exp(-z)) + (1 - y) * z : Math.log1p(Math.exp(z)) - y * z;
    }
  }

  /**
   * How many of the {@code n} rows of {@code xy} the weights {@code w} classify right.
   *
   * @param xy the rows, then the labels
   * @param n the rows
   * @param d values per row (features + 1)
   * @param w the weights (at least {@code d})
   * @return the rows whose predicted label (margin above 0) is theirs
   */
  public static int correct(double[] xy, int n, int d, double[] w) {
    int right = 0;
    for (int i = 0; i < n; i++) {
      if ((margin(xy, i, d, w) > 0) == (xy[n * d + i] > 0.5)) {
        right++;
      }
    }
    return right;
  }

  /** Row {@code i}'s margin {@code x . w}. */
  private static double margin(double[] xy, int i, int d, double[] w) {
    double z = 0.0;
    for (int j = 0; j < d; j++) {
      z += xy[i * d + j] * w[j];
    }
    return z;
  }
}

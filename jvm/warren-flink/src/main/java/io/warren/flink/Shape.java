package io.warren.flink;

import java.util.HashSet;
import java.util.Set;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.streaming.api.transformations.PartitionTransformation;
import org.apache.flink.streaming.runtime.partitioner.ForwardPartitioner;

/**
 * Whether a job's shape upstream of the workers keeps each worker subtask in its own failover
 * region: only forward (point-wise) edges at the workers' parallelism. An all-to-all edge
 * (a shuffle, a rebalance, a change of parallelism) in STREAMING mode joins every subtask into
 * one region, so Flink restarts all of them on any failure and retry-one cannot recover.
 */
final class Shape {
  private Shape() {}

  /**
   * The first edge that breaks point-wise failover, or null if there is none.
   *
   * @param t the workers' input
   * @param parallelism the workers' parallelism
   * @param defaultParallelism the environment's default parallelism
   * @return a description of the offending transformation, or null
   */
  static String firstShuffle(Transformation<?> t, int parallelism, int defaultParallelism) {
    return walk(t, parallelism, defaultParallelism, new HashSet<>());
  }

  private static String walk(Transformation<?> t, int n, int dflt, Set<Integer> seen) {
    if (!seen.add(t.getId())) {
      return null;
    }
    if (t instanceof PartitionTransformation<?> p && !(p.getPartitioner() instanceof ForwardPartitioner)) {
      return "'" + t.getName() + "' (" + p.getPartitioner() + ")";
    }
    int own = t.getParallelism() > 0 ? t.getParallelism() : dflt;
    if (!(t instanceof PartitionTransformation) && own != n) {
      return "'" + t.getName() + "' (parallelism " + own + ", the workers have " + n + ")";
    }
    for (Transformation<?> in : t.getInputs()) {
      String bad = walk(in, n, dflt, seen);
      if (bad != null) {
        return bad;
      }
    }
    return null;
  }
}

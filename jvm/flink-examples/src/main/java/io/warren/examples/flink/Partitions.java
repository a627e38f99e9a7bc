package io.warren.examples.flink;

import io.warren.flink.PartitionedSource;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * The input of a Warren job whose partitions a function makes: one element per worker, worker
 * {@code i} getting partition {@code i}.
 */
public final class Partitions {
  private Partitions() {}

  /** Makes one partition's element. */
  @FunctionalInterface
  public interface Maker extends Serializable {
    /**
     * Partition {@code pid}'s element.
     *
     * @param pid the partition
     * @return its element
     */
    double[] make(int pid);
  }

  /**
   * The partitions as a stream at parallelism {@code workers}. Under retry-one, source subtask
   * {@code i} makes partition {@code i} and a forward edge takes it to worker {@code i}, so each
   * worker is its own failover region. Under fail-all ({@code oneRegion}) the job needs one
   * failover region: one source subtask makes every partition, and a custom partitioning by
   * partition id (an all-to-all edge) sends each to its worker.
   *
   * @param env the environment
   * @param workers the workers (and partitions)
   * @param oneRegion make the source and the workers one failover region
   * @param maker makes a partition
   * @return the stream
   */
  public static DataStream<double[]> of(StreamExecutionEnvironment env, int workers, boolean oneRegion, Maker maker) {
    if (!oneRegion) {
      return env.fromSource(
              new PartitionedSource<>(workers, (pid, n) -> List.of(maker.make(pid))),
              WatermarkStrategy.noWatermarks(),
              "synthetic-partitions",
              TypeInformation.of(double[].class))
          .setParallelism(workers);
    }
    return env.fromSource(
            new PartitionedSource<Tuple2<Integer, double[]>>(
                1,
                (ignored, one) -> {
                  List<Tuple2<Integer, double[]>> all = new ArrayList<>();
                  for (int pid = 0; pid < workers; pid++) {
                    all.add(Tuple2.of(pid, maker.make(pid)));
                  }
                  return all;
                }),
            WatermarkStrategy.noWatermarks(),
            "synthetic-data",
            Types.TUPLE(Types.INT, TypeInformation.of(double[].class)))
        .setParallelism(1)
        .partitionCustom((Integer pid, int n) -> pid, new ByPartition())
        .map(t -> t.f1)
        .returns(TypeInformation.of(double[].class))
        .setParallelism(workers);
  }

  /** The partition id of a fail-all element. */
  private static final class ByPartition implements KeySelector<Tuple2<Integer, double[]>, Integer> {
    private static final long serialVersionUID = 1L;

    @Override
    public Integer getKey(Tuple2<Integer, double[]> t) {
      return t.f0;
    }
  }
}

package io.warren.examples.flink;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.accumulators.ListAccumulator;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/** Hands the workers' results to the client through a list accumulator. */
public final class Results {
  private static final String ACCUMULATOR = "warren-results";

  private Results() {}

  /**
   * Ends the job with {@code results}: a map into the accumulator, then a discarding sink, both
   * at the results' parallelism with forward edges (each worker stays its own failover region).
   *
   * @param results the workers' results
   * @param <R> their type
   */
  public static <R> void collect(DataStream<R> results) {
    int parallelism = results.getParallelism();
    results.map(new Report<R>()).returns(results.getType()).setParallelism(parallelism)
        .sinkTo(new DiscardingSink<>()).setParallelism(parallelism);
  }

  /**
   * The results {@link #collect} gathered, in no particular order.
   *
   * @param job the finished job
   * @param <R> their type
   * @return the results
   */
  public static <R> List<R> of(JobExecutionResult job) {
    return new ArrayList<>(job.<List<R>>getAccumulatorResult(ACCUMULATOR));
  }

  /** Adds every result to the accumulator. */
  private static final class Report<R> extends RichMapFunction<R, R> {
    private static final long serialVersionUID = 1L;
    private transient ListAccumulator<R> results;

    @Override
    public void open(OpenContext openContext) {
      results = new ListAccumulator<>();
      getRuntimeContext().addAccumulator(ACCUMULATOR, results);
    }

    @Override
    public R map(R r) {
      results.add(r);
      return r;
    }
  }
}

package io.warren.flink;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A bounded source whose subtask {@code i} always emits partition {@code i} of a dataset, in
 * the same order, however often it is restarted: what a Warren worker behind a forward edge
 * needs to recover bit-identically (Flink's own splitting sources hand splits to whichever
 * reader asks first). Run it with parallelism {@code numPartitions}.
 *
 * <pre>{@code
 * DataStream<double[]> rows = env.fromSource(
 *     new PartitionedSource<>(4, (p, n) -> loadPartition(p, n)),
 *     WatermarkStrategy.noWatermarks(), "data", PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO)
 *   .setParallelism(4);
 * }</pre>
 *
 * @param <T> the rows
 */
public final class PartitionedSource<T>
    implements Source<T, PartitionedSource.Partition, PartitionedSource.Nothing> {
  private static final long serialVersionUID = 1L;

  /**
   * Makes (or reads) the rows of one partition; runs in the subtask.
   *
   * @param <T> the rows
   */
  @FunctionalInterface
  public interface Rows<T> extends Serializable {
    /**
     * The rows of a partition, in order.
     *
     * @param partition the partition (= subtask index)
     * @param numPartitions the number of partitions
     * @return its rows
     * @throws Exception if they cannot be made
     */
    List<T> of(int partition, int numPartitions) throws Exception;
  }

  private final int numPartitions;
  private final Rows<T> rows;

  /**
   * A source of {@code numPartitions} partitions.
   *
   * @param numPartitions the partitions (the source's parallelism)
   * @param rows makes a partition's rows
   */
  public PartitionedSource(int numPartitions, Rows<T> rows) {
    if (numPartitions < 1) {
      throw new IllegalArgumentException("numPartitions must be at least 1, got " + numPartitions);
    }
    this.numPartitions = numPartitions;
    this.rows = rows;
  }

  @Override
  public Boundedness getBoundedness() {
    return Boundedness.BOUNDED;
  }

  @Override
  public SourceReader<T, Partition> createReader(SourceReaderContext ctx) {
    return new Reader<>(rows, numPartitions);
  }

  @Override
  public SplitEnumerator<Partition, Nothing> createEnumerator(SplitEnumeratorContext<Partition> ctx) {
    return new Enumerator(ctx, numPartitions);
  }

  @Override
  public SplitEnumerator<Partition, Nothing> restoreEnumerator(
      SplitEnumeratorContext<Partition> ctx, Nothing checkpoint) {
    return new Enumerator(ctx, numPartitions);
  }

  @Override
  public SimpleVersionedSerializer<Partition> getSplitSerializer() {
    return new PartitionSerializer();
  }

  @Override
  public SimpleVersionedSerializer<Nothing> getEnumeratorCheckpointSerializer() {
    return new NothingSerializer();
  }

  /**
   * The split of one partition.
   *
   * @param index the partition
   */
  public record Partition(int index) implements SourceSplit, Serializable {
    @Override
    public String splitId() {
      return Integer.toString(index);
    }
  }

  /** The enumerator's (empty) checkpoint: splits are a function of the subtask index. */
  public static final class Nothing implements Serializable {
    private static final long serialVersionUID = 1L;
  }

  /** Assigns partition {@code i} to reader {@code i} whenever it registers (restarts too). */
  private static final class Enumerator implements SplitEnumerator<Partition, Nothing> {
    private final SplitEnumeratorContext<Partition> ctx;
    private final int numPartitions;

    Enumerator(SplitEnumeratorContext<Partition> ctx, int numPartitions) {
      this.ctx = ctx;
      this.numPartitions = numPartitions;
    }

    @Override
    public void start() {}

    @Override
    public void handleSplitRequest(int subtask, String host) {}

    @Override
    public void addSplitsBack(List<Partition> splits, int subtask) {
      // Given again when the subtask's next attempt registers (addReader).
    }

    @Override
    public void addReader(int subtask) {
      if (subtask < numPartitions) {
        ctx.assignSplit(new Partition(subtask), subtask);
      }
      ctx.signalNoMoreSplits(subtask);
    }

    @Override
    public Nothing snapshotState(long checkpointId) {
      return new Nothing();
    }

    @Override
    public void close() {}
  }

  /** Emits the rows of its partition, then ends. */
  private static final class Reader<T> implements SourceReader<T, Partition> {
    private final Rows<T> rows;
    private final int numPartitions;
    private final ArrayDeque<T> pending = new ArrayDeque<>();
    private boolean noMoreSplits;
    private CompletableFuture<Void> available = new CompletableFuture<>();

    Reader(Rows<T> rows, int numPartitions) {
      this.rows = rows;
      this.numPartitions = numPartitions;
    }

    @Override
    public void start() {}

    @Override
    public InputStatus pollNext(ReaderOutput<T> out) {
      T next = pending.poll();
      if (next != null) {
        out.collect(next);
        return InputStatus.MORE_AVAILABLE;
      }
      if (noMoreSplits) {
        return InputStatus.END_OF_INPUT;
      }
      if (available.isDone()) {
        available = new CompletableFuture<>();
      }
      return InputStatus.NOTHING_AVAILABLE;
    }

    @Override
    public List<Partition> snapshotState(long checkpointId) {
      return new ArrayList<>();
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
      return pending.isEmpty() && !noMoreSplits ? available : CompletableFuture.completedFuture(null);
    }

    @Override
    public void addSplits(List<Partition> splits) {
      for (Partition p : splits) {
        try {
          pending.addAll(rows.of(p.index(), numPartitions));
        } catch (Exception e) {
          throw new IllegalStateException("cannot make the rows of partition " + p.index(), e);
        }
      }
      available.complete(null);
    }

    @Override
    public void notifyNoMoreSplits() {
      noMoreSplits = true;
      available.complete(null);
    }

    @Override
    public void close() {}
  }

  private static final class PartitionSerializer implements SimpleVersionedSerializer<Partition> {
    @Override
    public int getVersion() {
      return 1;
    }

    @Override
    public byte[] serialize(Partition p) {
      return ByteBuffer.allocate(4).putInt(p.index()).array();
    }

    @Override
    public Partition deserialize(int version, byte[] bytes) throws IOException {
      if (bytes.length != 4) {
        throw new IOException("a partition split is 4 bytes, got " + bytes.length);
      }
      return new Partition(ByteBuffer.wrap(bytes).getInt());
    }
  }

  private static final class NothingSerializer implements SimpleVersionedSerializer<Nothing> {
    @Override
    public int getVersion() {
      return 1;
    }

    @Override
    public byte[] serialize(Nothing n) {
      return new byte[0];
    }

    @Override
    public Nothing deserialize(int version, byte[] bytes) {
      return new Nothing();
    }
  }
}

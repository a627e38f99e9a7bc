package io.warren.spark

import org.apache.spark.util.AccumulatorV2

/** The `warren.checkpointVersion` accumulator: in a task, the checkpoint version its worker
  * committed last; merged on the driver, the highest of the tasks'. Executors send each running
  * task's value with their heartbeats (`spark.executor.heartbeatInterval`), which is how the
  * driver's Warren tab follows a job's iterations while it runs; the stage page shows the
  * merged value once the tasks end.
  */
final class CheckpointVersionAccumulator extends AccumulatorV2[Long, Long] {
  @volatile private var latest = 0L

  /** Whether no checkpoint was recorded (the value is 0). */
  override def isZero: Boolean = latest == 0L

  /** A copy holding the same value. */
  override def copy(): CheckpointVersionAccumulator = {
    val c = new CheckpointVersionAccumulator
    c.latest = latest
    c
  }

  /** Back to 0. */
  override def reset(): Unit = latest = 0L

  /** Records `version` as the latest checkpoint (in an elastic job it can be lower than the
    * one before, after a roll-back).
    *
    * @param version the version just committed
    */
  override def add(version: Long): Unit = latest = version

  /** Takes the higher of the two values (the driver merging its tasks'). */
  override def merge(other: AccumulatorV2[Long, Long]): Unit = latest = math.max(latest, other.value)

  /** The latest version (in a task) or the highest (merged on the driver). */
  override def value: Long = latest
}

/** Names of the accumulator. */
object CheckpointVersionAccumulator {

  /** The name the Spark UI shows. */
  val Name = "warren.checkpointVersion"
}

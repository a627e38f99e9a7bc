package io.warren.examples

import java.nio.charset.StandardCharsets

import io.warren.MasterTask
import io.warren.examples.RecordIOTraining.Params
import io.warren.spark._

/** The parts of a [[RecordIOTraining]] step that are not the loop: what a worker keeps
  * between steps and checkpoints, which task each rank's slot of a step's allreduce holds, and
  * one record's gradient and loss.
  */
private[examples] object RecordIOStep {

  /** What each checkpoint holds: the pass, the step and the idle steps; the weights; the reads
    * (passes x records, row-major); the losses per pass, then the running loss sum and count;
    * the last step's slots.
    */
  final case class Checkpointed(at: Array[Long], w: Array[Double], reads: Array[Int], losses: Array[Double],
      slots: Array[Double])
  object Checkpointed {
    implicit val codec: Codec[Checkpointed] = Codec.caseClass5(Checkpointed.apply _, Checkpointed.unapply _)
  }

  /** A worker's view of the job between steps, as kept in the checkpoint ([[Checkpointed]]). */
  final class State(p: Params) {
    val d: Int = p.features + 1
    var pass: Int = 0
    var step: Long = 0
    var idle: Int = 0
    val w: Array[Double] = new Array[Double](d)
    val reads: Array[Array[Int]] = Array.fill(p.passes)(new Array[Int](p.records))
    val losses: Array[Double] = new Array[Double](p.passes)
    val lossSum: Array[Double] = new Array[Double](2)
    /** (task id + 1, epoch) per rank, of the last step's allreduce: the tasks in the checkpoint. */
    val slots: Array[Double] = new Array[Double](2 * p.workers)

    /** This state as a checkpoint. */
    def checkpointed: Checkpointed =
      Checkpointed(Array(pass.toLong, step, idle.toLong), w, reads.flatten, losses ++ lossSum, slots)

    /** Takes on the state of checkpoint `c`. */
    def restore(c: Checkpointed): Unit = {
      pass = c.at(0).toInt
      step = c.at(1)
      idle = c.at(2).toInt
      System.arraycopy(c.w, 0, w, 0, d)
      for ((q, k) <- reads.zipWithIndex) System.arraycopy(c.reads, k * p.records, q, 0, p.records)
      System.arraycopy(c.losses, 0, losses, 0, losses.length)
      System.arraycopy(c.losses, losses.length, lossSum, 0, lossSum.length)
      System.arraycopy(c.slots, 0, slots, 0, slots.length)
    }
  }

  /** The task of `rank`'s slot in `slots`, if any. */
  def slotTask(slots: Array[Double], rank: Int, pass: Int): Option[MasterTask] =
    if (slots(2 * rank) > 0)
      Some(new MasterTask(MasterTask.Kind.TASK, slots(2 * rank).toLong - 1, slots(2 * rank + 1).toLong, pass, java.util.List.of[Array[Byte]]()))
    else None

  /** Adds the record `bytes` (of task `task`) to `buf`: its gradient at `w` to `buf(0 until d)`,
    * its log loss to `buf(d)`, one to the record count `buf(d + 1)` and to `buf(ids + id)`.
    */
  def accumulate(p: Params, w: Array[Double], task: Long, bytes: Array[Byte], buf: Array[Double], ids: Int): Unit = {
    val f = new String(bytes, StandardCharsets.UTF_8).split(',')
    if (f.length != p.features + 2) {
      throw new IllegalArgumentException(s"record of task $task has ${f.length} fields: ${f.mkString(",")}")
    }
    val id = f(0).toInt
    require(id >= 0 && id < p.records, s"record id $id out of range")
    val d = w.length
    val y = f(1).toDouble
    val x = Array.tabulate(d)(j => if (j == p.features) 1.0 else f(j + 2).toDouble)
    val z = x.indices.map(j => x(j) * w(j)).sum
    val g = 1.0 / (1.0 + math.exp(-z)) - y
    for (j <- 0 until d) buf(j) += g * x(j)
    buf(d) += (if (z > 0) math.log1p(math.exp(-z)) + (1 - y) * z else math.log1p(math.exp(z)) - y * z)
    buf(d + 1) += 1
    buf(ids + id) += 1
  }
}

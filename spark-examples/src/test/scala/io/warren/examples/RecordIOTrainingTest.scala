package io.warren.examples

import java.nio.file.Path

import io.warren.examples.FaultHarness.Faults
import io.warren.examples.RecordIOTraining.Params
import io.warren.spark.WarrenSpark
import org.apache.spark.SparkContext
import org.junit.jupiter.api.Assertions.{assertEquals, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._
import org.junit.jupiter.api.io.TempDir

/** The RecordIO training example on `local-cluster[3,1,1024]` (three executor JVMs), one
  * SparkContext for both cases: workers pull tasks from a master on the driver; every record of
  * the dataset is read in every pass, exactly once without failures and at least once when a
  * task attempt is killed while it holds a task.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
class RecordIOTrainingTest {
  private var sc: SparkContext = _
  private val params = Params(workers = 3, records = 600, passes = 2)

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(3, "warren-recordio-training-test")
    assertTrue(WarrenSpark.awaitSlots(sc, 3, 60) >= 3, "the 3 executors did not register")
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  /** Record ids 0 until records, as written by the driver. */
  private def allIds = (0 until params.records).toSet

  private def readIds(reads: Array[Int]) = reads.indices.filter(reads(_) > 0).toSet

  /** "id:reads" of every record not read exactly once (empty when all were). */
  private def notOnce(reads: Array[Int]) = reads.indices.filter(reads(_) != 1).map(i => s"$i:${reads(i)}")

  private def checkMaster(r: RecordIOTraining.Result): Unit = {
    val s = r.status
    assertEquals(params.passes.toLong, s.pass(), s"every pass is done: $s")
    assertEquals(0L, s.pending(), s"no task left pending: $s")
    assertEquals(0L, s.failed(), s"no task discarded: $s")
  }

  @Test
  def a_withoutFailuresEveryRecordIsReadExactlyOncePerPass(@TempDir dir: Path): Unit = {
    // A long task timeout: no task times out, so nothing is read twice.
    val r = RecordIOTraining.run(sc, params.copy(taskTimeoutMs = 120000), dir)
    println(s"RecordIO clean: ${r.steps} steps, losses ${r.losses.mkString(", ")}, master ${r.status}")
    assertEquals(params.passes, r.reads.length)
    for ((reads, pass) <- r.reads.zipWithIndex) {
      assertEquals(params.records, reads.length)
      assertEquals(Seq(), notOnce(reads), s"pass $pass: records not read exactly once (id:reads)")
    }
    assertEquals(0L, r.recoveries)
    assertTrue(r.losses.forall(l => l > 0 && l < math.log(2) + 0.1), r.losses.mkString(", "))
    assertTrue(r.losses(1) < r.losses(0), s"the loss falls: ${r.losses.mkString(", ")}")
    checkMaster(r)
  }

  @Test
  def b_aTaskKilledHoldingATaskLosesNoRecordOfThePass(@TempDir dir: Path): Unit = {
    // Killed at step 4 of pass 0 after taking a task: the task stays pending, times out at the
    // master after 3 s and is handed out again; the retried attempt recovers from its peers.
    val p = params.copy(hooks = Faults(killTask = 4), taskTimeoutMs = 3000)
    val r = RecordIOTraining.run(sc, p, dir)
    val twice = r.reads.map(_.count(_ > 1))
    println(s"RecordIO kill-task: ${r.steps} steps, recoveries ${r.recoveries}, read twice ${twice.mkString(", ")}")
    assertTrue(r.recoveries >= 1, s"recoveries ${r.recoveries}")
    for ((reads, pass) <- r.reads.zipWithIndex) {
      assertEquals(allIds, readIds(reads), s"pass $pass: every record at least once")
    }
    checkMaster(r)
  }

  /** Killed at step 4 after `point`: nothing waits for a task timeout (120 s here), so every
    * record is read exactly once per pass, or the run stalls and reads a task twice.
    */
  private def killedAfter(point: String, dir: Path): Unit = {
    val p = params.copy(hooks = Faults(killTask = 4, killPoint = point), taskTimeoutMs = 120000)
    val r = RecordIOTraining.run(sc, p, dir)
    println(s"RecordIO kill after $point: ${r.steps} steps, recoveries ${r.recoveries}")
    assertTrue(r.recoveries >= 1, s"recoveries ${r.recoveries}")
    for ((reads, pass) <- r.reads.zipWithIndex) {
      assertEquals(params.records, reads.length)
      assertEquals(Seq(), notOnce(reads), s"pass $pass: records not read exactly once (id:reads)")
    }
    checkMaster(r)
  }

  @Test
  def c_aTaskKilledAfterItsAllreduceIsReplayedWithItsPredecessorsTask(@TempDir dir: Path): Unit = {
    // The replacement replays step 4 from its peers' result, which holds the dead attempt's
    // task: it reports the task it took itself failed and finishes the dead attempt's.
    killedAfter("allreduce", dir)
  }

  @Test
  def d_aTaskKilledAfterItsCheckpointHasItsTaskFinishedByTheReplacement(@TempDir dir: Path): Unit = {
    // The dead attempt's task is in checkpoint 5 but was never reported: the replacement
    // finishes it from the checkpoint.
    killedAfter("checkpoint", dir)
  }
}

package io.warren.examples

import java.nio.file.Files
import java.util.concurrent.TimeUnit

import scala.jdk.CollectionConverters._

import io.warren.examples.FaultHarness.{Failure, Faults}
import io.warren.examples.LogisticRegression.{Params, Result}
import io.warren.spark.{WarrenSpark, WarrenSparkException}
import org.apache.spark.{SparkContext, WarrenSlots}
import org.junit.jupiter.api.Assertions.{assertEquals, assertFalse, assertThrows, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** Recovery of the logistic-regression example on `local-cluster[4,1,1024]` (four executor
  * JVMs of one core each, one SparkContext for every case): several losses at once, a loss
  * during a checkpoint and during the bootstrap calls (retry-one), a whole-stage re-run from
  * the durable checkpoint (fail-all), and a task that fails in every attempt. Each recovered run
  * must end with the failure-free run's model, bit for bit, after exactly the injected losses.
  *
  * Losses are thrown exceptions, halted or paused (SIGSTOP) executor JVMs at the start of an
  * iteration (the example's hooks), or `WARREN_MOCK` points, where the native library `_exit`s the executor
  * JVM inside a given collective call (per iteration: call 0 the gradient allreduce, 1 and 2
  * the checkpoint's two phases; `rank,bootstrap:n,attempt` the n-th bootstrap call;
  * `rank,finalize,attempt` the start of `finalize`, at the end of the task).
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class RecoveryClusterTest {
  private val workers = 4
  private var sc: SparkContext = _
  private val counts = new TaskCounts
  private val params = Params(workers = workers, rows = 60000, features = 20, iters = 12)
  private lazy val clean = LogisticRegression.run(sc, params)

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(workers, "warren-recovery-cluster-test")
    sc.addSparkListener(counts)
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  /** Every case starts with all executors registered (halted ones are replaced) and idle. */
  @BeforeEach
  def fullCluster(): Unit = {
    counts.reset(sc, workers)
  }

  /** Runs `p`, then checks the model equals the failure-free one and that exactly `losses`
    * task attempts failed (fail-all: at least; the others of the attempt may fail or be killed).
    */
  private def recovered(what: String, p: Params, losses: Int, exactly: Boolean = true): Result = {
    val want = clean
    counts.failed.set(0)
    val r = LogisticRegression.run(sc, p)
    WarrenSlots.drainListeners(sc, 5000)
    println(f"LR $what: ${r.seconds}%.2f s (clean ${want.seconds}%.2f s), recoveries ${r.recoveries}")
    assertEquals(want.modelHash, r.modelHash, s"$what: the model differs from the failure-free run's")
    assertEquals(want.losses.toSeq, r.losses.toSeq, what)
    if (exactly) assertEquals(losses, counts.failed.get(), s"$what: failed task attempts")
    else assertTrue(counts.failed.get() >= losses, s"$what: ${counts.failed.get()} failed task attempts")
    r
  }

  private def mocked(points: String): Map[String, String] = params.conf + ("setting.WARREN_MOCK" -> points)

  @Test
  def a_twoLossesAtOnce(): Unit = {
    val r = recovered(
      "two losses (a thrown task, a halted executor)",
      params.copy(hooks = Faults(failures = Seq(Failure(1, 5), Failure(2, 5, halt = true)))),
      2
    )
    assertTrue(r.recoveries >= 1, s"rank 0 re-linked ${r.recoveries} times")
  }

  @Test
  def b_threeLossesAtOnce(): Unit = {
    val r = recovered(
      "three losses (two thrown tasks, a halted executor)",
      params.copy(hooks = Faults(failures = Seq(Failure(1, 5), Failure(2, 5), Failure(3, 5, halt = true)))),
      3
    )
    assertTrue(r.recoveries >= 1, s"rank 0 re-linked ${r.recoveries} times")
  }

  @Test
  def c_aLossDuringACheckpoint(): Unit = {
    // Rank 2's executor exits in the first phase of checkpoint 6, rank 1's (later) in the
    // second phase of checkpoint 9.
    val r = recovered("losses during checkpoints", params.copy(conf = mocked("2,5,1,0;1,8,2,0")), 2)
    assertTrue(r.recoveries >= 2, s"rank 0 re-linked ${r.recoveries} times")
  }

  @Test
  def d_aLossDuringTheBootstrapCalls(): Unit = {
    // Rank 3's executor exits in the second bootstrap call (the seed broadcast).
    recovered("a loss during the bootstrap calls", params.copy(conf = mocked("3,bootstrap:1,0")), 1)
  }

  @Test
  def da_aLossAtTheEnd(): Unit = {
    // Rank 1's executor exits at the start of finalize (`close`), every call made, while the
    // others reach the end. Before finalize waited for every worker, the others had finished
    // by then and each re-run of task 1 was refused ("re-linking is impossible") until the
    // job failed.
    recovered("a loss at finalize", params.copy(conf = mocked("1,finalize,0")), 1)
  }

  @Test
  def e_failAllResumesFromTheDurableCheckpoint(): Unit = {
    val dir = Files.createTempDirectory("warren-fail-all")
    try {
      val failAll = params.conf ++ Map("recovery" -> "fail-all", "checkpointDir" -> dir.toString)
      // Rank 1's executor exits in the gradient allreduce of iteration 6 (after checkpoint 6).
      val r = recovered(
        "fail-all, a halted executor",
        params.copy(conf = failAll + ("setting.WARREN_MOCK" -> "1,6,0,0")),
        1,
        exactly = false
      )
      assertEquals(1, counts.stageReruns.get(), "Spark re-ran the barrier stage once")
      assertEquals(6, r.startVersion, "rank 0 of the re-run resumed from durable checkpoint 6")
      counts.stageReruns.set(0)
      val t = recovered(
        "fail-all, a thrown task",
        params.copy(conf = failAll, hooks = Faults(failures = Seq(Failure(2, 9)))),
        1,
        exactly = false
      )
      assertEquals(1, counts.stageReruns.get(), "Spark re-ran the barrier stage once")
      assertEquals(9, t.startVersion, "rank 0 of the re-run resumed from durable checkpoint 9")
      assertEquals(0, dir.toFile.list().length, s"the runs' checkpoint directories are removed: ${dir.toFile.list().toSeq}")
    } finally {
      Option(dir.toFile.listFiles()).foreach(_.foreach(d => { Option(d.listFiles()).foreach(_.foreach(_.delete())); d.delete() }))
      dir.toFile.delete()
    }
  }

  @Test
  def f_attemptsExhaustedFailTheJobClearlyAndFreeTheExecutors(): Unit = {
    val started = System.nanoTime()
    val e = assertThrows(
      classOf[WarrenSparkException],
      () => LogisticRegression.run(sc, params.copy(hooks = Faults(failures = Seq(Failure(1, 3, attempts = 1000)))))
    )
    val seconds = (System.nanoTime() - started) / 1e9
    println(f"LR attempts exhausted: failed after $seconds%.2f s: ${e.getMessage}")
    assertTrue(e.getMessage.contains("lost task id(s) 1 (task 1 failed 4 times"), e.getMessage)
    assertTrue(e.getMessage.contains("spark.task.maxFailures=4"), e.getMessage)
    assertTrue(e.getMessage.contains("injected failure of task 1"), e.getMessage)
    assertTrue(seconds < 60, s"the job took $seconds s to fail")
    // No task is left blocked: the next job gets every slot and runs.
    val next = WarrenSpark.train(sc.parallelize(0 until workers, workers), workers, Map("slotWaitTimeout" -> "30"))(
      (c, rows) => (c.rank(), rows.sum)
    )
    assertEquals((0 until workers).map(i => (i, i)), next)
  }

  @Test
  def g_failAllAttemptsExhaustedFailTheJobClearly(): Unit = {
    val dir = Files.createTempDirectory("warren-fail-all")
    try {
      val failAll = params.conf ++ Map("recovery" -> "fail-all", "checkpointDir" -> dir.toString)
      val started = System.nanoTime()
      val e = assertThrows(
        classOf[WarrenSparkException],
        () => LogisticRegression.run(sc, params.copy(conf = failAll, hooks = Faults(failures = Seq(Failure(2, 4, attempts = 1000)))))
      )
      val seconds = (System.nanoTime() - started) / 1e9
      println(f"LR fail-all attempts exhausted: failed after $seconds%.2f s: ${e.getMessage}")
      assertTrue(e.getMessage.contains("(fail-all) failed: lost task id(s) 2 (task 2 failed 4 times"), e.getMessage)
      assertTrue(e.getMessage.contains("spark.stage.maxConsecutiveAttempts=4"), e.getMessage)
      assertTrue(seconds < 90, s"the job took $seconds s to fail")
      assertEquals(3, counts.stageReruns.get(), "Spark ran the barrier stage 4 times")
    } finally {
      Option(dir.toFile.listFiles()).foreach(_.foreach(d => { Option(d.listFiles()).foreach(_.foreach(_.delete())); d.delete() }))
      dir.toFile.delete()
    }
    // Nothing is left blocked: the next job gets every slot and runs.
    val next = WarrenSpark.train(sc.parallelize(0 until workers, workers), workers, Map("slotWaitTimeout" -> "30"))(
      (c, rows) => (c.rank(), rows.sum)
    )
    assertEquals((0 until workers).map(i => (i, i)), next)
  }

  /** Why fail-all's barrier stage feeds a shuffle: Spark 4.3 does not re-run a failed barrier
    * ResultStage (the job fails), only a barrier ShuffleMapStage. If this starts failing, Spark
    * has changed and the shuffle may no longer be needed.
    */
  @Test
  def h_sparkDoesNotRerunAFailedBarrierResultStage(): Unit = {
    val e = assertThrows(
      classOf[org.apache.spark.SparkException],
      () =>
        sc.parallelize(0 until workers, workers)
          .barrier()
          .mapPartitions { it =>
            val ctx = org.apache.spark.TaskContext.get()
            if (ctx.partitionId() == 1 && ctx.stageAttemptNumber() == 0) throw new RuntimeException("barrier task fails")
            it
          }
          .collect()
    )
    assertTrue(e.getMessage.contains("Could not recover from a failed barrier ResultStage"), e.getMessage)
    val ok = sc.parallelize(0 until workers, workers)
      .barrier()
      .mapPartitions { it =>
        val ctx = org.apache.spark.TaskContext.get()
        if (ctx.partitionId() == 1 && ctx.stageAttemptNumber() == 0) throw new RuntimeException("barrier task fails")
        it
      }
      .map(i => (i, i))
      .partitionBy(new org.apache.spark.HashPartitioner(1))
      .keys
      .collect()
      .sorted
    assertEquals((0 until workers).toSeq, ok.toSeq)
    WarrenSlots.drainListeners(sc, 5000)
    assertEquals(1, counts.stageReruns.get(), "the barrier ShuffleMapStage ran twice")
  }

  @Test
  def i_badFailAllSettingsAreRefusedClearly(): Unit = {
    val rdd = sc.parallelize(0 until workers, workers)
    val noDir = assertThrows(
      classOf[WarrenSparkException],
      () => WarrenSpark.train(rdd, workers, Map("recovery" -> "fail-all"))((c, _) => c.rank())
    )
    assertTrue(noDir.getMessage.contains("needs spark.warren.checkpointDir"), noDir.getMessage)
    // Any Hadoop file system works (HdfsCheckpointClusterTest: a real HDFS, an unreachable
    // namenode); a scheme Hadoop has no FileSystem for is refused before any task starts.
    val unknown = assertThrows(
      classOf[WarrenSparkException],
      () =>
        WarrenSpark.train(rdd, workers, Map("recovery" -> "fail-all", "checkpointDir" -> "nosuchfs://nn/ckpt"))(
          (c, _) => c.rank()
        )
    )
    assertTrue(unknown.getMessage.contains("cannot create the fail-all run directory nosuchfs://nn/ckpt/warren-"), unknown.getMessage)
    assertTrue(unknown.getMessage.contains("No FileSystem for scheme \"nosuchfs\""), unknown.getMessage)
    val typo = assertThrows(
      classOf[WarrenSparkException],
      () => WarrenSpark.train(rdd, workers, Map("recovery" -> "failall"))((c, _) => c.rank())
    )
    assertEquals("""spark.warren.recovery = "failall": expected one of retry-one, fail-all""", typo.getMessage)
    assertFalse(counts.failed.get() > 0, "no task ran")
  }

  @Test
  def j_lbfgsToATargetLossRecoversToTheSameModel(): Unit = {
    // L-BFGS stops at the first iteration whose loss reaches the target; a restarted worker
    // decides that from the checkpointed losses, as the others did.
    val gd = clean
    val target = 0.2
    val lbfgs = params.copy(optimizer = "lbfgs", iters = 40, targetLoss = target)
    val free = LogisticRegression.run(sc, lbfgs)
    assertTrue(free.losses.last <= target, s"L-BFGS ended at loss ${free.losses.last} after ${free.losses.length} iterations")
    assertTrue(free.losses.init.forall(_ > target), s"L-BFGS went on past the target: ${free.losses.toSeq}")
    // Gradient descent (the same rows, step 1.0) needs more iterations to get there, if it does at all.
    val gdIters = gd.losses.indexWhere(_ <= target) match {
      case -1 => Int.MaxValue
      case k  => k + 1
    }
    assertTrue(
      free.losses.length < gdIters,
      s"L-BFGS took ${free.losses.length} iterations to loss $target, gradient descent ${gd.losses.toSeq}"
    )
    counts.failed.set(0)
    val r = LogisticRegression.run(sc, lbfgs.copy(hooks = Faults(failures = Seq(Failure(2, free.losses.length / 2, halt = true)))))
    WarrenSlots.drainListeners(sc, 5000)
    println(f"LR lbfgs: ${free.losses.length} iterations to loss ${free.losses.last}%.6f; with a halted executor ${r.seconds}%.2f s")
    assertEquals(free.modelHash, r.modelHash, "L-BFGS with a halted executor: the model differs from the failure-free run's")
    assertEquals(free.losses.toSeq, r.losses.toSeq)
    assertEquals(1, counts.failed.get(), "failed task attempts")
  }

  /** An executor JVM paused with SIGSTOP (nothing closes, nothing answers): the tracker fences
    * its worker after `peerTimeout` (10 s here), the driver kills its task attempt and then,
    * the executor not answering, kills and replaces the executor; Spark runs the task again and
    * the job ends with the failure-free model, long before Spark's own executor heartbeat
    * timeout (120 s) would have given the executor up.
    */
  @Test
  def k_aPausedExecutorIsFencedKilledAndRerun(): Unit = {
    val want = clean
    val paused = params.copy(conf = params.conf + ("peerTimeout" -> "10"), hooks = Faults(failures = Seq(Failure(2, 5, pause = true))))
    val r = recovered("a paused executor (SIGSTOP), peerTimeout 10 s", paused, 1)
    val why = counts.reasons.asScala.mkString("; ")
    println(f"LR paused executor: ${r.seconds}%.2f s, ${r.seconds - want.seconds}%.2f s more than the clean run; the lost attempt: $why")
    assertFalse(why.contains("heartbeat"), s"the executor was given up by Spark's heartbeat timeout, not by Warren: $why")
    assertTrue(r.recoveries >= 1, s"rank 0 re-linked ${r.recoveries} times")
  }
}

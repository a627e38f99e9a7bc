package io.warren.examples

import java.util.concurrent.atomic.AtomicInteger

import io.warren.examples.FaultHarness.Faults
import io.warren.examples.LogisticRegression.Params
import io.warren.spark._
import org.apache.spark.scheduler.{SparkListener, SparkListenerTaskStart}
import org.apache.spark.{SparkContext, TaskContext, WarrenSlots}
import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** The runner and the logistic-regression example on `local-cluster[3,1,1024]` (three executor
  * JVMs of one core each), one SparkContext for every case: a killed task and a killed
  * executor end with the failure-free model, bit for bit; too few slots fail before any task;
  * a collective call that differs between ranks, or a checkpoint the worker's codec cannot
  * read, stops the job without retries, naming the broken contract.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
class LocalClusterTest {
  private var sc: SparkContext = _
  private val taskStarts = new AtomicInteger()
  private val params = Params(workers = 3, rows = 60000, features = 20, iters = 12)
  private lazy val clean = LogisticRegression.run(sc, params)

  @BeforeAll
  def start(): Unit = {
    // The UI on, and heartbeats every second: case h reads the Warren tab while a job runs.
    sc = LocalCluster.start(
      3,
      "warren-local-cluster-test",
      Map("spark.ui.enabled" -> "true", "spark.ui.port" -> "0", "spark.executor.heartbeatInterval" -> "1s")
    )
    sc.addSparkListener(new SparkListener {
      override def onTaskStart(e: SparkListenerTaskStart): Unit = taskStarts.incrementAndGet()
    })
    assertTrue(WarrenSpark.awaitSlots(sc, 3, 60) >= 3, "the 3 executors did not register")
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  @Test
  def a_failureFreeRunLearns(): Unit = {
    assertEquals(12, clean.losses.length)
    assertTrue(clean.losses.last < clean.losses.head, clean.losses.mkString(", "))
    assertTrue(clean.accuracy > 0.7, s"accuracy ${clean.accuracy}")
    assertEquals(0L, clean.recoveries)
    println(f"LR clean: ${clean.seconds}%.2f s, MODEL_HASH ${clean.modelHash}")
  }

  @Test
  def b_aThrownTaskIsRetriedAndEndsWithTheSameModel(): Unit = {
    val r = LogisticRegression.run(sc, params.copy(hooks = Faults(killTask = 5)))
    println(f"LR kill-task: ${r.seconds}%.2f s, recoveries ${r.recoveries}")
    assertTrue(r.recoveries >= 1, s"recoveries ${r.recoveries}")
    assertEquals(clean.modelHash, r.modelHash)
    assertEquals(clean.losses.toSeq, r.losses.toSeq)
  }

  @Test
  def c_aHaltedExecutorsTaskIsRetriedElsewhereAndEndsWithTheSameModel(): Unit = {
    val r = LogisticRegression.run(sc, params.copy(hooks = Faults(killExecutor = 5)))
    println(f"LR kill-executor: ${r.seconds}%.2f s, recoveries ${r.recoveries}")
    assertTrue(r.recoveries >= 1, s"recoveries ${r.recoveries}")
    assertEquals(clean.modelHash, r.modelHash)
    // The lost executor is replaced: the next job has 3 slots again.
    assertTrue(WarrenSpark.awaitSlots(sc, 3, 60) >= 3)
  }

  @Test
  def d_tooFewSlotsFailBeforeAnyTaskStarts(): Unit = {
    WarrenSpark.awaitSlots(sc, 3, 60)
    val before = taskStarts.get()
    val e = assertThrows(
      classOf[WarrenSparkException],
      () => WarrenSpark.train(sc.parallelize(0 until 4, 4), 4)((c, _) => c.rank())
    )
    assertTrue(e.getMessage.contains("needs 4 task slots"), e.getMessage)
    Thread.sleep(200)
    assertEquals(before, taskStarts.get(), "a task started")
  }

  @Test
  def f_aCallThatDiffersBetweenRanksStopsTheJobNamingTheContract(): Unit = {
    WarrenSpark.awaitSlots(sc, 3, 60)
    val before = taskStarts.get()
    // Rank 1 reduces one value more than the others: a broken contract that no retry mends.
    val e = assertThrows(
      classOf[WarrenSparkException],
      () =>
        WarrenSpark.train(sc.parallelize(0 until 3, 3), 3) { (c, _) =>
          c.allreduce(new Array[Double](if (c.rank() == 1) 5 else 4), _root_.io.warren.Op.SUM)
          c.rank()
        }
    )
    println(s"LR mismatch: ${e.getMessage}")
    assertTrue(e.getMessage.contains("cannot succeed on retry, and the job was stopped"), e.getMessage)
    assertTrue(e.getMessage.contains("collective call mismatch"), e.getMessage)
    // Every rank fails at its first call. Spark re-runs each task at once, but the tracker
    // holds the re-runs until the driver's cancel kills them: at most one re-run a task, not
    // the four attempts that spark.task.maxFailures allows.
    WarrenSlots.drainListeners(sc, 5000)
    val started = taskStarts.get() - before
    assertTrue(started >= 3 && started <= 6, s"$started task attempts started")
  }

  @Test
  def g_aCheckpointTheCodecCannotReadStopsTheJobWithoutRetries(): Unit = {
    WarrenSpark.awaitSlots(sc, 3, 60)
    val before = taskStarts.get()
    // Every rank checkpoints an Array[Double]; rank 1's first attempt then fails, and its
    // re-run loads the checkpoint as another type: no re-run can read it, so Spark must not
    // retry it again.
    val e = assertThrows(
      classOf[WarrenSparkException],
      () =>
        WarrenSpark.train(sc.parallelize(0 until 3, 3), 3, LocalClusterTest.WaitForSlots) { (c, _) =>
          if (TaskContext.get().attemptNumber() == 0) {
            c.checkpoint(Array(1.0, 2.0))
            if (c.rank() == 1) throw new RuntimeException("first attempt of task 1 fails")
            c.allreduce(new Array[Double](2), _root_.io.warren.Op.SUM)
          } else c.loadCheckpointAs[String]
          c.rank()
        }
    )
    println(s"checkpoint format: ${e.getMessage}")
    assertTrue(e.getMessage.contains("cannot succeed on retry, and the job was stopped"), e.getMessage)
    assertTrue(e.getMessage.contains("CheckpointFormatException"), e.getMessage)
    // Three first attempts and the re-run of task 1 that failed (failing the job at the
    // tracker); Spark may have started one more re-run, which the tracker holds until the
    // driver's cancel kills it, not the four that spark.task.maxFailures allows.
    WarrenSlots.drainListeners(sc, 5000)
    val started = taskStarts.get() - before
    assertTrue(started == 4 || started == 5, s"$started task attempts started")
  }

  @Test
  def h_theWarrenTabFollowsEachJobsCheckpointVersion(): Unit = {
    WarrenSpark.awaitSlots(sc, 3, 60)
    val iterations = 16
    val page = sc.uiWebUrl.getOrElse(throw new AssertionError("the Spark UI is off")) + "/warren/"
    val job = new Thread(() =>
      WarrenSpark.train(sc.parallelize(0 until 3, 3), 3, LocalClusterTest.WaitForSlots) { (c, _) =>
        for (i <- 1 to iterations) {
          c.allreduce(Array(i.toDouble), _root_.io.warren.Op.SUM)
          c.checkpoint(Array(i.toDouble))
          Thread.sleep(400)
        }
        c.rank()
      }
    )
    job.start()
    // While it runs, the tab shows the job running at a version the heartbeats brought.
    val running = LocalClusterTest.awaitRow(page, 60) { r => r("state") == "running" && r("version").toInt > 0 }
    assertTrue(running("version").toInt < iterations, s"the job was over before the page showed it running: $running")
    job.join(120000)
    // Once it is over, the tasks' ends carry their last versions: the job's is the last iteration.
    val done = LocalClusterTest.awaitRow(page, 30)(r => r("job") == running("job") && r("state") == "succeeded")
    assertEquals(iterations.toString, done("version"), s"row $done")
    println(s"Warren tab: running $running, then $done")
  }

  @Test
  def e_theRunnerReturnsEachRanksResultInOrder(): Unit = {
    val ranks = WarrenSpark.train(sc.parallelize(1 to 30, 5), 3)((c, rows) => (c.rank(), rows.sum))
    assertEquals(Seq(0, 1, 2), ranks.map(_._1))
    assertEquals(465, ranks.map(_._2).sum)
  }
}

/** Reading the Spark UI's Warren tab, and the settings of the cases that follow a failed job. */
object LocalClusterTest {

  /** After a failed job, Spark kills its remaining tasks asynchronously: a case that follows
    * one waits for their slots (`spark.warren.slotWaitTimeout`) rather than failing its check. */
  val WaitForSlots: Map[String, String] = Map("slotWaitTimeout" -> "30")

  /** A job row of the Warren tab at `page` that satisfies `ok` (the newest first), polling
    * every 200 ms; fails after `timeoutS` seconds. A row is its `data-*` attributes (`job`,
    * `state`, `version`). */
  def awaitRow(page: String, timeoutS: Int)(ok: Map[String, String] => Boolean): Map[String, String] = {
    val deadline = System.nanoTime() + timeoutS * 1000000000L
    var last = Seq.empty[Map[String, String]]
    while (System.nanoTime() < deadline) {
      val html = scala.util.Using.resource(scala.io.Source.fromURL(page))(_.mkString)
      last = """<tr class="warren-job"[^>]*>""".r.findAllIn(html).toSeq.map { tag =>
        """data-(\w+)="([^"]*)"""".r.findAllMatchIn(tag).map(m => m.group(1) -> m.group(2)).toMap
      }
      last.find(ok) match {
        case Some(row) => return row
        case None      => Thread.sleep(200)
      }
    }
    throw new AssertionError(s"no job row of $page matched within $timeoutS s; the rows: $last")
  }
}

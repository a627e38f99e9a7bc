package io.warren.examples

import java.util.concurrent.ConcurrentLinkedQueue

import scala.jdk.CollectionConverters._

import io.warren.NativeLog
import io.warren.examples.FaultHarness.Faults
import io.warren.examples.KMeans.Params
import io.warren.spark.{WarrenJobSummary, WarrenListener, WarrenSpark, WarrenSparkException}
import org.apache.logging.log4j.{Level, LogManager}
import org.apache.logging.log4j.core.{LogEvent, LoggerContext}
import org.apache.logging.log4j.core.appender.AbstractAppender
import org.apache.logging.log4j.core.config.{Configurator, Property}
import org.apache.spark.{SparkContext, WarrenSlots}
import org.junit.jupiter.api.Assertions.{assertEquals, assertTrue, fail}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** The k-means example and the runner's observability on `local-cluster[3,1,1024]` (three
  * executor JVMs), one SparkContext for every case: k-means finds the generated clusters; a
  * killed task and a halted executor end with the failure-free model, bit for bit; the
  * recoveries reach the `warren.recoveries` accumulator and the listener, and rank 0's
  * progress lines reach the driver's log while the job runs.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
class KMeansLocalClusterTest {
  private var sc: SparkContext = _
  private val params = Params(workers = 3, rows = 60000, dims = 8, k = 4, iters = 10, spread = 10.0, noise = 1.0)
  private lazy val clean = KMeans.run(sc, params)
  private val logged = new ConcurrentLinkedQueue[String]()

  /** Keeps every record of the `io.warren` loggers (the tracker's, the listener's) in `logged`. */
  private val capture = new AbstractAppender("warren-test-capture", null, null, true, Property.EMPTY_ARRAY) {
    override def append(e: LogEvent): Unit = logged.add(s"${e.getLoggerName} ${e.getMessage.getFormattedMessage}")
  }

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(3, "warren-kmeans-local-cluster-test")
    // After the context (which sets up Spark's logging): capture io.warren at INFO.
    Configurator.setLevel("io.warren", Level.INFO)
    val ctx = LogManager.getContext(false).asInstanceOf[LoggerContext]
    capture.start()
    ctx.getConfiguration.getLoggerConfig("io.warren").addAppender(capture, Level.INFO, null)
    ctx.updateLoggers()
    NativeLog.refreshLevel()
    assertTrue(WarrenSpark.awaitSlots(sc, 3, 60) >= 3, "the 3 executors did not register")
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  /** The summary of the next Warren job to end after `before` summaries (the listener bus is
    * asynchronous), waiting up to 30 s. */
  private def nextSummary(before: Int): WarrenJobSummary = {
    val listener = WarrenListener.of(sc)
    val until = System.nanoTime() + 30e9.toLong
    while (listener.summaries.size <= before && System.nanoTime() < until) Thread.sleep(50)
    listener.summaries.drop(before).headOption.getOrElse(fail("the listener saw no end of the Warren stage in 30 s"))
  }

  private def linesOf(label: String, what: String): Seq[String] =
    logged.asScala.toSeq.filter(_.contains(s"$what: job $label,"))

  @Test
  def a_findsTheGeneratedClusters(): Unit = {
    val (k, d) = (params.k, params.dims)
    // Lloyd's algorithm never increases the cost, and it did go down.
    clean.costs.sliding(2).foreach { case Array(a, b) => assertTrue(b <= a, clean.costs.mkString(", ")) }
    assertTrue(clean.costs(1) < clean.costs(0), clean.costs.mkString(", "))
    // Every row is noise of variance 1 per coordinate around its center: the final cost per
    // row is close to d.
    val perRow = clean.finalCost / params.rows
    assertTrue(perRow > 0.95 * d && perRow < 1.05 * d, s"final cost per row $perRow, expected about $d")
    // Each true center (10 on one axis) has a learned center within 0.1, a different one each.
    val matched = (0 until k).map { t =>
      val truth = Array.tabulate(d)(j => if (j == t) 10.0 else 0.0)
      val dist = (0 until k).map(a => math.sqrt((0 until d).map(j => math.pow(clean.centers(a * d + j) - truth(j), 2)).sum))
      assertTrue(dist.min < 0.1, s"true center $t: nearest learned center at ${dist.min}")
      dist.indexOf(dist.min)
    }
    assertEquals(k, matched.distinct.size, s"learned centers matched twice: $matched")
    // Every row of true cluster t (rows/k of them) is assigned to its matched center.
    for (t <- 0 until k) {
      assertEquals(params.rows / k, (0 until k).map(a => clean.confusion(a * k + t)).sum)
      assertEquals(params.rows / k, clean.confusion(matched(t) * k + t), s"true cluster $t")
    }
    assertEquals(0L, clean.recoveries)
    println(f"k-means clean: ${clean.seconds}%.2f s, MODEL_HASH ${clean.modelHash}")
  }

  @Test
  def b_aThrownTaskIsRetriedAndEndsWithTheSameModelAndShowsInTheAccumulator(): Unit = {
    val before = WarrenListener.of(sc).summaries.size
    val r = KMeans.run(sc, params.copy(hooks = Faults(killTask = 4)))
    println(f"k-means kill-task: ${r.seconds}%.2f s, recoveries ${r.recoveries}")
    assertTrue(r.recoveries >= 1, s"recoveries ${r.recoveries}")
    assertEquals(clean.modelHash, r.modelHash)
    assertEquals(clean.costs.toSeq, r.costs.toSeq)
    val s = nextSummary(before)
    assertEquals(1L, s.failedAttempts, s.toString)
    assertEquals(1L, s.recoveredTasks, s.toString)
    assertEquals(Some(1L), s.recoveriesAccumulator, s.toString)
    val listenerLines = logged.asScala.filter(_.startsWith("io.warren.spark.WarrenListener"))
    assertTrue(
      listenerLines.exists(l => l.contains(s"warren job ${s.label}:") && l.contains("re-run and recovered from its peers")),
      listenerLines.mkString("\n")
    )
  }

  @Test
  def c_aHaltedExecutorsTaskIsRetriedElsewhereAndProgressReachesTheDriverLog(): Unit = {
    val before = WarrenListener.of(sc).summaries.size
    val p = params.copy(hooks = Faults(killExecutor = 4), conf = params.conf + ("progressInterval" -> "0.5"))
    val r = KMeans.run(sc, p)
    println(f"k-means kill-executor: ${r.seconds}%.2f s, recoveries ${r.recoveries}")
    assertTrue(r.recoveries >= 1, s"recoveries ${r.recoveries}")
    assertEquals(clean.modelHash, r.modelHash)
    val s = nextSummary(before)
    assertEquals(Some(1L), s.recoveriesAccumulator, s.toString)
    // Rank 0's lines went through the tracker into this (the driver's) log: some while the
    // job was still running (a version before the last), and one at the end.
    val progress = linesOf(s.label, "progress")
    assertTrue(progress.forall(_.contains("[rank 0]")), progress.mkString("\n"))
    val versions = progress.map(l => "checkpoint version (\\d+)".r.findFirstMatchIn(l).get.group(1).toInt)
    assertTrue(versions.exists(_ < params.iters), s"no progress line during the run:\n${progress.mkString("\n")}")
    val finished = linesOf(s.label, "finished")
    assertEquals(1, finished.size, logged.asScala.mkString("\n"))
    val last = finished.head
    assertTrue(last.contains(s"checkpoint version ${params.iters},"), last)
    assertTrue("recoveries [1-9]".r.findFirstIn(last).isDefined, last)
    assertTrue(last.contains("allreduce") && last.contains("p50=") && last.contains("p99="), last)
    // The lost executor is replaced: the next job has 3 slots again.
    assertTrue(WarrenSpark.awaitSlots(sc, 3, 60) >= 3)
  }

  @Test
  def d_aBadSettingFailsBeforeAnyTaskStarts(): Unit = {
    val counts = new TaskCounts
    sc.addSparkListener(counts)
    try {
      counts.reset(sc, params.workers)
      val cases = Seq(
        "progressInterval" -> "soon" -> """spark.warren.progressInterval = "soon": expected a number of seconds in 0..86400""",
        "timeout" -> "ten" -> """spark.warren.timeout = "ten": expected a number of seconds > 0 and <= 86400""",
        "localReplicas" -> "-1" -> """spark.warren.localReplicas = "-1": expected an integer in 0..1000""",
        "timout" -> "10" -> "spark.warren.timout is not a Warren setting (did you mean spark.warren.timeout?"
      )
      for ((setting, expected) <- cases) {
        val e = Assertions.assertThrows(
          classOf[WarrenSparkException],
          () => KMeans.run(sc, params.copy(conf = params.conf + setting))
        )
        assertTrue(e.getMessage.startsWith(expected), e.getMessage)
      }
      WarrenSlots.drainListeners(sc, 5000)
      assertEquals(0, counts.started.get(), "no task started")
    } finally sc.removeSparkListener(counts)
  }
}

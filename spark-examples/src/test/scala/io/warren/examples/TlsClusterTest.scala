package io.warren.examples

import java.time.Duration

import scala.jdk.CollectionConverters._

import io.warren.{Communicator, Op, TlsSettings, Tracker}
import io.warren.spark.WarrenSpark
import org.apache.spark.{SparkContext, SparkException, TaskContext}
import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** Encryption in transit on `local-cluster[2,1,1024]`: with `spark.warren.tls=true` (or the
  * pass-through `spark.warren.setting.WARREN_TLS=1` alone) the tracker on the driver, the
  * workers in the executors, and the parameter servers (child JVMs of the driver with
  * `spark.warren.ps.servers=process`) and their trainers all speak TLS, and the jobs end with the
  * models of plain runs, bit for bit; executors joining a TLS tracker in plain TCP fail at once
  * with an error naming the TLS mismatch, and the tracker keeps nothing of them; a data master the
  * application starts on the driver follows `spark.warren.tls` through `WarrenSpark.tlsSettings`.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
class TlsClusterTest {
  private var sc: SparkContext = _
  private val counts = new TaskCounts
  private val lr = LogisticRegression.Params(workers = 2, rows = 20000, features = 10, iters = 6)

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(2, "warren-tls-local-cluster-test")
    sc.addSparkListener(counts)
    assertTrue(WarrenSpark.awaitSlots(sc, 2, 300) >= 2, "the 2 executors did not register within 300 s")
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  @Test
  def a_trainingUnderTlsEndsWithThePlainModel(): Unit = {
    counts.reset(sc, 2)
    val plain = LogisticRegression.run(sc, lr)
    for (tls <- Seq(Map("tls" -> "true"), Map("setting.WARREN_TLS" -> "1"))) {
      counts.reset(sc, 2)
      val r = LogisticRegression.run(sc, lr.copy(conf = lr.conf ++ tls))
      println(f"LR $tls: ${r.seconds}%.2f s (plain ${plain.seconds}%.2f s), MODEL_HASH ${r.modelHash}")
      assertEquals(0, counts.failed.get, s"$tls: ${counts.reasons}")
      assertEquals(plain.modelHash, r.modelHash, s"$tls")
    }
  }

  @Test
  def b_parameterServersInChildJvmsAndTheirTrainersSpeakTlsAndGiveThePlainModel(): Unit = {
    val p = SparseLogisticRegressionPS.Params(workers = 2, servers = 2, rowsPerWorker = 1000, iters = 8, batch = 100)
    counts.reset(sc, 2)
    val plain = SparseLogisticRegressionPS.run(sc, p)
    counts.reset(sc, 2)
    val r = SparseLogisticRegressionPS.run(sc, p.copy(conf = Map("tls" -> "true", "ps.servers" -> "process")))
    println(f"PS tls process: ${r.seconds}%.2f s (plain ${plain.seconds}%.2f s), MODEL_HASH ${r.modelHash}")
    assertEquals(0, counts.failed.get, s"${counts.reasons}")
    assertEquals(plain.modelHash, r.modelHash)
  }

  @Test
  def c_plainExecutorsJoiningATlsTrackerFailAtOnceNamingTlsAndNothingIsKept(): Unit = {
    val tracker =
      Tracker.builder(2, "tls-cluster-test").rendezvousTimeout(Duration.ofSeconds(120)).tls(TlsSettings.jobSecret()).start()
    try {
      val tls = tracker.workerSettings().asScala.toMap
      val plain = tls.filter(!_._1.startsWith("WARREN_TLS"))
      def job(settings: Map[String, String]) = sc.parallelize(0 until 2, 2).mapPartitions { _ =>
        val s = new java.util.HashMap[String, String](settings.asJava)
        s.put("WARREN_TASK_ID", TaskContext.getPartitionId().toString)
        s.put("WARREN_CONNECT_TIMEOUT_S", "60")
        val v = Array(1f + TaskContext.getPartitionId())
        val c = Communicator.create(s)
        try c.allreduce(v, Op.SUM)
        catch { case t: Throwable => c.abort(); throw t }
        c.close()
        Iterator.single(v(0))
      }
      counts.reset(sc, 2)
      val started = System.nanoTime()
      val e = assertThrows(classOf[SparkException], () => { job(plain).collect(); () })
      val seconds = (System.nanoTime() - started) / 1e9
      println(f"plain executors refused by the TLS tracker in $seconds%.2f s (${counts.failed.get} task failures)")
      assertTrue(e.getMessage.contains("TLS mismatch"), e.getMessage)
      assertTrue(seconds < 60, s"the plain job failed after $seconds s")
      // The tracker kept nothing of the refused workers: the right ones join as the first.
      counts.reset(sc, 2)
      assertArrayEquals(Array(3f, 3f), job(tls).collect())
      val report = tracker.awaitCompletion(Duration.ofSeconds(60))
      assertEquals(2, report.workers())
      assertEquals(0L, report.recoveries())
    } finally tracker.close()
  }

  @Test
  def d_aMasterTheApplicationStartsOnTheDriverFollowsSparkWarrenTls(@org.junit.jupiter.api.io.TempDir dir: java.nio.file.Path): Unit = {
    assertEquals(TlsSettings.OFF, WarrenSpark.tlsSettings(sc))
    assertEquals(TlsSettings.jobSecret(), WarrenSpark.tlsSettings(sc, Map("spark.warren.tls" -> "true")))
    counts.reset(sc, 2)
    val p = RecordIOTraining.Params(workers = 2, records = 400, passes = 1, taskTimeoutMs = 120000, conf = Map("tls" -> "true"))
    val r = RecordIOTraining.run(sc, p, dir)
    println(s"RecordIO tls: ${r.steps} steps, master ${r.status}")
    assertEquals(0, counts.failed.get, s"${counts.reasons}")
    assertEquals(Seq(400), r.reads.map(_.count(_ == 1)).toSeq, "every record read exactly once")
    assertEquals(1L, r.status.pass())
  }
}

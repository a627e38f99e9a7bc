package io.warren.examples

import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

import io.warren.examples.LogisticRegression.{Failure, Params, Result}
import io.warren.spark.{WarrenSpark, WarrenSparkException}
import org.apache.spark.scheduler.{SparkListener, SparkListenerStageSubmitted, SparkListenerTaskEnd}
import org.apache.spark.{SparkConf, SparkContext, Success, TaskKilled, WarrenSlots}
import org.junit.jupiter.api.Assertions.{assertEquals, assertFalse, assertThrows, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** Recovery of the logistic-regression example on `local-cluster[4,1,1024]` (four executor
  * JVMs of one core each, one SparkContext for every case): a whole-stage re-run from the
  * durable checkpoint (fail-all). Each recovered run must end with the failure-free run's
  * model, bit for bit.
  *
  * Losses are thrown exceptions or halted executor JVMs at the start of an iteration (the
  * example's hooks), or `WARREN_MOCK` points, where the native library `_exit`s the executor
  * JVM inside a given collective call (per iteration: call 0 the gradient allreduce, 1 and 2
  * the checkpoint's two phases; bootstrap calls are 1000000 and up).
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class RecoveryClusterTest {
  private val workers = 4
  private var sc: SparkContext = _
  private val failedTasks = new AtomicInteger()
  private val stageReruns = new AtomicInteger()
  private val params = Params(workers = workers, rows = 60000, features = 20, iters = 12)
  private lazy val clean = LogisticRegression.run(sc, params)

  @BeforeAll
  def start(): Unit = {
    val home = sys.env.getOrElse("SPARK_HOME", throw new IllegalStateException("SPARK_HOME is not set"))
    val cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"))
    val ours = cp
      .split(File.pathSeparator)
      .filter(e => !e.startsWith(home) && !e.contains("/.spark/") && (e.contains("warren") || e.contains("/target/")))
    val conf = new SparkConf()
      .setMaster(s"local-cluster[$workers,1,1024]")
      .setAppName("warren-recovery-cluster-test")
      .setSparkHome(home)
      .set("spark.driver.host", "127.0.0.1")
      .set("spark.driver.bindAddress", "127.0.0.1")
      .set("spark.ui.enabled", "false")
      .set("spark.executor.extraClassPath", ours.mkString(File.pathSeparator))
      .set("spark.warren.connectTimeout", "120")
      .set("spark.warren.timeout", "300")
    sc = new SparkContext(conf)
    sc.addSparkListener(new SparkListener {
      override def onTaskEnd(e: SparkListenerTaskEnd): Unit = e.reason match {
        case Success | _: TaskKilled =>
        case _                       => failedTasks.incrementAndGet()
      }
      override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit =
        if (e.stageInfo.attemptNumber() > 0) stageReruns.incrementAndGet()
    })
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  /** Every case starts with all executors registered (halted ones are replaced) and idle. */
  @BeforeEach
  def fullCluster(): Unit = {
    assertTrue(WarrenSpark.awaitSlots(sc, workers, 90) >= workers, s"the $workers executors did not register")
    WarrenSlots.drainListeners(sc, 5000)
    failedTasks.set(0)
    stageReruns.set(0)
  }

  /** Runs `p`, then checks the model equals the failure-free one and that exactly `losses`
    * task attempts failed (fail-all: at least; the others of the attempt may fail or be killed).
    */
  private def recovered(what: String, p: Params, losses: Int, exactly: Boolean = true): Result = {
    val want = clean
    failedTasks.set(0)
    val r = LogisticRegression.run(sc, p)
    WarrenSlots.drainListeners(sc, 5000)
    println(f"LR $what: ${r.seconds}%.2f s (clean ${want.seconds}%.2f s), recoveries ${r.recoveries}")
    assertEquals(want.modelHash, r.modelHash, s"$what: the model differs from the failure-free run's")
    assertEquals(want.losses.toSeq, r.losses.toSeq, what)
    if (exactly) assertEquals(losses, failedTasks.get(), s"$what: failed task attempts")
    else assertTrue(failedTasks.get() >= losses, s"$what: ${failedTasks.get()} failed task attempts")
    r
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
      assertEquals(1, stageReruns.get(), "Spark re-ran the barrier stage once")
      assertEquals(6, r.startVersion, "rank 0 of the re-run resumed from durable checkpoint 6")
      stageReruns.set(0)
      val t = recovered(
        "fail-all, a thrown task",
        params.copy(conf = failAll, failures = Seq(Failure(2, 9))),
        1,
        exactly = false
      )
      assertEquals(1, stageReruns.get(), "Spark re-ran the barrier stage once")
      assertEquals(9, t.startVersion, "rank 0 of the re-run resumed from durable checkpoint 9")
      assertEquals(0, dir.toFile.list().length, s"the runs' checkpoint directories are removed: ${dir.toFile.list().toSeq}")
    } finally {
      Option(dir.toFile.listFiles()).foreach(_.foreach(d => { Option(d.listFiles()).foreach(_.foreach(_.delete())); d.delete() }))
      dir.toFile.delete()
    }
  }

  @Test
  def g_badFailAllSettingsAreRefusedClearly(): Unit = {
    val rdd = sc.parallelize(0 until workers, workers)
    val noDir = assertThrows(
      classOf[WarrenSparkException],
      () => WarrenSpark.train(rdd, workers, Map("recovery" -> "fail-all"))((c, _) => c.rank())
    )
    assertTrue(noDir.getMessage.contains("needs spark.warren.checkpointDir"), noDir.getMessage)
    val hdfs = assertThrows(
      classOf[WarrenSparkException],
      () =>
        WarrenSpark.train(rdd, workers, Map("recovery" -> "fail-all", "checkpointDir" -> "hdfs://nn:8020/ckpt"))(
          (c, _) => c.rank()
        )
    )
    assertTrue(hdfs.getMessage.contains("hdfs: file system is not supported"), hdfs.getMessage)
    val typo = assertThrows(
      classOf[WarrenSparkException],
      () => WarrenSpark.train(rdd, workers, Map("recovery" -> "failall"))((c, _) => c.rank())
    )
    assertTrue(typo.getMessage.contains("must be retry-one or fail-all"), typo.getMessage)
    assertFalse(failedTasks.get() > 0, "no task ran")
  }
}

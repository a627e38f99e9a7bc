package io.warren.examples

import io.warren.examples.FaultHarness.PsFaults
import io.warren.examples.SparseLogisticRegressionPS.Params
import io.warren.spark.{PsServers, WarrenSpark}
import org.apache.spark.SparkContext
import org.junit.jupiter.api.Assertions.{assertEquals, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** The parameter-server example on `local-cluster[2,1,1024]` (two executor JVMs, trainers in
  * them, two servers in this driver JVM): sync training gives the same model on every run, and
  * the same again after a trainer task that threw (re-run by Spark as the same trainer id) and
  * after a server restarted from its checkpoint mid-run, and after a server running as a child
  * JVM of the driver (`spark.warren.ps.servers=process`) is SIGKILLed and restarted by the
  * driver; async finishes.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
class SparseLogisticRegressionPSTest {
  private var sc: SparkContext = _
  private val counts = new TaskCounts
  private val params = Params(workers = 2, servers = 2, rowsPerWorker = 2000, iters = 16, batch = 100)
  private lazy val clean = SparseLogisticRegressionPS.run(sc, params)

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(2, "warren-ps-local-cluster-test")
    sc.addSparkListener(counts)
    assertTrue(WarrenSpark.awaitSlots(sc, 2, 300) >= 2, "the 2 executors did not register within 300 s")
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  @Test
  def a_syncTrainingIsTheSameOnEveryRun(): Unit = {
    counts.reset(sc, 2)
    println(f"PS sync clean: ${clean.seconds}%.2f s, loss ${clean.loss}%.6f, MODEL_HASH ${clean.modelHash}")
    assertEquals((1 << params.bits) + 1, clean.model.length)
    assertTrue(clean.model.exists(_ != 0f), "the model learnt nothing")
    assertTrue(clean.loss > 0 && clean.loss < math.log(2), s"loss ${clean.loss} is not below chance")
    val again = SparseLogisticRegressionPS.run(sc, params.copy(hooks = PsFaults(pauseMs = 3)))
    assertEquals(clean.modelHash, again.modelHash)
    assertEquals(0L, again.lostUpdates)
  }

  @Test
  def b_aTrainerTaskThatThrowsIsReRunAndEndsWithTheSameModel(): Unit = {
    val h = clean.modelHash
    counts.reset(sc, 2)
    val r = SparseLogisticRegressionPS.run(sc, params.copy(hooks = PsFaults(killTask = 6)))
    println(f"PS sync kill-task: ${r.seconds}%.2f s, failed tasks ${counts.failed.get}")
    assertEquals(1, counts.failed.get, "the injected failure")
    assertEquals(h, r.modelHash)
  }

  @Test
  def c_aServerRestartedFromItsCheckpointMidRunLosesNothing(): Unit = {
    val h = clean.modelHash
    counts.reset(sc, 2)
    val r = SparseLogisticRegressionPS.run(sc, params.copy(hooks = PsFaults(killServer = 7, pauseMs = 20)))
    println(f"PS sync kill-server: ${r.seconds}%.2f s, lost ${r.lostUpdates}")
    assertEquals(0, counts.failed.get, "no task failed: the trainers waited for the server")
    assertEquals(0L, r.lostUpdates)
    assertEquals(h, r.modelHash)
  }

  @Test
  def d_asyncAndSspFinish(): Unit = {
    for (mode <- Seq("async", "ssp")) {
      counts.reset(sc, 2)
      val r = SparseLogisticRegressionPS.run(sc, params.copy(mode = mode, hooks = PsFaults(killServer = 7, pauseMs = 10)))
      println(f"PS $mode kill-server: ${r.seconds}%.2f s, lost ${r.lostUpdates}, loss ${r.loss}%.6f")
      assertEquals((1 << params.bits) + 1, r.model.length)
      assertTrue(r.model.exists(_ != 0f))
    }
  }

  @Test
  def e_aServerProcessKilledWithSigkillIsRestartedAndTheSyncModelIsTheFailureFreeOne(): Unit = {
    val h = clean.modelHash
    counts.reset(sc, 2)
    var servers: PsServers = null
    var firstPid = -1L
    val p = params.copy(hooks = PsFaults(killServer = 7, pauseMs = 20), conf = Map("ps.servers" -> "process"))
    val r = SparseLogisticRegressionPS.run(sc, p, s => { servers = s; firstPid = s.pid(0).get })
    println(f"PS sync kill-server-process: ${r.seconds}%.2f s, lost ${r.lostUpdates}, restarts ${servers.restarts(0)}")
    assertTrue(servers.separateProcesses)
    assertTrue(firstPid != ProcessHandle.current().pid(), "server 0 ran in a process of its own")
    assertEquals(1, servers.restarts(0), "the driver restarted the killed server process once")
    assertTrue(servers.pid(0).get != firstPid, "the replacement is another process")
    assertEquals(0, servers.restarts(1))
    assertEquals(0, counts.failed.get, "no task failed: the trainers waited for the server")
    assertEquals(0L, r.lostUpdates)
    assertEquals(h, r.modelHash)
    for (pid <- Seq(firstPid, servers.pid(0).get, servers.pid(1).get)) {
      assertTrue(!ProcessHandle.of(pid).map[Boolean](_.isAlive).orElse(false), s"server process $pid is gone")
    }
  }
}

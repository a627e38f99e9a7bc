package io.warren.examples

import java.util.concurrent.atomic.AtomicInteger

import io.warren.examples.FaultHarness.Faults
import io.warren.examples.LogisticRegression.Params
import io.warren.spark.{WarrenSpark, WarrenSparkException}
import org.apache.spark.scheduler.{SparkListener, SparkListenerTaskStart}
import org.apache.spark.SparkContext
import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** The runner and the logistic-regression example on `local-cluster[3,1,1024]` (three executor
  * JVMs of one core each), one SparkContext for every case: a killed task and a killed
  * executor end with the failure-free model, bit for bit; too few slots fail before any task;
  * a collective call that differs between ranks stops the job, naming the broken contract.
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
    sc = LocalCluster.start(3, "warren-local-cluster-test")
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
  }

  @Test
  def e_theRunnerReturnsEachRanksResultInOrder(): Unit = {
    val ranks = WarrenSpark.train(sc.parallelize(1 to 30, 5), 3)((c, rows) => (c.rank(), rows.sum))
    assertEquals(Seq(0, 1, 2), ranks.map(_._1))
    assertEquals(465, ranks.map(_._2).sum)
  }
}

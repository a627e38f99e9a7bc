package io.warren.examples

import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference

import scala.jdk.CollectionConverters._

import io.warren.{Tracker, TrackerException}
import io.warren.examples.FaultHarness.Faults
import io.warren.examples.LogisticRegression.{Params, Result}
import io.warren.spark.WarrenSpark
import org.apache.spark.SparkContext
import org.junit.jupiter.api.Assertions.{assertEquals, assertTrue, fail}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** An elastic job (`spark.warren.elastic=true`) grows when Spark's dynamic allocation adds
  * executors: `local-cluster[4,1,1024]` (four standalone workers of one core) with
  * `spark.dynamicAllocation.enabled=true` starts with two executors; a job of four workers
  * (`minWorkers` 2) starts on those two, its two pending tasks make the allocation manager ask
  * the standalone master for two more executors, and those tasks join at a checkpoint boundary
  * once Spark runs them. A second run forced to the first's membership schedule (the same
  * tasks joining at the same versions, `Tracker.addWorker(task, version)` from the `onTracker`
  * hook) gives the same model bit for bit.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ElasticDynamicAllocationTest {
  private val workers = 4
  private val initial = 2
  private var sc: SparkContext = _
  private val elastic =
    Map("bootstrapCache" -> "true", "elastic" -> "true", "minWorkers" -> initial.toString, "rejoinTimeout" -> "1")
  // Long enough for two new executor JVMs to start (5-8 s on a quiet machine, 16 s seen under
  // load) while the first two train, pausing after each checkpoint until both have joined: with a
  // 1-minute load average of 12 on 2 cores they joined at versions 226 and 243.
  private val params =
    Params(workers = workers, rows = 20000, features = 10, iters = 500, conf = elastic,
      hooks = Faults(pauseMs = 100, pauseUntilGrown = true))
  /** The first run's joins (task -> version) and model, for the second. */
  private val grown = new AtomicReference[(Map[Int, Int], String)]()

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(
      workers,
      "warren-elastic-dynamic-allocation-test",
      Map(
        "spark.dynamicAllocation.enabled" -> "true",
        "spark.executor.cores" -> "1",
        "spark.dynamicAllocation.shuffleTracking.enabled" -> "true",
        "spark.dynamicAllocation.initialExecutors" -> initial.toString,
        "spark.dynamicAllocation.minExecutors" -> initial.toString,
        "spark.dynamicAllocation.maxExecutors" -> workers.toString,
        "spark.dynamicAllocation.schedulerBacklogTimeout" -> "1s",
        "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout" -> "1s",
        // Keep the added executors for the second case.
        "spark.dynamicAllocation.executorIdleTimeout" -> "600s"
      )
    )
    assertTrue(WarrenSpark.awaitSlots(sc, initial, 90) >= initial, s"the first $initial executors did not register")
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  /** Executors registered (the driver's entry aside). */
  private def executors(): Int = sc.statusTracker.getExecutorInfos.length - 1

  /** Checks that every task returned with four workers and one model, tasks 0 and 1 from the
    * start and tasks 2 and 3 later; returns the joins (task -> version).
    */
  private def grewToFour(what: String, rs: Seq[Result]): Map[Int, Int] = {
    rs.foreach(r => println(f"ELASTIC $what: task ${r.taskId} start ${r.startVersion} world ${r.world} " +
      f"views ${r.viewChanges} model ${r.modelHash.take(12)} in ${r.seconds}%.2f s"))
    assertEquals(Seq(0, 1, 2, 3), rs.map(_.taskId), s"$what: every task returned: $rs")
    assertEquals(Seq(0, 0), rs.take(2).map(_.startVersion), s"$what: tasks 0 and 1 made the first view")
    val joins = rs.drop(2).map(r => r.taskId -> r.startVersion).toMap
    assertTrue(joins.values.forall(_ > 0), s"$what: tasks 2 and 3 joined later: $joins")
    assertEquals(Seq(workers), rs.map(_.world).distinct, s"$what: four workers at the end")
    assertEquals(1, rs.map(_.modelHash).distinct.size, s"$what: every member ends with the same model")
    // Rank 0 was told of each join (Communicator.takeViewChange()): 2 -> 4 workers at once, or
    // 2 -> 3 -> 4.
    val want =
      if (joins(2) == joins(3)) Seq((joins(2), 2, 4))
      else Seq((joins.values.min, 2, 3), (joins.values.max, 3, 4))
    assertEquals(want, rs.head.viewChanges, s"$what: rank 0's view changes")
    joins
  }

  @Test
  def a_aJobStartedOnTwoExecutorsGrowsWhenDynamicAllocationAddsTwo(): Unit = {
    assertEquals(initial, executors(), "dynamic allocation started two executors")
    val rs = LogisticRegression.runAll(sc, params)
    val joins = grewToFour("dynamic allocation", rs)
    assertEquals(workers, executors(), "dynamic allocation added two executors")
    grown.set((joins, rs.head.modelHash))
  }

  @Test
  def b_theSameJoinsForcedGiveTheSameModel(): Unit = {
    val (joins, model) = Option(grown.get()).getOrElse(fail("needs a_aJobStartedOnTwoExecutorsGrowsWhenDynamicAllocationAddsTwo"))
    // Four executors now: two slots held so that the job starts with tasks 0 and 1 again; the
    // hook admits tasks 2 and 3 at the first run's versions as soon as the first view is made,
    // and only then frees the slots, so they register after (else the tracker would admit them
    // at the next boundary after they register).
    val holder = LocalCluster.holdSlots(sc, workers - initial, "elastic-da-holder")
    val scheduled = new AtomicReference[String]("not yet")
    val schedule: Tracker => Unit = tracker => {
      val t = new Thread(() => {
        val until = System.nanoTime() + 120e9.toLong
        var done = false
        while (!done && System.nanoTime() < until) {
          try {
            tracker.list()
            for ((task, at) <- joins.toSeq.sorted) tracker.addWorker(task.toString, at)
            scheduled.set("scheduled")
            done = true
          } catch {
            case e: TrackerException if e.getMessage.contains("not started") => // no first view yet
            case e: RuntimeException                                        => scheduled.set(e.toString); done = true
          }
        }
        sc.cancelJobGroup("elastic-da-holder")
      })
      t.setDaemon(true)
      t.start()
    }
    try {
      val rs = LogisticRegression.runAll(sc, params, schedule)
      assertEquals("scheduled", scheduled.get(), "the hook admitted tasks 2 and 3 at the first run's versions")
      assertEquals(joins, grewToFour("the same joins", rs), "tasks 2 and 3 joined at the scheduled versions")
      assertEquals(model, rs.head.modelHash, s"joins at $joins: the same model as the first run")
    } finally {
      sc.cancelJobGroup("elastic-da-holder")
      holder.join(30000)
    }
  }
}

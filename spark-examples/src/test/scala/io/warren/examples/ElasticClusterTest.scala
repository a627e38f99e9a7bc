package io.warren.examples

import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference

import scala.jdk.CollectionConverters._

import io.warren.Tracker
import io.warren.examples.FaultHarness.{withFaults, Failure, Faults}
import io.warren.examples.LogisticRegression.{Params, Result}
import io.warren.spark.WarrenSparkException
import org.apache.spark.{SparkContext, WarrenSlots}
import org.apache.spark.scheduler.{SparkListener, SparkListenerTaskEnd}
import org.junit.jupiter.api.Assertions.{assertEquals, assertFalse, assertThrows, assertTrue, fail}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** Elastic membership on Spark (`spark.warren.elastic=true`) on `local-cluster[4,1,1024]`:
  *
  *  - an executor JVM halted mid-training: the three others do not wait for Spark's new
  *    executor; they roll back to the last checkpoint and go on without it, and the re-run task
  *    joins again when Spark starts it; a second run forced to the same membership schedule
  *    (dropped at the same version, back at the same version) gives the same model bit for bit;
  *  - a job started while one slot is busy runs with three workers and grows to four when the
  *    slot frees up;
  *  - fewer free slots than `minWorkers`: a clear error naming the tasks without a slot;
  *  - an executor JVM paused with SIGSTOP (nothing closes, nothing answers): the tracker fences
  *    its worker after `peerTimeout`, the others go on without it after the rejoin timeout
  *    (not after Spark's 120 s heartbeat timeout), its re-run joins again once the driver has
  *    replaced the executor, and the same schedule forced onto a halted executor gives the same
  *    model bit for bit;
  *  - a worker removed by the driver whose executor JVM halts right after it left, or exits
  *    when its removal is decided: Spark re-runs its task, which is told it is not a member any
  *    more and ends at once without a result, instead of failing until Spark gives up on the
  *    stage; the others end with the model of the same removal without the loss. A stayer lost
  *    when the removal is decided costs its own attempt only;
  *  - a lost worker's re-run task lost too, before it linked to its peers as a joiner: its
  *    third attempt joins.
  *
  * Every survivor is told of the shrink and the re-join by `Communicator.takeViewChange()`.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
// 420 s a case: the same-schedule case runs 400 iterations twice, 135 s for the first alone at
// a 1-minute load average of 24 on 2 cores (before the pauses stopped at the rejoin).
@Timeout(value = 420, unit = TimeUnit.SECONDS)
class ElasticClusterTest {
  private val workers = 4
  private var sc: SparkContext = _
  private val counts = new TaskCounts
  private val elastic = Map("bootstrapCache" -> "true", "elastic" -> "true", "minWorkers" -> "3", "rejoinTimeout" -> "1")
  // Many short iterations (a pause after each checkpoint until the job is whole again): the
  // survivors go on without the halted worker for a while before Spark's new executor runs its
  // task again (2-4 s on a quiet machine, 15 s seen under load: the job lasts long enough for
  // it to rejoin); once it is back, the rest runs unpaused.
  private val params =
    Params(workers = workers, rows = 20000, features = 10, iters = 200, conf = elastic,
      hooks = Faults(pauseMs = 100, pauseUntilGrown = true))
  // The halted-executor cases: 400 iterations, since under load (1-minute load average 12 on
  // 2 cores) 200 were over before Spark's new executor ran the re-run task (more than 28 s).
  private val halted = params.copy(iters = 400)
  private val haltAt = 6
  /** The first case's schedule (dropped at, back at) and model, for the second. */
  private val firstRun = new AtomicReference[(Int, Int, String)]()

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(workers, "warren-elastic-cluster-test")
    sc.addSparkListener(counts)
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  @BeforeEach
  def fullCluster(): Unit = counts.reset(sc, workers)

  /** Checks a run where task 1's executor halted at iteration [[haltAt]]: every survivor rolled
    * back once, to that checkpoint, and task 1 came back at a later version. Returns the
    * version it came back at.
    */
  private def shrankAndRejoined(what: String, rs: Seq[Result], iters: Int = halted.iters): Int = {
    rs.foreach(r => println(f"ELASTIC $what: task ${r.taskId} start ${r.startVersion} rollbacks ${r.rollbacks} " +
      f"to ${r.rolledBackTo} world ${r.world} model ${r.modelHash.take(12)} in ${r.seconds}%.2f s"))
    val byTask = rs.map(r => r.taskId -> r).toMap
    for (t <- Seq(0, 2, 3)) {
      val r = byTask.getOrElse(t, fail(s"$what: survivor $t returned no result"))
      assertEquals(1, r.rollbacks, s"$what: task $t rolled back once (task 1 dropped)")
      assertEquals(haltAt, r.rolledBackTo, s"$what: task $t went on from checkpoint $haltAt")
    }
    val back = byTask.getOrElse(1, fail(s"$what: task 1's re-run did not rejoin before the end ($rs)"))
    assertEquals(0, back.rollbacks, s"$what: the re-run task joined, it did not roll back")
    assertEquals(Seq(workers), rs.map(_.world).distinct, s"$what: four workers at the end")
    assertEquals(1, rs.map(_.modelHash).distinct.size, s"$what: every member ends with the same model")
    assertEquals(iters, back.losses.length, s"$what: the joiner has every iteration's loss")
    // What Communicator.takeViewChange() told them: the survivors 4 -> 3 workers at the
    // roll-back to the halt's checkpoint and 3 -> 4 when task 1 joined; the joiner nothing
    // (it was not in the view before).
    for (t <- Seq(0, 2, 3))
      assertEquals(Seq((haltAt, 4, 3), (back.startVersion, 3, 4)), byTask(t).viewChanges, s"$what: task $t's view changes")
    assertEquals(Seq(), back.viewChanges, s"$what: the joiner's view changes")
    back.startVersion
  }

  /** An `onTracker` hook that forces task 1 back at checkpoint version `back`: as soon as the
    * tracker reports it lost it schedules its restart there. `scheduled` ends as "scheduled".
    */
  private def returnAt(back: Int, scheduled: AtomicReference[String]): Tracker => Unit = tracker => {
    val t = new Thread(() => {
      val until = System.nanoTime() + 120e9.toLong
      var done = false
      while (!done && System.nanoTime() < until) {
        try {
          if (tracker.list().asScala.exists(i => i.taskId == "1" && i.state == "lost")) {
            tracker.restart("1", back)
            scheduled.set("scheduled")
            done = true
          }
        } catch { case e: RuntimeException => if (tracker.isClosed) done = true else scheduled.set(e.toString) }
        Thread.sleep(5)
      }
    })
    t.setDaemon(true)
    t.start()
  }

  @Test
  def a_aHaltedExecutorDoesNotStallTheOthers(): Unit = {
    val p = withFaults(halted)(_.copy(failures = Seq(Failure(1, haltAt, halt = true))))
    val rs = LogisticRegression.runAll(sc, p)
    val back = shrankAndRejoined("halted executor", rs)
    // Task 1 came back only after Spark started a new executor JVM (seconds); meanwhile the
    // others committed checkpoints without it: they did not wait.
    assertTrue(back > haltAt + 1, s"the survivors went on without task 1 (it rejoined at version $back)")
    assertEquals(1, counts.failed.get(), s"one failed task attempt (the halted one): ${counts.reasons}")
    firstRun.set((haltAt, back, rs.head.modelHash))
  }

  @Test
  def b_theSameMembershipScheduleGivesTheSameModel(): Unit = {
    val (dropped, back, model) = Option(firstRun.get()).getOrElse(fail("needs a_aHaltedExecutorDoesNotStallTheOthers"))
    // The same halt; task 1 back at the same version: the driver schedules its restart there
    // as soon as the tracker gives up on it. The survivors pause twice as long after each
    // checkpoint (the model does not depend on it), so that the re-run task registers before
    // that version.
    val scheduled = new AtomicReference[String]("not yet")
    val schedule = returnAt(back, scheduled)
    val p = withFaults(halted)(_.copy(pauseMs = 200, failures = Seq(Failure(1, dropped, halt = true))))
    val rs = LogisticRegression.runAll(sc, p, schedule)
    assertEquals("scheduled", scheduled.get(), "the driver scheduled task 1's return")
    assertEquals(back, shrankAndRejoined("same schedule", rs), "task 1 rejoined at the scheduled version")
    assertEquals(model, rs.head.modelHash, s"dropped at $dropped and back at $back: the same model as the first run")
    val clean = LogisticRegression.run(sc, withFaults(halted)(_.copy(pauseMs = 0)))
    assertTrue(clean.modelHash != model, "the model records the schedule: without the loss it differs")
  }

  private def holdSlots(slots: Int, group: String): Thread = LocalCluster.holdSlots(sc, slots, group)

  @Test
  def c_aJobStartsWithFewerSlotsAndGrows(): Unit = {
    val holder = holdSlots(1, "elastic-holder")
    try {
      val release: Tracker => Unit = _ => {
        val t = new Thread(() => { Thread.sleep(3000); sc.cancelJobGroup("elastic-holder") })
        t.setDaemon(true)
        t.start()
      }
      val rs = LogisticRegression.runAll(sc, params, release)
      rs.foreach(r => println(s"ELASTIC fewer slots: task ${r.taskId} start ${r.startVersion} world ${r.world}"))
      assertEquals(workers, rs.size, "every task ran, the last one once its slot freed up")
      val late = rs.filter(_.startVersion > 0)
      assertEquals(1, late.size, s"one task joined after the start: $rs")
      assertEquals(Seq((late.head.startVersion, 3, 4)), rs.head.viewChanges, "rank 0 was told of the join")
      assertEquals(Seq(workers), rs.map(_.world).distinct, "four workers at the end")
      assertEquals(1, rs.map(_.modelHash).distinct.size, "every member ends with the same model")
    } finally {
      sc.cancelJobGroup("elastic-holder")
      holder.join(30000)
    }
  }

  @Test
  def d_fewerFreeSlotsThanMinWorkersIsAClearError(): Unit = {
    val holder = holdSlots(2, "elastic-holder-2")
    try {
      val e = assertThrows(classOf[WarrenSparkException], () => LogisticRegression.run(sc, params))
      println(s"ELASTIC below the minimum: ${e.getMessage}")
      assertTrue(e.getMessage.contains("needs at least 3 task slots"), e.getMessage)
      assertTrue(e.getMessage.contains("spark.warren.minWorkers"), e.getMessage)
      assertTrue(e.getMessage.contains("has 2 free (of 4): tasks 2, 3"), e.getMessage)
    } finally {
      sc.cancelJobGroup("elastic-holder-2")
      holder.join(30000)
    }
  }

  /** The paused run's schedule (back at) and model, for [[f_thePausedRunsScheduleOnAHaltGivesItsModel]]. */
  private val pausedRun = new AtomicReference[(Int, String)]()

  /** Long enough for the paused worker's re-run to join: the tracker fences it after
    * `peerTimeout` (10 s), the driver kills its executor 5 s later, and Spark starts a new one.
    * Up to 30 s for all four slots to be free: the previous case's cancelled slot holders may
    * still count as running.
    */
  private val pausedParams =
    params.copy(iters = 500, conf = elastic + ("peerTimeout" -> "10") + ("slotWaitTimeout" -> "30"))

  @Test
  def e_aPausedExecutorIsFencedAndTheOthersGoOnWithoutIt(): Unit = {
    // Task 1's executor JVM stops (SIGSTOP) at iteration haltAt: nothing closes, nothing answers.
    val p = withFaults(pausedParams)(_.copy(failures = Seq(Failure(1, haltAt, pause = true))))
    val rs = LogisticRegression.runAll(sc, p)
    WarrenSlots.drainListeners(sc, 5000)
    val back = shrankAndRejoined("paused executor", rs, p.iters)
    val why = counts.reasons.asScala.mkString("; ")
    println(f"ELASTIC paused executor: ${rs.head.seconds}%.2f s, task 1 back at version $back; the lost attempt: $why")
    assertTrue(back > haltAt + 1, s"the survivors went on without task 1 (it rejoined at version $back)")
    // Fenced by Warren's peer timeout and its executor replaced, not given up by Spark's
    // executor heartbeat timeout (120 s).
    assertFalse(why.contains("heartbeat"), s"the executor was given up by Spark's heartbeat timeout: $why")
    pausedRun.set((back, rs.head.modelHash))
  }

  @Test
  def f_thePausedRunsScheduleOnAHaltGivesItsModel(): Unit = {
    val (back, model) = Option(pausedRun.get()).getOrElse(fail("needs e_aPausedExecutorIsFencedAndTheOthersGoOnWithoutIt"))
    // The same membership schedule (dropped at haltAt, back at `back`) with a halted executor
    // in place of the paused one: the same model bit for bit.
    val scheduled = new AtomicReference[String]("not yet")
    val p = withFaults(pausedParams)(_.copy(failures = Seq(Failure(1, haltAt, halt = true))))
    val rs = LogisticRegression.runAll(sc, p, returnAt(back, scheduled))
    assertEquals("scheduled", scheduled.get(), "the driver scheduled task 1's return")
    assertEquals(back, shrankAndRejoined("the paused run's schedule", rs, p.iters), "task 1 rejoined at the scheduled version")
    assertEquals(model, rs.head.modelHash, s"dropped at $haltAt and back at $back: the paused run's model")
  }

  /** An `onTracker` hook that removes `task` at checkpoint version `at` once the job has
    * started (the tracker refuses changes before its first view); `done` ends as "removed".
    */
  private def removeAt(task: String, at: Int, done: AtomicReference[String]): Tracker => Unit = tracker => {
    val t = new Thread(() => {
      val until = System.nanoTime() + 60e9.toLong
      while (done.get() != "removed" && System.nanoTime() < until && !tracker.isClosed) {
        try {
          tracker.removeWorker(task, at)
          done.set("removed")
        } catch { case e: RuntimeException => done.set(e.toString); Thread.sleep(5) }
      }
    })
    t.setDaemon(true)
    t.start()
  }

  @Test
  def h_aLeaverOrStayerLostAtTheRemovalCostsOnlyItsOwnAttempt(): Unit = {
    val removedAt = 10
    // Paused iterations (the job never grows back to four): a re-run task has about 30 s to
    // start on a new executor before the others finish (pauses do not change the model).
    // Up to 30 s for all four slots to be free (an earlier case's replaced executor may still
    // be starting): the job starts with four workers, so the removal is its only change.
    val base = params.copy(iters = 300, conf = elastic + ("slotWaitTimeout" -> "30"))
    def removing(p: Params): Seq[Result] = {
      val removed = new AtomicReference[String]("not yet")
      val rs = LogisticRegression.runAll(sc, p, removeAt("3", removedAt, removed))
      WarrenSlots.drainListeners(sc, 5000)
      assertEquals("removed", removed.get(), "the driver removed task 3")
      rs
    }
    val clean = removing(withFaults(base)(_.copy(pauseMs = 20)))
    val leaver = clean.find(_.taskId == 3).getOrElse(fail(s"the leaver returns its result: $clean"))
    assertEquals(0, leaver.world, "the leaver says it left")
    val model = clean.find(_.taskId == 0).get.modelHash
    val mock = (m: String) => base.conf + ("setting.WARREN_MOCK" -> m)
    // The others stop pausing once the leaver's re-run has ended.
    val rerunEnded = java.nio.file.Files.createTempDirectory("warren-elastic").resolve("leaver-re-run-ended")
    val untilRerun = (p: Params) => withFaults(p)(_.copy(pauseUntilFile = rerunEnded.toString))
    val cases = Seq(
      ("the leaver's executor halts right after it left", withFaults(untilRerun(base))(_.copy(failures = Seq(Failure(3, -1, halt = true, afterLeaving = true))))),
      ("the leaver's executor exits when its removal is decided", untilRerun(base.copy(conf = mock("3,resize,0"))))
    )
    val rerunListener = new SparkListener {
      override def onTaskEnd(e: SparkListenerTaskEnd): Unit =
        if (e.taskInfo.partitionId == 3 && e.taskInfo.attemptNumber > 0) java.nio.file.Files.write(rerunEnded, Array.emptyByteArray)
    }
    sc.addSparkListener(rerunListener)
    for ((what, p) <- cases) {
      counts.reset(sc, workers)
      java.nio.file.Files.deleteIfExists(rerunEnded)
      val rs = removing(p)
      rs.foreach(r => println(s"ELASTIC $what: task ${r.taskId} world ${r.world} changes ${r.viewChanges}"))
      assertEquals(Seq(0, 1, 2), rs.map(_.taskId).sorted, s"$what: the members' results; the lost leaver has none")
      assertEquals(Seq(3), rs.map(_.world).distinct, s"$what: three workers at the end")
      for (r <- rs) assertEquals(Seq((removedAt, 4, 3)), r.viewChanges, s"$what: task ${r.taskId}'s view changes")
      assertEquals(1, counts.failed.get(), s"$what: only the lost attempt failed: ${counts.reasons}")
      // Spark re-runs the leaver's task: told it is not a member, it ends at once (before, it
      // was refused and failed until Spark gave up on the stage).
      assertEquals(workers + 1, counts.started.get(), s"$what: Spark re-ran the leaver's task once")
      assertEquals(model, rs.head.modelHash, s"$what: the model of the same removal without a loss")
    }
    sc.removeSparkListener(rerunListener)
    // A stayer lost when the removal is decided: its task is re-run (on the leaver's free
    // slot, within the rejoin timeout: recovered from its peers; else dropped and joined
    // again later) and the job ends with it; one failed attempt.
    counts.reset(sc, workers)
    val rs = removing(base.copy(conf = mock("0,resize,0")))
    rs.foreach(r => println(s"ELASTIC stayer lost at the removal: task ${r.taskId} world ${r.world} " +
      s"changes ${r.viewChanges} model ${r.modelHash.take(12)} (clean ${model.take(12)})"))
    val members = rs.filter(_.world > 0)
    assertEquals(Seq(0, 1, 2), members.map(_.taskId).sorted, "the members' results: the stayer's re-run is back")
    assertEquals(1, members.map(_.modelHash).distinct.size, "every member ends with the same model")
    assertEquals(1, counts.failed.get(), s"only the lost attempt failed: ${counts.reasons}")
  }

  @Test
  def i_aJoinerLostBeforeItLinkedCostsOnlyItsOwnAttempt(): Unit = {
    // Task 1's executor halts; the others go on without it; its re-run task (on a new
    // executor) registers to join and exits before linking to its peers: Spark runs it a
    // third time, and that attempt joins.
    val conf = halted.conf + ("setting.WARREN_MOCK" -> "1,linking,1") + ("slotWaitTimeout" -> "30")
    val p = withFaults(halted)(_.copy(failures = Seq(Failure(1, haltAt, halt = true)))).copy(conf = conf)
    val rs = LogisticRegression.runAll(sc, p)
    WarrenSlots.drainListeners(sc, 5000)
    rs.foreach(r => println(s"ELASTIC joiner lost before linking: task ${r.taskId} world ${r.world} changes ${r.viewChanges}"))
    assertEquals(Seq(0, 1, 2, 3), rs.map(_.taskId).sorted, s"task 1 joined on its third attempt: $rs")
    assertEquals(1, rs.map(_.modelHash).distinct.size, "every member ends with the same model")
    assertEquals(2, counts.failed.get(), s"the halted attempt and the lost joiner's: ${counts.reasons}")
  }

  /** Executor JVMs of this application that are stopped (state `T` in `/proc/PID/stat`). */
  private def stoppedExecutors(): Seq[Long] =
    ProcessHandle.allProcesses().iterator().asScala.toSeq.filter { h =>
      val cmd = h.info().commandLine().orElse("")
      cmd.contains("CoarseGrainedExecutorBackend") && cmd.contains(sc.applicationId) && {
        val stat = try new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(s"/proc/${h.pid}/stat")))
        catch { case _: java.io.IOException => "" }
        stat.drop(stat.lastIndexOf(')') + 2).headOption.contains('T')
      }
    }.map(_.pid)

  @Test
  def g_aJobFailingWhileAnExecutorIsPausedLeavesNoPausedJvm(): Unit = {
    // minWorkers 4 of 4: going on without the paused task would be below the minimum, so the
    // job fails about a second after its worker is fenced, within the kill grace of its
    // attempt; the paused JVM is killed and replaced all the same.
    val p = withFaults(pausedParams)(_.copy(failures = Seq(Failure(1, haltAt, pause = true))))
      .copy(conf = pausedParams.conf + ("minWorkers" -> "4"))
    val e = assertThrows(classOf[Exception], () => LogisticRegression.runAll(sc, p))
    println(s"ELASTIC paused below the minimum: ${e.getMessage}")
    assertTrue(e.getMessage.contains("below the minimum"), e.getMessage)
    val until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30)
    while (stoppedExecutors().nonEmpty && System.nanoTime() < until) Thread.sleep(200)
    assertEquals(Seq(), stoppedExecutors(), "no executor JVM of the application is left stopped")
  }
}

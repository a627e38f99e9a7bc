package io.warren.examples

import java.util.concurrent.{ConcurrentHashMap, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.AtomicReference

import scala.jdk.CollectionConverters._

import io.warren.Op
import io.warren.spark.WarrenSpark
import org.apache.spark.scheduler.{SparkListener, SparkListenerTaskEnd, SparkListenerTaskStart}
import org.apache.spark.{SparkContext, SparkEnv, TaskContext, WarrenSlots}
import org.junit.jupiter.api.Assertions.{assertEquals, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** Cancelling a Warren job on `local-cluster[3,1,1024]` while its workers wait in a collective:
  * `sc.cancelJobGroup` with `interruptOnCancel` interrupts the task threads, which abort their
  * calls (`Communicator`'s interrupt watcher); without it Spark only marks the tasks killed, and
  * the runner's `KillWatch` aborts their calls. Either way every task must end within 10 s, and
  * no executor may keep a Warren thread (one inside the native library or a watcher).
  */
@TestInstance(Lifecycle.PER_CLASS)
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class CancelClusterTest {
  private val workers = 3
  private var sc: SparkContext = _

  @BeforeAll
  def start(): Unit = {
    sc = LocalCluster.start(workers, "warren-cancel-cluster-test")
    assertTrue(WarrenSpark.awaitSlots(sc, workers, 90) >= workers, "the executors did not register")
  }

  @AfterAll
  def stop(): Unit = if (sc != null) sc.stop()

  @Test
  def aCancelledJobGroupEndsTasksBlockedInAnAllreduceAndLeavesNoThread(): Unit =
    cancelWhileBlocked(interruptOnCancel = true)

  @Test
  def aJobGroupCancelledWithoutInterruptsEndsBlockedTasksToo(): Unit =
    cancelWhileBlocked(interruptOnCancel = false)

  private def cancelWhileBlocked(interruptOnCancel: Boolean): Unit = {
    val started = new CountDownLatch(workers)
    // Partition -> when its task ended.
    val ended = new ConcurrentHashMap[Int, java.lang.Long]()
    val listener = new SparkListener {
      override def onTaskStart(e: SparkListenerTaskStart): Unit = started.countDown()
      override def onTaskEnd(e: SparkListenerTaskEnd): Unit =
        ended.put(e.taskInfo.index, System.nanoTime())
    }
    sc.addSparkListener(listener)
    val outcome = new AtomicReference[Throwable]()
    // local-cluster runs on this machine: each worker marks here that it is about to wait.
    val marks = java.nio.file.Files.createTempDirectory("warren-cancel").toString
    val driver = new Thread(() => {
      sc.setJobGroup("warren-cancel", "a Warren job to cancel", interruptOnCancel)
      try {
        // Partitions 0 and 1 wait in an allreduce that partition 2 never joins: it computes
        // (sleeps) without looking at kills, for 10 min if an interrupt can end it, else 15 s.
        WarrenSpark.train(sc.parallelize(0 until workers, workers), workers) { (c, _) =>
          val partition = TaskContext.get().partitionId()
          java.nio.file.Files.createFile(java.nio.file.Paths.get(marks, s"partition-$partition"))
          if (partition == CancelClusterTest.Busy) Thread.sleep(if (interruptOnCancel) 600000 else 15000)
          else c.allreduce(new Array[Float](1024), Op.SUM)
          c.rank()
        }
      } catch { case t: Throwable => outcome.set(t) }
      finally sc.clearJobGroup()
    }, "cancelled-job-driver")
    driver.start()
    assertTrue(started.await(120, TimeUnit.SECONDS), "the tasks did not start")
    val joinBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(120)
    while (new java.io.File(marks).list().length < workers && System.nanoTime() < joinBy) Thread.sleep(50)
    assertEquals(workers, new java.io.File(marks).list().length, "the workers did not all join")
    new java.io.File(marks).listFiles().foreach(_.delete()) // every mark is made: not needed again
    new java.io.File(marks).delete()
    Thread.sleep(500) // partitions 0 and 1 now wait in the allreduce, 2 in its sleep
    assertEquals(0, ended.size(), "a task ended before the cancel")
    val cancelled = System.nanoTime()
    sc.cancelJobGroup("warren-cancel")
    driver.join(30000)
    assertTrue(!driver.isAlive, "the driver's job did not end")
    // The job fails at once; the executors report their killed tasks a little later (the busy
    // partition without an interrupt only when its 15 s of work are over).
    val endBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(40)
    while (ended.size() < workers && System.nanoTime() < endBy) Thread.sleep(50)
    WarrenSlots.drainListeners(sc, 5000)
    sc.removeSparkListener(listener)
    assertTrue(outcome.get() != null, "the cancelled job returned a result")
    assertEquals(workers, ended.size(), s"tasks ended: ${ended.size()}")
    // Every task blocked in Warren's calls ends within 10 s (and, with an interrupt, the busy one).
    val mustEnd = ended.asScala.filter { case (p, _) => interruptOnCancel || p != CancelClusterTest.Busy }
    val lastMs = mustEnd.values.map(t => TimeUnit.NANOSECONDS.toMillis(t - cancelled)).max
    println(s"cancelJobGroup (interruptOnCancel = $interruptOnCancel): the tasks of partitions " +
      s"${mustEnd.keys.toSeq.sorted.mkString(", ")} ended within $lastMs ms; the job failed with: ${outcome.get()}")
    assertTrue(lastMs < 10000, s"the last task ended $lastMs ms after cancelJobGroup")

    // A follow-up job (one task per executor) lists each executor's Warren threads.
    val threads = sc
      .parallelize(0 until workers, workers)
      .map { _ =>
        Thread.sleep(1000) // hold the slot so that each executor runs one task
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
        var found = CancelClusterTest.warrenThreads()
        while (found.nonEmpty && System.nanoTime() < deadline) {
          Thread.sleep(100)
          found = CancelClusterTest.warrenThreads()
        }
        (SparkEnv.get.executorId, found)
      }
      .collect()
    println(s"Warren threads per executor after the cancel: ${threads.mkString(", ")}")
    assertEquals(workers, threads.map(_._1).distinct.length, s"not every executor answered: ${threads.mkString}")
    threads.foreach { case (executor, found) =>
      assertTrue(found.isEmpty, s"executor $executor keeps Warren threads: ${found.mkString("; ")}")
    }
  }
}

object CancelClusterTest {

  /** The partition that does not join the allreduce (it is busy computing). */
  val Busy = 2

  /** The threads of this JVM inside Warren's native library or its interrupt watcher. */
  def warrenThreads(): Seq[String] =
    Thread.getAllStackTraces.asScala.collect {
      case (t, stack)
          if t.getName.startsWith("warren-") ||
            stack.exists(f => f.getClassName == "io.warren.Native" || f.getClassName == "io.warren.Communicator") =>
        s"${t.getName}: ${stack.take(3).mkString(" < ")}"
    }.toSeq
}

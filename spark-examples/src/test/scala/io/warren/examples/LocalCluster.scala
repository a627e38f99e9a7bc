package io.warren.examples

import java.io.File
import java.util.concurrent.atomic.AtomicInteger

import io.warren.spark.WarrenSpark
import org.apache.spark.scheduler.{SparkListener, SparkListenerStageSubmitted, SparkListenerTaskEnd, SparkListenerTaskStart}
import org.apache.spark.{SparkConf, SparkContext, Success, TaskKilled, WarrenSlots}
import org.junit.jupiter.api.Assertions.assertTrue

/** The SparkContext of the local-cluster test classes: executor JVMs of one core and 1 GiB on
  * 127.0.0.1, Spark from `$SPARK_HOME` (scripts/setup-spark.sh), this project's classes and
  * jars on the executors' class path, and the Warren deadlines the tests use.
  */
object LocalCluster {

  /** Starts a context on `local-cluster[executors,1,1024]`.
    *
    * @param executors the number of executor JVMs (one task slot each)
    * @param appName the application's name
    * @param extra further Spark settings (e.g. dynamic allocation's)
    * @return the context; the caller stops it
    */
  def start(executors: Int, appName: String, extra: Map[String, String] = Map.empty): SparkContext = {
    val home = sys.env.getOrElse("SPARK_HOME", throw new IllegalStateException("SPARK_HOME is not set"))
    val cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"))
    // Executors get Spark from $SPARK_HOME/jars; add this project's classes and jars.
    val ours = cp
      .split(File.pathSeparator)
      .filter(e => !e.startsWith(home) && !e.contains("/.spark") && (e.contains("warren") || e.contains("/target/") || e.contains("scala-collection-compat")))
    val conf = new SparkConf()
      .setMaster(s"local-cluster[$executors,1,1024]")
      .setAppName(appName)
      .setSparkHome(home)
      .set("spark.driver.host", "127.0.0.1")
      .set("spark.driver.bindAddress", "127.0.0.1")
      .set("spark.ui.enabled", "false")
      .set("spark.executor.extraClassPath", ours.mkString(File.pathSeparator))
      .set("spark.warren.connectTimeout", "120")
      .set("spark.warren.timeout", "300")
      .setAll(extra)
    new SparkContext(conf)
  }

  /** Runs, in a daemon thread, a job of `slots` one-task jobs that hold a task slot each until
    * the job group `group` is cancelled (`sc.cancelJobGroup(group)`); returns once they run
    * (at most 60 s later).
    *
    * @param sc the context
    * @param slots how many slots to hold
    * @param group the job group to cancel to free them
    * @return the thread; join it after cancelling
    */
  def holdSlots(sc: SparkContext, slots: Int, group: String): Thread = {
    val t = new Thread(() => {
      sc.setJobGroup(group, "holds task slots", interruptOnCancel = true)
      try sc.parallelize(0 until slots, slots).foreach(_ => Thread.sleep(600000))
      catch { case _: Exception => }
    })
    t.setDaemon(true)
    t.start()
    val until = System.nanoTime() + 60e9.toLong
    while (sc.statusTracker.getExecutorInfos.map(_.numRunningTasks).sum < slots && System.nanoTime() < until) Thread.sleep(50)
    t
  }
}

/** What Spark's listener bus reports of the tasks of a local-cluster test class's jobs: task
  * attempts started, failed (killed ones aside: Spark kills the rest of a failed barrier
  * stage) and stage re-runs. Add it to the context once; [[reset]] it before each case.
  */
final class TaskCounts extends SparkListener {

  /** Task attempts started. */
  val started = new AtomicInteger()

  /** Task attempts that failed (not counting those Spark killed). */
  val failed = new AtomicInteger()

  /** Why they failed (the first line of each reason), in order. */
  val reasons = new java.util.concurrent.ConcurrentLinkedQueue[String]()

  /** Stage attempts after the first (a re-run barrier stage, say). */
  val stageReruns = new AtomicInteger()

  override def onTaskStart(e: SparkListenerTaskStart): Unit = started.incrementAndGet()

  override def onTaskEnd(e: SparkListenerTaskEnd): Unit = e.reason match {
    case Success | _: TaskKilled =>
    case other =>
      reasons.add(other.toString.linesIterator.take(1).toList.headOption.getOrElse(""))
      failed.incrementAndGet()
  }

  override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit =
    if (e.stageInfo.attemptNumber() > 0) stageReruns.incrementAndGet()

  /** Waits until `workers` task slots are registered (a halted executor is replaced a few
    * seconds later) and the events of earlier jobs are delivered, then zeroes the counts.
    *
    * @param sc the context this listens to
    * @param workers the task slots the next case needs
    */
  def reset(sc: SparkContext, workers: Int): Unit = {
    assertTrue(WarrenSpark.awaitSlots(sc, workers, 90) >= workers, s"the $workers executors did not register")
    WarrenSlots.drainListeners(sc, 5000)
    started.set(0)
    failed.set(0)
    reasons.clear()
    stageReruns.set(0)
  }
}

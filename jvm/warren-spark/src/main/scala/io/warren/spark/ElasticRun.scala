package io.warren.spark

import java.time.Duration
import java.util.concurrent.ConcurrentHashMap

import scala.concurrent.Await
import scala.concurrent.duration.{Duration => ScalaDuration}
import scala.jdk.CollectionConverters._
import scala.reflect.ClassTag

import io.warren.{Tracker, TrackerException, WarrenTimeoutException}
import org.apache.spark.{FutureAction, SparkContext, WarrenSlots}
import org.apache.spark.rdd.RDD

/** The driver's side of an elastic job (`spark.warren.elastic=true`, see [[WarrenSpark]]):
  *
  *  - [[startingWorkers]]: a job starts with every worker if the slots are free, else with the
  *    free slots if there are at least `minWorkers` of them (the tracker's first view is the
  *    first tasks to register; it admits the others as they register, `admitArrivals`, and
  *    they join at a checkpoint boundary once Spark runs them);
  *  - [[collect]]: runs the workers' job asynchronously and ends it when the tracker says the
  *    job is over: every member of the final view finished and its result has arrived. A task
  *    that is not a member then (a lost worker's re-run task still waiting for a new executor,
  *    or registered too late to join) is cancelled: it has nothing to add.
  */
private[spark] object ElasticRun {

  /** Spark's job property that makes a cancellation interrupt the task threads. */
  private val InterruptOnCancel = "spark.job.interruptOnCancel"

  /** How often the driver looks at the tracker and the Spark job. */
  private val Poll = Duration.ofMillis(20)

  /** How many workers the job starts with: `n` if that many task slots are free (waiting up to
    * `waitS` seconds for them), else the free slots if there are at least `min`.
    *
    * @throws WarrenSparkException naming the tasks without a slot, below `min`
    */
  def startingWorkers(sc: SparkContext, n: Int, min: Int, waitS: Double): Int = {
    val until = System.nanoTime() + (waitS * 1e9).toLong
    WarrenSlots.drainListeners(sc, 2000)
    var (avail, total) = WarrenSpark.freeSlots(sc)
    while (avail < n && System.nanoTime() < until) {
      Thread.sleep(100)
      val (a, t) = WarrenSpark.freeSlots(sc)
      avail = a
      total = t
    }
    if (avail >= n) n
    else if (avail >= min) avail
    else {
      val missing = (avail.max(0) until n).mkString(", ")
      throw new WarrenSparkException(
        s"Warren's elastic job of $n workers needs at least $min task slots at once " +
          s"(spark.warren.minWorkers) but the cluster has ${avail.max(0)} free (of $total): tasks " +
          s"$missing (in Spark's launch order) would have no slot. Use fewer minWorkers, more " +
          "executors or cores, or spark.warren.slotWaitTimeout to wait for executors that are " +
          "still registering",
        null
      )
    }
  }

  /** Runs the workers' job (`workers`: one `(task id, result)` per task) until the tracker
    * reports the job over and the result of every member of its final view has arrived, then
    * cancels the tasks that are not members (the tracker admits the tasks that were not in
    * the first view as they register).
    *
    * @return the members' results with their task ids
    * @throws org.apache.spark.SparkException if the Spark job failed first
    * @throws WarrenSparkException if the tracker failed the job (below `minWorkers`: it names
    *   the missing tasks)
    */
  def collect[R: ClassTag](
      sc: SparkContext,
      workers: RDD[(Int, R)],
      tracker: Tracker,
      numWorkers: Int,
      cancelled: FutureAction[_] => Unit
  ): Array[(Int, R)] = {
    val results = new ConcurrentHashMap[Int, R]()
    // Cancelling interrupts the tasks: a re-run task blocked joining (waiting for a boundary, or
    // retrying a tracker that is gone) would otherwise hold its slot up to connectTimeout.
    val previous = sc.getLocalProperty(InterruptOnCancel)
    sc.setLocalProperty(InterruptOnCancel, "true")
    val job =
      try
        sc.submitJob[(Int, R), Array[(Int, R)], Unit](
          workers,
          (it: Iterator[(Int, R)]) => it.toArray,
          0 until numWorkers,
          (_: Int, rs: Array[(Int, R)]) => rs.foreach { case (id, r) => results.put(id, r) },
          ()
        )
      finally sc.setLocalProperty(InterruptOnCancel, previous)
    var over = false
    try {
      while (!over && !job.isCompleted) over = finished(tracker, results, Poll)
      // The Spark job ended first, or failed after the tracker's job was over (a late task
      // refused): what counts is whether every member of the final view returned.
      if (!over) {
        Await.ready(job, ScalaDuration.Inf)
        over = finished(tracker, results, Duration.ZERO)
        if (!over) job.value.foreach(_.get)
      }
    } finally {
      // Tasks still running or waiting for a slot: not members, or the job failed. Spark kills
      // them; their results are not needed, so the driver does not wait (Spark's cancellation
      // can take seconds when a re-run task is being retried meanwhile).
      if (!job.isCompleted) {
        job.cancel()
        cancelled(job)
      }
    }
    results.asScala.toArray
  }

  /** Closes `trackers` once the cancelled `job` has ended (at most `limit` later), in a daemon
    * thread: until then a late task registering is refused at once, and one waiting to join is
    * interrupted by the cancellation; with the tracker gone it would retry connecting, holding
    * its slot, up to its connect timeout.
    */
  def closeAfter(job: FutureAction[_], trackers: AutoCloseable, limit: ScalaDuration): Unit = {
    val t = new Thread(() => {
      try Await.ready(job, limit)
      catch { case _: Exception => }
      finally trackers.close()
    }, "warren-elastic-close")
    t.setDaemon(true)
    t.start()
  }

  /** Whether the tracker's job is over and every member of its final view has returned its
    * result (waiting up to `wait` for the tracker).
    *
    * @throws WarrenSparkException if the tracker failed the job
    */
  private def finished[R](tracker: Tracker, results: ConcurrentHashMap[Int, R], wait: Duration): Boolean = {
    try tracker.awaitCompletion(wait)
    catch {
      case _: WarrenTimeoutException => return false
      case e: TrackerException =>
        throw new WarrenSparkException(s"Warren elastic job failed: ${e.getMessage}", e)
    }
    val all = tracker.list().asScala.filter(_.rank >= 0).forall(t => results.containsKey(t.taskId.toInt))
    if (!all) Thread.sleep(Poll.toMillis) // the last results are on their way
    all
  }
}

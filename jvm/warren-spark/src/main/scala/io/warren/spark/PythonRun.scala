package io.warren.spark

import io.warren.runner.Trackers
import org.apache.spark.SparkContext

/** The driver's watch of a run that PySpark's `warren.spark.train` submits, for a Python
  * driver through py4j: what the Scala adapter gives its own runs. With this jar on the
  * driver's class path, a worker the tracker fenced (its executor paused, frozen or cut off,
  * its task hung) has its task attempt killed, and its executor killed and replaced if it does
  * not end the attempt ([[FenceWatch]]), instead of holding its slot until Spark's
  * `spark.network.timeout`.
  */
object PythonRun {

  /** The local property whose value names the run in its jobs: set it to the run id on the
    * thread that submits the workers' stage.
    */
  val RunKey: String = JobWatch.RunKey

  /** Starts watching the run whose jobs carry [[RunKey]] = `runId` and whose workers are the
    * tasks of RDD `workersRddId` (retry-one).
    *
    * @param sc the context
    * @param trackers the run's trackers (`JobPlan.trackers`)
    * @param runId the run's id
    * @param workersRddId the id of the RDD whose tasks are the workers (a PySpark RDD's
    *   `_jrdd.rdd().id()`)
    * @return stops the watch (once the workers' stage has ended)
    */
  def watch(sc: SparkContext, trackers: Trackers, runId: String, workersRddId: Int): AutoCloseable = {
    val jobs = new JobWatch(runId, workersRddId, failAll = false, _ => ())
    sc.addSparkListener(jobs)
    val fences = new FenceWatch(sc, trackers, jobs)
    new AutoCloseable {
      override def close(): Unit =
        try fences.stop()
        finally sc.removeSparkListener(jobs)
    }
  }
}

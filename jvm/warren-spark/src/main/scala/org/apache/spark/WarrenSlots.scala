package org.apache.spark

import org.apache.spark.scheduler.ExecutorProcessLost
import org.apache.spark.scheduler.cluster.CoarseGrainedClusterMessages.RemoveExecutor
import org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend

/** Access to Spark's own count of task slots (`SparkContext.maxNumConcurrentTasks`, the number
  * its barrier-mode check uses), to its listener bus, to an executor's local directory, to
  * `killAndReplaceExecutor` and to the scheduler's executor removal, which are `private[spark]`;
  * hence this package.
  */
object WarrenSlots {

  /** Tasks of the default resource profile that can run at once on the executors registered
    * now (in local mode: the local cores).
    *
    * @param sc the context
    * @return the number of slots, busy or free
    */
  def maxConcurrentTasks(sc: SparkContext): Int =
    sc.maxNumConcurrentTasks(sc.resourceProfileManager.defaultResourceProfile)

  /** Waits until the listener bus has delivered the events posted so far, up to `timeoutMs`
    * (so that a listener has seen a failed job's task failures before they are reported).
    *
    * @param sc the context
    * @param timeoutMs the most milliseconds to wait
    * @return whether the bus was emptied in time
    */
  def drainListeners(sc: SparkContext, timeoutMs: Long): Boolean =
    try {
      sc.listenerBus.waitUntilEmpty(timeoutMs)
      true
    } catch { case _: java.util.concurrent.TimeoutException => false }

  /** A local directory of this JVM for scratch files (in an executor: one of its
    * `spark.local.dir`s, or the cluster manager's, e.g. YARN's container directories), or
    * `java.io.tmpdir` outside Spark or if Spark cannot say.
    *
    * @return an existing directory's path
    */
  def localDir(): String =
    try Option(SparkEnv.get).map(e => org.apache.spark.util.Utils.getLocalDir(e.conf)).getOrElse(tmpDir)
    catch { case _: Exception | _: LinkageError => tmpDir }

  /** Gives up an executor that does not answer, as Spark does after its heartbeat timeout:
    * asks the cluster manager to kill it and start another in its place, and removes it from
    * the scheduler at once, so that its running tasks are run again elsewhere now. The
    * removal matters when the executor's host is gone or cut off: the cluster manager cannot
    * reach it to kill it, a standalone master then never reports it lost, and its tasks would
    * wait for `spark.network.timeout` (120 s by default).
    *
    * @param sc the context
    * @param executorId the executor
    * @param why what showed it does not answer (the reason its tasks failed)
    * @return whether the cluster manager took the request (false in local mode)
    */
  def killAndReplaceExecutor(sc: SparkContext, executorId: String, why: String): Boolean = {
    val taken = sc.killAndReplaceExecutor(executorId)
    sc.schedulerBackend match {
      case b: CoarseGrainedSchedulerBackend => b.driverEndpoint.send(RemoveExecutor(executorId, ExecutorProcessLost(why)))
      case _                                => ()
    }
    taken
  }

  private def tmpDir: String = System.getProperty("java.io.tmpdir")
}

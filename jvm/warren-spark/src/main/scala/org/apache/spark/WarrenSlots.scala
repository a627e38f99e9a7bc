package org.apache.spark

/** Access to Spark's own count of task slots (`SparkContext.maxNumConcurrentTasks`, the number
  * its barrier-mode check uses), which is `private[spark]`; hence this package.
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
}

package io.warren.examples

import io.warren.{Communicator, ViewChange}

/** Where a harness reaches into the worker loop of an example ([[LogisticRegression]],
  * [[KMeans]]): [[FaultHarness]] injects failures and paces the loop through it for the tests
  * and demos. The default does
  * nothing; a job without a harness never needs one.
  */
trait Hooks extends Serializable {

  /** The hooks of one worker attempt, made once it has loaded its checkpoint.
    *
    * @param workers the job's workers
    * @param comm the worker's communicator
    */
  def worker(workers: Int, comm: Communicator): WorkerHooks = WorkerHooks.none
}

/** The hooks that do nothing. */
object Hooks {

  /** Hooks whose workers do nothing. */
  val none: Hooks = new Hooks {}
}

/** One worker attempt's calls into a harness; each does nothing by default. */
trait WorkerHooks {

  /** At the start of iteration `it`, before its pass over the rows (or its records). */
  def beforeIteration(it: Int): Unit = ()

  /** After iteration `it`'s allreduce, before its checkpoint. */
  def afterAllreduce(it: Int): Unit = ()

  /** After iteration `it`'s checkpoint, with the change of membership it brought (elastic jobs). */
  def afterCheckpoint(it: Int, change: Option[ViewChange]): Unit = ()

  /** Elastic jobs: this worker was removed from the job after `it` iterations. */
  def afterLeaving(it: Int): Unit = ()
}

/** The worker hooks that do nothing. */
object WorkerHooks {

  /** Hooks that do nothing. */
  val none: WorkerHooks = new WorkerHooks {}
}

/** Where a harness reaches into the parameter-server example ([[SparseLogisticRegressionPS]]):
  * [[FaultHarness.PsFaults]] fails a trainer, restarts a server and paces the steps through it.
  * Each call does nothing by default.
  */
trait PsHooks extends Serializable {

  /** On the driver: runs the job (`body`) with the settings it needs added to `conf` (a
    * checkpoint directory for a server to restart from, say), and cleans up after it.
    *
    * @param conf the job's `spark.warren.*` settings
    * @param body runs the job with the settings given
    */
  def around[A](conf: Map[String, String])(body: Map[String, String] => A): A = body(conf)

  /** On the driver, once the job's servers run, before any trainer starts. */
  def onServers(servers: io.warren.spark.PsServers): Unit = ()

  /** In a trainer, at the start of step `step`. */
  def beforeStep(step: Int): Unit = ()

  /** In a trainer, after step `step`'s push. */
  def afterPush(step: Int): Unit = ()
}

/** The parameter-server hooks that do nothing. */
object PsHooks {

  /** Hooks that do nothing. */
  val none: PsHooks = new PsHooks {}
}

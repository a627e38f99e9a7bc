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

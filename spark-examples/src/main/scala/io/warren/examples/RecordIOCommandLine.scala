package io.warren.examples

import io.warren.examples.RecordIOTraining.Params

/** The command line of [[RecordIOTraining]]: the job's parameters, its data master's store and
  * the failures of [[FaultHarness]] for the demos and tests.
  */
object RecordIOCommandLine {

  /** The usage, as the error of an unknown argument gives it. */
  val usage: String =
    "usage: [--workers N] [--records N] [--features N] [--passes N] [--task-timeout MS] [--kill-task STEP] " +
      "[--kill-point get|allreduce|checkpoint] [--store file:DIR|etcd:HOST:PORT[/PREFIX]] [--data-dir SHARED_DIR]"

  /** Where `--kill-point` fails the step, as [[FaultHarness.Failure]]'s point: `get` is holding
    * a task at the start of the step. */
  private val points = Map("get" -> "start", "allreduce" -> "allreduce", "checkpoint" -> "checkpoint")

  /** Parses the arguments.
    *
    * @param args the arguments (see [[usage]])
    * @param p the parameters the arguments change
    * @return the parameters; its hooks are [[FaultHarness.Faults]] if a failure was asked for
    * @throws IllegalArgumentException naming an unknown argument or kill point, with the usage
    */
  def parse(args: List[String], p: Params = Params()): Params = {
    def faults(f: FaultHarness.Faults => FaultHarness.Faults) = p.copy(hooks = f(FaultHarness.faults(p.hooks)))
    args match {
      case Nil                           => p
      case "--workers" :: v :: rest      => parse(rest, p.copy(workers = v.toInt))
      case "--records" :: v :: rest      => parse(rest, p.copy(records = v.toInt))
      case "--features" :: v :: rest     => parse(rest, p.copy(features = v.toInt))
      case "--passes" :: v :: rest       => parse(rest, p.copy(passes = v.toInt))
      case "--task-timeout" :: v :: rest => parse(rest, p.copy(taskTimeoutMs = v.toLong))
      case "--kill-task" :: v :: rest    => parse(rest, faults(_.copy(killTask = v.toInt)))
      case "--kill-point" :: v :: rest =>
        val point = points.getOrElse(v, throw new IllegalArgumentException(s"--kill-point $v: get, allreduce or checkpoint; $usage"))
        parse(rest, faults(_.copy(killPoint = point)))
      case "--store" :: v :: rest    => parse(rest, p.copy(store = Some(v)))
      case "--data-dir" :: v :: rest => parse(rest, p.copy(dataDir = Some(v)))
      case other :: _                => throw new IllegalArgumentException(s"unknown argument $other; $usage")
    }
  }
}

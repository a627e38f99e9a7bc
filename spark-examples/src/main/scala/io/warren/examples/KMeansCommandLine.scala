package io.warren.examples

import io.warren.examples.KMeans.Params

/** The command line of [[KMeans]]: the job's parameters and the failures of [[FaultHarness]]
  * for the demos and tests.
  */
object KMeansCommandLine {

  /** The usage, as the error of an unknown argument gives it. */
  val usage: String =
    "usage: [--workers N] [--rows N] [--dims N] [--k N] [--iters N] [--spread X] [--noise X] [--seed N] " +
      "[--kill-task ITER] [--kill-executor ITER] [--pause-ms MS]"

  /** Parses the arguments.
    *
    * @param args the arguments (see [[usage]])
    * @param p the parameters the arguments change
    * @return the parameters; its hooks are [[FaultHarness.Faults]] if a failure or pause was asked for
    * @throws IllegalArgumentException naming an unknown argument, with the usage
    */
  def parse(args: List[String], p: Params = Params()): Params = {
    def faults(f: FaultHarness.Faults => FaultHarness.Faults) = p.copy(hooks = f(FaultHarness.faults(p.hooks)))
    args match {
      case Nil                            => p
      case "--workers" :: v :: rest       => parse(rest, p.copy(workers = v.toInt))
      case "--rows" :: v :: rest          => parse(rest, p.copy(rows = v.toInt))
      case "--dims" :: v :: rest          => parse(rest, p.copy(dims = v.toInt))
      case "--k" :: v :: rest             => parse(rest, p.copy(k = v.toInt))
      case "--iters" :: v :: rest         => parse(rest, p.copy(iters = v.toInt))
      case "--spread" :: v :: rest        => parse(rest, p.copy(spread = v.toDouble))
      case "--noise" :: v :: rest         => parse(rest, p.copy(noise = v.toDouble))
      case "--seed" :: v :: rest          => parse(rest, p.copy(seed = v.toLong))
      case "--kill-task" :: v :: rest     => parse(rest, faults(_.copy(killTask = v.toInt)))
      case "--kill-executor" :: v :: rest => parse(rest, faults(_.copy(killExecutor = v.toInt)))
      case "--pause-ms" :: v :: rest      => parse(rest, faults(_.copy(pauseMs = v.toInt)))
      case other :: _                     => throw new IllegalArgumentException(s"unknown argument $other; $usage")
    }
  }
}

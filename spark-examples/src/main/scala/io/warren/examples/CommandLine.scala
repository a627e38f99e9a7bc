package io.warren.examples

import io.warren.examples.FaultHarness.Faults
import io.warren.examples.LogisticRegression.Params

/** The command line of [[LogisticRegression]]: the job's parameters, its recovery settings,
  * and the failures of [[FaultHarness]] for the demos and tests.
  */
object CommandLine {

  /** The usage, as the error of an unknown argument gives it. */
  val usage: String =
    "usage: [--workers N] [--rows N] [--features N] [--iters N] [--step-size X] [--optimizer gd|lbfgs] " +
      "[--lbfgs-memory M] [--target-loss X] [--seed N] [--recovery retry-one|fail-all] [--checkpoint-dir DIR] " +
      "[--elastic MIN_WORKERS] [--kill-task ITER] [--kill-executor ITER] [--pause-ms MS] [--pause-until-grown]"

  /** Parses the arguments.
    *
    * @param args the arguments (see [[usage]])
    * @param p the parameters the arguments change
    * @return the parameters; its hooks are [[FaultHarness.Faults]] if a failure or pause was asked for
    * @throws IllegalArgumentException naming an unknown argument, with the usage
    */
  def parse(args: List[String], p: Params = Params()): Params = {
    def faults(f: Faults => Faults) = FaultHarness.withFaults(p)(f)
    args match {
      case Nil                             => p
      case "--workers" :: v :: rest        => parse(rest, p.copy(workers = v.toInt))
      case "--rows" :: v :: rest           => parse(rest, p.copy(rows = v.toInt))
      case "--features" :: v :: rest       => parse(rest, p.copy(features = v.toInt))
      case "--iters" :: v :: rest          => parse(rest, p.copy(iters = v.toInt))
      case "--step-size" :: v :: rest      => parse(rest, p.copy(stepSize = v.toDouble))
      case "--optimizer" :: v :: rest      => parse(rest, p.copy(optimizer = v))
      case "--lbfgs-memory" :: v :: rest   => parse(rest, p.copy(lbfgsMemory = v.toInt))
      case "--target-loss" :: v :: rest    => parse(rest, p.copy(targetLoss = v.toDouble))
      case "--seed" :: v :: rest           => parse(rest, p.copy(seed = v.toLong))
      case "--recovery" :: v :: rest       => parse(rest, p.copy(conf = p.conf + ("recovery" -> v)))
      case "--checkpoint-dir" :: v :: rest => parse(rest, p.copy(conf = p.conf + ("checkpointDir" -> v)))
      case "--elastic" :: v :: rest        => parse(rest, p.copy(conf = p.conf + ("elastic" -> "true") + ("minWorkers" -> v)))
      case "--kill-task" :: v :: rest      => parse(rest, faults(_.copy(killTask = v.toInt)))
      case "--kill-executor" :: v :: rest  => parse(rest, faults(_.copy(killExecutor = v.toInt)))
      case "--pause-ms" :: v :: rest       => parse(rest, faults(_.copy(pauseMs = v.toInt)))
      case "--pause-until-grown" :: rest   => parse(rest, faults(_.copy(pauseUntilGrown = true)))
      case other :: _                      => throw new IllegalArgumentException(s"unknown argument $other; $usage")
    }
  }
}

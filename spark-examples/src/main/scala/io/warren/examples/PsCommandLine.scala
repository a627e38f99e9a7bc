package io.warren.examples

import io.warren.examples.SparseLogisticRegressionPS.Params

/** The command line of [[SparseLogisticRegressionPS]]: the job's parameters, and the failures of
  * [[FaultHarness.PsFaults]] for the demos and tests.
  */
object PsCommandLine {

  /** The usage, as the error of an unknown argument gives it. */
  val usage: String =
    "usage: [--workers N] [--servers N] [--rows N] [--bits B] [--batch N] [--iters N] [--lr X] " +
      "[--mode sync|async|ssp] [--staleness K] [--seed N] [--checkpoint-dir DIR] [--ps-servers driver|process] " +
      "[--kill-task STEP] [--kill-server STEP] [--pause-ms MS]"

  /** Parses the arguments.
    *
    * @param args the arguments (see [[usage]])
    * @param p the parameters the arguments change
    * @return the parameters; its hooks are [[FaultHarness.PsFaults]] if a failure or pause was asked for
    * @throws IllegalArgumentException naming an unknown argument, with the usage
    */
  def parse(args: List[String], p: Params = Params()): Params = {
    def faults(f: FaultHarness.PsFaults => FaultHarness.PsFaults) = p.copy(hooks = f(FaultHarness.psFaults(p.hooks)))
    args match {
      case Nil                             => p
      case "--workers" :: v :: rest        => parse(rest, p.copy(workers = v.toInt))
      case "--servers" :: v :: rest        => parse(rest, p.copy(servers = v.toInt))
      case "--rows" :: v :: rest           => parse(rest, p.copy(rowsPerWorker = v.toInt))
      case "--bits" :: v :: rest           => parse(rest, p.copy(bits = v.toInt))
      case "--batch" :: v :: rest          => parse(rest, p.copy(batch = v.toInt))
      case "--iters" :: v :: rest          => parse(rest, p.copy(iters = v.toInt))
      case "--lr" :: v :: rest             => parse(rest, p.copy(lr = v.toFloat))
      case "--mode" :: v :: rest           => parse(rest, p.copy(mode = v))
      case "--staleness" :: v :: rest      => parse(rest, p.copy(staleness = v.toLong))
      case "--seed" :: v :: rest           => parse(rest, p.copy(seed = v.toLong))
      case "--checkpoint-dir" :: v :: rest => parse(rest, p.copy(conf = p.conf + ("ps.checkpointDir" -> v)))
      case "--ps-servers" :: v :: rest     => parse(rest, p.copy(conf = p.conf + ("ps.servers" -> v)))
      case "--kill-task" :: v :: rest      => parse(rest, faults(_.copy(killTask = v.toInt)))
      case "--kill-server" :: v :: rest    => parse(rest, faults(_.copy(killServer = v.toInt)))
      case "--pause-ms" :: v :: rest       => parse(rest, faults(_.copy(pauseMs = v.toInt)))
      case other :: _                      => throw new IllegalArgumentException(s"unknown argument $other; $usage")
    }
  }
}

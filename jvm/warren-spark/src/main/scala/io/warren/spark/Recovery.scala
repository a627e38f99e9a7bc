package io.warren.spark

/** How a Warren job on Spark survives a lost worker (`spark.warren.recovery`). */
sealed abstract class Recovery(
    /** The setting's value. */
    val name: String
)

/** The recovery strategies and the parsing of their settings. */
object Recovery {

  /** Spark re-runs only the failed task; it catches up from its peers (a normal stage). */
  case object RetryOne extends Recovery("retry-one")

  /** Spark re-runs the whole (barrier) stage; every worker resumes from the last durable
    * checkpoint in `spark.warren.checkpointDir`.
    */
  case object FailAll extends Recovery("fail-all")

  /** The Spark strategy of the runner's one.
    *
    * @param r the engine-neutral strategy
    * @return the same strategy
    */
  def of(r: io.warren.runner.Recovery): Recovery = r match {
    case io.warren.runner.Recovery.RETRY_ONE => RetryOne
    case io.warren.runner.Recovery.FAIL_ALL  => FailAll
  }

  /** Parses `spark.warren.recovery`.
    *
    * @param value the setting (absent: retry-one)
    * @return the strategy
    * @throws WarrenSparkException if the value is neither `retry-one` nor `fail-all`
    */
  def parse(value: Option[String]): Recovery = value.map(_.trim.toLowerCase) match {
    case None | Some("retry-one") => RetryOne
    case Some("fail-all")         => FailAll
    case Some(other) =>
      throw new WarrenSparkException(s"spark.warren.recovery=$other: must be retry-one or fail-all", null)
  }
}

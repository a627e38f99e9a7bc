package io.warren.spark

import java.io.File
import java.net.URI
import java.util.UUID

import scala.util.Try

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

  /** The directory one fail-all run writes its durable checkpoints to: a new subdirectory of
    * `spark.warren.checkpointDir`, so that a run never resumes from another run's files.
    *
    * Only local paths (or `file:` URIs) work: the native library writes the files with POSIX
    * I/O from each executor, so on a cluster of several machines the directory must be on a
    * file system shared by every executor and mounted at the same path (NFS, say).
    *
    * @param setting `spark.warren.checkpointDir`
    * @param appId the Spark application id (part of the subdirectory's name)
    * @return the absolute path of the run's directory (not created yet)
    * @throws WarrenSparkException if the setting is missing or names a non-local file system
    */
  def runDirectory(setting: Option[String], appId: String): String = {
    val raw = setting.map(_.trim).filter(_.nonEmpty).getOrElse {
      throw new WarrenSparkException(
        "spark.warren.recovery=fail-all needs spark.warren.checkpointDir: a directory every executor " +
          "can read and write, where each worker's durable checkpoints go",
        null
      )
    }
    val scheme = Try(new URI(raw)).toOption.flatMap(u => Option(u.getScheme))
    val local = scheme match {
      case None | Some("file") => new File(if (scheme.isDefined) new URI(raw).getPath else raw)
      case Some(s) if s.length == 1 => new File(raw) // a Windows drive letter
      case Some(s) =>
        throw new WarrenSparkException(
          s"spark.warren.checkpointDir=$raw: the $s: file system is not supported; the native library " +
            "writes checkpoints with POSIX file I/O, so use a local path or file: URI (on a cluster, a " +
            "directory of a shared file system mounted at the same path on every executor)",
          null
        )
    }
    val safeApp = appId.replaceAll("[^A-Za-z0-9._-]", "_")
    new File(local.getAbsoluteFile, s"warren-$safeApp-${UUID.randomUUID()}").getPath
  }

  /** Removes a run's directory and the checkpoint files in it (best effort).
    *
    * @param dir what [[runDirectory]] returned
    */
  def removeRunDirectory(dir: String): Unit = {
    val d = new File(dir)
    Option(d.listFiles()).foreach(_.foreach(_.delete()))
    d.delete()
  }
}

package io.warren.spark

import java.io.File
import java.util.UUID

import scala.jdk.OptionConverters._

import io.warren.runner.CheckpointDirs
import org.apache.hadoop.fs.Path

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

  /** The directory one fail-all run writes its durable checkpoints to: a new subdirectory of
    * `spark.warren.checkpointDir`, so that a run never resumes from another run's files.
    *
    * A local path or `file:` URI is written by the native library itself, with POSIX file I/O,
    * from each executor: on a cluster of several machines it must be on a file system shared by
    * every executor and mounted at the same path (NFS, say). Any other scheme (`hdfs:`, `s3a:`,
    * `viewfs:`, ...) is reached through Hadoop's `FileSystem` API with the driver's Hadoop
    * configuration: each task stages its checkpoints in a local directory and copies them
    * to and from this one (see warren-runner's `HadoopCheckpoints`).
    *
    * @param setting `spark.warren.checkpointDir`
    * @param appId the Spark application id (part of the subdirectory's name)
    * @return the run's directory (not created yet): an absolute local path, or a URI
    * @throws WarrenSparkException if the setting is missing or not a valid path
    */
  def runDirectory(setting: Option[String], appId: String): String = {
    val raw = setting.map(_.trim).filter(_.nonEmpty).getOrElse {
      throw new WarrenSparkException(
        "spark.warren.recovery=fail-all needs spark.warren.checkpointDir: a directory every executor " +
          "can read and write (a local path of a shared file system, or any Hadoop file system URI " +
          "such as hdfs://namenode:8020/dir), where each worker's durable checkpoints go",
        null
      )
    }
    val safeApp = appId.replaceAll("[^A-Za-z0-9._-]", "_")
    val name = s"warren-$safeApp-${UUID.randomUUID()}"
    CheckpointDirs.localDirectory(raw).toScala match {
      case Some(local) => new File(local.getAbsoluteFile, name).getPath
      case None =>
        try new Path(new Path(raw), name).toString
        catch {
          case e: IllegalArgumentException =>
            throw new WarrenSparkException(s"spark.warren.checkpointDir=$raw is not a valid path: ${e.getMessage}", e)
        }
    }
  }

  /** Removes a local run's directory and the checkpoint files in it (best effort; a remote
    * one is removed by warren-runner's `HadoopCheckpoints.RunDirectory.close`).
    *
    * @param dir what [[runDirectory]] returned for a local path
    */
  def removeRunDirectory(dir: String): Unit = CheckpointDirs.removeLocal(new File(dir))
}

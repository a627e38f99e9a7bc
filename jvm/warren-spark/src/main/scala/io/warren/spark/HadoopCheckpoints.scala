package io.warren.spark

import java.io.{File, IOException, UncheckedIOException}
import java.net.URI
import java.nio.file.{Files, Path => LocalPath, StandardCopyOption}
import java.util.UUID
import java.util.concurrent.{Callable, ExecutionException, FutureTask, TimeUnit, TimeoutException}

import scala.util.control.NonFatal

import io.warren.{CheckpointListener, Communicator}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path, StreamCapabilities}
import org.slf4j.LoggerFactory

/** Fail-all's durable checkpoints on a file system the native library cannot write itself
  * (`hdfs:`, `s3a:`, `viewfs:`, ... : any scheme but a local path or `file:`), through Hadoop's
  * `FileSystem` API.
  *
  * The native library still writes and reads the files (`warren-ckpt-rank{r}-v{v}.bin`, see
  * `native/warren/src/engine/checkpoint.rs`), in a local staging directory of each task; this
  * copies them between it and the run's remote directory:
  *
  *  - before the worker loads its checkpoint, its rank's two newest remote versions are
  *    downloaded into the staging directory ([[Staging.download]]);
  *  - after each checkpoint whose version is a multiple of `durableEvery`, the file the
  *    native library has just written is uploaded under a temporary name and renamed, so a
  *    half-written file is never read, and the version `2 * durableEvery` older is deleted
  *    ([[Staging.checkpointCommitted]], the communicator's checkpoint listener).
  *
  * Why two versions are enough, and why the upload happens synchronously in the listener: on a
  * fresh start the ranks agree on the newest version *every* rank has (the minimum of their
  * newest). The listener runs inside `checkpoint`, before the worker can make its next
  * collective call; committing checkpoint `v + 1` is a collective that needs every rank to
  * have entered it, so no rank can commit (let alone upload) durable version `v + durableEvery`
  * before every rank has returned from checkpoint `v`, i.e. finished uploading `v` (a rank whose
  * upload fails throws and never gets there). Hence the ranks' newest remote versions differ by
  * at most one durable step, the agreed version is a rank's newest or the one before, and each
  * rank keeps both remotely (it deletes `v - 2 * durableEvery` only after uploading `v`).
  */
private[spark] object HadoopCheckpoints {
  private val log = LoggerFactory.getLogger(getClass)

  /** The default of `spark.warren.checkpointDirTimeout`: seconds the driver's creation (and
    * removal) of a run's directory may take.
    */
  val DefaultDriverTimeoutS = 60.0

  /** Whether `dir` (a `spark.warren.checkpointDir` or a run directory) is written by the
    * native library directly: a path without a scheme, a `file:` URI or a Windows drive letter.
    */
  def isLocal(dir: String): Boolean = localDirectory(dir).isDefined

  /** The directory `dir` names on the local file system, if it is local (see [[isLocal]]).
    *
    * @param dir a `spark.warren.checkpointDir` or a run directory
    * @return the local directory (a `file:` URI's path), or None for another file system
    */
  def localDirectory(dir: String): Option[File] = scheme(dir) match {
    case Some("file")             => Some(new File(new URI(dir).getPath))
    case None                     => Some(new File(dir))
    case Some(s) if s.length == 1 => Some(new File(dir)) // a Windows drive letter
    case _                        => None
  }

  private def scheme(dir: String): Option[String] =
    scala.util.Try(new URI(dir)).toOption.flatMap(u => Option(u.getScheme)).map(_.toLowerCase)

  /** A copy of `conf` whose RPC clients give up quickly: the driver's check must not wait
    * minutes for a namenode that is down (Hadoop's defaults retry a refused connection 10 times
    * a second apart, and a connection timeout 45 times, 20 s each).
    */
  private def impatient(conf: Configuration): Configuration = {
    val c = new Configuration(conf)
    c.setInt("ipc.client.connect.max.retries", 1)
    c.setInt("ipc.client.connect.max.retries.on.timeouts", 1)
    c.setInt("ipc.client.connect.timeout", 10000)
    c.setInt("ipc.client.connect.retry.interval", 200)
    c.setBoolean("dfs.client.retry.policy.enabled", false)
    c.setInt("dfs.client.failover.max.attempts", 1)
    c
  }

  /** The driver's handle on a run's remote directory: created by [[create]], removed by
    * [[close]]. Its file system instance is its own (not Hadoop's shared cache) and impatient.
    */
  final class RunDirectory private[HadoopCheckpoints] (val dir: String, fs: FileSystem, timeoutS: Double)
      extends AutoCloseable {

    /** Removes the directory and every checkpoint in it (best effort, bounded in time), then
      * closes the file system instance.
      */
    override def close(): Unit = {
      try timed(s"removing $dir", timeoutS) { fs.delete(new Path(dir), true) }
      catch { case NonFatal(e) => log.warn(s"could not remove the checkpoint directory $dir: $e") }
      try fs.close()
      catch { case NonFatal(_) => }
    }
  }

  /** Creates the run's directory on the driver, before any task starts, within `timeoutS`
    * seconds.
    *
    * @param setting `spark.warren.checkpointDir` (for the message)
    * @param dir the run's directory (a subdirectory of `setting`)
    * @param conf the driver's Hadoop configuration
    * @param timeoutS the most seconds it may take (`spark.warren.checkpointDirTimeout`)
    * @return the handle that removes it
    * @throws WarrenSparkException naming the directory and the cause if it cannot be created
    */
  def create(setting: String, dir: String, conf: Configuration, timeoutS: Double): RunDirectory = {
    @volatile var fs: FileSystem = null
    try {
      timed(s"creating $dir", timeoutS) {
        fs = FileSystem.newInstance(new URI(dir), impatient(conf))
        if (!fs.mkdirs(new Path(dir))) throw new IOException(s"mkdirs returned false")
        fs.getFileStatus(new Path(dir)) // it really is there
      }
      new RunDirectory(dir, fs, timeoutS)
    } catch {
      case NonFatal(e) =>
        if (fs != null) {
          try fs.close()
          catch { case NonFatal(_) => }
        }
        val cause = e match {
          case t: TimeoutException => t.getMessage
          case _                   => rootCause(e)
        }
        throw new WarrenSparkException(
          s"spark.warren.checkpointDir=$setting: cannot create the fail-all run directory $dir through " +
            s"Hadoop's FileSystem (it must be reachable from the driver and every executor): $cause",
          e
        )
    }
  }

  /** Runs `body` in a daemon thread and waits at most `timeoutS` seconds (then interrupts it). */
  private def timed[A](what: String, timeoutS: Double)(body: => A): A = {
    val task = new FutureTask[A](new Callable[A] { def call(): A = body })
    val t = new Thread(task, "warren-checkpoint-dir")
    t.setDaemon(true)
    t.start()
    try task.get((timeoutS * 1000).toLong, TimeUnit.MILLISECONDS)
    catch {
      case e: ExecutionException => throw e.getCause
      case _: TimeoutException =>
        task.cancel(true)
        throw new TimeoutException(
          s"$what took over $timeoutS s (spark.warren.checkpointDirTimeout); is the file system reachable?"
        )
    }
  }

  private def rootCause(e: Throwable): String = {
    var c = e
    while (c.getCause != null && (c.getCause ne c)) c = c.getCause
    if (c eq e) e.toString else s"$e (cause: $c)"
  }

  /** One task's local staging directory for a remote run directory: the native library's
    * `WARREN_CHECKPOINT_DIR`. Create it before the communicator, [[download]] after it (the rank
    * is known then) and before the worker loads its checkpoint, install it as the checkpoint
    * listener, and [[close]] it in `finally`.
    *
    * @param remote the run's remote directory
    * @param conf the Hadoop configuration (the driver's, shipped to the task)
    * @param durableEvery `spark.warren.durableEvery` (at least 1)
    * @param localBase where to create the staging directory (the executor's local directory)
    */
  final class Staging(remote: String, conf: Configuration, durableEvery: Int, localBase: File)
      extends CheckpointListener
      with AutoCloseable {
    require(durableEvery >= 1, s"durableEvery $durableEvery")

    /** The local directory to pass as `WARREN_CHECKPOINT_DIR`. */
    val local: LocalPath = {
      localBase.mkdirs()
      Files.createTempDirectory(localBase.toPath, "warren-ckpt-")
    }
    private val remoteDir = new Path(remote)
    // The shared (cached) instance, with the configuration's own retries: not closed here,
    // other users in this executor may hold it.
    private lazy val fs = remoteDir.getFileSystem(conf)
    @volatile private var rank = -1

    private def name(v: Int) = s"warren-ckpt-rank$rank-v$v.bin"

    /** Downloads this rank's two newest durable checkpoints from the remote directory (the
      * ranks' newest may differ by one durable version, see [[HadoopCheckpoints]]).
      *
      * @param comm the task's communicator (for its rank)
      * @return the versions downloaded, newest first
      * @throws IOException if the remote directory cannot be listed or a file copied
      */
    def download(comm: Communicator): Seq[Int] = {
      rank = comm.rank()
      val prefix = s"warren-ckpt-rank$rank-v"
      val versions = fs
        .listStatus(remoteDir)
        .iterator
        .map(_.getPath.getName)
        .filter(n => n.startsWith(prefix) && n.endsWith(".bin"))
        .flatMap(n => n.stripPrefix(prefix).stripSuffix(".bin").toIntOption)
        .toSeq
        .sorted(Ordering[Int].reverse)
        .take(2)
      for (v <- versions) {
        val tmp = local.resolve(name(v) + ".part")
        val in = fs.open(new Path(remoteDir, name(v)))
        try Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING)
        finally in.close()
        Files.move(tmp, local.resolve(name(v)), StandardCopyOption.ATOMIC_MOVE)
      }
      if (versions.nonEmpty) {
        log.info(s"rank $rank: downloaded durable checkpoint(s) ${versions.mkString(", ")} from $remote")
      }
      versions
    }

    /** After each checkpoint: uploads a durable version to the remote directory (temporary
      * name, synced where the file system can, then renamed), then deletes the version
      * `2 * durableEvery` older there. Synchronous: see [[HadoopCheckpoints]] for why.
      *
      * @param version the version just committed
      * @throws UncheckedIOException if the upload fails (the task fails, and fail-all re-runs the
      *   stage from the previous durable version)
      */
    override def checkpointCommitted(version: Int): Unit = if (version % durableEvery == 0) {
      require(rank >= 0, "download() was not called")
      val file = local.resolve(name(version))
      val dst = new Path(remoteDir, name(version))
      val tmp = new Path(remoteDir, s".${name(version)}.${UUID.randomUUID()}.tmp")
      try {
        val out = fs.create(tmp, true)
        try {
          Files.copy(file, out)
          if (out.hasCapability(StreamCapabilities.HSYNC)) out.hsync()
        } finally out.close()
        // A re-run after a failure writes again versions an earlier attempt wrote (the same
        // bytes): FileSystem.rename does not replace an existing file.
        if (!fs.rename(tmp, dst)) {
          fs.delete(dst, false)
          if (!fs.rename(tmp, dst)) throw new IOException(s"cannot rename $tmp to $dst")
        }
      } catch {
        case e: IOException =>
          try fs.delete(tmp, false)
          catch { case NonFatal(x) => e.addSuppressed(x) }
          throw new UncheckedIOException(s"rank $rank: uploading durable checkpoint $version to $dst failed: $e", e)
      }
      val old = version - 2 * durableEvery
      if (old > 0) {
        try fs.delete(new Path(remoteDir, name(old)), false)
        catch { case NonFatal(e) => log.warn(s"rank $rank: could not delete old checkpoint $old in $remote: $e") }
      }
    }

    /** Removes the local staging directory and its files. */
    override def close(): Unit = {
      Option(local.toFile.listFiles()).foreach(_.foreach(_.delete()))
      local.toFile.delete()
    }
  }
}

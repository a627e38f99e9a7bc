package io.warren.examples

import java.nio.file.Files
import java.util.concurrent.{ConcurrentHashMap, TimeUnit}

import scala.jdk.CollectionConverters._

import io.warren.examples.FaultHarness.{Failure, Faults}
import io.warren.examples.LogisticRegression.{Params, Result}
import io.warren.spark.{WarrenSpark, WarrenSparkException}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.permission.FsPermission
import org.apache.hadoop.fs.{FileSystem, Path, RawLocalFileSystem}
import org.apache.hadoop.hdfs.MiniDFSCluster
import org.apache.spark.{SparkContext, WarrenSlots}
import org.junit.jupiter.api.Assertions.{assertEquals, assertFalse, assertThrows, assertTrue}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** Fail-all recovery with `spark.warren.checkpointDir` on a real HDFS: a `MiniDFSCluster`
  * (a namenode and one datanode on 127.0.0.1) in this JVM, the driver's, and
  * `local-cluster[3,1,1024]`, whose executor JVMs reach it with the Hadoop client in Spark's
  * jars. One SparkContext and one HDFS for every case.
  *
  * The checkpoints go through Hadoop's FileSystem API (`HadoopCheckpoints`): each task stages
  * them in a local directory and copies each durable one to HDFS, and a re-run stage downloads
  * them from there. A recovered run must end with the failure-free model bit for bit, resuming
  * from the durable version the injected failure implies; the files must really have been in
  * HDFS during the run, and the run's directory must be gone after it.
  */
@TestInstance(Lifecycle.PER_CLASS)
@TestMethodOrder(classOf[MethodOrderer.MethodName])
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class HdfsCheckpointClusterTest {
  private val workers = 3
  private var hdfs: MiniDFSCluster = _
  private var fs: FileSystem = _
  private var root: String = _
  private var sc: SparkContext = _
  private val counts = new TaskCounts
  private val params = Params(workers = workers, rows = 30000, features = 20, iters = 12)
  private lazy val clean = LogisticRegression.run(sc, params)

  @BeforeAll
  def start(): Unit = {
    val base = Files.createTempDirectory("warren-minidfs").toFile
    val conf = new Configuration()
    conf.set("dfs.replication", "1")
    hdfs = new MiniDFSCluster.Builder(conf, base).numDataNodes(1).build()
    hdfs.waitActive()
    fs = hdfs.getFileSystem
    root = s"hdfs://127.0.0.1:${hdfs.getNameNodePort}"
    sc = LocalCluster.start(workers, "warren-hdfs-checkpoint-test")
    // The tasks get the driver's Hadoop configuration: one datanode, so one replica.
    sc.hadoopConfiguration.set("dfs.replication", "1")
    sc.addSparkListener(counts)
  }

  @AfterAll
  def stop(): Unit = {
    try if (sc != null) sc.stop()
    finally if (hdfs != null) hdfs.shutdown(true)
  }

  @BeforeEach
  def fullCluster(): Unit = {
    counts.reset(sc, workers)
  }

  /** Lists every file under `dir` on HDFS every 20 ms while `body` runs, and returns their
    * names (relative to `dir`) with what `body` returned.
    */
  private def watching[A](dir: String)(body: => A): (A, Set[String]) = {
    val seen = ConcurrentHashMap.newKeySet[String]()
    @volatile var running = true
    val watcher = new Thread(() => {
      while (running) {
        try {
          val files = fs.listFiles(new Path(dir), true)
          while (files.hasNext) {
            val p = files.next().getPath
            seen.add(s"${p.getParent.getName}/${p.getName}")
          }
        } catch { case _: java.io.IOException => } // the run's directory was just removed
        Thread.sleep(20)
      }
    }, "hdfs-watcher")
    watcher.setDaemon(true)
    watcher.start()
    try {
      val r = body
      (r, seen.asScala.toSet)
    } finally {
      running = false
      watcher.join(5000)
    }
  }

  /** Runs `p` with fail-all on `dir` in HDFS and checks: the failure-free model, one stage
    * re-run, rank 0 resumed from `resumedFrom`, every rank's durable files were in HDFS (under
    * the run's own subdirectory), and nothing is left in `dir` afterwards.
    */
  private def failAll(what: String, dir: String, p: Params, resumedFrom: Int, durableEvery: Int): Result = {
    val want = clean
    WarrenSlots.drainListeners(sc, 5000)
    counts.failed.set(0)
    counts.stageReruns.set(0)
    val (r, seen) = watching(dir) {
      LogisticRegression.run(
        sc,
        p.copy(conf = p.conf ++ Map(
          "recovery" -> "fail-all",
          "checkpointDir" -> s"$root$dir",
          "durableEvery" -> durableEvery.toString
        ))
      )
    }
    WarrenSlots.drainListeners(sc, 5000)
    println(
      f"LR $what: ${r.seconds}%.2f s (clean ${want.seconds}%.2f s), resumed from ${r.startVersion}; " +
        s"seen in HDFS: ${seen.filterNot(_.contains("/.")).map(_.dropWhile(_ != '/').drop(1)).toSeq.sorted.mkString(" ")}"
    )
    assertEquals(want.modelHash, r.modelHash, s"$what: the model differs from the failure-free run's")
    assertEquals(want.losses.toSeq, r.losses.toSeq, what)
    assertTrue(counts.failed.get() >= 1, s"$what: ${counts.failed.get()} failed task attempts")
    assertEquals(1, counts.stageReruns.get(), s"$what: Spark re-ran the barrier stage once")
    assertEquals(resumedFrom, r.startVersion, s"$what: rank 0 of the re-run resumed from durable checkpoint $resumedFrom")
    val files = seen.filter(_.endsWith(".bin")).filterNot(_.contains("/."))
    assertEquals(1, files.map(_.takeWhile(_ != '/')).size, s"$what: one run directory: $files")
    assertTrue(files.head.startsWith("warren-"), s"$what: the run directory's name: $files")
    // The version resumed from stays in HDFS from the failure until the re-run has gone two
    // durable versions past it (others may come and go between two listings).
    for (rank <- 0 until workers) {
      assertTrue(
        files.exists(_.endsWith(s"/warren-ckpt-rank$rank-v$resumedFrom.bin")),
        s"$what: rank $rank's durable checkpoint $resumedFrom was never seen in HDFS: ${files.toSeq.sorted}"
      )
    }
    assertTrue(
      !files.exists(f => (1 to p.iters).filter(_ % durableEvery != 0).exists(v => f.endsWith(s"-v$v.bin"))),
      s"$what: only every ${durableEvery}th checkpoint is durable: ${files.toSeq.sorted}"
    )
    assertEquals(Seq.empty, fs.listStatus(new Path(dir)).map(_.getPath.getName).toSeq, s"$what: the run directory is removed")
    r
  }

  @Test
  def a_aHaltedExecutorResumesFromTheDurableCheckpointInHdfs(): Unit = {
    // Rank 1's executor halts at the start of iteration 7, after checkpoint 7 (not durable with
    // durableEvery 2): every rank had uploaded version 6 before any rank could commit 7.
    val halt = params.copy(hooks = Faults(failures = Seq(Failure(1, 7, halt = true))))
    failAll("fail-all on HDFS, a halted executor", "/ckpt-a", halt, resumedFrom = 6, durableEvery = 2)
  }

  @Test
  def b_aThrownTaskResumesFromTheDurableCheckpointInHdfs(): Unit = {
    // Rank 2 throws at the start of iteration 5 (after checkpoint 5): durable versions 3, 6, 9, 12.
    val thrown = params.copy(hooks = Faults(failures = Seq(Failure(2, 5))))
    failAll("fail-all on HDFS, a thrown task", "/ckpt-b", thrown, resumedFrom = 3, durableEvery = 3)
  }

  @Test
  def c_anUnreachableNamenodeFailsBeforeAnyTaskStarts(): Unit = {
    val rdd = sc.parallelize(0 until workers, workers)
    val started = System.nanoTime()
    val e = assertThrows(
      classOf[WarrenSparkException],
      () =>
        WarrenSpark.train(rdd, workers, Map("recovery" -> "fail-all", "checkpointDir" -> "hdfs://127.0.0.1:1/x"))(
          (c, _) => c.rank()
        )
    )
    val seconds = (System.nanoTime() - started) / 1e9
    println(f"unreachable namenode: failed after $seconds%.2f s: ${e.getMessage}")
    assertTrue(e.getMessage.contains("spark.warren.checkpointDir=hdfs://127.0.0.1:1/x"), e.getMessage)
    assertTrue(e.getMessage.contains("cannot create the fail-all run directory hdfs://127.0.0.1:1/x/warren-"), e.getMessage)
    assertTrue(e.getMessage.contains("Connection refused"), e.getMessage)
    assertTrue(seconds < 20, s"the check took $seconds s")
    WarrenSlots.drainListeners(sc, 5000)
    assertEquals(0, counts.started.get(), "no task started")
    assertFalse(counts.failed.get() > 0, "no task failed")
  }

  @Test
  def d_aHangingFileSystemIsCutOffAtTheTimeout(): Unit = {
    // Driver side only: the check runs before any task, so the executors need not know "hang:".
    sc.hadoopConfiguration.set("fs.hang.impl", classOf[HangingFileSystem].getName)
    try {
      val rdd = sc.parallelize(0 until workers, workers)
      val conf = Map("recovery" -> "fail-all", "checkpointDir" -> "hang:///x", "checkpointDirTimeout" -> "2")
      val started = System.nanoTime()
      val e = assertThrows(classOf[WarrenSparkException], () => WarrenSpark.train(rdd, workers, conf)((c, _) => c.rank()))
      val seconds = (System.nanoTime() - started) / 1e9
      println(f"hanging file system: failed after $seconds%.2f s: ${e.getMessage}")
      assertTrue(e.getMessage.contains("cannot create the fail-all run directory hang:/x/warren-"), e.getMessage)
      assertTrue(e.getMessage.contains("took over 2.0 s (spark.warren.checkpointDirTimeout)"), e.getMessage)
      assertTrue(seconds >= 2 && seconds < 10, s"the check took $seconds s")
      WarrenSlots.drainListeners(sc, 5000)
      assertEquals(0, counts.started.get(), "no task started")
    } finally sc.hadoopConfiguration.unset("fs.hang.impl")
  }

  @Test
  def e_aFailureFreeRunOnHdfsEndsWithTheSameModelAsOnALocalDirectory(): Unit = {
    val want = clean // first: the context's first job also warms up the executors
    val local = Files.createTempDirectory("warren-fail-all")
    try {
      def run(dir: String) = LogisticRegression.run(
        sc,
        params.copy(conf = params.conf ++ Map("recovery" -> "fail-all", "checkpointDir" -> dir))
      )
      val onDisk = run(local.toString)
      val (onHdfs, seen) = watching("/ckpt-e")(run(s"$root/ckpt-e"))
      // Per checkpoint (durableEvery 1): the upload's create, write, hsync, close, rename and
      // delete on HDFS against the native library's write, fsync and rename on local disk.
      println(
        f"LR fail-all without failures, ${params.iters} durable checkpoints of ${workers} workers: " +
          f"local directory ${onDisk.seconds}%.2f s, HDFS ${onHdfs.seconds}%.2f s " +
          f"(${(onHdfs.seconds - onDisk.seconds) / params.iters * 1000}%.1f ms more per iteration)"
      )
      for (r <- Seq(onDisk, onHdfs)) {
        assertEquals(want.modelHash, r.modelHash)
        assertEquals(0, r.startVersion)
      }
      for (rank <- 0 until workers) {
        assertTrue(seen.exists(_.contains(s"/warren-ckpt-rank$rank-v")), s"no file of rank $rank seen in HDFS: $seen")
      }
      assertEquals(Seq.empty, fs.listStatus(new Path("/ckpt-e")).toSeq, "the run directory is removed")
      assertEquals(0, counts.failed.get())
    } finally {
      Option(local.toFile.listFiles()).foreach(_.foreach(d => { Option(d.listFiles()).foreach(_.foreach(_.delete())); d.delete() }))
      local.toFile.delete()
    }
  }
}

/** A Hadoop file system (scheme `hang:`, registered by `fs.hang.impl`) whose `mkdirs` hangs
  * until interrupted: a namenode that accepts connections and never answers.
  */
class HangingFileSystem extends RawLocalFileSystem {
  override def getScheme: String = "hang"
  override def mkdirs(f: Path): Boolean = {
    Thread.sleep(300000)
    false
  }
  override def mkdirs(f: Path, permission: FsPermission): Boolean = mkdirs(f)
}

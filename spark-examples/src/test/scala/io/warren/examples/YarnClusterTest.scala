package io.warren.examples

import java.io.{BufferedReader, File, InputStream, InputStreamReader}
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}
import java.util.concurrent.TimeUnit
import java.util.jar.JarOutputStream
import java.util.regex.{Matcher, Pattern}

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.yarn.conf.YarnConfiguration
import org.apache.hadoop.yarn.server.MiniYARNCluster
import org.junit.jupiter.api.Assertions.{assertEquals, assertFalse, assertTrue, fail}
import org.junit.jupiter.api.TestInstance.Lifecycle
import org.junit.jupiter.api._

/** The logistic-regression example on YARN: a real ResourceManager and NodeManager
  * (`MiniYARNCluster`, from `hadoop-client-minicluster` 3.5.0, the Hadoop of Spark 4.3's jars) in
  * this JVM, their configuration in a `HADOOP_CONF_DIR`, and the job started as users start it,
  * `spark-submit --master yarn --deploy-mode client` in a process of its own, with three
  * executors in containers of one core each. Spark's jars come from `$SPARK_HOME/jars` on this
  * machine (`spark.yarn.jars=local:...`), so nothing large is uploaded.
  *
  * With one executor container's JVM SIGKILLed from outside a few checkpoints in, YARN
  * reports the container lost, Spark asks for a new one, the lost task alone runs again there
  * and recovers from its peers (retry-one), the other two executors stay, and the job ends with
  * the demo's recorded `MODEL_HASH`, the model of a run without failures. With
  * `-Dwarren.yarn.measure=true` the test first runs the job without failures on YARN too (same
  * hash) and prints the time the lost container added.
  */
@TestInstance(Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class YarnClusterTest {
  private val executors = 3
  private val Backend = "org.apache.spark.executor.YarnCoarseGrainedExecutorBackend"
  private var yarn: MiniYARNCluster = _
  private var base: Path = _
  private var confDir: Path = _
  private var home: String = _
  // The demo's job (spark-examples/demo-model-hash.txt), with a pause after each checkpoint
  // that leaves time to kill an executor from outside (the model is the same).
  private val (demoArgs, demoHash) = {
    val lines = Files.readAllLines(Paths.get("demo-model-hash.txt")).asScala.filterNot(l => l.startsWith("#") || l.isBlank)
    def field(k: String) = lines.find(_.startsWith(k + " ")).map(_.drop(k.length + 1).trim).get
    (field("args").split(" ").toSeq, field("hash"))
  }
  private val jobArgs = demoArgs ++ Seq("--pause-ms", "250")

  @BeforeAll
  def start(): Unit = {
    home = sys.env.getOrElse("SPARK_HOME", throw new IllegalStateException("SPARK_HOME is not set"))
    base = Files.createTempDirectory("warren-yarn")
    val conf = new YarnConfiguration()
    // The shaded minicluster has no capacity-scheduler.xml: one queue with everything.
    conf.set("yarn.scheduler.capacity.root.queues", "default")
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100")
    conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100")
    conf.set("yarn.scheduler.capacity.root.default.user-limit-factor", "1")
    conf.set("yarn.scheduler.capacity.root.default.state", "RUNNING")
    conf.set("yarn.scheduler.capacity.root.default.acl_submit_applications", "*")
    conf.set("yarn.scheduler.capacity.root.default.acl_administer_queue", "*")
    conf.set("yarn.scheduler.capacity.node-locality-delay", "-1")
    // The AM and 3 executors (512 MiB + 384 MiB overhead each, one vcore) and a replacement.
    conf.set("yarn.nodemanager.resource.memory-mb", "6144")
    conf.set("yarn.nodemanager.resource.cpu-vcores", "8")
    conf.set("yarn.scheduler.minimum-allocation-mb", "128")
    conf.set("yarn.scheduler.maximum-allocation-mb", "2048")
    conf.set("yarn.scheduler.minimum-allocation-vcores", "1")
    conf.set("yarn.nodemanager.pmem-check-enabled", "false")
    conf.set("yarn.nodemanager.vmem-check-enabled", "false")
    // A full disk on a build machine must not mark the only node unhealthy.
    conf.set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", "100.0")
    // Keep the containers' logs a while after they end (read when a case fails).
    conf.set("yarn.nodemanager.delete.debug-delay-sec", "600")
    conf.set("fs.defaultFS", "file:///")
    yarn = new MiniYARNCluster("warren-yarn-test", 1, 1, 1)
    yarn.init(conf)
    yarn.start()
    // start() may return before the RM has written its bound address into the configuration.
    val rmConf = yarn.getConfig
    val until = System.nanoTime() + 60e9.toLong
    while (rmConf.get(YarnConfiguration.RM_ADDRESS).split(":")(1) == "0") {
      assertTrue(System.nanoTime() < until, "the ResourceManager did not bind its address in 60 s")
      Thread.sleep(100)
    }
    confDir = Files.createDirectories(base.resolve("hadoop-conf"))
    val out = Files.newOutputStream(confDir.resolve("yarn-site.xml"))
    try rmConf.writeXml(out)
    finally out.close()
    val core = new Configuration(false)
    core.set("fs.defaultFS", "file:///")
    val coreOut = Files.newOutputStream(confDir.resolve("core-site.xml"))
    try core.writeXml(coreOut)
    finally coreOut.close()
    println(s"MiniYARNCluster: ResourceManager at ${rmConf.get(YarnConfiguration.RM_ADDRESS)}, configuration in $confDir")
  }

  @AfterAll
  def stop(): Unit = {
    if (yarn != null) yarn.stop()
    if (base != null) TempDirs.deleteTree(base) // a failed case's output is in its assertion message
  }

  /** A spark-submit process and its output, read as it comes. */
  final class Submitted(val proc: Process, val started: Long, logDir: Path) {
    private val out = new StringBuilder
    private val err = new StringBuilder
    @volatile var wallSeconds = 0.0
    private def drain(in: InputStream, into: StringBuilder, echo: Boolean): Thread = {
      val t = new Thread(() => {
        val r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))
        var line = r.readLine()
        while (line != null) {
          into.synchronized { into.append(line).append('\n'); into.notifyAll() }
          if (echo) System.out.println(s"  | $line")
          line = r.readLine()
        }
        into.synchronized { into.notifyAll() }
      })
      t.setDaemon(true)
      t.start()
      t
    }
    private val readers = Seq(drain(proc.getInputStream, out, echo = false), drain(proc.getErrorStream, err, echo = false))

    def stdout: String = out.synchronized(out.toString)
    def stderr: String = err.synchronized(err.toString)

    /** Waits until `regex` matches the driver's log (stderr) after offset `after`. */
    def waitFor(regex: String, seconds: Double, after: Int = 0): Matcher = {
      val p = Pattern.compile(regex)
      val until = System.nanoTime() + (seconds * 1e9).toLong
      err.synchronized {
        while (true) {
          val m = p.matcher(err)
          if (m.find(after)) return m
          val left = until - System.nanoTime()
          if (left <= 0 || (!proc.isAlive && readers.forall(!_.isAlive)))
            fail(s"no '$regex' in the driver's log within $seconds s (spark-submit ${if (proc.isAlive) "running" else s"exited ${proc.exitValue()}"}):\n${tail(err.toString)}\n${containerLogs()}")
          err.wait(math.max(1, math.min(left / 1000000, 500)))
        }
        throw new IllegalStateException
      }
    }

    /** Waits for spark-submit to exit 0 and returns the example's result lines. */
    def finish(seconds: Long): Map[String, String] = {
      if (!proc.waitFor(seconds, TimeUnit.SECONDS)) {
        proc.destroyForcibly()
        fail(s"spark-submit did not finish in $seconds s:\n${tail(stderr)}\n${containerLogs()}")
      }
      wallSeconds = (System.nanoTime() - started) / 1e9
      readers.foreach(_.join(10000))
      Files.write(logDir.resolve("stdout"), stdout.getBytes(StandardCharsets.UTF_8))
      Files.write(logDir.resolve("stderr"), stderr.getBytes(StandardCharsets.UTF_8))
      println(s"spark-submit's output: $logDir/stdout, $logDir/stderr")
      assertEquals(0, proc.exitValue(), s"spark-submit exited ${proc.exitValue()}:\n${tail(stderr)}\n${containerLogs()}")
      stdout.linesIterator.map(_.split(" ", 2)).collect { case Array(k, v) if k.forall(c => c.isUpper || c == '_') => k -> v.trim }.toMap
    }
  }

  private def tail(s: String): String = s.linesIterator.toSeq.takeRight(80).mkString("\n")

  /** The last lines of every container's stderr, from the NodeManager's log directory. */
  private def containerLogs(): String = {
    val dirs = Option(yarn).toSeq.flatMap(_.getNodeManager(0).getConfig.get(YarnConfiguration.NM_LOG_DIRS, "").split(",").filter(_.nonEmpty))
    dirs.flatMap { d =>
      val root = Paths.get(d)
      if (!Files.isDirectory(root)) Nil
      else Files.walk(root, Int.MaxValue).iterator().asScala.filter(p => p.getFileName.toString == "stderr").toSeq.map { p =>
        s"--- $p\n" + tail(new String(Files.readAllBytes(p), StandardCharsets.UTF_8))
      }
    }.mkString("\n")
  }

  /** Starts the example with spark-submit on the MiniYARNCluster. */
  private def submit(name: String): Submitted = {
    val javaHome = System.getProperty("java.home")
    val cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"))
    // This project's classes and jars, on this machine (the NodeManager runs here): on the
    // driver's and the executors' class paths as they are, nothing uploaded.
    val ours = cp
      .split(File.pathSeparator)
      .filter(e => !e.startsWith(home) && !e.contains("/.spark") && (e.contains("warren") || e.contains("/target/") || e.contains("scala-collection-compat")))
      .filterNot(_.contains("hadoop-client-minicluster"))
      .mkString(File.pathSeparator)
    // spark-submit needs an application jar; the classes are on the class paths above.
    val appJar = base.resolve("app.jar")
    if (!Files.exists(appJar)) new JarOutputStream(Files.newOutputStream(appJar)).close()
    val logDir = Files.createDirectories(base.resolve(name))
    // The driver's log at INFO on stderr, whatever $SPARK_HOME/conf says: the test waits for
    // the application's id, rank 0's progress and the listener's lines there.
    val log4j = base.resolve("log4j2.properties")
    if (!Files.exists(log4j))
      Files.write(log4j, Seq(
        "rootLogger.level = info",
        "rootLogger.appenderRef.stderr.ref = console",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex"
      ).mkString("", "\n", "\n").getBytes(StandardCharsets.UTF_8))
    val settings = Seq(
      "spark.executor.instances" -> executors.toString,
      "spark.executor.cores" -> "1",
      "spark.executor.memory" -> "512m",
      "spark.yarn.am.memory" -> "512m",
      "spark.yarn.am.cores" -> "1",
      "spark.yarn.jars" -> s"local:$home/jars/*",
      "spark.yarn.stagingDir" -> base.resolve("staging").toUri.toString,
      "spark.yarn.appMasterEnv.JAVA_HOME" -> javaHome,
      "spark.executorEnv.JAVA_HOME" -> javaHome,
      "spark.executorEnv.SPARK_LOCAL_IP" -> "127.0.0.1",
      "spark.yarn.appMasterEnv.SPARK_LOCAL_IP" -> "127.0.0.1",
      "spark.driver.host" -> "127.0.0.1",
      "spark.driver.bindAddress" -> "127.0.0.1",
      "spark.driver.extraClassPath" -> ours,
      "spark.driver.extraJavaOptions" -> s"-Dlog4j2.configurationFile=file:$log4j",
      "spark.executor.extraClassPath" -> ours,
      "spark.task.maxFailures" -> "4",
      "spark.dynamicAllocation.enabled" -> "false",
      "spark.ui.enabled" -> "false",
      "spark.warren.connectTimeout" -> "120",
      "spark.warren.timeout" -> "300",
      "spark.warren.progressInterval" -> "0.5"
    )
    val cmd = Seq(s"$home/bin/spark-submit", "--master", "yarn", "--deploy-mode", "client", "--class", "io.warren.examples.LogisticRegression") ++
      settings.flatMap { case (k, v) => Seq("--conf", s"$k=$v") } ++ Seq(appJar.toString) ++ jobArgs
    val pb = new ProcessBuilder(cmd.asJava).directory(logDir.toFile)
    pb.environment().put("SPARK_HOME", home)
    pb.environment().put("HADOOP_CONF_DIR", confDir.toString)
    pb.environment().put("YARN_CONF_DIR", confDir.toString)
    pb.environment().put("SPARK_LOCAL_IP", "127.0.0.1")
    pb.environment().put("JAVA_HOME", javaHome)
    new Submitted(pb.start(), System.nanoTime(), logDir)
  }

  /** The executor JVMs of application `app` on this machine, by executor id. */
  private def executorPids(app: String): Map[String, Long] =
    Option(new File("/proc").listFiles()).toSeq.flatten.filter(_.getName.forall(_.isDigit)).flatMap { d =>
      val args =
        try new String(Files.readAllBytes(d.toPath.resolve("cmdline")), StandardCharsets.UTF_8).split('\u0000').toSeq
        catch { case _: java.io.IOException => Seq.empty }
      if (args.contains(Backend) && args.contains(app)) {
        val i = args.indexOf("--executor-id")
        if (i >= 0 && i + 1 < args.length) Some(args(i + 1) -> d.getName.toLong) else None
      } else None
    }.toMap

  private def alive(pid: Long): Boolean = ProcessHandle.of(pid).map[Boolean](_.isAlive).orElse(false)

  private def failureFree(): Submitted = {
    val job = submit("clean")
    val r = job.finish(240)
    println(f"YARN, failure-free: spark-submit ${job.wallSeconds}%.2f s, TRAIN_SECONDS ${r("TRAIN_SECONDS")}, MODEL_HASH ${r("MODEL_HASH")}")
    assertEquals(demoHash, r("MODEL_HASH"), "the failure-free run on YARN gives the demo's recorded model")
    assertEquals("0", r("RECOVERIES"))
    assertFalse(job.stderr.contains("failed (ExecutorLostFailure"), "no executor was lost")
    job
  }

  @Test
  def aKilledExecutorContainerIsReplacedAndItsTaskRecoversFromItsPeers(): Unit = {
    val want = if (java.lang.Boolean.getBoolean("warren.yarn.measure")) Some(failureFree()) else None
    def trainSeconds(out: String) =
      out.linesIterator.collect { case l if l.startsWith("TRAIN_SECONDS ") => l.drop(14).toDouble }.next()
    val job = submit("killed")
    try {
      val app = job.waitFor("""Submitted application (application_\d+_\d+)""", 120).group(1)
      // A few checkpoints in: rank 0's progress line shows version 3 or later.
      var m = job.waitFor("""\[rank 0\] progress: .*checkpoint version ([3-9]|\d\d+)""", 180)
      val before = executorPids(app)
      assertEquals(executors, before.size, s"the executors' JVMs of $app: $before")
      val (victimId, victim) = before.toSeq.minBy(_._1.toInt)
      val killedAt = System.nanoTime()
      Runtime.getRuntime.exec(Array("kill", "-KILL", victim.toString)).waitFor()
      println(s"SIGKILLed executor $victimId (pid $victim) of $app")
      m = job.waitFor(s"""task of partition (\\d+) attempt 0 failed \\(ExecutorLostFailure \\(executor $victimId exited""", 120, m.end())
      val partition = m.group(1)
      val lostAt = System.nanoTime()
      m = job.waitFor(s"""task of partition $partition re-run \\(attempt 1\\) on executor (\\d+)""", 120, m.end())
      val newExecutor = m.group(1)
      val rerunAt = System.nanoTime()
      // The other two executors were not restarted: the same JVMs still run their tasks.
      val others = before - victimId
      assertTrue(others.values.forall(alive), s"the other executors' JVMs $others lived on")
      m = job.waitFor(s"""task of partition $partition attempt 1 finished: re-run and recovered from its peers""", 180, m.end())
      val r = job.finish(240)
      val train = r("TRAIN_SECONDS").toDouble
      val against = want.fold("") { w =>
        val base = trainSeconds(w.stdout)
        f" (failure-free: spark-submit ${w.wallSeconds}%.2f s, TRAIN_SECONDS $base%.3f): the lost container added ${train - base}%.2f s"
      }
      println(
        f"YARN, executor $victimId's container killed: its task re-run on new executor $newExecutor " +
          f"${(rerunAt - killedAt) / 1e9}%.2f s after the kill (the loss seen by the driver after ${(lostAt - killedAt) / 1e9}%.2f s); " +
          f"spark-submit ${job.wallSeconds}%.2f s, TRAIN_SECONDS $train%.3f$against"
      )
      assertEquals(demoHash, r("MODEL_HASH"), "the recovered run gives the failure-free model")
      // RECOVERIES is rank 0's count of recoveries it served: none if rank 0 was the lost task.
      if (partition != "0") assertTrue(r("RECOVERIES").toInt >= 1, s"rank 0 re-linked ${r("RECOVERIES")} times")
      val err = job.stderr
      assertEquals(1, "attempt \\d+ failed \\(".r.findAllIn(err).size, s"one failed task attempt:\n${tail(err)}")
      assertEquals(1, "re-run and recovered from its peers".r.findAllIn(err).size, "one re-run task")
      assertFalse(newExecutor == victimId || others.contains(newExecutor), s"the re-run ran on a new executor, $newExecutor")
      assertTrue(err.contains("1 re-run task(s) recovered from peers"), tail(err))
      // One container more than the failure-free run: the killed one's replacement.
      val registered = "Registered executor .* with ID (\\d+)".r.findAllMatchIn(err).map(_.group(1)).toSeq
      assertEquals(Seq("1", "2", "3", newExecutor).sorted, registered.sorted, s"executors registered: $registered")
    } finally if (job.proc.isAlive) job.proc.destroyForcibly()
  }
}

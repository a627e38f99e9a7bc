package io.warren.spark

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters._

import io.warren.runner.{RunnerSettings, Setting}
import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

/** [[WarrenConf]] and [[PsConf]]: their defaults are the declared ones, and every field maps to
  * a declared `spark.warren.*` setting and back.
  */
class WarrenConfTest {

  /** Every declared setting, keyed with the prefix. */
  private val declared: Map[String, Setting[_]] =
    (RunnerSettings.ALL.asScala.toSeq ++ ElasticSettings.All ++ PsSettings.All).map(s => (WarrenSettings.Prefix + s.name) -> s).toMap

  /** A value of every field other than its default. */
  private val changed = WarrenConf(
    recovery = Recovery.FailAll,
    checkpointDir = Some("/tmp/ckpt"),
    durableEvery = 3,
    checkpointDirTimeout = 90.seconds,
    timeout = 1500.millis,
    connectTimeout = 2.minutes,
    peerTimeout = Duration.Zero,
    bootstrapCache = false,
    localReplicas = 1,
    reductionOrder = "hosts",
    tls = true,
    tlsCa = Some("/pki/ca.pem"),
    tlsCert = Some("/pki/c.pem"),
    tlsKey = Some("/pki/k.pem"),
    trackerHost = Some("10.0.0.1"),
    rendezvousTimeout = 20.seconds,
    slotWaitTimeout = 2500.millis,
    progressInterval = Duration.Zero,
    elastic = true,
    minWorkers = 2,
    rejoinTimeout = 250.millis,
    ps = PsConf(
      servers = "process",
      checkpointDir = Some("/tmp/ps"),
      checkpointEvery = 5,
      host = Some("10.0.0.2"),
      pullTimeout = 1.second,
      connectTimeout = 3.seconds,
      callTimeout = 4.seconds,
      threads = 4
    ),
    workerSettings = Map("WARREN_LOG" -> "debug")
  )

  @Test
  def theDefaultsAreTheDeclaredOnesAndMapToNothing(): Unit = {
    assertEquals(Map.empty, WarrenConf().toMap)
    assertEquals(Map.empty, PsConf().toMap)
    assertEquals(WarrenConf(), WarrenConf.fromMap(Map.empty))
    for ((key, value) <- WarrenConf().values if !key.startsWith(WarrenSettings.Prefix + RunnerSettings.PASS_THROUGH)) {
      val s = declared.getOrElse(key, throw new AssertionError(s"$key is not a declared setting"))
      // The declared default, else the documented one when it is a number, a boolean or a
      // choice (a text setting's documented default is prose: "the driver's host").
      val documented = if (s.kind.expected == "a non-empty string") None else s.kind.parse(s.defaultDoc.replace("`", "")).toScala
      val default = Option(s.defaultValue).orElse(documented)
      assertEquals(default, value.map(s.parse(_, WarrenSettings.Prefix)), s"the default of $key")
    }
  }

  @Test
  def everyFieldMapsToADeclaredSettingAndBack(): Unit = {
    val map = changed.toMap
    // One key per field: each field differs from its default, so each is in the map.
    val fields = changed.productArity - 2 + changed.ps.productArity + changed.workerSettings.size
    assertEquals(fields, map.size, map.toString)
    val settings = map.keySet.filterNot(_.startsWith(WarrenSettings.Prefix + RunnerSettings.PASS_THROUGH))
    assertEquals(declared.keySet, settings, "every declared setting has a field and every field a setting")
    assertEquals(Some("debug"), map.get("spark.warren.setting.WARREN_LOG"))
    assertEquals(Some("1.5"), map.get("spark.warren.timeout"))
    assertEquals(Some("0.25"), map.get("spark.warren.rejoinTimeout"))
    assertEquals(changed, WarrenConf.fromMap(map))
    assertEquals(changed.ps, PsConf.fromMap(changed.ps.toMap))
    // The prefix is optional, as in train's conf.
    assertEquals(changed, WarrenConf.fromMap(map.map { case (k, v) => k.stripPrefix(WarrenSettings.Prefix) -> v }))
    // And train reads the map as the fields say.
    val s = WarrenSettings.parse(map.map { case (k, v) => k.stripPrefix(WarrenSettings.Prefix) -> v })
    assertEquals(Recovery.FailAll, s.recovery)
    assertEquals(Some("/tmp/ckpt"), s.checkpointDir)
    assertEquals(20.0, s.rendezvousTimeout)
    assertEquals(ElasticSettings(enabled = true, 2, java.time.Duration.ofMillis(250)), s.elastic)
    assertEquals(4, s.ps.threads)
    assertEquals(Some("1.5"), s.workerSettings.get("WARREN_TIMEOUT_S"))
  }

  @Test
  def aWarrenConfStandsWhereASettingsMapGoes(): Unit = {
    def takesAMap(conf: Map[String, String] = Map.empty): Map[String, String] = conf
    assertEquals(Map("spark.warren.checkpointDir" -> "/d"), takesAMap(conf = WarrenConf(checkpointDir = Some("/d"))))
    assertEquals(Map("spark.warren.ps.threads" -> "3"), takesAMap(conf = PsConf(threads = 3)))
  }

  /** The mean gradient of the logistic loss over `data` (rows of features, the label last). */
  private def gradient(data: Array[Array[Double]], w: Array[Double]): Array[Double] = {
    val g = new Array[Double](w.length)
    for (row <- data) {
      val z = w.indices.map(j => w(j) * row(j)).sum
      val err = 1.0 / (1.0 + math.exp(-z)) - row.last
      for (j <- w.indices) g(j) += err * row(j) / data.length
    }
    g
  }

  /** The example of docs/spark.md, compiled here (running it needs a cluster: spark-examples). */
  private def trainExample(rdd: org.apache.spark.rdd.RDD[Array[Double]], iters: Int, dim: Int): Seq[Array[Double]] = {
    // SPARK-DOC-BEGIN
    import io.warren.spark._
    import scala.concurrent.duration._

    WarrenSpark.train(rdd, numWorkers = 3, conf = WarrenConf(timeout = 10.minutes)) { (comm, rows) =>
      val data = rows.toArray
      // A re-run task goes on from the last checkpoint its peers committed.
      var (it, w) = comm.loadCheckpointAs[(Int, Array[Double])].fold((0, new Array[Double](dim)))(_._2)
      while (it < iters) {
        val g = comm.allreduceInPlace(gradient(data, w))  // summed over the workers
        for (j <- w.indices) w(j) -= 0.5 * g(j) / comm.worldSize()
        it += 1
        comm.checkpoint((it, w))
      }
      w
    }
    // SPARK-DOC-END
  }

  @Test
  def docsSparkShowsTheCompiledExample(): Unit = {
    val dir = java.nio.file.Path.of(System.getProperty("user.dir"))
    def block(lines: Seq[String], begin: String => Boolean, end: String): String =
      lines.dropWhile(l => !begin(l.trim)).drop(1).takeWhile(_.trim != end).map(_.strip).mkString("\n")
    val source = java.nio.file.Files.readAllLines(dir.resolve("src/test/scala/io/warren/spark/WarrenConfTest.scala")).asScala.toSeq
    val page = java.nio.file.Files.readAllLines(dir.resolve("../../docs/spark.md")).asScala.toSeq
    val section = page.dropWhile(_ != "## `WarrenSpark.train` in detail")
    assertEquals(block(source, _ == "// SPARK-DOC-BEGIN", "// SPARK-DOC-END"), block(section, _ == "```scala", "```"))
  }

  @Test
  def fromMapChecksAsTrainDoes(): Unit = {
    val bad = assertThrows(classOf[WarrenSparkException], () => WarrenConf.fromMap(Map("timeout" -> "ten")))
    assertEquals("""spark.warren.timeout = "ten": expected a number of seconds > 0 and <= 86400""", bad.getMessage)
    val typo = assertThrows(classOf[WarrenSparkException], () => WarrenConf.fromMap(Map("spark.warren.timout" -> "1")))
    assertTrue(typo.getMessage.contains("did you mean spark.warren.timeout?"), typo.getMessage)
  }
}

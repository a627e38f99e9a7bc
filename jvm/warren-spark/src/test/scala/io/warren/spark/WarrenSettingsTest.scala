package io.warren.spark

import java.nio.file.{Files, Path}

import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

import scala.jdk.CollectionConverters._

/** The `spark.warren.*` declarations: parsing, validation, unknown keys, and the docs table. */
class WarrenSettingsTest {

  private def refused(raw: (String, String)*): String =
    assertThrows(classOf[WarrenSparkException], () => WarrenSettings.parse(raw.toMap)).getMessage

  @Test
  def absentSettingsTakeTheirDefaults(): Unit = {
    val s = WarrenSettings.parse(Map.empty)
    assertEquals(Recovery.RetryOne, s.recovery)
    assertEquals(None, s.checkpointDir)
    assertEquals(1, s.durableEvery)
    assertEquals(60.0, s.checkpointDirTimeout)
    assertEquals(None, s.trackerHost)
    assertEquals(600.0, s.rendezvousTimeout)
    assertEquals(0.0, s.slotWaitTimeout)
    assertEquals(10.0, s.progressInterval)
    assertEquals(None, s.peerTimeout) // the tracker's default
    // Unset worker settings are not passed: the native library's defaults apply.
    assertEquals(Map.empty, s.workerSettings)
  }

  @Test
  def validValuesAreTypedAndMappedToWorkerSettings(): Unit = {
    val s = WarrenSettings.parse(
      Map(
        "recovery" -> " Fail-All ",
        "checkpointDir" -> "/tmp/x",
        "durableEvery" -> "0",
        "timeout" -> "300",
        "connectTimeout" -> "1.5",
        "localReplicas" -> "3",
        "bootstrapCache" -> "false",
        "rendezvousTimeout" -> "20",
        "slotWaitTimeout" -> "2.5",
        "progressInterval" -> "0",
        "trackerHost" -> "10.0.0.1",
        "setting.WARREN_LOCAL_REPLICAS" -> "1"
      )
    )
    assertEquals(Recovery.FailAll, s.recovery)
    assertEquals(Some("/tmp/x"), s.checkpointDir)
    assertEquals(1, s.durableEvery) // 0 is taken as 1
    assertEquals(Some("10.0.0.1"), s.trackerHost)
    assertEquals(20.0, s.rendezvousTimeout)
    assertEquals(2.5, s.slotWaitTimeout)
    assertEquals(0.0, s.progressInterval)
    assertEquals(
      Map(
        "WARREN_TIMEOUT_S" -> "300",
        "WARREN_CONNECT_TIMEOUT_S" -> "1.5",
        "WARREN_BOOTSTRAP_CACHE" -> "0",
        // setting.WARREN_X wins over the mapped setting
        "WARREN_LOCAL_REPLICAS" -> "1"
      ),
      s.workerSettings
    )
    assertEquals(7, WarrenSettings.parse(Map("setting.WARREN_DURABLE_EVERY" -> "7")).durableEvery)
  }

  @Test
  def tlsGoesToTheTrackersTheParameterServersAndTheWorkers(): Unit = {
    assertEquals(io.warren.TlsSettings.OFF, WarrenSettings.parse(Map.empty).tls)
    val on = WarrenSettings.parse(Map("tls" -> "true"))
    assertEquals(io.warren.TlsSettings.jobSecret(), on.tls)
    assertEquals(Map("WARREN_TLS" -> "1"), on.workerSettings)
    // The pass-through alone turns it on for the driver's endpoints too.
    assertEquals(io.warren.TlsSettings.jobSecret(), WarrenSettings.parse(Map("setting.WARREN_TLS" -> "1")).tls)
    val pki = WarrenSettings.parse(
      Map("tls" -> "yes", "tls.ca" -> "/pki/ca.pem", "tls.cert" -> "/pki/c.pem", "tls.key" -> "/pki/k.pem")
    )
    val paths = io.warren.TlsSettings.certificates(
      java.nio.file.Path.of("/pki/ca.pem"),
      java.nio.file.Path.of("/pki/c.pem"),
      java.nio.file.Path.of("/pki/k.pem")
    )
    assertEquals(paths, pki.tls)
    assertEquals(paths.workerSettings().asScala.toMap, pki.workerSettings)
    assertEquals("""spark.warren.tls = "maybe": expected true or false""", refused("tls" -> "maybe"))
  }

  @Test
  def thePeerTimeoutGoesToTheTrackersAndTheWorkers(): Unit = {
    val s = WarrenSettings.parse(Map("peerTimeout" -> "2.5"))
    assertEquals(Some(java.time.Duration.ofMillis(2500)), s.peerTimeout)
    assertEquals(Map("WARREN_PEER_TIMEOUT_S" -> "2.5"), s.workerSettings)
    assertEquals(Some(java.time.Duration.ZERO), WarrenSettings.parse(Map("peerTimeout" -> "0")).peerTimeout)
    // Passed through as a worker setting, it reaches the trackers too, checked alike.
    assertEquals(Some(java.time.Duration.ofSeconds(7)), WarrenSettings.parse(Map("setting.WARREN_PEER_TIMEOUT_S" -> "7")).peerTimeout)
    assertEquals("""spark.warren.peerTimeout = "-3": expected a number of seconds in 0..86400""", refused("peerTimeout" -> "-3"))
    assertEquals(
      """spark.warren.setting.WARREN_PEER_TIMEOUT_S = "soon": expected a number of seconds in 0..86400""",
      refused("setting.WARREN_PEER_TIMEOUT_S" -> "soon")
    )
  }

  @Test
  def parameterServerSettingsAreTypedAndChecked(): Unit = {
    val defaults = WarrenSettings.parse(Map.empty).ps
    assertEquals(None, defaults.checkpointDir)
    assertEquals(0, defaults.checkpointEvery)
    assertEquals(java.time.Duration.ofSeconds(600), defaults.callTimeout)
    assertEquals("driver", defaults.servers)
    assertEquals(2, defaults.threads)
    assertEquals(4, WarrenSettings.parse(Map("ps.threads" -> "4")).ps.threads)
    assertEquals("""spark.warren.ps.threads = "0": expected an integer in 1..1024""", refused("ps.threads" -> "0"))
    assertEquals("process", WarrenSettings.parse(Map("ps.servers" -> "process")).ps.servers)
    assertEquals("""spark.warren.ps.servers = "threads": expected one of driver, process""", refused("ps.servers" -> "threads"))
    val s = WarrenSettings.parse(Map("ps.checkpointDir" -> "/tmp/ps", "ps.checkpointEvery" -> "5", "ps.pullTimeout" -> "1.5")).ps
    assertEquals(Some("/tmp/ps"), s.checkpointDir)
    assertEquals(5, s.checkpointEvery)
    assertEquals(java.time.Duration.ofMillis(1500), s.pullTimeout)
    assertEquals("""spark.warren.ps.checkpointEvery = "-1": expected an integer in 0..1000000""", refused("ps.checkpointEvery" -> "-1"))
    val typo = refused("ps.chekpointDir" -> "/x")
    assertTrue(typo.contains("did you mean spark.warren.ps.checkpointDir?"), typo)
  }

  @Test
  def anInvalidValueNamesTheSettingTheValueAndTheAcceptedRange(): Unit = {
    assertEquals("""spark.warren.timeout = "ten": expected a number of seconds > 0 and <= 86400""", refused("timeout" -> "ten"))
    assertEquals("""spark.warren.timeout = "0": expected a number of seconds > 0 and <= 86400""", refused("timeout" -> "0"))
    assertEquals("""spark.warren.connectTimeout = "NaN": expected a number of seconds > 0 and <= 86400""", refused("connectTimeout" -> "NaN"))
    assertEquals("""spark.warren.localReplicas = "two": expected an integer in 0..1000""", refused("localReplicas" -> "two"))
    assertEquals("""spark.warren.durableEvery = "-1": expected an integer in 0..1000000""", refused("durableEvery" -> "-1"))
    assertEquals("""spark.warren.durableEvery = "x": expected an integer in 0..1000000""", refused("setting.WARREN_DURABLE_EVERY" -> "x"))
    assertEquals("""spark.warren.bootstrapCache = "maybe": expected true or false""", refused("bootstrapCache" -> "maybe"))
    assertEquals("""spark.warren.recovery = "fail-some": expected one of retry-one, fail-all""", refused("recovery" -> "fail-some"))
    assertEquals("""spark.warren.progressInterval = "soon": expected a number of seconds in 0..86400""", refused("progressInterval" -> "soon"))
    assertEquals("""spark.warren.slotWaitTimeout = "-1": expected a number of seconds in 0..86400""", refused("slotWaitTimeout" -> "-1"))
    assertEquals("""spark.warren.rendezvousTimeout = "Infinity": expected a number of seconds > 0 and <= 86400""", refused("rendezvousTimeout" -> "Infinity"))
    assertEquals("""spark.warren.checkpointDir = " ": expected a non-empty string""", refused("checkpointDir" -> " "))
  }

  @Test
  def anUnknownKeyFailsNamingTheClosestKnownOne(): Unit = {
    val m = refused("timout" -> "60")
    assertTrue(m.startsWith("spark.warren.timout is not a Warren setting (did you mean spark.warren.timeout?"), m)
    val c = refused("checkpointdir" -> "/tmp")
    assertTrue(c.contains("did you mean spark.warren.checkpointDir?"), c)
    val w = refused("setting.timeout" -> "60")
    assertTrue(w.startsWith("spark.warren.setting.timeout: a worker setting must be named WARREN_"), w)
  }

  @Test
  def theDocsTableIsTheDeclaration(): Unit = {
    val readme = Path.of(System.getProperty("user.dir")).resolve("../../docs/spark.md")
    val lines = Files.readAllLines(readme).asScala.toSeq
    val begin = lines.indexOf("<!-- settings-table: rendered from WarrenSettings.markdownTable, checked by WarrenSettingsTest -->")
    assertTrue(begin >= 0, s"no settings-table marker in $readme")
    val table = lines.drop(begin + 1).takeWhile(_.startsWith("|")).mkString("\n")
    assertEquals(WarrenSettings.markdownTable, table, s"$readme: the settings table differs from WarrenSettings; put this there:\n${WarrenSettings.markdownTable}\n")
  }
}

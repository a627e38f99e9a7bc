package io.warren.examples

import io.warren.examples.FaultHarness.PsFaults
import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

/** The parameter-server example's command line: the job's flags go into its parameters, the
  * failures and pauses into [[FaultHarness.PsFaults]] hooks, and a job without them has no hooks.
  */
class PsCommandLineTest {

  @Test
  def theJobsFlagsGoIntoTheParameters(): Unit = {
    val p = PsCommandLine.parse(List("--workers", "3", "--servers", "4", "--rows", "100", "--bits", "10", "--batch", "50",
      "--iters", "7", "--lr", "0.25", "--mode", "ssp", "--staleness", "3", "--seed", "9", "--checkpoint-dir", "/tmp/c",
      "--ps-servers", "process"))
    val expected = SparseLogisticRegressionPS.Params(workers = 3, servers = 4, rowsPerWorker = 100, bits = 10, batch = 50,
      iters = 7, lr = 0.25f, mode = "ssp", staleness = 3, seed = 9L,
      conf = Map("ps.checkpointDir" -> "/tmp/c", "ps.servers" -> "process"))
    assertEquals(expected, p)
    assertEquals(PsHooks.none, p.hooks)
  }

  @Test
  def theFailuresAndPausesGoIntoTheFaultHarness(): Unit = {
    val p = PsCommandLine.parse(List("--kill-task", "3", "--pause-ms", "50", "--kill-server", "5"))
    assertEquals(PsFaults(killTask = 3, killServer = 5, pauseMs = 50), p.hooks)
  }

  @Test
  def aServerRestartGetsACheckpointDirectoryOfItsOwnOnlyWithoutOne(): Unit = {
    val own = PsFaults(killServer = 2).around(Map.empty[String, String])(identity)
    assertEquals("3", own("ps.checkpointEvery"))
    assertTrue(!new java.io.File(own("ps.checkpointDir")).exists(), s"${own("ps.checkpointDir")} is removed after the run")
    val supplied = Map("ps.checkpointDir" -> "/tmp/given")
    assertEquals(supplied, PsFaults(killServer = 2).around(supplied)(identity))
    assertEquals(Map.empty[String, String], PsFaults(pauseMs = 5).around(Map.empty[String, String])(identity))
  }

  @Test
  def anUnknownArgumentIsNamedWithTheUsage(): Unit = {
    val e = assertThrows(classOf[IllegalArgumentException], () => PsCommandLine.parse(List("--elastic", "2")))
    assertTrue(e.getMessage.startsWith("unknown argument --elastic; usage: "), e.getMessage)
  }
}

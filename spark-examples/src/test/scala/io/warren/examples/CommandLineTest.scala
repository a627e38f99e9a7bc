package io.warren.examples

import io.warren.examples.FaultHarness.Faults
import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

/** The example's command line: the job's flags go into its parameters, the failures and
  * pauses into [[FaultHarness.Faults]] hooks, and a job without them has no hooks.
  */
class CommandLineTest {

  @Test
  def theJobsFlagsAndTheRecoverySettingsGoIntoTheParameters(): Unit = {
    val p = CommandLine.parse(List("--workers", "4", "--iters", "7", "--optimizer", "lbfgs", "--recovery", "fail-all",
      "--checkpoint-dir", "/tmp/c", "--elastic", "2"))
    assertEquals((4, 7, "lbfgs"), (p.workers, p.iters, p.optimizer))
    assertEquals(Some("fail-all"), p.conf.get("recovery"))
    assertEquals(Some("/tmp/c"), p.conf.get("checkpointDir"))
    assertEquals((Some("true"), Some("2")), (p.conf.get("elastic"), p.conf.get("minWorkers")))
    assertEquals(Hooks.none, p.hooks)
  }

  @Test
  def theFailuresAndPausesGoIntoTheFaultHarness(): Unit = {
    val p = CommandLine.parse(List("--kill-task", "3", "--pause-ms", "50", "--kill-executor", "5", "--pause-until-grown"))
    assertEquals(Faults(killTask = 3, killExecutor = 5, pauseMs = 50, pauseUntilGrown = true), p.hooks)
  }

  @Test
  def anUnknownArgumentIsNamedWithTheUsage(): Unit = {
    val e = assertThrows(classOf[IllegalArgumentException], () => CommandLine.parse(List("--kill-everything", "1")))
    assertTrue(e.getMessage.startsWith("unknown argument --kill-everything; usage: "), e.getMessage)
  }
}

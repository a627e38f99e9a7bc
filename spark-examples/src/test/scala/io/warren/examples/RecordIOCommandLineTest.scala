package io.warren.examples

import io.warren.examples.FaultHarness.Faults
import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

/** The RecordIO example's command line: the job's flags go into its parameters, `--kill-task`
  * and `--kill-point` into [[FaultHarness.Faults]] hooks, and a job without them has no hooks.
  */
class RecordIOCommandLineTest {

  @Test
  def theJobsFlagsGoIntoTheParameters(): Unit = {
    val p = RecordIOCommandLine.parse(List("--workers", "2", "--records", "50", "--passes", "3", "--task-timeout", "900",
      "--store", "etcd:h:2379/x", "--data-dir", "/shared"))
    assertEquals((2, 50, 3, 900L), (p.workers, p.records, p.passes, p.taskTimeoutMs))
    assertEquals((Some("etcd:h:2379/x"), Some("/shared")), (p.store, p.dataDir))
    assertEquals(Hooks.none, p.hooks)
  }

  @Test
  def theKillPointNamesWhereInTheStepTheTaskFails(): Unit = {
    for ((flag, point) <- Seq("get" -> "start", "allreduce" -> "allreduce", "checkpoint" -> "checkpoint")) {
      val p = RecordIOCommandLine.parse(List("--kill-point", flag, "--kill-task", "4"))
      assertEquals(Faults(killTask = 4, killPoint = point), p.hooks)
    }
    val e = assertThrows(classOf[IllegalArgumentException], () => RecordIOCommandLine.parse(List("--kill-point", "x")))
    assertTrue(e.getMessage.startsWith("--kill-point x: get, allreduce or checkpoint"), e.getMessage)
  }

  @Test
  def anUnknownArgumentIsNamedWithTheUsage(): Unit = {
    val e = assertThrows(classOf[IllegalArgumentException], () => RecordIOCommandLine.parse(List("--kill-executor", "1")))
    assertTrue(e.getMessage.startsWith("unknown argument --kill-executor; usage: "), e.getMessage)
  }
}

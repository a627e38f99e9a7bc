package io.warren.examples

import io.warren.examples.FaultHarness.Faults
import org.junit.jupiter.api.Assertions.{assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

/** The k-means example's command line: the job's flags go into its parameters, the failures
  * and pauses into [[FaultHarness.Faults]] hooks, and a job without them has no hooks.
  */
class KMeansCommandLineTest {

  @Test
  def theJobsFlagsGoIntoTheParameters(): Unit = {
    val p = KMeansCommandLine.parse(List("--workers", "4", "--rows", "1000", "--dims", "6", "--k", "3", "--iters", "7",
      "--spread", "5", "--noise", "0.5", "--seed", "9"))
    assertEquals(KMeans.Params(workers = 4, rows = 1000, dims = 6, k = 3, iters = 7, spread = 5.0, noise = 0.5, seed = 9L), p)
    assertEquals(Hooks.none, p.hooks)
  }

  @Test
  def theFailuresAndPausesGoIntoTheFaultHarness(): Unit = {
    val p = KMeansCommandLine.parse(List("--kill-task", "3", "--pause-ms", "50", "--kill-executor", "5"))
    assertEquals(Faults(killTask = 3, killExecutor = 5, pauseMs = 50), p.hooks)
  }

  @Test
  def anUnknownArgumentIsNamedWithTheUsage(): Unit = {
    val e = assertThrows(classOf[IllegalArgumentException], () => KMeansCommandLine.parse(List("--elastic", "2")))
    assertTrue(e.getMessage.startsWith("unknown argument --elastic; usage: "), e.getMessage)
  }
}

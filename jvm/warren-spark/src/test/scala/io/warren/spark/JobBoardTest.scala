package io.warren.spark

import org.junit.jupiter.api.Assertions.{assertEquals, assertTrue}
import org.junit.jupiter.api.Test

/** [[JobBoard]], what the Warren tab shows: a job's checkpoint version follows its tasks'
  * heartbeats and ends, a re-run task counts once, late task ends still land, and the board
  * forgets the oldest jobs.
  */
class JobBoardTest {
  private var now = 1000L
  private def board(keep: Int = 10) = new JobBoard(keep, () => now)

  @Test
  def theVersionFollowsTheNewestAttemptOfEachTask(): Unit = {
    val b = board()
    b.jobStarted("1", 2, "retry-one")
    b.taskStarted("1", 10, 0, 0, 0, "e1", "h1")
    b.taskStarted("1", 11, 1, 0, 0, "e2", "h2")
    b.taskProgress(10, 5)
    b.taskProgress(11, 4)
    assertEquals(5L, b.job("1").get.checkpointVersion)
    // Task 1 is lost and re-run on another host; its replacement recovers to version 5.
    b.taskEnded(11, "failed", None)
    b.taskStarted("1", 12, 1, 1, 0, "e3", "h3")
    b.taskProgress(12, 6)
    b.taskProgress(10, 6)
    val j = b.job("1").get
    assertEquals(6L, j.checkpointVersion)
    assertEquals(1, j.reruns)
    assertEquals(1, j.failedAttempts)
    assertEquals(Seq("e1", "e3"), j.latestAttempts.map(_.executor))
    assertEquals("running", j.state)
  }

  @Test
  def taskEndsAfterTheJobEndStillLand(): Unit = {
    val b = board()
    b.jobStarted("1", 1, "retry-one")
    b.taskStarted("1", 10, 0, 0, 0, "e1", "h1")
    now += 2500
    b.jobEnded("1", None)
    b.taskEnded(10, "finished", Some(20))
    val j = b.job("1").get
    assertEquals("succeeded", j.state)
    assertEquals(20L, j.checkpointVersion)
    assertEquals(2.5, j.seconds(now + 99999), 1e-9)
    // A heartbeat that comes after the end changes nothing.
    b.taskProgress(10, 3)
    assertEquals(20L, b.job("1").get.checkpointVersion)
  }

  @Test
  def aFailedJobKeepsWhy(): Unit = {
    val b = board()
    b.jobStarted("1", 3, "fail-all")
    b.jobEnded("1", Some("collective call mismatch"))
    assertEquals("failed", b.job("1").get.state)
    assertEquals(Some("collective call mismatch"), b.job("1").get.failure)
  }

  @Test
  def theOldestJobsAreForgotten(): Unit = {
    val b = board(keep = 2)
    for (l <- 1 to 3) {
      b.jobStarted(l.toString, 1, "retry-one")
      b.taskStarted(l.toString, l.toLong, 0, 0, 0, "e", "h")
    }
    assertEquals(Seq("3", "2"), b.all.map(_.label))
    assertTrue(!b.tracks(1L) && b.tracks(2L) && b.tracks(3L))
  }
}

package io.warren.scaladsl

import scala.concurrent.duration._
import scala.concurrent.{Await, Future}
import scala.concurrent.ExecutionContext.Implicits.global
import scala.util.Using

import io.warren.Op
import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals}
import org.junit.jupiter.api.{Test, Timeout}

/** The conveniences without Spark: two workers (this thread and a Future) joined to a tracker. */
class ScalaDslTest {

  @Test
  @Timeout(60)
  def twoWorkersReduceGatherAndBroadcastWithScalaTypes(): Unit = {
    Using.resource(Warren.tracker(2, "s3cret")) { tracker =>
      def work(task: Int): (Array[Float], Array[Long], IndexedSeq[String], String) =
        Warren.run(tracker.settingsFor(task.toString)) { comm =>
          val f = comm.allreduceInPlace(Array(1f + task, 2f))
          val l = comm.allreduceInPlace(Array(1L << task), Op.BIT_OR)
          val g = comm.gather(s"w$task".getBytes).map(new String(_))
          val b = new String(comm.broadcastFrom(if (comm.rank() == 1) Some("from 1".getBytes) else None, 1))
          (f, l, g, b)
        }
      val peer = Future(work(1))
      val mine = work(0)
      val theirs = Await.result(peer, 30.seconds)
      for ((f, l, g, b) <- Seq(mine, theirs)) {
        assertArrayEquals(Array(3f, 4f), f, 0f)
        assertArrayEquals(Array(3L), l)
        assertEquals(Seq("w0", "w1"), g.sorted)
        assertEquals("from 1", b)
      }
    }
  }
}

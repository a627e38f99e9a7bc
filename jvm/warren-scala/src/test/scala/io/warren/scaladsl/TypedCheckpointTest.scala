package io.warren.scaladsl

import java.nio.file.Path

import scala.concurrent.duration._
import scala.concurrent.{Await, Future}
import scala.concurrent.ExecutionContext.Implicits.global
import scala.util.Using

import io.warren.Communicator
import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.{Test, Timeout}
import org.junit.jupiter.api.io.TempDir

/** Typed checkpoints in a real job: two workers (this thread and a Future) joined to a tracker,
  * writing durable checkpoints that the next job of the same directory loads back.
  */
class TypedCheckpointTest {

  /** Runs `body` on both workers of a new job whose checkpoints go to `dir`. */
  private def job[T](dir: Path)(body: Communicator => T): (T, T) =
    Using.resource(Warren.tracker(2, "s3cret")) { tracker =>
      def work(task: Int): T = Warren.run(tracker.settingsFor(task.toString) + ("WARREN_CHECKPOINT_DIR" -> dir.toString))(body)
      val peer = Future(work(1))
      val mine = work(0)
      (mine, Await.result(peer, 30.seconds))
    }

  @Test
  @Timeout(90)
  def twoWorkersLoadTheirTypedModelAndLocalStateBack(@TempDir dir: Path): Unit = {
    job(dir) { comm =>
      assertEquals(None, comm.loadCheckpointWithLocal[TestModel, Seq[Int]])
      for (step <- 1 to 3) {
        val w = comm.allreduceInPlace(Array(step.toDouble, 1.0))
        comm.checkpoint(TestModel(w, step, "lr"), Seq(comm.rank(), step))
      }
    }
    // The next job of the same directory starts from the last durable checkpoint.
    val (r0, r1) = job(dir) { comm =>
      val loaded = comm.loadCheckpointWithLocal[TestModel, Seq[Int]]
      assertTrue(loaded.isDefined, "no checkpoint loaded")
      val (version, model, local) = loaded.get
      (comm.rank(), version, model, local)
    }
    for ((rank, version, model, local) <- Seq(r0, r1)) {
      assertEquals(3, version)
      assertArrayEquals(Array(6.0, 2.0), model.weights, 0.0)
      assertEquals((3, "lr"), (model.step, model.name))
      assertEquals(Some(Seq(rank, 3)), local, s"rank $rank's own state")
    }
    assertEquals(Set(0, 1), Set(r0._1, r1._1))
    // A job that expects another type is told so, on every worker, and decodes nothing.
    val (e0, e1) = job(dir) { comm =>
      assertThrows(classOf[CheckpointFormatException], () => comm.loadCheckpointAs[Array[Double]])
    }
    for (e <- Seq(e0, e1)) {
      assertEquals(("Array[Double]", "TestModel(Array[Double],Int,String)"), (e.expected, e.found))
    }
  }

  @Test
  @Timeout(60)
  def aWorldOfOneCheckpointsWithoutLocalState(): Unit = {
    Using.resource(Warren.communicator(Map.empty)) { comm =>
      assertEquals(None, comm.loadCheckpointAs[(Array[Float], Long)])
      comm.checkpoint((Array(1f, 2f), 5L))
      val (version, (w, n)) = comm.loadCheckpointAs[(Array[Float], Long)].get
      assertEquals((1, 5L), (version, n))
      assertArrayEquals(Array(1f, 2f), w, 0f)
      assertEquals(Some((1, (Array(1f, 2f).toSeq, 5L), None)),
        comm.loadCheckpointWithLocal[(Array[Float], Long), Int].map(c => (c._1, (c._2._1.toSeq, c._2._2), c._3)))
    }
  }
}

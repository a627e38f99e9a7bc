package io.warren.spark

import java.nio.file.{Files, Path}

import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals}
import org.junit.jupiter.api.{Test, Timeout}

import scala.jdk.CollectionConverters._

/** The Scala examples of docs/jvm-api.md, as written, and the package object's helpers. */
class ReadmeScalaExampleTest {

  @Test
  @Timeout(60)
  def example(): Unit = {
    val out = new java.io.ByteArrayOutputStream()
    Console.withOut(out) {
    // README-BEGIN
    import io.warren.Op, io.warren.spark._
    import scala.concurrent.{Await, Future}, scala.concurrent.ExecutionContext.Implicits.global
    import scala.concurrent.duration._, scala.util.Using

    Using.resource(Warren.tracker(2, "s3cret")) { tracker =>
      // worker "1" as a Future here; in a real job, another Spark task or process
      val peer = Future(Warren.run(tracker.settingsFor("1"))(_.allreduceInPlace(Array(10.0, 20.0))))
      val sum = Warren.run(tracker.settingsFor("0"))(_.allreduceInPlace(Array(1.0, 2.0), Op.SUM))
      println(sum.mkString(", ") + " / " + Await.result(peer, 30.seconds).mkString(", "))  // 11.0, 22.0 / 11.0, 22.0
    }
    // README-END
    }
    assertEquals("11.0, 22.0 / 11.0, 22.0", out.toString("UTF-8").trim)
  }

  @Test
  @Timeout(60)
  def typedCheckpointExample(): Unit = {
    val out = new java.io.ByteArrayOutputStream()
    Console.withOut(out) {
    // TYPED-BEGIN
    import io.warren.spark._
    import scala.util.Using

    case class Model(weights: Array[Double], step: Int)
    implicit val modelCodec: Codec[Model] = Codec.caseClass2(Model.apply _, Model.unapply _)

    Using.resource(Warren.communicator(Map.empty)) { comm =>  // a world of one
      // A restarted worker gets the last committed model; a fresh start, None.
      var model = comm.loadCheckpointAs[Model].fold(Model(Array(0.0, 0.0), 0))(_._2)
      while (model.step < 3) {
        val grad = comm.allreduceInPlace(Array(1.0, -1.0))
        model = Model(model.weights.zip(grad).map { case (w, g) => w - 0.5 * g }, model.step + 1)
        comm.checkpoint(model)  // a collective call: every worker at the same point
      }
      for ((version, m) <- comm.loadCheckpointAs[Model]) println(s"v$version ${m.weights.mkString(" ")}")  // v3 -1.5 1.5
      try comm.loadCheckpointAs[Array[Double]]
      catch { case e: CheckpointFormatException => println(e.found) }  // Model(Array[Double],Int)
    }
    // TYPED-END
    }
    assertEquals("v3 -1.5 1.5\nModel(Array[Double],Int)", out.toString("UTF-8").trim)
  }

  @Test
  @Timeout(60)
  def helpers(): Unit = {
    import io.warren.{CallOptions, DataType, Op}
    import scala.util.Using
    Using.resource(Warren.communicator(Map.empty)) { comm =>
      assertArrayEquals(Array(3f), comm.allreduceInPlace(Array(3f)), 0f)
      assertArrayEquals(Array(5), comm.allreduceInPlace(Array(5), Op.MAX))
      assertArrayEquals(Array(7L), comm.allreduceInPlace(Array(7L), Op.BIT_OR))
      assertArrayEquals(Array(9), comm.allreduceInPlace(Array(9), Op.MAX, CallOptions.bootstrap()))
      assertEquals("z", new String(comm.broadcastFrom(Some("z".getBytes), 0, CallOptions.bootstrap().withKey("z"))))
      assertEquals(Seq("x"), comm.gather("x".getBytes).map(new String(_)))
      assertEquals("y", new String(comm.broadcastFrom(Some("y".getBytes), 0)))
      val b = java.nio.ByteBuffer.allocateDirect(8).order(java.nio.ByteOrder.nativeOrder())
      b.putDouble(0, 2.5)
      comm.allreduceBuffer(b, DataType.F64)
      assertEquals(2.5, b.getDouble(0))
    }
  }

  /** The docs page shows exactly the lines between the markers above. */
  @Test
  def readmeMatchesThisFile(): Unit = {
    val dir = Path.of(System.getProperty("user.dir"))
    val self = dir.resolve("src/test/scala/io/warren/spark/ReadmeScalaExampleTest.scala")
    val readme = dir.resolve("../../docs/jvm-api.md")
    val page = Files.readAllLines(readme).asScala.toSeq
    val source = Files.readAllLines(self).asScala.toSeq
    assertEquals(block(source, "// README-BEGIN", "// README-END"), block(page, "```scala", "```"))
    val typed = page.drop(page.indexOf("## Typed checkpoints in Scala"))
    assertEquals(block(source, "// TYPED-BEGIN", "// TYPED-END"), block(typed, "```scala", "```"))
  }

  private def block(lines: Seq[String], begin: String, end: String): String = {
    val from = lines.indexWhere(_.trim == begin) + 1
    lines.drop(from).takeWhile(_.trim != end).map(_.strip).mkString("\n")
  }
}

package io.warren

import java.nio.ByteBuffer
import scala.jdk.CollectionConverters._

/** Scala conveniences over the Java API of `io.warren`, for any engine (or none): module
  * `warren-scala_2.13`. `io.warren.spark._` re-exports them, so Spark code that imports that
  * package needs nothing else.
  *
  * {{{
  * import io.warren.Op
  * import io.warren.scaladsl._
  * import scala.util.Using
  *
  * Using.resource(Warren.communicator(settings)) { comm =>
  *   val grad = Array(1f, 2f)
  *   comm.allreduceInPlace(grad)            // Op.SUM by default
  *   val all = comm.gather("hello".getBytes) // IndexedSeq[Array[Byte]]
  * }
  * }}}
  *
  * Checkpoints are typed: a [[Codec]] turns the model into framed bytes and back, so that a
  * checkpoint of another type, or damaged bytes, fail with a [[CheckpointFormatException]]
  * that names both types instead of decoding into a wrong model:
  *
  * {{{
  * case class Model(weights: Array[Double], step: Int)
  * implicit val modelCodec: Codec[Model] = Codec.caseClass2(Model.apply _, Model.unapply _)
  *
  * var model = comm.loadCheckpointAs[Model] match {
  *   case Some((version, m)) => m                   // restarted: the last committed model
  *   case None               => Model(Array.fill(10)(0.0), 0) // a fresh start (version 0)
  * }
  * while (model.step < 100) {
  *   model = Model(comm.allreduceInPlace(gradient(model.weights)), model.step + 1)
  *   comm.checkpoint(model)                         // one collective call on every worker
  * }
  * }}}
  *
  * `Communicator` and `Tracker` are `AutoCloseable`, so `scala.util.Using` manages them as
  * they are. Scala's `Array[Float]`, `Array[Double]`, `Array[Int]` and `Array[Long]` are Java
  * arrays and go to the native library unchanged; [[Reducible]] lets generic code call one
  * method for all four.
  */
package object scaladsl {

  /** Entry points taking and returning Scala collections. */
  object Warren {

    /** Joins a job (see `Communicator.create`): settings as a Scala map.
      *
      * @param settings the worker settings (`WARREN_*` keys); empty for a world of one
      * @return the communicator; close it (e.g. with `scala.util.Using`)
      */
    def communicator(settings: Map[String, String]): Communicator =
      Communicator.create(settings.asJava)

    /** Starts a tracker on 127.0.0.1, any port (see `Tracker.start`).
      *
      * @param workers the number of workers
      * @param secret the job secret
      * @return the running tracker; close it when the job is over
      */
    def tracker(workers: Int, secret: String): Tracker = Tracker.start(workers, secret)

    /** Runs one worker's part of a job (see `Communicator.run`): joins, runs `body`, then
      * closes the communicator, or aborts it if `body` throws (so that a new attempt with the
      * same task id can take over).
      *
      * @param settings the worker settings (`WARREN_*` keys); empty for a world of one
      * @param body the worker's work
      * @return what `body` returned
      */
    def run[T](settings: Map[String, String])(body: Communicator => T): T =
      Communicator.run[T](settings.asJava, c => body(c))
  }

  /** An element type whose arrays can be reduced in place.
    *
    * @tparam T `Float`, `Double`, `Int` or `Long`
    */
  trait Reducible[T] {

    /** Reduces `data` across all workers with `op`, in place.
      *
      * @param comm the communicator
      * @param data this worker's values, replaced by the result
      * @param op the reduction operator
      * @param options the call options (a bootstrap call, a tag)
      */
    def allreduce(comm: Communicator, data: Array[T], op: Op, options: CallOptions): Unit
  }

  /** The four element types with array overloads in `Communicator`. */
  object Reducible {
    implicit val floats: Reducible[Float] = (c, a, op, o) => c.allreduce(a, op, o)
    implicit val doubles: Reducible[Double] = (c, a, op, o) => c.allreduce(a, op, o)
    implicit val ints: Reducible[Int] = (c, a, op, o) => c.allreduce(a, op, o)
    implicit val longs: Reducible[Long] = (c, a, op, o) => c.allreduce(a, op, o)
  }

  /** Scala methods on a `Communicator`.
    *
    * @param comm the communicator
    */
  implicit class RichCommunicator(val comm: Communicator) extends AnyVal {

    /** Reduces `data` across all workers in place and returns it.
      *
      * @param data this worker's values
      * @param op the reduction operator, `Op.SUM` by default
      * @param options the call options (`CallOptions.bootstrap()`, a tag), none by default
      * @return `data`, now holding the result
      */
    def allreduceInPlace[T](data: Array[T], op: Op = Op.SUM, options: CallOptions = CallOptions.defaults())(
        implicit r: Reducible[T]
    ): Array[T] = {
      r.allreduce(comm, data, op, options)
      data
    }

    /** Gathers every worker's bytes, in rank order.
      *
      * @param mine this worker's bytes
      * @return one array per rank
      */
    def gather(mine: Array[Byte]): IndexedSeq[Array[Byte]] =
      comm.allgather(mine).toIndexedSeq

    /** Broadcasts bytes from `root`; other workers may pass `None`.
      *
      * @param data the bytes on the root
      * @param root the sending rank
      * @param options the call options (`CallOptions.bootstrap()`, a tag), none by default
      * @return the root's bytes
      */
    def broadcastFrom(data: Option[Array[Byte]], root: Int, options: CallOptions = CallOptions.defaults()): Array[Byte] =
      comm.broadcast(data.orNull, root, options)

    /** Commits a checkpoint of the global model `model` (the same on every worker), encoded
      * by its [[Codec]]; a collective call every worker makes at the same point (see
      * `Communicator.checkpoint`). No local state: [[loadCheckpointWithLocal]] gives `None`
      * for it.
      *
      * @param model the global model
      * @param codec its codec
      * @tparam G its type
      */
    def checkpoint[G](model: G)(implicit codec: Codec[G]): Unit =
      comm.checkpoint(codec.encode(model), null)

    /** Commits a checkpoint of the global model `model` and of this worker's own state
      * `local` (kept by other workers too, so that a restarted worker gets it back), each
      * encoded by its [[Codec]]. Two `Array[Byte]`s go to `Communicator.checkpoint` itself,
      * unframed: wrap raw bytes in a type of your own to frame them.
      *
      * @param model the global model
      * @param local this worker's state
      * @param g the model's codec
      * @param l the local state's codec
      * @tparam G the model's type
      * @tparam L the local state's type
      */
    def checkpoint[G, L](model: G, local: L)(implicit g: Codec[G], l: Codec[L]): Unit =
      comm.checkpoint(g.encode(model), l.encode(local))

    /** Loads the latest checkpoint (see `Communicator.loadCheckpoint`: once, after the
      * bootstrap calls) and decodes its global model.
      *
      * @param codec the model's codec
      * @tparam G the model's type
      * @return `None` on a fresh start (version 0), else the version and the model
      * @throws CheckpointFormatException if the checkpoint holds another type, raw bytes, or
      *   damaged bytes (the message names what was expected and found, and the fix)
      */
    def loadCheckpointAs[G](implicit codec: Codec[G]): Option[(Int, G)] = {
      val c = comm.loadCheckpoint()
      if (c.version == 0) None else Some((c.version, decoded(codec, c.global)))
    }

    /** Loads the latest checkpoint as [[loadCheckpointAs]] does, with this worker's local
      * state.
      *
      * @param g the model's codec
      * @param l the local state's codec
      * @tparam G the model's type
      * @tparam L the local state's type
      * @return `None` on a fresh start (version 0), else the version, the model and the local
      *   state (`None` if the checkpoint has none for this worker)
      * @throws CheckpointFormatException as [[loadCheckpointAs]]
      */
    def loadCheckpointWithLocal[G, L](implicit g: Codec[G], l: Codec[L]): Option[(Int, G, Option[L])] = {
      val c = comm.loadCheckpoint()
      if (c.version == 0) None
      else Some((c.version, decoded(g, c.global), Option(c.local).map(decoded(l, _))))
    }

    /** Decodes checkpoint bytes; bytes the codec cannot take fail the whole job
      * (`Communicator.failJob`: every re-run would read the same bytes) before the
      * [[CheckpointFormatException]] is thrown.
      */
    private def decoded[T](codec: Codec[T], bytes: Array[Byte]): T =
      try codec.decode(bytes)
      catch {
        case e: CheckpointFormatException =>
          comm.failJob(s"CheckpointFormatException: ${e.getMessage}")
          throw e
      }

    /** Reduces a direct buffer of `dtype` elements in place (see `Communicator.allreduce`).
      *
      * @param buffer a direct buffer in native byte order
      * @param dtype its element type
      * @param op the reduction operator
      * @param options the call options, none by default
      */
    def allreduceBuffer(
        buffer: ByteBuffer,
        dtype: DataType,
        op: Op = Op.SUM,
        options: CallOptions = CallOptions.defaults()
    ): Unit =
      comm.allreduce(buffer, dtype, op, options)
  }

  /** Scala methods on a `Tracker`.
    *
    * @param tracker the tracker
    */
  implicit class RichTracker(val tracker: Tracker) extends AnyVal {

    /** The settings of the worker with task id `taskId`, as a Scala map.
      *
      * @param taskId the worker's stable identity
      * @return the settings
      */
    def settingsFor(taskId: String): Map[String, String] =
      tracker.workerSettings(taskId).asScala.toMap
  }
}

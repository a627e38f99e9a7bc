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

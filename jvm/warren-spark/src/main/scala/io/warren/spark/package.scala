package io.warren

import scala.language.implicitConversions

/** The Scala conveniences of [[io.warren.scaladsl]] (module `warren-scala_2.13`), re-exported
  * under their former names, so that `import io.warren.spark._` keeps bringing `Warren`,
  * `Reducible`, `Codec` (typed checkpoints) and the methods on `Communicator` and `Tracker`:
  *
  * {{{
  * import io.warren.Op
  * import io.warren.spark._
  * import scala.util.Using
  *
  * Using.resource(Warren.communicator(settings)) { comm =>
  *   comm.allreduceInPlace(Array(1f, 2f))    // Op.SUM by default
  * }
  * }}}
  */
package object spark {

  /** Entry points taking and returning Scala collections ([[io.warren.scaladsl.Warren]]). */
  val Warren: scaladsl.Warren.type = scaladsl.Warren

  /** An element type whose arrays can be reduced in place ([[io.warren.scaladsl.Reducible]]).
    *
    * @tparam T `Float`, `Double`, `Int` or `Long`
    */
  type Reducible[T] = scaladsl.Reducible[T]

  /** The four element types with array overloads in `Communicator`. */
  val Reducible: scaladsl.Reducible.type = scaladsl.Reducible

  /** Scala methods on a `Communicator` ([[io.warren.scaladsl.RichCommunicator]]). */
  type RichCommunicator = scaladsl.RichCommunicator

  /** Scala methods on a `Communicator`.
    *
    * @param comm the communicator
    * @return its Scala methods
    */
  implicit def RichCommunicator(comm: Communicator): scaladsl.RichCommunicator = new scaladsl.RichCommunicator(comm)

  /** How a value becomes the bytes of a typed checkpoint and back ([[io.warren.scaladsl.Codec]]).
    *
    * @tparam T the type of the values
    */
  type Codec[T] = scaladsl.Codec[T]

  /** The codecs Warren provides and the helpers for case classes ([[io.warren.scaladsl.Codec$]]). */
  val Codec: scaladsl.Codec.type = scaladsl.Codec

  /** Checkpoint bytes a codec cannot decode ([[io.warren.scaladsl.CheckpointFormatException]]). */
  type CheckpointFormatException = scaladsl.CheckpointFormatException

  /** Scala methods on a `Tracker` ([[io.warren.scaladsl.RichTracker]]). */
  type RichTracker = scaladsl.RichTracker

  /** Scala methods on a `Tracker`.
    *
    * @param tracker the tracker
    * @return its Scala methods
    */
  implicit def RichTracker(tracker: Tracker): scaladsl.RichTracker = new scaladsl.RichTracker(tracker)
}

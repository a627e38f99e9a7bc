package io.warren.scaladsl

import java.nio.{BufferUnderflowException, ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.zip.CRC32

import scala.annotation.implicitNotFound
import scala.reflect.ClassTag

/** How values of `T` become the bytes of a checkpoint and back: a type class, with instances
  * for arrays of primitives, strings, numbers, tuples, `Seq`, `Vector` and `Option` of codec
  * types in [[Codec$ the companion]], and case classes through [[Codec.caseClass2]] and its
  * siblings.
  *
  * [[encode]] frames the payload (a magic, the format version, the codec's [[typeName]], the
  * payload's length and its CRC32), so that [[decode]] of bytes written for another type, of
  * raw bytes, or of damaged bytes throws a [[CheckpointFormatException]] instead of returning
  * a wrong value.
  *
  * {{{
  * val c = implicitly[Codec[(Array[Double], Int)]]
  * val bytes = c.encode((Array(0.5, 1.5), 7))
  * val (w, it) = c.decode(bytes)
  * }}}
  *
  * @tparam T the type of the values
  */
@implicitNotFound(
  "no Codec[${T}] in scope: Warren has codecs for Array[Byte|Float|Double|Int|Long], String, Int, Long, " +
    "Double, Float, Boolean, and tuples, Seq, Vector and Option of codec types; for a case class, put " +
    "`implicit val codec: Codec[C] = Codec.caseClass2(C.apply _, C.unapply _)` (caseClass1 to caseClass5) " +
    "in its companion"
)
trait Codec[T] {

  /** The type's name as the frame records it and as error messages show it, e.g.
    * `(Array[Double],Int)`; decoding checks that the bytes were written under the same name.
    */
  def typeName: String

  /** The payload size of `value` in bytes, as [[write]] writes it.
    *
    * @param value the value
    * @return the number of bytes
    */
  def size(value: T): Int

  /** Writes `value`'s payload (no frame) at the buffer's position (little-endian).
    *
    * @param value the value
    * @param out a buffer with at least [[size]]`(value)` bytes left
    */
  def write(value: T, out: ByteBuffer): Unit

  /** Reads one value's payload (no frame) from the buffer's position.
    *
    * @param in the payload
    * @return the value
    * @throws java.nio.BufferUnderflowException if the payload ends early
    * @throws IllegalArgumentException if the payload holds an impossible value
    */
  def read(in: ByteBuffer): T

  /** The framed bytes of `value`, for `Communicator.checkpoint`.
    *
    * @param value the value
    * @return the frame followed by the payload
    */
  final def encode(value: T): Array[Byte] = Frame.encode(this, value)

  /** The value framed in `bytes` by [[encode]].
    *
    * @param bytes the framed bytes
    * @return the value
    * @throws CheckpointFormatException if the bytes are not a frame, are of another format
    *   version, were written for another type, or are truncated or damaged
    */
  final def decode(bytes: Array[Byte]): T = Frame.decode(this, bytes)

  /** A codec of `U` that writes `U` as this codec writes `T`.
    *
    * @param name the type name of `U` ([[typeName]])
    * @param to makes the `U` from the decoded `T`
    * @param from the `T` to write for a `U`
    * @return the codec of `U`
    */
  final def imap[U](name: String)(to: T => U)(from: U => T): Codec[U] = {
    val self = this
    new Codec[U] {
      val typeName: String = name
      def size(value: U): Int = self.size(from(value))
      def write(value: U, out: ByteBuffer): Unit = self.write(from(value), out)
      def read(in: ByteBuffer): U = to(self.read(in))
    }
  }

  /** This codec under another [[typeName]] (to keep reading checkpoints of a renamed class,
    * say).
    *
    * @param name the new name
    * @return the same encoding under `name`
    */
  final def named(name: String): Codec[T] = imap[T](name)(identity)(identity)
}

/** The codecs Warren provides, found implicitly for `Codec[T]`, and the helpers for case
  * classes.
  *
  * {{{
  * case class Model(weights: Array[Double], step: Int)
  * object Model { implicit val codec: Codec[Model] = Codec.caseClass2(Model.apply _, Model.unapply _) }
  * }}}
  */
object Codec {

  /** The codec of `T` in implicit scope.
    *
    * @param c the codec
    * @tparam T the type
    * @return `c`
    */
  def apply[T](implicit c: Codec[T]): Codec[T] = c

  /** A codec of fixed-size values.
    *
    * @param name the type name
    * @param bytes the payload size
    * @param put writes one value
    * @param get reads one value
    */
  private def fixed[T](name: String, bytes: Int)(put: (ByteBuffer, T) => Unit)(get: ByteBuffer => T): Codec[T] =
    new Codec[T] {
      val typeName: String = name
      def size(value: T): Int = bytes
      def write(value: T, out: ByteBuffer): Unit = put(out, value)
      def read(in: ByteBuffer): T = get(in)
    }

  /** A length, checked against what is left so that damaged bytes never allocate a huge array. */
  private def count(in: ByteBuffer, elementBytes: Int, typeName: String): Int = {
    val n = in.getInt()
    require(n >= 0, s"$typeName: negative length $n")
    require(elementBytes == 0 || n.toLong * elementBytes <= in.remaining(),
      s"$typeName: length $n needs ${n.toLong * elementBytes} bytes but ${in.remaining()} are left")
    n
  }

  /** The codec of primitive arrays: an element count, then the elements.
    *
    * @param name the type name
    * @param elementBytes bytes per element
    * @param put writes the elements
    * @param get reads `n` elements
    */
  private def array[A](name: String, elementBytes: Int)(length: A => Int)(put: (ByteBuffer, A) => Unit)(
      get: (ByteBuffer, Int) => A
  ): Codec[A] =
    new Codec[A] {
      val typeName: String = name
      def size(value: A): Int = Math.addExact(4, Math.multiplyExact(elementBytes, length(value)))
      def write(value: A, out: ByteBuffer): Unit = {
        out.putInt(length(value))
        put(out, value)
      }
      def read(in: ByteBuffer): A = get(in, count(in, elementBytes, name))
    }

  /** Advances `b` by `n` elements of `bytes` each (after a bulk put or get through a view). */
  private def skip(b: ByteBuffer, n: Int, bytes: Int): Unit = b.position(b.position() + n * bytes)

  /** `Array[Byte]`: the length, then the bytes. */
  implicit val bytes: Codec[Array[Byte]] =
    array[Array[Byte]]("Array[Byte]", 1)(_.length)((b, a) => b.put(a)) { (b, n) =>
      val a = new Array[Byte](n); b.get(a); a
    }

  /** `Array[Float]`: the length, then little-endian floats. */
  implicit val floats: Codec[Array[Float]] =
    array[Array[Float]]("Array[Float]", 4)(_.length) { (b, a) =>
      b.asFloatBuffer().put(a); skip(b, a.length, 4)
    } { (b, n) =>
      val a = new Array[Float](n); b.asFloatBuffer().get(a); skip(b, n, 4); a
    }

  /** `Array[Double]`: the length, then little-endian doubles. */
  implicit val doubles: Codec[Array[Double]] =
    array[Array[Double]]("Array[Double]", 8)(_.length) { (b, a) =>
      b.asDoubleBuffer().put(a); skip(b, a.length, 8)
    } { (b, n) =>
      val a = new Array[Double](n); b.asDoubleBuffer().get(a); skip(b, n, 8); a
    }

  /** `Array[Int]`: the length, then little-endian ints. */
  implicit val ints: Codec[Array[Int]] =
    array[Array[Int]]("Array[Int]", 4)(_.length) { (b, a) =>
      b.asIntBuffer().put(a); skip(b, a.length, 4)
    } { (b, n) =>
      val a = new Array[Int](n); b.asIntBuffer().get(a); skip(b, n, 4); a
    }

  /** `Array[Long]`: the length, then little-endian longs. */
  implicit val longs: Codec[Array[Long]] =
    array[Array[Long]]("Array[Long]", 8)(_.length) { (b, a) =>
      b.asLongBuffer().put(a); skip(b, a.length, 8)
    } { (b, n) =>
      val a = new Array[Long](n); b.asLongBuffer().get(a); skip(b, n, 8); a
    }

  /** `String`: its UTF-8 bytes, with their length. */
  implicit val string: Codec[String] =
    bytes.imap("String")(new String(_, UTF_8))(_.getBytes(UTF_8))

  /** `Int`: 4 bytes. */
  implicit val int: Codec[Int] = fixed[Int]("Int", 4)(_.putInt(_))(_.getInt())

  /** `Long`: 8 bytes. */
  implicit val long: Codec[Long] = fixed[Long]("Long", 8)(_.putLong(_))(_.getLong())

  /** `Double`: 8 bytes, every bit kept (NaNs too). */
  implicit val double: Codec[Double] = fixed[Double]("Double", 8)(_.putDouble(_))(_.getDouble())

  /** `Float`: 4 bytes, every bit kept. */
  implicit val float: Codec[Float] = fixed[Float]("Float", 4)(_.putFloat(_))(_.getFloat())

  /** `Boolean`: one byte, 0 or 1. */
  implicit val boolean: Codec[Boolean] = fixed[Boolean]("Boolean", 1)((b, v) => b.put(if (v) 1.toByte else 0.toByte)) {
    b =>
      b.get() match {
        case 0 => false
        case 1 => true
        case x => throw new IllegalArgumentException(s"Boolean: byte $x is neither 0 nor 1")
      }
  }

  /** A sequence as its length, then its elements.
    *
    * @param name the type name
    * @param build makes the collection from the decoded elements
    */
  private def sequence[T, C <: Iterable[T]](name: String, c: Codec[T])(build: Array[Any] => C): Codec[C] =
    new Codec[C] {
      val typeName: String = s"$name[${c.typeName}]"
      def size(value: C): Int = value.foldLeft(4)((n, x) => Math.addExact(n, c.size(x)))
      def write(value: C, out: ByteBuffer): Unit = {
        out.putInt(value.size)
        value.foreach(c.write(_, out))
      }
      def read(in: ByteBuffer): C = {
        // Every element takes at least a byte: damaged bytes never allocate a huge array.
        val n = count(in, 1, typeName)
        val items = new Array[Any](n)
        var i = 0
        while (i < n) { items(i) = c.read(in); i += 1 }
        build(items)
      }
    }

  /** `Seq[T]` (decoded as an immutable `Seq`): the length, then the elements.
    *
    * @param c the elements' codec
    * @tparam T the element type
    * @return the codec
    */
  implicit def seq[T](implicit c: Codec[T]): Codec[Seq[T]] =
    sequence[T, Seq[T]]("Seq", c)(a => a.toSeq.asInstanceOf[Seq[T]])

  /** `Vector[T]`: the length, then the elements.
    *
    * @param c the elements' codec
    * @tparam T the element type
    * @return the codec
    */
  implicit def vector[T](implicit c: Codec[T]): Codec[Vector[T]] =
    sequence[T, Vector[T]]("Vector", c)(a => a.toVector.asInstanceOf[Vector[T]])

  /** `Option[T]`: a byte (0: `None`, 1: `Some`), then the value.
    *
    * @param c the value's codec
    * @tparam T the value type
    * @return the codec
    */
  implicit def option[T](implicit c: Codec[T]): Codec[Option[T]] = new Codec[Option[T]] {
    val typeName: String = s"Option[${c.typeName}]"
    def size(value: Option[T]): Int = 1 + value.fold(0)(c.size)
    def write(value: Option[T], out: ByteBuffer): Unit = value match {
      case None    => out.put(0.toByte)
      case Some(v) => out.put(1.toByte); c.write(v, out)
    }
    def read(in: ByteBuffer): Option[T] = if (boolean.read(in)) Some(c.read(in)) else None
  }

  /** A pair: the first element, then the second.
    *
    * @return the codec
    */
  implicit def tuple2[A, B](implicit a: Codec[A], b: Codec[B]): Codec[(A, B)] = new Codec[(A, B)] {
    val typeName: String = s"(${a.typeName},${b.typeName})"
    def size(v: (A, B)): Int = Math.addExact(a.size(v._1), b.size(v._2))
    def write(v: (A, B), out: ByteBuffer): Unit = { a.write(v._1, out); b.write(v._2, out) }
    def read(in: ByteBuffer): (A, B) = { val x = a.read(in); (x, b.read(in)) }
  }

  /** A triple, element by element.
    *
    * @return the codec
    */
  implicit def tuple3[A, B, C](implicit a: Codec[A], b: Codec[B], c: Codec[C]): Codec[(A, B, C)] =
    new Codec[(A, B, C)] {
      val typeName: String = s"(${a.typeName},${b.typeName},${c.typeName})"
      def size(v: (A, B, C)): Int = Math.addExact(Math.addExact(a.size(v._1), b.size(v._2)), c.size(v._3))
      def write(v: (A, B, C), out: ByteBuffer): Unit = { a.write(v._1, out); b.write(v._2, out); c.write(v._3, out) }
      def read(in: ByteBuffer): (A, B, C) = { val x = a.read(in); val y = b.read(in); (x, y, c.read(in)) }
    }

  /** A 4-tuple, element by element.
    *
    * @return the codec
    */
  implicit def tuple4[A, B, C, D](implicit a: Codec[A], b: Codec[B], c: Codec[C], d: Codec[D]): Codec[(A, B, C, D)] =
    tuple2(tuple2(a, b), tuple2(c, d)).imap(s"(${a.typeName},${b.typeName},${c.typeName},${d.typeName})") {
      case ((w, x), (y, z)) => (w, x, y, z)
    }(v => ((v._1, v._2), (v._3, v._4)))

  /** A 5-tuple, element by element.
    *
    * @return the codec
    */
  implicit def tuple5[A, B, C, D, E](implicit
      a: Codec[A],
      b: Codec[B],
      c: Codec[C],
      d: Codec[D],
      e: Codec[E]
  ): Codec[(A, B, C, D, E)] =
    tuple2(tuple4(a, b, c, d), e).imap(s"(${a.typeName},${b.typeName},${c.typeName},${d.typeName},${e.typeName})") {
      case ((v, w, x, y), z) => (v, w, x, y, z)
    }(t => ((t._1, t._2, t._3, t._4), t._5))

  /** The name of a case class in frames and messages: its simple name and its fields' types. */
  private def className(ct: ClassTag[_], fields: Codec[_]*): String = {
    // `a.b.Outer$Inner` and local classes' `a.b.Test$Inner$1`: the last part that is a name.
    val parts = ct.runtimeClass.getName.split('.').last.split('$').filter(p => p.nonEmpty && !p.forall(_.isDigit))
    val simple = parts.lastOption.getOrElse(ct.runtimeClass.getName)
    fields.map(_.typeName).mkString(s"$simple(", ",", ")")
  }

  /** The codec of a case class of one field, from its companion's `apply` and `unapply`:
    * `Codec.caseClass1(Step.apply _, Step.unapply _)`.
    *
    * @param apply makes the value from its fields
    * @param unapply the value's fields
    * @return the codec, named after the class and its fields' types
    */
  def caseClass1[A, P](apply: A => P, unapply: P => Option[A])(implicit a: Codec[A], ct: ClassTag[P]): Codec[P] =
    a.imap(className(ct, a))(apply)(unapply(_).get)

  /** The codec of a case class of two fields, from its companion's `apply` and `unapply`:
    * `Codec.caseClass2(Model.apply _, Model.unapply _)`.
    *
    * @param apply makes the value from its fields
    * @param unapply the value's fields
    * @return the codec, named after the class and its fields' types (`Model(Array[Double],Int)`)
    */
  def caseClass2[A, B, P](apply: (A, B) => P, unapply: P => Option[(A, B)])(implicit
      a: Codec[A],
      b: Codec[B],
      ct: ClassTag[P]
  ): Codec[P] =
    tuple2(a, b).imap(className(ct, a, b))(apply.tupled)(unapply(_).get)

  /** The codec of a case class of three fields, from its companion's `apply` and `unapply`.
    *
    * @param apply makes the value from its fields
    * @param unapply the value's fields
    * @return the codec, named after the class and its fields' types
    */
  def caseClass3[A, B, C, P](apply: (A, B, C) => P, unapply: P => Option[(A, B, C)])(implicit
      a: Codec[A],
      b: Codec[B],
      c: Codec[C],
      ct: ClassTag[P]
  ): Codec[P] =
    tuple3(a, b, c).imap(className(ct, a, b, c))(apply.tupled)(unapply(_).get)

  /** The codec of a case class of four fields, from its companion's `apply` and `unapply`.
    *
    * @param apply makes the value from its fields
    * @param unapply the value's fields
    * @return the codec, named after the class and its fields' types
    */
  def caseClass4[A, B, C, D, P](apply: (A, B, C, D) => P, unapply: P => Option[(A, B, C, D)])(implicit
      a: Codec[A],
      b: Codec[B],
      c: Codec[C],
      d: Codec[D],
      ct: ClassTag[P]
  ): Codec[P] =
    tuple4(a, b, c, d).imap(className(ct, a, b, c, d))(apply.tupled)(unapply(_).get)

  /** The codec of a case class of five fields, from its companion's `apply` and `unapply`.
    *
    * @param apply makes the value from its fields
    * @param unapply the value's fields
    * @return the codec, named after the class and its fields' types
    */
  def caseClass5[A, B, C, D, E, P](apply: (A, B, C, D, E) => P, unapply: P => Option[(A, B, C, D, E)])(implicit
      a: Codec[A],
      b: Codec[B],
      c: Codec[C],
      d: Codec[D],
      e: Codec[E],
      ct: ClassTag[P]
  ): Codec[P] =
    tuple5(a, b, c, d, e).imap(className(ct, a, b, c, d, e))(apply.tupled)(unapply(_).get)
}

/** Checkpoint bytes that [[Codec.decode]] cannot take: not a typed checkpoint, another format
  * version, another type, or truncated or damaged bytes. The message names what was expected,
  * what was found and what to do.
  *
  * @param message the whole explanation
  * @param expected what the decoder expected (a type name, a magic, a length, a CRC)
  * @param found what the bytes hold instead
  */
final class CheckpointFormatException(message: String, val expected: String, val found: String)
    extends RuntimeException(message)

/** The frame of [[Codec.encode]]: the magic `WRNC`, a format version (u16), the type name
  * (u16 length and UTF-8), the payload's length (u32), the CRC32 of the payload (u32), then the
  * payload; numbers little-endian.
  */
private[scaladsl] object Frame {

  /** The first four bytes of every frame: `WRNC`. */
  val Magic: Int = 0x434e5257 // "WRNC" read as a little-endian int

  /** The format version this library writes and reads. */
  val Version: Int = 1

  private def hex(b: Array[Byte], n: Int): String = b.take(n).map(x => f"$x%02x").mkString

  private def fail(msg: String, expected: String, found: String): Nothing =
    throw new CheckpointFormatException(msg, expected, found)

  def encode[T](c: Codec[T], value: T): Array[Byte] = {
    val name = c.typeName.getBytes(UTF_8)
    require(name.length <= 0xffff, s"type name of ${name.length} bytes is too long")
    val payload = c.size(value)
    val header = 4 + 2 + 2 + name.length + 4 + 4
    val out = ByteBuffer.allocate(Math.addExact(header, payload)).order(ByteOrder.LITTLE_ENDIAN)
    out.putInt(Magic).putShort(Version.toShort).putShort(name.length.toShort).put(name)
    out.putInt(payload).putInt(0) // the CRC, filled in below
    val body = out.slice().order(ByteOrder.LITTLE_ENDIAN)
    c.write(value, body)
    if (body.position() != payload) {
      throw new IllegalStateException(s"codec ${c.typeName} wrote ${body.position()} bytes, its size said $payload")
    }
    val crc = new CRC32()
    crc.update(out.array(), header, payload)
    out.putInt(header - 4, crc.getValue.toInt)
    out.array()
  }

  def decode[T](c: Codec[T], bytes: Array[Byte]): T = {
    val want = c.typeName
    val in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
    if (bytes.length < 12 || in.getInt(0) != Magic) {
      val what = if (bytes.isEmpty) "no bytes" else s"${bytes.length} bytes starting ${hex(bytes, 8)}"
      fail(
        s"the checkpoint is not a typed checkpoint of $want: expected the magic WRNC, found $what. It was " +
          "written as raw bytes (Communicator.checkpoint(byte[], byte[])) or by another program: " +
          "write it with comm.checkpoint(value) (io.warren.scaladsl) or read it with comm.loadCheckpoint()",
        "magic WRNC",
        what
      )
    }
    in.position(4)
    val version = in.getShort() & 0xffff
    if (version != Version) {
      fail(
        s"the checkpoint of $want has format version $version, this library reads version $Version: " +
          "load it with the Warren version that wrote it, or start the job afresh",
        s"format version $Version",
        s"format version $version"
      )
    }
    val nameLen = in.getShort() & 0xffff
    if (in.remaining() < nameLen + 8) {
      fail(
        s"the checkpoint of $want is truncated: its header needs ${12 + nameLen} bytes, there are " +
          s"${bytes.length}: restore the checkpoint from an intact copy or start the job afresh",
        s"${12 + nameLen} header bytes",
        s"${bytes.length} bytes"
      )
    }
    val nameBytes = new Array[Byte](nameLen)
    in.get(nameBytes)
    val found = new String(nameBytes, UTF_8)
    if (found != want) {
      fail(
        s"the checkpoint holds a $found, expected a $want: load it with the codec of the type it was " +
          s"written with (Codec[$found]), or start the job afresh (a new checkpoint directory) to train " +
          s"from scratch with $want",
        want,
        found
      )
    }
    val length = in.getInt().toLong & 0xffffffffL
    val stored = in.getInt()
    if (length != in.remaining()) {
      fail(
        s"the checkpoint of $want is truncated or damaged: its frame says $length payload bytes, " +
          s"${in.remaining()} follow: restore the checkpoint from an intact copy or start the job afresh",
        s"$length payload bytes",
        s"${in.remaining()} payload bytes"
      )
    }
    val crc = new CRC32()
    crc.update(bytes, in.position(), in.remaining())
    if (crc.getValue.toInt != stored) {
      fail(
        f"the checkpoint of $want is damaged: the CRC32 of its payload is ${crc.getValue.toInt}%08x, " +
          f"its frame says $stored%08x: restore the checkpoint from an intact copy or start the job afresh",
        f"CRC32 $stored%08x",
        f"CRC32 ${crc.getValue.toInt}%08x"
      )
    }
    val payload = in.slice().order(ByteOrder.LITTLE_ENDIAN)
    val value =
      try c.read(payload)
      catch {
        case e @ (_: BufferUnderflowException | _: IllegalArgumentException) =>
          val why = Option(e.getMessage).getOrElse("the payload ends early")
          fail(
            s"the checkpoint's payload does not decode as $want ($why): it was written by another codec " +
              s"under the same name; give one of the codecs another name (Codec.named)",
            s"a payload of $want",
            why
          )
      }
    if (payload.hasRemaining) {
      fail(
        s"the checkpoint's payload of ${payload.limit()} bytes holds ${payload.remaining()} bytes more than " +
          s"a $want: it was written by another codec under the same name; give one of the codecs another " +
          "name (Codec.named)",
        s"${payload.position()} payload bytes",
        s"${payload.limit()} payload bytes"
      )
    }
    value
  }
}

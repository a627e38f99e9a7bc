package io.warren.scaladsl

import java.nio.{ByteBuffer, ByteOrder}

import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

/** A case class of the tests, with its codec in its companion. */
final case class TestModel(weights: Array[Double], step: Int, name: String)

/** The codec of [[TestModel]]. */
object TestModel {

  /** Found implicitly for `Codec[TestModel]`. */
  implicit val codec: Codec[TestModel] = Codec.caseClass3(TestModel.apply _, TestModel.unapply _)
}

/** A case class with the same fields' types as [[TestModel]] but another name. */
final case class OtherModel(weights: Array[Double], step: Int, name: String)

/** The codecs: every instance decodes what it encoded, and the frame's checks refuse the rest. */
class CodecTest {

  private def decoded[T](value: T)(implicit c: Codec[T]): T = c.decode(c.encode(value))

  private def refused[T](bytes: Array[Byte])(implicit c: Codec[T]): CheckpointFormatException =
    assertThrows(classOf[CheckpointFormatException], () => c.decode(bytes))

  @Test
  def primitiveArraysDecodeBitForBit(): Unit = {
    assertArrayEquals(Array[Byte](1, -2, 127), decoded(Array[Byte](1, -2, 127)))
    assertArrayEquals(Array(1.5f, Float.NaN, -0f, Float.MaxValue), decoded(Array(1.5f, Float.NaN, -0f, Float.MaxValue)), 0f)
    val d = Array(0.1, Double.NaN, -0.0, Double.MinPositiveValue, Double.NegativeInfinity)
    assertArrayEquals(d.map(java.lang.Double.doubleToRawLongBits), decoded(d).map(java.lang.Double.doubleToRawLongBits))
    assertArrayEquals(Array(1, -1, Int.MaxValue, Int.MinValue), decoded(Array(1, -1, Int.MaxValue, Int.MinValue)))
    assertArrayEquals(Array(1L << 40, -1L, Long.MinValue), decoded(Array(1L << 40, -1L, Long.MinValue)))
    assertEquals(0, decoded(Array.empty[Double]).length)
    val big = Array.tabulate(100000)(i => i * 0.25)
    assertArrayEquals(big, decoded(big), 0.0)
  }

  @Test
  def scalarsAndStringsDecodeAsEncoded(): Unit = {
    assertEquals(-7, decoded(-7))
    assertEquals(Long.MaxValue, decoded(Long.MaxValue))
    assertEquals(2.5, decoded(2.5))
    assertEquals(1.25f, decoded(1.25f))
    assertEquals(true, decoded(true))
    assertEquals(false, decoded(false))
    assertEquals("", decoded(""))
    assertEquals("grüße, 世界", decoded("grüße, 世界"))
  }

  @Test
  def tuplesSeqsVectorsAndOptionsDecodeAsEncoded(): Unit = {
    val (w, n) = decoded((Array(1.0, 2.0), 3))
    assertArrayEquals(Array(1.0, 2.0), w, 0.0)
    assertEquals(3, n)
    assertEquals((1, "a", 2L), decoded((1, "a", 2L)))
    assertEquals((1, 2, 3, "four"), decoded((1, 2, 3, "four")))
    assertEquals((1, 2.0, 3L, "four", false), decoded((1, 2.0, 3L, "four", false)))
    assertEquals(Seq("x", "yz", ""), decoded(Seq("x", "yz", "")))
    assertEquals(Seq.empty[Int], decoded(Seq.empty[Int]))
    assertEquals(Vector(1L, 2L, 3L), decoded(Vector(1L, 2L, 3L)))
    assertEquals(Vector(Seq(1, 2), Seq(3)), decoded(Vector(Seq(1, 2), Seq(3))))
    assertEquals(Some(4), decoded(Option(4)))
    assertEquals(None, decoded(Option.empty[String]))
    val nested = decoded(Seq((Array(1f), Option("a")), (Array(2f, 3f), None)))
    assertEquals(Seq(Seq(1f), Seq(2f, 3f)), nested.map(_._1.toSeq))
    assertEquals(Seq(Some("a"), None), nested.map(_._2))
  }

  @Test
  def caseClassesDecodeAndCarryTheirNameAndFields(): Unit = {
    val m = decoded(TestModel(Array(0.5, -1.5), 12, "lr"))
    assertArrayEquals(Array(0.5, -1.5), m.weights, 0.0)
    assertEquals((12, "lr"), (m.step, m.name))
    assertEquals("TestModel(Array[Double],Int,String)", Codec[TestModel].typeName)
    case class Step(n: Long)
    implicit val step: Codec[Step] = Codec.caseClass1(Step.apply _, Step.unapply _)
    assertEquals(Step(9L), decoded(Step(9L)))
    assertEquals("Step(Long)", step.typeName)
    case class P2(a: Int, b: String)
    case class P4(a: Int, b: Int, c: Int, d: P2)
    case class P5(a: Int, b: Int, c: Int, d: Int, e: Seq[P2])
    implicit val p2: Codec[P2] = Codec.caseClass2(P2.apply _, P2.unapply _)
    implicit val p4: Codec[P4] = Codec.caseClass4(P4.apply _, P4.unapply _)
    implicit val p5: Codec[P5] = Codec.caseClass5(P5.apply _, P5.unapply _)
    assertEquals(P4(1, 2, 3, P2(4, "x")), decoded(P4(1, 2, 3, P2(4, "x"))))
    assertEquals(P5(1, 2, 3, 4, Seq(P2(5, "y"))), decoded(P5(1, 2, 3, 4, Seq(P2(5, "y")))))
    assertEquals("P4(Int,Int,Int,P2(Int,String))", p4.typeName)
  }

  @Test
  def imapAndNamedChangeTheTypeName(): Unit = {
    val c = Codec[Int].imap("Celsius")(BigDecimal(_))(_.toInt)
    assertEquals(BigDecimal(21), c.decode(c.encode(BigDecimal(21))))
    val renamed = TestModel.codec.named("Model(Array[Double],Int,String)")
    assertEquals(7, renamed.decode(renamed.encode(TestModel(Array.empty, 7, ""))).step)
  }

  @Test
  def anotherTypeFailsNamingBothTypes(): Unit = {
    val bytes = Codec[(Array[Double], Int)].encode((Array(1.0), 2))
    val e = refused[Array[Double]](bytes)
    assertEquals("Array[Double]", e.expected)
    assertEquals("(Array[Double],Int)", e.found)
    assertTrue(e.getMessage.startsWith("the checkpoint holds a (Array[Double],Int), expected a Array[Double]"), e.getMessage)
    assertTrue(e.getMessage.contains("start the job afresh"), e.getMessage)
    // Same fields, another class: refused too.
    implicit val other: Codec[OtherModel] = Codec.caseClass3(OtherModel.apply _, OtherModel.unapply _)
    val o = refused[OtherModel](TestModel.codec.encode(TestModel(Array(1.0), 1, "x")))
    assertEquals("TestModel(Array[Double],Int,String)", o.found)
    assertEquals("OtherModel(Array[Double],Int,String)", o.expected)
  }

  @Test
  def rawBytesFailNamingTheMagic(): Unit = {
    val raw = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putDouble(1.0).putDouble(2.0).array()
    val e = refused[Array[Double]](raw)
    assertEquals("magic WRNC", e.expected)
    assertEquals("16 bytes starting 000000000000f03f", e.found)
    assertTrue(e.getMessage.contains("written as raw bytes"), e.getMessage)
    assertEquals("no bytes", refused[Array[Double]](Array.empty).found)
  }

  @Test
  def anotherFormatVersionFailsNamingBoth(): Unit = {
    val bytes = Codec[Int].encode(5)
    bytes(4) = 2
    val e = refused[Int](bytes)
    assertEquals(("format version 1", "format version 2"), (e.expected, e.found))
  }

  @Test
  def truncatedBytesFailNamingTheLengths(): Unit = {
    val bytes = Codec[Array[Int]].encode(Array(1, 2, 3))
    val e = refused[Array[Int]](bytes.dropRight(1))
    assertEquals(("16 payload bytes", "15 payload bytes"), (e.expected, e.found))
    assertTrue(e.getMessage.contains("truncated or damaged"), e.getMessage)
    assertEquals("16 payload bytes", refused[Array[Int]](bytes :+ 0.toByte).expected)
    val header = refused[Array[Int]](bytes.take(14))
    assertTrue(header.getMessage.contains("truncated"), header.getMessage)
  }

  @Test
  def aFlippedPayloadBitFailsTheCrc(): Unit = {
    val bytes = Codec[Array[Double]].encode(Array(1.0, 2.0))
    bytes(bytes.length - 1) = (bytes(bytes.length - 1) ^ 0x10).toByte
    val e = refused[Array[Double]](bytes)
    assertTrue(e.expected.startsWith("CRC32 ") && e.found.startsWith("CRC32 ") && e.expected != e.found, e.getMessage)
    assertTrue(e.getMessage.contains("damaged"), e.getMessage)
  }

  @Test
  def aPayloadOfAnotherCodecUnderTheSameNameFails(): Unit = {
    val short = Codec[Int].named("Thing")
    val long = Codec[Long].named("Thing")
    val under = refused[Long](short.encode(1))(long)
    assertTrue(under.getMessage.contains("does not decode as Thing"), under.getMessage)
    val over = refused[Int](long.encode(1L))(short)
    assertEquals(("4 payload bytes", "8 payload bytes"), (over.expected, over.found))
    // A length that the payload cannot hold is refused before anything is allocated.
    val lying = Codec[Int].named("Array[Double]").encode(Int.MaxValue)
    assertTrue(refused[Array[Double]](lying).getMessage.contains("length 2147483647 needs"))
  }
}

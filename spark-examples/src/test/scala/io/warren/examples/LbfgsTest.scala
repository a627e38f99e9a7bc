package io.warren.examples

import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals, assertThrows, assertTrue}
import org.junit.jupiter.api.Test

/** [[Lbfgs]] driven one evaluation at a time, as the logistic-regression workers drive it. */
class LbfgsTest {

  /** f(x) = sum_j c_j (x_j - t_j)^2 / 2 + (x_0 x_1) / 4: ill-conditioned (c from 1 to 1000),
    * coupled, minimum where the gradient vanishes.
    */
  private val dim = 12
  private val c = Array.tabulate(dim)(j => math.pow(1000.0, j / (dim - 1.0)))
  private val t = Array.tabulate(dim)(j => (j % 5) - 2.0)

  private def loss(x: Array[Double]): Double =
    (0 until dim).map(j => c(j) * (x(j) - t(j)) * (x(j) - t(j)) / 2).sum + x(0) * x(1) / 4

  private def grad(x: Array[Double]): Array[Double] = {
    val g = Array.tabulate(dim)(j => c(j) * (x(j) - t(j)))
    g(0) += x(1) / 4
    g(1) += x(0) / 4
    g
  }

  private def drive(o: Lbfgs, evaluations: Int): Unit =
    for (_ <- 0 until evaluations) o.observe(loss(o.trial), grad(o.trial))

  @Test
  def convergesOnAnIllConditionedQuadratic(): Unit = {
    // With a memory of `dim` steps and a backtracking search, 120 evaluations are plenty here
    // (about 90 reach a gradient norm of 1e-7).
    val o = Lbfgs.start(new Array[Double](dim), memory = dim)
    drive(o, 120)
    // The minimum solved by hand: coordinates 2.. are t; (x0, x1) solve the 2x2 system
    // c0 (x0 - t0) + x1/4 = 0, c1 (x1 - t1) + x0/4 = 0.
    val (a, b) = (c(0), c(1))
    val det = a * b - 1.0 / 16
    val x0 = (a * t(0) * b - t(1) * b / 4) / det
    val x1 = (b * t(1) * a - t(0) * a / 4) / det
    val want = Array(x0, x1) ++ t.drop(2)
    for (j <- 0 until dim) assertEquals(want(j), o.x(j), 1e-5, s"coordinate $j")
    assertTrue(math.sqrt(grad(o.x).map(v => v * v).sum) < 1e-5, "gradient norm at the result")
    assertEquals(loss(o.x), o.loss, 0.0, "the state's loss is the loss at its point")
  }

  @Test
  def neverAcceptsAnIncrease(): Unit = {
    val o = Lbfgs.start(Array.fill(dim)(5.0), memory = 3)
    var best = Double.PositiveInfinity
    for (_ <- 0 until 60) {
      o.observe(loss(o.trial), grad(o.trial))
      assertTrue(o.loss <= best, s"accepted loss ${o.loss} above an earlier one $best")
      best = o.loss
    }
  }

  @Test
  def aRestoredStateGoesOnBitForBit(): Unit = {
    val a = Lbfgs.start(Array.fill(dim)(1.5), memory = 4)
    drive(a, 9) // the history ring has wrapped around
    val saved = a.toDoubles
    assertEquals(Lbfgs.doubles(dim, 4), saved.length)
    val b = Lbfgs.fromDoubles(Array(7.0) ++ saved, offset = 1)
    drive(a, 15)
    drive(b, 15)
    assertArrayEquals(a.x, b.x, 0.0)
    assertArrayEquals(a.trial, b.trial, 0.0)
    assertArrayEquals(a.toDoubles, b.toDoubles, 0.0)
  }

  @Test
  def aForcedAcceptanceMakesTheTrialTheResult(): Unit = {
    val o = Lbfgs.start(Array.fill(dim)(3.0), memory = 4)
    drive(o, 5)
    val trial = o.trial.clone()
    o.observe(Double.MaxValue, grad(trial), accept = true)
    assertArrayEquals(trial, o.x, 0.0)
  }

  @Test
  def badStatesAreRefused(): Unit = {
    assertThrows(classOf[IllegalArgumentException], () => Lbfgs.fromDoubles(Array(3.0, 2.0, 0.0)))
    val o = Lbfgs.start(Array(1.0, 2.0), memory = 2)
    assertThrows(classOf[IllegalArgumentException], () => o.observe(1.0, Array(1.0)))
  }
}

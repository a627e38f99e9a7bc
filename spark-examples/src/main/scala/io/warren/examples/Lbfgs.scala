package io.warren.examples

/** L-BFGS with a backtracking (Armijo) line search, driven one function evaluation at a time,
  * so that a distributed job can evaluate the loss and gradient at [[trial]] (one pass over the
  * data and one allreduce), hand them to [[observe]], and checkpoint the whole state
  * ([[toDoubles]]) after every evaluation. Pure arithmetic, no I/O: every worker that observes
  * the same (allreduced) values holds the same state bit for bit, and a worker restored from
  * [[Lbfgs.fromDoubles]] goes on exactly as the others.
  *
  * Each evaluation either accepts the trial point (sufficient decrease, or the caller forces it)
  * and takes a new quasi-Newton direction from the last `memory` steps, or halves the step.
  *
  * @param dim the number of parameters
  * @param memory how many past steps the inverse-Hessian estimate keeps
  */
final class Lbfgs private (val dim: Int, val memory: Int) {
  require(dim >= 1 && memory >= 1, s"dim and memory must be at least 1, got $dim, $memory")

  /** The last accepted point. */
  val x = new Array[Double](dim)

  /** The point to evaluate next. */
  val trial = new Array[Double](dim)

  private val gx = new Array[Double](dim)
  private val dir = new Array[Double](dim)
  private val s = Array.ofDim[Double](memory, dim)
  private val y = Array.ofDim[Double](memory, dim)
  private var fx = Double.NaN
  private var alpha = 1.0
  private var stored = 0 // steps held in s and y (at most memory)
  private var pushes = 0 // steps ever pushed: the newest is in slot (pushes - 1) % memory

  /** The loss at [[x]] (NaN before the first evaluation). */
  def loss: Double = fx

  /** Takes the loss and gradient at [[trial]] and picks the next trial point.
    *
    * @param f the loss at [[trial]]
    * @param g the gradient at [[trial]] (`dim` values; not kept)
    * @param accept accept the trial point even without sufficient decrease (e.g. the loss
    *   reached the caller's target, which makes it the result)
    */
  def observe(f: Double, g: Array[Double], accept: Boolean = false): Unit = {
    require(g.length >= dim, s"the gradient has ${g.length} values, expected $dim")
    if (fx.isNaN || accept || f <= fx + Lbfgs.SufficientDecrease * alpha * dot(gx, dir)) take(f, g)
    else {
      alpha *= 0.5
      if (alpha < Lbfgs.SmallestStep) restart() // no decrease along this direction: steepest descent
    }
    for (j <- 0 until dim) trial(j) = x(j) + alpha * dir(j)
  }

  private def take(f: Double, g: Array[Double]): Unit = {
    if (!fx.isNaN) {
      val step = Array.tabulate(dim)(j => trial(j) - x(j))
      val change = Array.tabulate(dim)(j => g(j) - gx(j))
      // Keep a step only if it keeps the estimate positive definite (curvature condition).
      if (dot(step, change) > 1e-12 * math.sqrt(dot(step, step) * dot(change, change))) {
        val slot = pushes % memory
        System.arraycopy(step, 0, s(slot), 0, dim)
        System.arraycopy(change, 0, y(slot), 0, dim)
        pushes += 1
        stored = math.min(stored + 1, memory)
      }
    }
    System.arraycopy(trial, 0, x, 0, dim)
    System.arraycopy(g, 0, gx, 0, dim)
    fx = f
    direction()
    if (dot(dir, gx) >= 0) restart()
    else alpha = if (stored == 0) firstStep() else 1.0
  }

  /** Forgets the past steps and goes down the gradient. */
  private def restart(): Unit = {
    stored = 0
    for (j <- 0 until dim) dir(j) = -gx(j)
    alpha = firstStep()
  }

  /** A first step of length at most 1 along the steepest descent. */
  private def firstStep(): Double = {
    val norm = math.sqrt(dot(gx, gx))
    if (norm > 1.0) 1.0 / norm else 1.0
  }

  /** `dir = -H g` by the two-loop recursion over the stored steps, newest first. */
  private def direction(): Unit = {
    val q = gx.clone()
    val a = new Array[Double](stored)
    for (k <- 0 until stored) {
      val i = Math.floorMod(pushes - 1 - k, memory)
      a(k) = dot(s(i), q) / dot(y(i), s(i))
      for (j <- 0 until dim) q(j) -= a(k) * y(i)(j)
    }
    if (stored > 0) {
      val newest = Math.floorMod(pushes - 1, memory)
      val gamma = dot(s(newest), y(newest)) / dot(y(newest), y(newest))
      for (j <- 0 until dim) q(j) *= gamma
    }
    for (k <- stored - 1 to 0 by -1) {
      val i = Math.floorMod(pushes - 1 - k, memory)
      val b = dot(y(i), q) / dot(y(i), s(i))
      for (j <- 0 until dim) q(j) += s(i)(j) * (a(k) - b)
    }
    for (j <- 0 until dim) dir(j) = -q(j)
  }

  private def dot(u: Array[Double], v: Array[Double]): Double = {
    var acc = 0.0
    var j = 0
    while (j < dim) {
      acc += u(j) * v(j)
      j += 1
    }
    acc
  }

  /** The whole state as doubles (for a checkpoint): see [[Lbfgs.fromDoubles]]. */
  def toDoubles: Array[Double] = {
    val head = Array(dim.toDouble, memory.toDouble, fx, alpha, stored.toDouble, pushes.toDouble)
    Array.concat(head, x, trial, gx, dir, Array.concat(s.toIndexedSeq: _*), Array.concat(y.toIndexedSeq: _*))
  }
}

/** Construction of [[Lbfgs]] states. */
object Lbfgs {

  /** Armijo's constant: a step must decrease the loss by this fraction of the linear model's
    * prediction.
    */
  val SufficientDecrease = 1e-4

  /** Below this step length the search gives up the direction and restarts. */
  val SmallestStep = 1e-20

  /** How many doubles [[Lbfgs.toDoubles]] writes for `dim` parameters and `memory` steps. */
  def doubles(dim: Int, memory: Int): Int = 6 + 4 * dim + 2 * memory * dim

  /** A state whose first evaluation is at `x0`.
    *
    * @param x0 the starting point
    * @param memory how many past steps to keep
    */
  def start(x0: Array[Double], memory: Int): Lbfgs = {
    val o = new Lbfgs(x0.length, memory)
    System.arraycopy(x0, 0, o.trial, 0, x0.length)
    o
  }

  /** The state written by [[Lbfgs.toDoubles]], read from `v` at `offset`.
    *
    * @param v the doubles
    * @param offset where the state begins
    */
  def fromDoubles(v: Array[Double], offset: Int = 0): Lbfgs = {
    require(v.length - offset >= 6, "too few values for an L-BFGS state")
    val dim = v(offset).toInt
    val memory = v(offset + 1).toInt
    require(v.length - offset >= doubles(dim, memory), s"an L-BFGS state of $dim x $memory needs ${doubles(dim, memory)} values")
    val o = new Lbfgs(dim, memory)
    o.fx = v(offset + 2)
    o.alpha = v(offset + 3)
    o.stored = v(offset + 4).toInt
    o.pushes = v(offset + 5).toInt
    var at = offset + 6
    for (a <- Seq(o.x, o.trial, o.gx, o.dir) ++ o.s ++ o.y) {
      System.arraycopy(v, at, a, 0, dim)
      at += dim
    }
    o
  }
}

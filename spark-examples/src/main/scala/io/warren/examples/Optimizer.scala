package io.warren.examples

/** The state of [[LogisticRegression]]'s optimizer between iterations, as doubles for the
  * checkpoint: gradient descent's weights, or L-BFGS's whole state ([[Lbfgs]]). Every worker
  * that takes the same (allreduced) loss and gradient holds the same state bit for bit.
  */
sealed trait Optimizer {

  /** The point whose loss and gradient the next pass computes. */
  def point: Array[Double]

  /** Takes the pass's mean loss and gradient (`sums(j) / total`); `last` marks the iteration
    * that ends training.
    */
  def step(loss: Double, sums: Array[Double], total: Double, last: Boolean): Unit

  /** The model: the weights the training ends with. */
  def weights: Array[Double]

  /** The state as doubles, for the checkpoint. */
  def state: Array[Double]
}

/** Makes the optimizers by name: `gd` (gradient descent) or `lbfgs`. */
object Optimizer {

  /** The names [[apply]] takes. */
  val names: Set[String] = Set("gd", "lbfgs")

  /** The state an optimizer starts from at the weights `w`.
    *
    * @param name `gd` or `lbfgs`
    * @param w the initial weights
    * @param memory past steps L-BFGS keeps
    */
  def initial(name: String, w: Array[Double], memory: Int): Array[Double] =
    if (name == "gd") w else Lbfgs.start(w, memory).toDoubles

  /** The optimizer `name` holding `state` (from [[initial]] or a checkpoint).
    *
    * @param name `gd` or `lbfgs`
    * @param state its state as doubles (gradient descent updates the array in place)
    * @param stepSize gradient descent's learning rate
    */
  def apply(name: String, state: Array[Double], stepSize: Double): Optimizer =
    if (name == "gd") new GradientDescent(state, stepSize) else new Quasinewton(Lbfgs.fromDoubles(state))

  private final class GradientDescent(w: Array[Double], stepSize: Double) extends Optimizer {
    def point: Array[Double] = w
    def step(loss: Double, sums: Array[Double], total: Double, last: Boolean): Unit =
      for (j <- w.indices) w(j) -= stepSize * sums(j) / total
    def weights: Array[Double] = w
    def state: Array[Double] = w
  }

  private final class Quasinewton(o: Lbfgs) extends Optimizer {
    def point: Array[Double] = o.trial
    private val grad = new Array[Double](o.dim)
    // The iteration that ends training (target loss reached) makes its point the model.
    def step(loss: Double, sums: Array[Double], total: Double, last: Boolean): Unit = {
      for (j <- grad.indices) grad(j) = sums(j) / total
      o.observe(loss, grad, accept = last)
    }
    def weights: Array[Double] = o.x
    def state: Array[Double] = o.toDoubles
  }
}

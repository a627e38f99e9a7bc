package io.warren.ps;

import java.util.Objects;

/**
 * A table's server-side optimizer and its hyper-parameters; the servers apply it to the summed
 * gradients, and its state (momentum, accumulators) lives in their shards and checkpoints.
 */
public final class PsOptimizer {
  private final String spec;

  private PsOptimizer(String spec) {
    this.spec = spec;
  }

  /**
   * {@code p -= lr * g}.
   *
   * @param lr the learning rate
   * @return the optimizer
   */
  public static PsOptimizer sgd(float lr) {
    return new PsOptimizer("sgd:" + lr);
  }

  /**
   * {@code v = momentum * v + g; p -= lr * v}.
   *
   * @param lr the learning rate
   * @param momentum decay of the velocity, in [0, 1)
   * @return the optimizer
   */
  public static PsOptimizer momentum(float lr, float momentum) {
    return new PsOptimizer("momentum:" + lr + ":" + momentum);
  }

  /**
   * {@code a += g * g; p -= lr * g / (sqrt(a) + eps)}.
   *
   * @param lr the learning rate
   * @param eps added to the denominator
   * @param initialAccumulator the starting value of {@code a}
   * @return the optimizer
   */
  public static PsOptimizer adagrad(float lr, float eps, float initialAccumulator) {
    return new PsOptimizer("adagrad:" + lr + ":" + eps + ":" + initialAccumulator);
  }

  /**
   * Adam with bias correction.
   *
   * @param lr the learning rate
   * @param beta1 decay of the first moment, in [0, 1)
   * @param beta2 decay of the second moment, in [0, 1)
   * @param eps added to the denominator
   * @return the optimizer
   */
  public static PsOptimizer adam(float lr, float beta1, float beta2, float eps) {
    return new PsOptimizer("adam:" + lr + ":" + beta1 + ":" + beta2 + ":" + eps);
  }

  /**
   * Adam with the usual defaults ({@code beta1} 0.9, {@code beta2} 0.999, {@code eps} 1e-8).
   *
   * @param lr the learning rate
   * @return the optimizer
   */
  public static PsOptimizer adam(float lr) {
    return adam(lr, 0.9f, 0.999f, 1e-8f);
  }

  /**
   * The optimizer as {@code warren ps-train --optimizer} writes it ({@code sgd:0.1}, ...).
   *
   * @return the spec
   */
  public String spec() {
    return spec;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PsOptimizer && ((PsOptimizer) o).spec.equals(spec);
  }

  @Override
  public int hashCode() {
    return Objects.hash(spec);
  }

  @Override
  public String toString() {
    return spec;
  }
}

package io.warren.examples.flink;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;

/** The parameters of the {@link LogisticRegression} job. */
public final class TrainingParams implements Serializable {
  private static final long serialVersionUID = 1L;
  /** Warren workers (parallel subtasks). */
  public int workers = 3;
  /** Rows of synthetic data in all. */
  public int rows = 100000;
  /** Features per row. */
  public int features = 20;
  /** Gradient steps. */
  public int iters = 20;
  /** The learning rate. */
  public double stepSize = 1.0;
  /** Seed of the data and of the initial weights. */
  public long seed = 20240601L;
  /** {@code warren.*} settings. */
  public Map<String, String> settings = new HashMap<>(Map.of("bootstrapCache", "true"));
  /** Calls into the worker loop ({@link Faults} injects failures through them). */
  public Hooks hooks = Hooks.NONE;
}

package io.warren.ps;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * What a parameter-server job runs: its number of trainers, its consistency mode and its
 * tables. The first trainer to {@link PsClient#define(PsJob) define} it sets it on every
 * server; the same job again is a no-op, a different one an error.
 *
 * <pre>{@code
 * PsJob job = PsJob.builder(4).sync()
 *     .sparse("emb", 16, PsJob.uniform(0.01f, 7), PsOptimizer.adagrad(0.1f, 1e-8f, 0.1f))
 *     .dense("bias", 1, PsJob.zeros(), PsOptimizer.sgd(0.1f))
 *     .build();
 * }</pre>
 */
public final class PsJob {
  /** The consistency modes. */
  public enum Mode {
    /** Bulk-synchronous: step n is applied once every live trainer pushed it. */
    SYNC,
    /** Every push applied on arrival; pulls never wait. */
    ASYNC,
    /** Pushes applied on arrival; no trainer more than {@code staleness} steps ahead. */
    SSP
  }

  /** How a table's parameters start. */
  public static final class Init {
    final float scale;
    final long seed;

    private Init(float scale, long seed) {
      this.scale = scale;
      this.seed = seed;
    }

    @Override
    public String toString() {
      return Float.isNaN(scale) ? "zeros" : "uniform(" + scale + ", seed " + seed + ")";
    }
  }

  /** One table of a job. */
  public static final class Table {
    final String name;
    final boolean sparse;
    final long size;
    final Init init;
    final PsOptimizer optimizer;
    final long expectedRows;

    private Table(
        String name, boolean sparse, long size, long expectedRows, Init init, PsOptimizer optimizer) {
      this.name = Objects.requireNonNull(name, "name");
      this.sparse = sparse;
      this.size = size;
      this.expectedRows = expectedRows;
      this.init = Objects.requireNonNull(init, "init");
      this.optimizer = Objects.requireNonNull(optimizer, "optimizer");
    }

    /**
     * The table's name.
     *
     * @return the name
     */
    public String name() {
      return name;
    }

    /**
     * Whether the table is sparse (rows by key) rather than dense.
     *
     * @return true if sparse
     */
    public boolean isSparse() {
      return sparse;
    }

    /**
     * A dense table's length, or a sparse table's row width.
     *
     * @return the size
     */
    public long size() {
      return size;
    }

    /**
     * The rows a sparse table expects in all (0: not known, and for a dense table).
     *
     * @return the hint
     */
    public long expectedRows() {
      return expectedRows;
    }
  }

  private final int trainers;
  private final Mode mode;
  private final long staleness;
  private final List<Table> tables;

  private PsJob(int trainers, Mode mode, long staleness, List<Table> tables) {
    this.trainers = trainers;
    this.mode = mode;
    this.staleness = staleness;
    this.tables = Collections.unmodifiableList(new ArrayList<>(tables));
  }

  /**
   * All parameters start at zero.
   *
   * @return the initializer
   */
  public static Init zeros() {
    return new Init(Float.NaN, 0);
  }

  /**
   * Parameters start uniform in {@code [-scale, scale)}, a pure function of {@code seed}, the
   * key (or index) and the column: the same in every run, whatever the number of servers.
   *
   * @param scale the half-width, at least 0
   * @param seed mixed with the key
   * @return the initializer
   */
  public static Init uniform(float scale, long seed) {
    if (!(scale >= 0 && Float.isFinite(scale))) {
      throw new IllegalArgumentException("scale must be finite and >= 0, got " + scale);
    }
    return new Init(scale, seed);
  }

  /**
   * A builder of a job of {@code trainers} trainers (ids 0 to {@code trainers - 1}), sync by
   * default.
   *
   * @param trainers at least 1
   * @return the builder
   */
  public static Builder builder(int trainers) {
    if (trainers < 1) {
      throw new IllegalArgumentException("a job needs at least one trainer, got " + trainers);
    }
    return new Builder(trainers);
  }

  /** Builds a {@link PsJob}. */
  public static final class Builder {
    private final int trainers;
    private Mode mode = Mode.SYNC;
    private long staleness;
    private final List<Table> tables = new ArrayList<>();

    private Builder(int trainers) {
      this.trainers = trainers;
    }

    /**
     * Bulk-synchronous (the default): the model never depends on arrival order.
     *
     * @return this builder
     */
    public Builder sync() {
      return mode(Mode.SYNC, 0);
    }

    /**
     * Asynchronous: every push applied on arrival.
     *
     * @return this builder
     */
    public Builder async() {
      return mode(Mode.ASYNC, 0);
    }

    /**
     * Bounded staleness SSP(k): no trainer runs more than {@code k} steps ahead of the slowest.
     *
     * @param k the bound, at least 0
     * @return this builder
     */
    public Builder ssp(long k) {
      if (k < 0) {
        throw new IllegalArgumentException("staleness must not be negative, got " + k);
      }
      return mode(Mode.SSP, k);
    }

    /**
     * Sets the mode by name, as the examples' {@code --mode} does.
     *
     * @param name {@code sync}, {@code async} or {@code ssp}
     * @param k the bound of {@code ssp} (ignored otherwise)
     * @return this builder
     */
    public Builder mode(String name, long k) {
      switch (Objects.requireNonNull(name, "name")) {
        case "sync":
          return sync();
        case "async":
          return async();
        case "ssp":
          return ssp(k);
        default:
          throw new IllegalArgumentException("mode " + name + ": expected sync, async or ssp");
      }
    }

    private Builder mode(Mode m, long k) {
      this.mode = m;
      this.staleness = k;
      return this;
    }

    /**
     * Adds a dense table of {@code length} floats, split into ranges across the servers.
     *
     * @param name the table's name
     * @param length at least 1
     * @param init how the parameters start
     * @param optimizer the server-side optimizer
     * @return this builder
     */
    public Builder dense(String name, long length, Init init, PsOptimizer optimizer) {
      if (length < 1) {
        throw new IllegalArgumentException("dense table " + name + " needs at least one element");
      }
      tables.add(new Table(name, false, length, 0, init, optimizer));
      return this;
    }

    /**
     * Adds a sparse table of rows of {@code width} floats keyed by {@code long}s (unsigned),
     * spread over the servers by a hash of the key; a row is created on its first pull.
     *
     * @param name the table's name
     * @param width floats per row, at least 1
     * @param init how a new row starts
     * @param optimizer the server-side optimizer
     * @return this builder
     */
    public Builder sparse(String name, int width, Init init, PsOptimizer optimizer) {
      return sparse(name, width, 0, init, optimizer);
    }

    /**
     * {@link #sparse(String, int, Init, PsOptimizer)}, expecting about {@code expectedRows}
     * rows in all (hashed features into 2^20 buckets: 2^20). A hint, not a bound: each server
     * makes room for its share up front, so the table never stops to grow while it fills (a
     * pause of about 0.2 s at half a million rows a server, every trainer waiting on it in a
     * sync job); rows beyond it are still created.
     *
     * @param name the table's name
     * @param width floats per row, at least 1
     * @param expectedRows the rows expected, at least 0 (0: not known)
     * @param init how a new row starts
     * @param optimizer the server-side optimizer
     * @return this builder
     */
    public Builder sparse(
        String name, int width, long expectedRows, Init init, PsOptimizer optimizer) {
      if (width < 1) {
        throw new IllegalArgumentException("sparse table " + name + " needs rows of at least one float");
      }
      if (expectedRows < 0) {
        throw new IllegalArgumentException(
            "sparse table " + name + " cannot expect " + expectedRows + " rows");
      }
      tables.add(new Table(name, true, width, expectedRows, init, optimizer));
      return this;
    }

    /**
     * The job.
     *
     * @return the job
     */
    public PsJob build() {
      if (tables.isEmpty()) {
        throw new IllegalArgumentException("a job needs at least one table");
      }
      return new PsJob(trainers, mode, staleness, tables);
    }
  }

  /**
   * The number of trainers.
   *
   * @return the count
   */
  public int trainers() {
    return trainers;
  }

  /**
   * The consistency mode.
   *
   * @return the mode
   */
  public Mode mode() {
    return mode;
  }

  /**
   * The SSP bound (0 for the other modes).
   *
   * @return the bound
   */
  public long staleness() {
    return staleness;
  }

  /**
   * The tables, in the order added.
   *
   * @return an unmodifiable list
   */
  public List<Table> tables() {
    return tables;
  }

  /** Defines this job through the native client {@code handle}. */
  void defineOn(long handle) {
    DefineRequest.Table[] defined = new DefineRequest.Table[tables.size()];
    for (int i = 0; i < defined.length; i++) {
      Table t = tables.get(i);
      defined[i] =
          new DefineRequest.Table(
              t.name, t.sparse ? 1 : 0, t.size, t.init.scale, t.init.seed, t.optimizer.spec(),
              t.expectedRows);
    }
    String m = mode.name().toLowerCase(java.util.Locale.ROOT);
    PsNative.clientDefine(handle, new DefineRequest(trainers, m, staleness, defined));
  }
}

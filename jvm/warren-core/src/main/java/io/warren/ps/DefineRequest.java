package io.warren.ps;

/**
 * A job as {@link PsNative#clientDefine} takes it: its settings and one {@link Table} object
 * per table. Read field by field by {@code native/warren-jni/src/ps_request.rs}: a field's
 * name and type are part of the native interface.
 */
final class DefineRequest {
  /** The number of trainers. */
  final int trainers;
  /** The consistency mode: {@code sync}, {@code async} or {@code ssp}. */
  final String mode;
  /** How many steps a trainer may run ahead in {@code ssp} mode. */
  final long staleness;
  /** The tables, in order. */
  final Table[] tables;

  /**
   * A request with these settings.
   *
   * @param trainers the number of trainers
   * @param mode {@code sync}, {@code async} or {@code ssp}
   * @param staleness the bound of {@code ssp} mode
   * @param tables the tables
   */
  DefineRequest(int trainers, String mode, long staleness, Table[] tables) {
    this.trainers = trainers;
    this.mode = mode;
    this.staleness = staleness;
    this.tables = tables;
  }

  /** One table of the job, as the native side reads it. */
  static final class Table {
    /** The table's name. */
    final String name;
    /** 0 dense, 1 sparse. */
    final int kind;
    /** A dense table's length, a sparse table's row width. */
    final long size;
    /** The uniform initializer's scale (NaN: zeros). */
    final float scale;
    /** The uniform initializer's seed (its bits, unsigned). */
    final long seed;
    /** The optimizer, as {@code sgd:LR}, {@code adam:LR}... ({@link PsOptimizer#spec()}). */
    final String optimizer;
    /** The rows a sparse table expects (0: not known; ignored for a dense table). */
    final long expectedRows;

    /**
     * A table with these settings; each parameter sets the field of the same name.
     *
     * @param name the table's name
     * @param kind 0 dense, 1 sparse
     * @param size the length or the row width
     * @param scale the initializer's scale (NaN: zeros)
     * @param seed the initializer's seed
     * @param optimizer the optimizer's spec
     * @param expectedRows the rows a sparse table expects (0: not known)
     */
    Table(String name, int kind, long size, float scale, long seed, String optimizer, long expectedRows) {
      this.name = name;
      this.kind = kind;
      this.size = size;
      this.scale = scale;
      this.seed = seed;
      this.optimizer = optimizer;
      this.expectedRows = expectedRows;
    }
  }
}

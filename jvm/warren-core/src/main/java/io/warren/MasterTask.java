package io.warren;

import java.util.List;
import java.util.Objects;

/**
 * The answer to {@link MasterClient#getTask(long)}: a task of the data master with its records,
 * or why there is none. A task is identified by {@code id} and the {@code epoch} of this
 * hand-out; report it with {@link MasterClient#finish(MasterTask)} or {@link
 * MasterClient#fail(MasterTask, String)}.
 *
 * @param kind a task, none for now, or the pass is over
 * @param id the task's id (0 unless {@code kind} is {@link Kind#TASK})
 * @param epoch the hand-out's epoch (0 unless a task)
 * @param pass the task's pass; for {@link Kind#PASS_FINISHED} the master's current pass
 * @param records the records of the task's chunks in dataset order (empty unless a task)
 */
public record MasterTask(Kind kind, long id, long epoch, long pass, List<byte[]> records) {
  /** What {@link MasterClient#getTask(long)} got. */
  public enum Kind {
    /** A task to work on. */
    TASK,
    /** No task now, but tasks of the pass are held by workers: one may time out or fail. */
    NONE_NOW,
    /** The pass is over (every task not failed is done); the master is at {@code pass}. */
    PASS_FINISHED
  }

  /**
   * Checks the fields.
   *
   * @param kind the kind
   * @param id the task's id
   * @param epoch the hand-out's epoch
   * @param pass the pass
   * @param records the records
   */
  public MasterTask {
    Objects.requireNonNull(kind, "kind");
    records = List.copyOf(records);
  }

  static MasterTask of(long[] head, byte[][] records) {
    Kind kind = Kind.values()[(int) head[0]];
    return new MasterTask(kind, head[1], head[2], head[3], records == null ? List.of() : List.of(records));
  }

  /**
   * Whether this is a task (rather than none or the end of the pass).
   *
   * @return true for {@link Kind#TASK}
   */
  public boolean isTask() {
    return kind == Kind.TASK;
  }

  MasterTask requireTask() {
    if (kind != Kind.TASK) {
      throw new IllegalArgumentException("not a task: " + this);
    }
    return this;
  }

  @Override
  public String toString() {
    return kind == Kind.TASK
        ? "MasterTask[id=" + id + ", epoch=" + epoch + ", pass=" + pass + ", records=" + records.size() + "]"
        : "MasterTask[" + kind + ", pass=" + pass + "]";
  }
}

package io.warren;

/**
 * The data master's counts, from {@link Master#status()} or {@link MasterClient#status()}.
 *
 * @param hasDataset whether a dataset has been set
 * @param pass the current pass (from 0); it advances when every task not failed is done
 * @param tasks the number of tasks in the dataset
 * @param todo tasks waiting to be handed out in this pass
 * @param pending tasks handed out and not yet reported
 * @param done tasks finished in this pass
 * @param failed tasks that failed too often and are discarded
 */
public record MasterStatus(
    boolean hasDataset, long pass, long tasks, long todo, long pending, long done, long failed) {

  static MasterStatus of(long[] s) {
    return new MasterStatus(s[0] != 0, s[1], s[2], s[3], s[4], s[5], s[6]);
  }
}

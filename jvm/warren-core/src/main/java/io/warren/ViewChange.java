package io.warren;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A change of membership of an elastic job, as one worker sees it: {@link
 * Communicator#takeViewChange()} returns it once, after the {@link Communicator#checkpoint} at
 * which the view changed (workers joined or were removed) or after a call threw {@link
 * RolledBackException} (a lost worker was given up on). The world size and this worker's rank
 * have changed with it: a job re-shards its data or rescales its learning rate here.
 *
 * <p>A view is the job's members (task ids) in rank order; its epoch grows with every change.
 *
 * @param oldEpoch the epoch of the view before
 * @param newEpoch the epoch of the view after
 * @param oldMembers the task ids of the view before, in rank order
 * @param newMembers the task ids of the view after, in rank order
 * @param taskId this worker's task id
 * @param newRank this worker's rank in the new view, -1 if it left the job (it should close its
 *     communicator)
 */
public record ViewChange(
    long oldEpoch, long newEpoch, List<String> oldMembers, List<String> newMembers, String taskId, int newRank) {

  /**
   * Copies the member lists (unmodifiable).
   *
   * @param oldEpoch the epoch of the view before
   * @param newEpoch the epoch of the view after
   * @param oldMembers the task ids of the view before, in rank order
   * @param newMembers the task ids of the view after, in rank order
   * @param taskId this worker's task id
   * @param newRank this worker's rank in the new view, -1 if it left the job
   */
  public ViewChange {
    oldMembers = List.copyOf(oldMembers);
    newMembers = List.copyOf(newMembers);
  }

  /**
   * The number of workers before the change.
   *
   * @return the old view's size
   */
  public int oldWorldSize() {
    return oldMembers.size();
  }

  /**
   * The number of workers after the change.
   *
   * @return the new view's size (the communicator's {@link Communicator#worldSize()} now)
   */
  public int newWorldSize() {
    return newMembers.size();
  }

  /**
   * This worker's rank before the change.
   *
   * @return its index in {@link #oldMembers()}, -1 if it was not a member (never for a view change
   *     a member is told of)
   */
  public int oldRank() {
    return oldMembers.indexOf(taskId);
  }

  /**
   * Whether this worker left the job with this change (it was removed).
   *
   * @return true if it is not a member of the new view
   */
  public boolean left() {
    return newRank < 0;
  }

  /**
   * The task ids that joined: in the new view, not in the old.
   *
   * @return them in rank order of the new view
   */
  public List<String> joined() {
    return newMembers.stream().filter(t -> !oldMembers.contains(t)).toList();
  }

  /**
   * The task ids that left: in the old view, not in the new (removed, or lost and given up on).
   *
   * @return them in rank order of the old view
   */
  public List<String> leftTasks() {
    return oldMembers.stream().filter(t -> !newMembers.contains(t)).toList();
  }

  /**
   * Parses the native layout {@code [oldEpoch, newEpoch, task, newRank ("" if it left), oldWorld,
   * old members..., new members...]}.
   */
  static ViewChange fromNative(String[] f) {
    int header = 5;
    int oldWorld = Integer.parseInt(f[4]);
    List<String> all = Arrays.asList(f);
    return new ViewChange(
        Long.parseLong(f[0]),
        Long.parseLong(f[1]),
        new ArrayList<>(all.subList(header, header + oldWorld)),
        new ArrayList<>(all.subList(header + oldWorld, f.length)),
        f[2],
        f[3].isEmpty() ? -1 : Integer.parseInt(f[3]));
  }

  @Override
  public String toString() {
    return "ViewChange[epoch "
        + oldEpoch
        + " -> "
        + newEpoch
        + ", workers "
        + oldWorldSize()
        + " -> "
        + newWorldSize()
        + ", task "
        + taskId
        + " rank "
        + oldRank()
        + " -> "
        + (left() ? "left" : String.valueOf(newRank))
        + ", joined "
        + joined()
        + ", left "
        + leftTasks()
        + "]";
  }
}

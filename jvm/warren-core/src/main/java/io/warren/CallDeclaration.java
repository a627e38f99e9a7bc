package io.warren;

import java.io.Serializable;
import java.util.Objects;

/**
 * What one worker declared about a collective call, as a {@link CollectiveMismatchException}
 * reports it: the worker's rank and the call (collective, position, size in bytes, element type,
 * operator, root, user-reducer tag), as the native library describes it, for example {@code
 * allreduce(tree) #3 of 40 bytes f32 sum}.
 */
public final class CallDeclaration implements Serializable {
  private static final long serialVersionUID = 1L;

  private final int rank;
  private final String call;

  /**
   * Creates a declaration.
   *
   * @param rank the rank that declared the call
   * @param call the call it declared
   */
  public CallDeclaration(int rank, String call) {
    this.rank = rank;
    this.call = Objects.requireNonNull(call, "call");
  }

  /**
   * The rank that declared the call.
   *
   * @return the rank
   */
  public int rank() {
    return rank;
  }

  /**
   * The call it declared: collective, position, size in bytes, element type, operator (and root
   * or user-reducer tag where they apply).
   *
   * @return the description
   */
  public String call() {
    return call;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CallDeclaration
        && ((CallDeclaration) o).rank == rank
        && ((CallDeclaration) o).call.equals(call);
  }

  @Override
  public int hashCode() {
    return 31 * rank + call.hashCode();
  }

  @Override
  public String toString() {
    return "rank " + rank + " called " + call;
  }
}

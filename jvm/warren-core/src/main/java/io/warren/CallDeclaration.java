package io.warren;

import java.io.Serializable;
import java.util.Objects;

/**
 * What one worker declared about a collective call, as a {@link CollectiveMismatchException}
 * reports it: the worker's rank, the call as the native library describes it (for example
 * {@code allreduce(tree) #3 of 40 bytes f32 sum}; with recovery
 * {@code allreduce(tree) #3 of version 2, 40 bytes f32 sum}), and the same field by field:
 * collective, position, size in bytes, element type, operator, root, tag and bootstrap key.
 * Fields the native library did not know are -1 or {@code null}.
 */
public final class CallDeclaration implements Serializable {
  private static final long serialVersionUID = 1L;

  private final int rank;
  private final String call;
  private final String collective;
  private final long seq;
  private final long bytes;
  private final String dataType;
  private final String op;
  private final int root;
  private final long tag;
  private final String key;

  /**
   * Creates a declaration known only by its description (every field unknown).
   *
   * @param rank the rank that declared the call
   * @param call the call it declared
   */
  public CallDeclaration(int rank, String call) {
    this(rank, call, null, -1, -1, null, null, -1, -1, null);
  }

  /**
   * Creates a declaration with its fields (as the native library does).
   *
   * @param rank the rank that declared the call
   * @param call the call it declared, as the native library describes it
   * @param collective the collective, with its algorithm: {@code allreduce(tree)}, {@code
   *     broadcast}, ..., or {@code null} if unknown
   * @param seq the call's position (see {@link #seq()})
   * @param bytes the size in bytes, or -1 if the worker did not know it
   * @param dataType the element type ({@code f32}, {@code i64}, ...), or {@code null}
   * @param op the operator ({@code sum}, {@code max}, ..., {@code user}), or {@code null}
   * @param root the root of a broadcast, or -1
   * @param tag the call's tag ({@link CallOptions#withTag(int)}, as an unsigned value), or -1
   * @param key the bootstrap key of a bootstrap call, or {@code null}
   */
  public CallDeclaration(
      int rank,
      String call,
      String collective,
      long seq,
      long bytes,
      String dataType,
      String op,
      int root,
      long tag,
      String key) {
    this.rank = rank;
    this.call = Objects.requireNonNull(call, "call");
    this.collective = collective;
    this.seq = seq;
    this.bytes = bytes;
    this.dataType = dataType;
    this.op = op;
    this.root = root;
    this.tag = tag;
    this.key = key;
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
   * The call it declared, as the native library describes it.
   *
   * @return the description
   */
  public String call() {
    return call;
  }

  /**
   * The collective, with its algorithm where it has one.
   *
   * @return {@code allreduce(tree)}, {@code allreduce(ring)}, {@code broadcast}, ..., or {@code
   *     null} if unknown
   */
  public String collective() {
    return collective;
  }

  /**
   * The call's position: the call number (in robust mode, the checkpoint version in the high 32
   * bits and the call number since it in the low 32; for a bootstrap call, its key's hash), an
   * unsigned 64-bit value.
   *
   * @return the position, or -1 if unknown
   */
  public long seq() {
    return seq;
  }

  /**
   * The size of the call's data in bytes.
   *
   * @return the size, or -1 if the worker did not know it (a broadcast receiver) or it is unknown
   */
  public long bytes() {
    return bytes;
  }

  /**
   * The element type, as the native library names it.
   *
   * @return {@code u8}, {@code i32}, {@code f32}, {@code f64}, ..., or {@code null} if unknown
   */
  public String dataType() {
    return dataType;
  }

  /**
   * The reduction operator, as the native library names it.
   *
   * @return {@code sum}, {@code max}, ..., {@code user}, or {@code null} if unknown
   */
  public String op() {
    return op;
  }

  /**
   * The root of a broadcast.
   *
   * @return the root rank, or -1 for other calls or if unknown
   */
  public int root() {
    return root;
  }

  /**
   * The call's tag ({@link CallOptions#withTag(int)}, as an unsigned 32-bit value; a native
   * user-defined reducer's identity).
   *
   * @return the tag, or -1 for a call without one or if unknown
   */
  public long tag() {
    return tag;
  }

  /**
   * The bootstrap key of a bootstrap call, where the native library knows its name.
   *
   * @return the key, or {@code null}
   */
  public String key() {
    return key;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof CallDeclaration)) {
      return false;
    }
    CallDeclaration d = (CallDeclaration) o;
    return d.rank == rank
        && d.call.equals(call)
        && Objects.equals(d.collective, collective)
        && d.seq == seq
        && d.bytes == bytes
        && Objects.equals(d.dataType, dataType)
        && Objects.equals(d.op, op)
        && d.root == root
        && d.tag == tag
        && Objects.equals(d.key, key);
  }

  @Override
  public int hashCode() {
    return Objects.hash(rank, call, collective, seq, bytes, dataType, op, root, tag, key);
  }

  @Override
  public String toString() {
    return "rank " + rank + " called " + call;
  }
}

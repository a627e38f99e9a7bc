package io.warren.ps;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** One parameter server's state: its place in the job and the trainers' progress there. */
public final class PsStatus {
  private final long[] v;
  private final long[] clocks;

  private PsStatus(long[] v, long[] clocks) {
    this.v = v;
    this.clocks = clocks;
  }

  /** The states in {@code values} (server after server, as {@code ps.rs} writes them). */
  static List<PsStatus> parse(long[] values) {
    List<PsStatus> out = new ArrayList<>();
    int at = 0;
    while (at < values.length) {
      long[] head = Arrays.copyOfRange(values, at, at + 8);
      int n = (int) head[7];
      out.add(new PsStatus(head, Arrays.copyOfRange(values, at + 8, at + 8 + n)));
      at += 8 + n;
    }
    return out;
  }

  /**
   * The server's index.
   *
   * @return the index
   */
  public int index() {
    return (int) v[0];
  }

  /**
   * The number of servers of the job.
   *
   * @return the count
   */
  public int servers() {
    return (int) v[1];
  }

  /**
   * Whether a job is defined on the server.
   *
   * @return true once defined
   */
  public boolean defined() {
    return v[2] != 0;
  }

  /**
   * Steps applied (sync), or the slowest live trainer's clock (async, SSP).
   *
   * @return the count
   */
  public long applied() {
    return v[3];
  }

  /**
   * Sparse rows the server holds.
   *
   * @return the count
   */
  public long rows() {
    return v[4];
  }

  /**
   * Pushes taken since the job started (restored with a checkpoint).
   *
   * @return the count
   */
  public long pushes() {
    return v[5];
  }

  /**
   * Trainers' pushes lost in this server's restarts (async, SSP; sync loses none).
   *
   * @return the count
   */
  public long lost() {
    return v[6];
  }

  /**
   * Each trainer's clock here (its pushes received), by trainer id.
   *
   * @return a copy
   */
  public long[] clocks() {
    return clocks.clone();
  }

  @Override
  public String toString() {
    return "PsStatus[server " + index() + " of " + servers() + ", applied " + applied() + ", rows " + rows()
        + ", pushes " + pushes() + ", lost " + lost() + ", clocks " + Arrays.toString(clocks) + "]";
  }
}

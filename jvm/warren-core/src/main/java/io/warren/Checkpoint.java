package io.warren;

import java.util.Arrays;

/**
 * A checkpoint as {@link Communicator#loadCheckpoint()} returns it: how many checkpoints were
 * committed, the global model (the same on every worker) and this worker's local model.
 *
 * <p>On a fresh start the version is 0 and the models are empty. A restarted worker (same task
 * id, next attempt) gets the last committed checkpoint from the surviving workers.
 */
public final class Checkpoint {
  private final int version;
  private final byte[] global;
  private final byte[] local;

  Checkpoint(int version, byte[] global, byte[] local) {
    this.version = version;
    this.global = global;
    this.local = local;
  }

  /**
   * The number of checkpoints committed before this one was loaded.
   *
   * @return 0 on a fresh start
   */
  public int version() {
    return version;
  }

  /**
   * The global model of the last checkpoint (the caller's own copy).
   *
   * @return the bytes passed to {@link Communicator#checkpoint}; empty at version 0
   */
  public byte[] global() {
    return global.clone();
  }

  /**
   * This worker's local model of the last checkpoint (the caller's own copy).
   *
   * @return the bytes, or null if the worker checkpointed none (or at version 0)
   */
  public byte[] local() {
    return local == null ? null : local.clone();
  }

  @Override
  public String toString() {
    return "Checkpoint[version "
        + version
        + ", global "
        + global.length
        + " bytes, local "
        + (local == null ? "none" : local.length + " bytes")
        + "]";
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof Checkpoint)) {
      return false;
    }
    Checkpoint c = (Checkpoint) o;
    return version == c.version && Arrays.equals(global, c.global) && Arrays.equals(local, c.local);
  }

  @Override
  public int hashCode() {
    return 31 * (31 * version + Arrays.hashCode(global)) + Arrays.hashCode(local);
  }
}

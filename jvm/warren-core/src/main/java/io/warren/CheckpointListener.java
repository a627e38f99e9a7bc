package io.warren;

/**
 * Told of each checkpoint a {@link Communicator} commits (see {@link
 * Communicator#setCheckpointListener(CheckpointListener)}): for example, to copy the durable
 * checkpoint file the native library has just written to {@code WARREN_CHECKPOINT_DIR} to
 * another file system.
 */
@FunctionalInterface
public interface CheckpointListener {
  /**
   * Called in the thread that called {@link Communicator#checkpoint(byte[], byte[])}, after the
   * checkpoint is committed (and, with {@code WARREN_CHECKPOINT_DIR}, its durable file written if
   * it was one of the {@code WARREN_DURABLE_EVERY}-th), before {@code checkpoint} returns. An
   * exception thrown here propagates out of {@code checkpoint}; the checkpoint stays committed.
   *
   * @param version the version just committed: {@link Communicator#version()}, 1 after the first
   *     checkpoint of a fresh start
   */
  void checkpointCommitted(int version);
}

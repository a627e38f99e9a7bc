package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@link Communicator#setCheckpointListener}: called with each committed version, in order. */
@Timeout(60)
class CheckpointListenerTest {

  @Test
  void theListenerGetsEachCommittedVersionAfterTheDurableFileIsWritten(@TempDir Path dir) {
    Map<String, String> settings =
        Map.of("WARREN_CHECKPOINT_DIR", dir.toString(), "WARREN_DURABLE_EVERY", "2");
    List<String> seen = new ArrayList<>();
    try (Communicator comm = Communicator.create(settings)) {
      assertEquals(0, comm.loadCheckpoint().version());
      comm.checkpoint(new byte[] {1}, null); // no listener yet: nothing to tell
      Thread caller = Thread.currentThread();
      comm.setCheckpointListener(
          v -> {
            assertSame(caller, Thread.currentThread(), "the listener runs in the calling thread");
            assertEquals(v, comm.version(), "the checkpoint is committed before the listener");
            seen.add(v + (Files.exists(dir.resolve("warren-ckpt-rank0-v" + v + ".bin")) ? "+file" : ""));
          });
      for (int i = 2; i <= 5; i++) {
        comm.checkpoint(new byte[] {(byte) i}, null);
      }
      assertEquals(List.of("2+file", "3", "4+file", "5"), seen);
    }
    // A fresh start resumes from durable version 4: the next checkpoint is version 5.
    List<Integer> resumed = new ArrayList<>();
    try (Communicator comm = Communicator.create(settings)) {
      comm.setCheckpointListener(resumed::add);
      Checkpoint c = comm.loadCheckpoint();
      assertEquals(4, c.version());
      assertTrue(resumed.isEmpty(), "loadCheckpoint does not call the listener: " + resumed);
      comm.checkpoint(c.global(), null);
      comm.checkpoint(c.global(), null);
      assertEquals(List.of(5, 6), resumed);
    }
  }

  @Test
  void anExceptionFromTheListenerLeavesTheCheckpointCommitted() {
    try (Communicator comm = Communicator.create(Map.of())) {
      IllegalStateException boom = new IllegalStateException("upload failed");
      comm.setCheckpointListener(
          v -> {
            if (v == 2) {
              throw boom;
            }
          });
      comm.checkpoint(new byte[] {1}, null);
      IllegalStateException e =
          assertThrows(IllegalStateException.class, () -> comm.checkpoint(new byte[] {2}, null));
      assertSame(boom, e);
      assertEquals(2, comm.version());
      assertEquals(2, comm.loadCheckpoint().global()[0]);
      List<Integer> after = new ArrayList<>();
      comm.setCheckpointListener(null);
      comm.checkpoint(new byte[] {3}, null);
      comm.setCheckpointListener(after::add);
      comm.checkpoint(new byte[] {4}, null);
      assertEquals(List.of(4), after, "a removed listener is not called; a new one is");
    }
  }

  @Test
  void everyWorkerIsToldOfEveryCheckpoint() throws Exception {
    List<TestSupport.Outcome<List<Integer>>> out =
        TestSupport.threads(
            3,
            Map.of(),
            Duration.ofSeconds(30),
            comm -> {
              List<Integer> versions = new ArrayList<>();
              comm.setCheckpointListener(versions::add);
              for (int i = 0; i < 4; i++) {
                comm.checkpoint(new byte[] {(byte) i}, new byte[] {(byte) comm.rank()});
              }
              return versions;
            });
    for (TestSupport.Outcome<List<Integer>> o : out) {
      assertEquals(List.of(1, 2, 3, 4), o.get());
    }
  }
}

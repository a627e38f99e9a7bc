package io.warren.runner;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.warren.Communicator;
import io.warren.Op;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The progress reporter never takes its worker down with it. */
class ProgressTest {

  @Test
  @Timeout(120)
  void stoppingTheReporterWhileItSendsALineLeavesTheCommunicatorWorking() {
    // A reporter sending a line every millisecond, stopped again and again: a stop that lands
    // while a line is being sent must not cancel the communicator (an interrupt of the sending
    // thread would: a failure-free Spark job once failed so at its end).
    try (Communicator comm = Communicator.create(Map.of())) {
      for (int i = 0; i < 300; i++) {
        Progress p = Progress.start(comm, "test", 0.001);
        try {
          Thread.sleep(i % 3);
        } catch (InterruptedException e) {
          throw new AssertionError(e);
        }
        if (i % 2 == 0) {
          p.stop();
        } else {
          p.finish();
        }
        float[] v = {1f, 2f};
        comm.allreduce(v, Op.SUM);
        assertArrayEquals(new float[] {1f, 2f}, v, "round " + i);
      }
      assertFalse(Thread.currentThread().isInterrupted());
    }
  }
}

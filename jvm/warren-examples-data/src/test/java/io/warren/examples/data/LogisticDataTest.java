package io.warren.examples.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The rows are pinned: a change to them would change every example's MODEL_HASH. */
class LogisticDataTest {
  @Test
  void aPartitionsRowsAreTheRecordedOnes() {
    assertEquals(
        "6c3fef96a26042770d20793454733055ed0f9bbf16c8830e312fef89f8a3c925",
        ModelHash.of(LogisticData.generate(1000, 3, 5, 20240601L, 1)));
    assertEquals(
        "c3e40b100c8c5d4c78ac0b2440f7607956ee788bd8196d84e2bd762ece27c29d",
        ModelHash.of(LogisticData.trueWeights(20, 20240601L)));
  }

  @Test
  void thePartitionsSplitTheRowsAndEachRowEndsWithTheIntercept() {
    int total = 0;
    for (int pid = 0; pid < 3; pid++) {
      int n = LogisticData.rowCount(1000, 3, pid);
      double[] xy = LogisticData.generate(1000, 3, 5, 7L, pid);
      assertEquals(n * 7, xy.length);
      for (int i = 0; i < n; i++) {
        assertEquals(1.0, xy[i * 6 + 5], "row " + i + "'s intercept column");
        assertTrue(xy[n * 6 + i] == 0.0 || xy[n * 6 + i] == 1.0, "row " + i + "'s label");
      }
      total += n;
    }
    assertEquals(1000, total);
  }

  @Test
  void theGradientAndTheLossAreTheRecordedOnes() {
    double[] xy = LogisticData.generate(1000, 3, 5, 20240601L, 1);
    int n = LogisticData.rowCount(1000, 3, 1);
    double[] w = {0.1, -0.2, 0.3, -0.4, 0.5, 0.05};
    double[] buf = new double[7];
    LogisticData.accumulate(xy, n, 6, w, buf);
    assertEquals("23cddccebb8c14cc63a5cb903127f96318241c1f7ed201893ad4aa1c552dd77e", ModelHash.of(buf));
    assertEquals(70, LogisticData.correct(xy, n, 6, w));
  }
}

package io.warren;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * Two ranks in one JVM (two Spark tasks in one executor) while another thread allocates
 * heavily, so garbage collections keep being requested during the collectives.
 *
 * <p>With the default array access (copies) the job completes. With critical access the first
 * rank holds its array pinned while it waits for the second, whose own
 * GetPrimitiveArrayCritical waits for the pending collection, which waits for the first rank:
 * both stall until {@code WARREN_TIMEOUT_S}. That second test documents the hazard and is run
 * only on request: {@code -Dwarren.test.hazard=true}.
 */
class GcPressureTest {

  static <T> List<TestSupport.Outcome<T>> underGcPressure(String access, int iters)
      throws Exception {
    AtomicBoolean stop = new AtomicBoolean();
    CompletableFuture<Long> garbage =
        CompletableFuture.supplyAsync(
            () -> {
              long n = 0;
              while (!stop.get()) {
                byte[] b = new byte[1 << 20];
                n += b.length;
              }
              return n;
            });
    try {
      return TestSupport.threads(
          2,
          Map.of("WARREN_JNI_ARRAY_ACCESS", access, "WARREN_TIMEOUT_S", "10"),
          Duration.ofSeconds(100),
          comm -> {
            float[] x = new float[4 << 20];
            for (int i = 0; i < iters; i++) {
              comm.allreduce(x, Op.SUM);
            }
            return null;
          });
    } finally {
      stop.set(true);
      garbage.get();
    }
  }

  @Test
  @Timeout(120)
  void copiesKeepTwoRanksInOneJvmGoingUnderGcPressure() throws Exception {
    underGcPressure("copy", 100).forEach(TestSupport.Outcome::get);
  }

  @Test
  @Timeout(120)
  @EnabledIfSystemProperty(named = "warren.test.hazard", matches = "true")
  void criticalAccessStallsTwoRanksInOneJvmUntilTheDeadline() throws Exception {
    long started = System.nanoTime();
    List<TestSupport.Outcome<Object>> out = underGcPressure("critical", 200);
    for (TestSupport.Outcome<Object> o : out) {
      assertInstanceOf(WarrenException.class, o.error, "expected the stall to end in a failure");
    }
    assertTrue(System.nanoTime() - started > Duration.ofSeconds(10).toNanos());
  }
}

package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

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
 * <p>With copies the job completes. With critical access on a JVM whose collector is held up
 * by pinned arrays (JDK 17 and 21, the GC locker), the first rank holds its array pinned while
 * it waits for the second, whose own GetPrimitiveArrayCritical waits for the pending
 * collection, which waits for the first rank: both stall until {@code WARREN_TIMEOUT_S}. That
 * test documents the hazard and is run only on request: {@code -Dwarren.test.hazard=true}. On
 * a JVM whose G1 pins single regions (JDK 22 and later, JEP 423) critical access is the
 * default and the same job completes ({@code make jvm-pinning} runs these tests on JDK 25).
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
  void whereG1PinsRegionsTheDefaultIsCriticalAndTwoRanksInOneJvmGoOn() throws Exception {
    assumeTrue(ArrayAccess.thisJvmPinsRegions(), "this JVM's collector is held up by pinned arrays");
    assertEquals("critical", ArrayAccess.resolved(Map.of()).get(ArrayAccess.KEY));
    underGcPressure("critical", 200).forEach(TestSupport.Outcome::get);
  }

  @Test
  @Timeout(120)
  @EnabledIfSystemProperty(named = "warren.test.hazard", matches = "true")
  void criticalAccessStallsTwoRanksInOneJvmUntilTheDeadline() throws Exception {
    assumeFalse(ArrayAccess.thisJvmPinsRegions(), "this JVM pins arrays region by region");
    assertEquals("copy", ArrayAccess.resolved(Map.of()).get(ArrayAccess.KEY));
    long started = System.nanoTime();
    List<TestSupport.Outcome<Object>> out = underGcPressure("critical", 200);
    for (TestSupport.Outcome<Object> o : out) {
      assertInstanceOf(WarrenException.class, o.error, "expected the stall to end in a failure");
    }
    assertTrue(System.nanoTime() - started > Duration.ofSeconds(10).toNanos());
  }
}

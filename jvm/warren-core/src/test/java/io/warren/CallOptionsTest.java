package io.warren;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The call-options value, and every collective shape called through it. */
class CallOptionsTest {

  @Test
  void defaultsAreAPlainUntaggedCall() {
    CallOptions d = CallOptions.defaults();
    assertSame(d, CallOptions.defaults());
    assertFalse(d.isBootstrap());
    assertNull(d.key());
    assertEquals(0, d.tag());
  }

  @Test
  void bootstrapIsKeyedByTheCodeThatBuildsIt() {
    CallOptions a = CallOptions.bootstrap();
    int line = new Throwable().getStackTrace()[0].getLineNumber() - 1;
    assertTrue(a.isBootstrap());
    assertEquals(
        CallOptionsTest.class.getName() + "#bootstrapIsKeyedByTheCodeThatBuildsIt:" + line, a.key());
    assertNotEquals(a, CallOptions.bootstrap(), "another line, another key");
  }

  @Test
  void withersMakeNewValuesAndKeepTheOtherField() {
    CallOptions tagged = CallOptions.defaults().withTag(7);
    CallOptions both = tagged.withKey("k");
    assertEquals(7, tagged.tag());
    assertNull(tagged.key(), "withKey did not change the value it was called on");
    assertEquals("k", both.key());
    assertEquals(7, both.tag());
    assertEquals(both, CallOptions.defaults().withKey("k").withTag(7));
    assertEquals(both.hashCode(), CallOptions.defaults().withKey("k").withTag(7).hashCode());
    assertNotEquals(both, both.withTag(8));
    assertEquals(0, CallOptions.defaults().tag(), "defaults unchanged");
    assertTrue(both.toString().contains("bootstrap k"), both.toString());
  }

  @Test
  void emptyOrNullKeysAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> CallOptions.defaults().withKey(""));
    assertThrows(NullPointerException.class, () -> CallOptions.defaults().withKey(null));
  }

  @Test
  @Timeout(60)
  void everyShapeTakesOptionsAndComputesThePlainResult() throws Exception {
    List<TestSupport.Outcome<String>> out =
        TestSupport.threads(
            3,
            Map.of("WARREN_TIMEOUT_S", "20", "WARREN_JNI_ARRAY_SEGMENT_BYTES", "64"),
            Duration.ofSeconds(50),
            comm -> {
              int r = comm.rank();
              float[] f = comm.allreduce(new float[] {r, 1}, Op.SUM, CallOptions.bootstrap());
              assertArrayEquals(new float[] {3, 3}, f);
              double[] d = {r};
              comm.allreduce(d, Op.MAX, CallOptions.defaults().withTag(5));
              assertArrayEquals(new double[] {2}, d);
              // 40 ints over 64-byte pieces: a tagged call split in pieces.
              int[] i = new int[40];
              java.util.Arrays.fill(i, r);
              comm.allreduce(i, Op.SUM, CallOptions.defaults().withTag(-1));
              assertEquals(3, i[39]);
              long[] l = comm.allreduce(new long[] {r}, Op.MIN, CallOptions.bootstrap().withKey("l"));
              assertArrayEquals(new long[] {0}, l);
              ByteBuffer buf = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
              buf.putLong(0, 1L << r);
              comm.allreduce(buf, DataType.I64, Op.BIT_OR, CallOptions.bootstrap().withTag(2));
              assertEquals(7L, buf.getLong(0));
              byte[] seed = comm.broadcast(r == 1 ? new byte[] {4, 2} : null, 1, CallOptions.bootstrap());
              assertArrayEquals(new byte[] {4, 2}, seed);
              ByteBuffer fixed = ByteBuffer.allocateDirect(3);
              fixed.put(0, (byte) r);
              comm.broadcast(fixed, 2, CallOptions.defaults().withKey("fixed"));
              assertEquals(2, fixed.get(0));
              return "ok";
            });
    for (TestSupport.Outcome<String> o : out) {
      assertEquals("ok", o.get());
    }
  }

  @Test
  @Timeout(60)
  void workersPassingDifferentTagsOrKeysGetAMismatch() throws Exception {
    List<TestSupport.Outcome<Void>> tags =
        TestSupport.threads(
            2,
            Map.of("WARREN_TIMEOUT_S", "20"),
            Duration.ofSeconds(50),
            comm -> {
              comm.allreduce(new float[4], Op.SUM, CallOptions.defaults().withTag(comm.rank()));
              return null;
            });
    for (TestSupport.Outcome<Void> o : tags) {
      assertInstanceOf(CollectiveMismatchException.class, o.error, String.valueOf(o.error));
      assertTrue(o.error.getMessage().contains("tag 1"), o.error.getMessage());
      CollectiveMismatchException m = (CollectiveMismatchException) o.error;
      assertEquals(
          java.util.Set.of(-1L, 1L), java.util.Set.of(m.first().tag(), m.second().tag()), m.toString());
    }
    List<TestSupport.Outcome<Void>> keys =
        TestSupport.threads(
            2,
            Map.of("WARREN_TIMEOUT_S", "20"),
            Duration.ofSeconds(50),
            comm -> {
              CallOptions o = CallOptions.defaults().withKey(comm.rank() == 0 ? "a" : "b");
              comm.broadcast(new byte[] {1}, 0, o);
              return null;
            });
    for (TestSupport.Outcome<Void> o : keys) {
      assertInstanceOf(CollectiveMismatchException.class, o.error, String.valueOf(o.error));
    }
  }
}

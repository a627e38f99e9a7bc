package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Which array access {@code WARREN_JNI_ARRAY_ACCESS=auto} (the default) picks. */
class ArrayAccessTest {
  static final List<String> G1 = List.of("G1 Young Generation", "G1 Concurrent GC", "G1 Old Generation");

  @Test
  void onlyG1FromJdk22PinsRegionByRegion() {
    assertTrue(ArrayAccess.pinsRegions(22, G1));
    assertTrue(ArrayAccess.pinsRegions(25, G1));
    assertFalse(ArrayAccess.pinsRegions(17, G1), "JDK 17's G1 has the GC locker");
    assertFalse(ArrayAccess.pinsRegions(21, G1), "JDK 21's G1 has the GC locker");
    assertFalse(ArrayAccess.pinsRegions(25, List.of("PS Scavenge", "PS MarkSweep")), "Parallel GC");
    assertFalse(ArrayAccess.pinsRegions(25, List.of("Copy", "MarkSweepCompact")), "Serial GC");
    assertFalse(ArrayAccess.pinsRegions(25, List.of("ZGC Minor Cycles", "ZGC Major Cycles")), "ZGC");
    assertFalse(ArrayAccess.pinsRegions(25, List.of()), "no collector named");
  }

  @Test
  void autoAndNoSettingFollowTheJvmAndExplicitModesStay() {
    assertEquals("critical", ArrayAccess.resolve(null, true));
    assertEquals("critical", ArrayAccess.resolve("auto", true));
    assertEquals("copy", ArrayAccess.resolve(null, false));
    assertEquals("copy", ArrayAccess.resolve("auto", false));
    assertEquals("copy", ArrayAccess.resolve("copy", true));
    assertEquals("critical", ArrayAccess.resolve("critical", false));
    assertEquals("sometimes", ArrayAccess.resolve("sometimes", true), "the native library rejects it");
  }

  @Test
  void resolvedSettingsKeepTheOthers() {
    Map<String, String> out = ArrayAccess.resolved(Map.of("WARREN_TIMEOUT_S", "7"));
    assertEquals("7", out.get("WARREN_TIMEOUT_S"));
    assertEquals(ArrayAccess.thisJvmPinsRegions() ? "critical" : "copy", out.get(ArrayAccess.KEY));
    assertEquals(2, out.size());
  }
}

package io.warren;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How Java arrays reach a collective: the setting {@value #KEY}.
 *
 * <ul>
 *   <li>{@code copy}: copied into a native buffer in pieces (see the native crate's "Arrays");
 *   <li>{@code critical}: pinned ({@code GetPrimitiveArrayCritical}) for the whole call, no
 *       copy;
 *   <li>{@code auto}, the default: {@code critical} where pinning an array holds up nothing but
 *       the array's own heap region, else {@code copy}.
 * </ul>
 *
 * <p>A collective waits on its peers, for as long as the slowest takes. On JDK 17 and 21 a
 * pinned array blocks every garbage collection of the JVM meanwhile (the GC locker), and two
 * ranks in one JVM can deadlock until the deadline: {@code GcPressureTest}. From JDK 22 G1 pins
 * only the region holding the array (JEP 423) and collects the rest as usual, so there the
 * array is pinned, which saves two copies of it per call. Other collectors keep the copies.
 */
final class ArrayAccess {
  /** The setting's key. */
  static final String KEY = "WARREN_JNI_ARRAY_ACCESS";

  /** The first JDK whose G1 pins single regions for JNI critical regions (JEP 423). */
  static final int FIRST_PINNING_JDK = 22;

  private static final Logger LOG = LoggerFactory.getLogger(ArrayAccess.class);
  private static final AtomicBoolean SAID = new AtomicBoolean();

  private ArrayAccess() {}

  /**
   * Whether a JVM of this feature version whose collectors have these names pins arrays
   * region by region.
   *
   * @param featureVersion {@code Runtime.version().feature()}
   * @param collectorNames the names of the JVM's {@link GarbageCollectorMXBean}s
   * @return true for G1 from JDK {@value #FIRST_PINNING_JDK}
   */
  static boolean pinsRegions(int featureVersion, List<String> collectorNames) {
    return featureVersion >= FIRST_PINNING_JDK
        && !collectorNames.isEmpty()
        && collectorNames.stream().allMatch(n -> n.startsWith("G1 "));
  }

  /**
   * The mode {@code setting} stands for on a JVM that does (or does not) pin regions: {@code
   * auto} (or no setting) is resolved, other values are passed on as given (the native library
   * rejects unknown ones).
   *
   * @param setting the value of {@value #KEY}, or null
   * @param pinsRegions what {@link #pinsRegions(int, List)} says of this JVM
   * @return the mode for the native library
   */
  static String resolve(String setting, boolean pinsRegions) {
    if (setting == null || setting.equals("auto")) {
      return pinsRegions ? "critical" : "copy";
    }
    return setting;
  }

  /**
   * {@code settings} with {@value #KEY} resolved for this JVM.
   *
   * @param settings the worker settings
   * @return a copy with the mode the native library is to use
   */
  static Map<String, String> resolved(Map<String, String> settings) {
    Map<String, String> out = new HashMap<>(settings);
    String setting = settings.get(KEY);
    String mode = resolve(setting, thisJvmPinsRegions());
    out.put(KEY, mode);
    if ((setting == null || setting.equals("auto")) && SAID.compareAndSet(false, true)) {
      LOG.info(
          "{}={}: Java arrays {} (JDK {}, {}); set copy or critical to choose",
          KEY,
          mode,
          mode.equals("critical")
              ? "are pinned for each collective, with no copy, as G1 pins single regions here"
              : "are copied for each collective, as pinning one would hold up this JVM's collector",
          Runtime.version().feature(),
          String.join(", ", collectorNames()));
    }
    return out;
  }

  /**
   * Whether this JVM pins arrays region by region.
   *
   * @return {@link #pinsRegions(int, List)} of this JVM's version and collectors
   */
  static boolean thisJvmPinsRegions() {
    return pinsRegions(Runtime.version().feature(), collectorNames());
  }

  /** The names of this JVM's garbage collectors ({@link GarbageCollectorMXBean}s). */
  private static List<String> collectorNames() {
    return ManagementFactory.getGarbageCollectorMXBeans().stream()
        .map(GarbageCollectorMXBean::getName)
        .collect(Collectors.toList());
  }
}

package io.warren;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.Test;

/** The second surefire execution really runs with -Xcheck:jni (and passes it to worker JVMs). */
class CheckJniTest {
  @Test
  void flagsReachTheTestJvm() {
    for (String flag : TestSupport.jvmFlags()) {
      assertTrue(
          ManagementFactory.getRuntimeMXBean().getInputArguments().contains(flag),
          flag + " missing from " + ManagementFactory.getRuntimeMXBean().getInputArguments());
    }
  }
}

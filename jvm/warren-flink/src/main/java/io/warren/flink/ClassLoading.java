package io.warren.flink;

import io.warren.Communicator;

/**
 * Checks that Warren's classes come from Flink's own class path (its {@code lib/}), not from a
 * job's class loader.
 *
 * <p>A JVM loads a native library into one class loader only, and Flink gives every job (and,
 * after its tasks on a TaskManager all ended, every restart of it there) a new user-code class
 * loader: Warren loaded by one would work for the first job and fail with an {@code
 * UnsatisfiedLinkError} in the next. So Warren's jars must be in Flink's {@code lib/} (the
 * parent class loader), and a job jar that bundles them too needs {@code
 * classloader.parent-first-patterns.additional: io.warren.} so that the parent's copy wins.
 */
final class ClassLoading {
  private ClassLoading() {}

  /**
   * Throws unless {@code Communicator} was loaded by Flink's class loader or one of its
   * ancestors.
   *
   * @param caller a class of the adapter (for the message)
   * @throws WarrenFlinkException naming both set-ups that work
   */
  static void check(Class<?> caller) {
    ClassLoader warren = Communicator.class.getClassLoader();
    ClassLoader flink = org.apache.flink.api.common.functions.RuntimeContext.class.getClassLoader();
    for (ClassLoader c = flink; c != null; c = c.getParent()) {
      if (c == warren) {
        return;
      }
    }
    if (warren == null) {
      return; // the boot class path
    }
    throw new WarrenFlinkException(
        "Warren's classes were loaded by the job's class loader ("
            + warren
            + "), not by Flink's ("
            + flink
            + "): a JVM can load Warren's native library into one class loader only, so a second"
            + " job or a restarted task would fail. Put warren-core, warren-runner and"
            + " warren-flink in Flink's lib/ directory and, if the job jar bundles them too, set"
            + " classloader.parent-first-patterns.additional: io.warren. in the Flink"
            + " configuration (caller: "
            + caller.getName()
            + ")",
        null);
  }
}

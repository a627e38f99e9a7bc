package io.warren;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/** Helpers: N workers as threads of this JVM, or as separate JVMs. */
final class TestSupport {
  static final String SECRET = "test-secret";

  private TestSupport() {}

  interface Body<T> {
    T run(Communicator comm) throws Exception;
  }

  /** The value or the exception of one worker. */
  static final class Outcome<T> {
    final T value;
    final Throwable error;

    Outcome(T value, Throwable error) {
      this.value = value;
      this.error = error;
    }

    T get() {
      if (error != null) {
        throw new AssertionError("worker failed: " + error, error);
      }
      return value;
    }
  }

  /**
   * Starts a tracker, runs {@code n} workers as threads (task ids "0".."n-1", {@code extra} added
   * to their settings), each creating a communicator, running {@code body} and closing it.
   * Returns each worker's outcome in task-id order; fails if they take longer than {@code limit}.
   */
  static <T> List<Outcome<T>> threads(int n, Map<String, String> extra, Duration limit, Body<T> body)
      throws Exception {
    try (Tracker tracker = Tracker.start(n, SECRET)) {
      return threads(tracker, n, extra, limit, body);
    }
  }

  static <T> List<Outcome<T>> threads(
      Tracker tracker, int n, Map<String, String> extra, Duration limit, Body<T> body)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(n);
    try {
      List<Future<Outcome<T>>> futures = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        Map<String, String> settings = tracker.workerSettings(Integer.toString(i));
        settings.putAll(extra);
        futures.add(
            pool.submit(
                () -> {
                  try (Communicator comm = Communicator.create(settings)) {
                    return new Outcome<>(body.run(comm), null);
                  } catch (Throwable t) {
                    return new Outcome<T>(null, t);
                  }
                }));
      }
      List<Outcome<T>> out = new ArrayList<>();
      long until = System.nanoTime() + limit.toNanos();
      for (Future<Outcome<T>> f : futures) {
        out.add(f.get(Math.max(1, until - System.nanoTime()), TimeUnit.NANOSECONDS));
      }
      return out;
    } finally {
      pool.shutdownNow();
    }
  }

  static String javaBin() {
    return Paths.get(System.getProperty("java.home"), "bin", "java").toString();
  }

  static String classPath() {
    return System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
  }

  /** Extra flags of the test JVM (e.g. -Xcheck:jni), passed on to worker JVMs. */
  static List<String> jvmFlags() {
    List<String> out = new ArrayList<>();
    for (String f : System.getProperty("warren.test.jvmflags", "").trim().split("\\s+")) {
      if (!f.isEmpty()) {
        out.add(f);
      }
    }
    return out;
  }

  /** A worker JVM running {@link WorkerMain} with {@code env} added to its environment. */
  static final class Worker implements AutoCloseable {
    final Process process;
    final ConcurrentLinkedQueue<String> lines = new ConcurrentLinkedQueue<>();
    final CompletableFuture<Void> drained;

    Worker(List<String> jvmArgs, Map<String, String> env, String... args) throws IOException {
      this(classPath(), jvmArgs, env, args);
    }

    /** A worker JVM with the class path {@code classPath} instead of this JVM's. */
    Worker(String classPath, List<String> jvmArgs, Map<String, String> env, String... args)
        throws IOException {
      List<String> cmd = new ArrayList<>();
      cmd.add(javaBin());
      cmd.addAll(jvmFlags());
      cmd.addAll(jvmArgs);
      cmd.add("-cp");
      cmd.add(classPath);
      cmd.add(WorkerMain.class.getName());
      cmd.addAll(List.of(args));
      ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
      pb.environment().keySet().removeIf(k -> k.startsWith("WARREN_"));
      pb.environment().putAll(env);
      process = pb.start();
      drained =
          CompletableFuture.runAsync(
              () -> {
                try (BufferedReader r =
                    new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                  String line;
                  while ((line = r.readLine()) != null) {
                    lines.add(line);
                  }
                } catch (IOException e) {
                  lines.add("READ ERROR " + e);
                }
              });
    }

    /** Waits for the process to exit; returns its exit code. */
    int await(Duration limit) throws Exception {
      if (!process.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly();
        throw new AssertionError("worker did not exit within " + limit + "; output:\n" + output());
      }
      drained.get(10, TimeUnit.SECONDS);
      // Under -Xcheck:jni the JVM reports bad JNI use as warnings and carries on: fail on them.
      if (output().contains("WARNING in native method") || output().contains("FATAL ERROR in native method")) {
        throw new AssertionError("-Xcheck:jni complained in a worker JVM:\n" + output());
      }
      return process.exitValue();
    }

    /** Waits until a line starting with {@code prefix} appears. */
    String awaitLine(String prefix, Duration limit) throws InterruptedException {
      long until = System.nanoTime() + limit.toNanos();
      while (System.nanoTime() < until) {
        for (String l : lines) {
          if (l.startsWith(prefix)) {
            return l;
          }
        }
        if (!process.isAlive() && drained.isDone()) {
          break;
        }
        Thread.sleep(20);
      }
      throw new AssertionError("no line " + prefix + " within " + limit + "; output:\n" + output());
    }

    String output() {
      return String.join("\n", lines);
    }

    @Override
    public void close() {
      process.destroyForcibly();
    }
  }

  /** Runs {@code n} worker JVMs in {@code mode} against a tracker in this JVM. */
  static List<Worker> processes(Tracker tracker, int n, Map<String, String> extra, String mode)
      throws IOException {
    List<Worker> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Map<String, String> env = new HashMap<>(tracker.workerSettings(Integer.toString(i)));
      env.putAll(extra);
      out.add(new Worker(List.of(), env, mode));
    }
    return out;
  }

  static String sep() {
    return File.separator;
  }
}

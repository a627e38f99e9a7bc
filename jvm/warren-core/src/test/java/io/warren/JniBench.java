package io.warren;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The JVM benchmark ({@code make bench-jvm}): a harness in the spirit of JMH (warm-up, many
 * timed iterations, medians), not JMH itself.
 *
 * <ol>
 *   <li>Allreduce (sum) of 16 MiB with 2 worker JVMs: a {@code float[]} copied in 1 MiB
 *       pieces (the default on JDK 17 and 21), a {@code float[]} copied as one 16 MiB piece, a
 *       {@code float[]} with {@code WARREN_JNI_ARRAY_ACCESS=critical} (the default where G1 pins
 *       regions, JDK 22 and later: {@link ArrayAccess}), a direct {@code ByteBuffer}, and a
 *       {@code float[]} copied on the Java side ({@code FloatBuffer.put/get}) through a 1 MiB
 *       direct buffer;
 *       interleaved in rounds with {@code warren bench allreduce -n 2 --bytes 16777216}, the
 *       same call from Rust processes, and with 16 MiB as 16 calls of 1 MiB from Rust.
 *   <li>The cost of one 4-byte allreduce in a world of one through JNI, and the same call in a
 *       loop inside Rust, in this JVM: the difference is the JNI overhead per call.
 * </ol>
 *
 * <p>Arguments: {@code [rounds] [iters]} (default 5 and 30). System property {@code warren.bin}:
 * the {@code warren} binary.
 */
public final class JniBench {
  static final int BYTES = 16 << 20;
  static final int WARMUP = 10;

  private JniBench() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("worker")) {
      worker(Integer.parseInt(args[1]));
      return;
    }
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    int iters = args.length > 1 ? Integer.parseInt(args[1]) : 30;
    String bin = System.getProperty("warren.bin", "../../target/release/warren");

    Map<String, List<Double>> medians = new LinkedHashMap<>();
    medians.put("rust", new ArrayList<>());
    for (int r = 0; r < rounds; r++) {
      // Rotate the order each round so that no implementation always runs first.
      for (int k = 0; k < 5; k++) {
        List<String> lines;
        switch ((r + k) % 5) {
          case 0:
            lines = rust(bin, iters);
            break;
          case 1:
            lines = jvmJob(iters, Map.of("WARREN_JNI_ARRAY_ACCESS", "copy"));
            break;
          case 2:
            lines =
                jvmJob(
                    iters,
                    Map.of(
                        "WARREN_JNI_ARRAY_ACCESS", "copy",
                        "WARREN_JNI_ARRAY_SEGMENT_BYTES", Integer.toString(BYTES)));
            break;
          case 3:
            lines = rustPieces(bin, iters);
            break;
          default:
            lines = jvmJob(iters, Map.of("WARREN_JNI_ARRAY_ACCESS", "critical"));
            break;
        }
        for (String line : lines) {
          record(medians, line);
        }
      }
    }
    System.out.println();
    System.out.println("## allreduce sum, 16 MiB, 2 worker processes, " + rounds + " rounds x " + iters + " iterations");
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "JVM %s: a float[] goes by %s access by default (WARREN_JNI_ARRAY_ACCESS=auto)%n%n",
        Runtime.version(),
        ArrayAccess.resolved(Map.of()).get(ArrayAccess.KEY));
    System.out.println("| implementation | median of per-round medians (ms) | min (ms) | vs Rust |");
    System.out.println("|---|---|---|---|");
    double rustMs = median(medians.get("rust")) * 1e3;
    for (Map.Entry<String, List<Double>> e : medians.entrySet()) {
      double ms = median(e.getValue()) * 1e3;
      double min = e.getValue().stream().mapToDouble(d -> d).min().orElse(0) * 1e3;
      System.out.printf(
          Locale.ROOT, "| %s | %.2f | %.2f | %+.1f%% |%n", e.getKey(), ms, min, (ms / rustMs - 1) * 100);
    }
    overhead();
  }

  static void record(Map<String, List<Double>> medians, String jsonLine) {
    Matcher impl = Pattern.compile("\"impl\":\"([^\"]+)\"").matcher(jsonLine);
    Matcher med = Pattern.compile("\"median_s\":([0-9.eE+-]+)").matcher(jsonLine);
    if (impl.find() && med.find()) {
      String name = impl.group(1).equals("warren") ? "rust" : impl.group(1);
      medians.computeIfAbsent(name, k -> new ArrayList<>()).add(Double.parseDouble(med.group(1)));
      System.out.println(jsonLine);
    }
  }

  static List<String> rust(String bin, int iters) throws Exception {
    Process p =
        new ProcessBuilder(
                bin, "bench", "allreduce", "-n", "2", "--bytes", Integer.toString(BYTES),
                "--iters", Integer.toString(iters), "--warmup", Integer.toString(WARMUP))
            .redirectErrorStream(true)
            .start();
    List<String> lines = readAll(p);
    if (!p.waitFor(300, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new IllegalStateException("warren bench failed: " + lines);
    }
    return lines;
  }

  /**
   * The Rust reference for the JVM's pieces: {@code warren bench allreduce} of 1 MiB calls,
   * reported as 16 x their mean (the time of 16 MiB in 1 MiB calls).
   */
  static List<String> rustPieces(String bin, int iters) throws Exception {
    int piece = 1 << 20;
    int n = BYTES / piece;
    Process p =
        new ProcessBuilder(
                bin, "bench", "allreduce", "-n", "2", "--bytes", Integer.toString(piece),
                "--iters", Integer.toString(iters * n), "--warmup", Integer.toString(WARMUP * n))
            .redirectErrorStream(true)
            .start();
    List<String> lines = readAll(p);
    if (!p.waitFor(300, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new IllegalStateException("warren bench failed: " + lines);
    }
    List<String> out = new ArrayList<>();
    for (String line : lines) {
      Matcher mean = Pattern.compile("\"mean_s\":([0-9.eE+-]+)").matcher(line);
      if (mean.find()) {
        out.add(String.format(Locale.ROOT, "{\"impl\":\"rust-16-calls-of-1MiB\",\"median_s\":%.6f}",
            Double.parseDouble(mean.group(1)) * n));
      }
    }
    return out;
  }

  static List<String> jvmJob(int iters, Map<String, String> extra) throws Exception {
    List<Process> ps = new ArrayList<>();
    List<String> out = new ArrayList<>();
    try (Tracker tracker = Tracker.start(2, "bench-secret")) {
      for (int i = 0; i < 2; i++) {
        Map<String, String> env = new HashMap<>(tracker.workerSettings(Integer.toString(i)));
        env.putAll(extra);
        ProcessBuilder pb =
            new ProcessBuilder(
                    Paths.java(), "-Xms512m", "-Xmx512m", "-cp", System.getProperty("java.class.path"),
                    JniBench.class.getName(), "worker", Integer.toString(iters))
                .redirectErrorStream(true);
        pb.environment().putAll(env);
        ps.add(pb.start());
      }
      for (Process p : ps) {
        out.addAll(readAll(p));
        if (!p.waitFor(300, TimeUnit.SECONDS) || p.exitValue() != 0) {
          throw new IllegalStateException("bench worker failed: " + out);
        }
      }
      tracker.awaitCompletion(Duration.ofSeconds(30));
    }
    return out;
  }

  static List<String> readAll(Process p) throws Exception {
    List<String> lines = new ArrayList<>();
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
      String l;
      while ((l = r.readLine()) != null) {
        lines.add(l);
      }
    }
    return lines;
  }

  interface Call {
    void run();
  }

  /** Calls between the (untimed) checkpoints, as in {@code warren bench}. */
  static final int CALLS_PER_CHECKPOINT = 8;

  static double[] time(Communicator comm, Call call, int iters) {
    for (int i = 0; i < WARMUP; i++) {
      call.run();
    }
    double[] t = new double[iters];
    for (int i = 0; i < iters; i++) {
      // Results are kept for replay until the next checkpoint, as in a training loop that
      // checkpoints every few calls; the Rust benchmark does the same. Not timed.
      if (i % CALLS_PER_CHECKPOINT == 0) {
        comm.checkpoint(new byte[0], null);
      }
      long s = System.nanoTime();
      call.run();
      t[i] = (System.nanoTime() - s) / 1e9;
    }
    Arrays.sort(t);
    return t;
  }

  static String json(String impl, Communicator comm, double[] sorted) {
    double median = sorted[(sorted.length - 1) / 2];
    double p99 = sorted[(int) Math.round((sorted.length - 1) * 0.99)];
    double algbw = BYTES / median / 1e9;
    return String.format(
        Locale.ROOT,
        "{\"impl\":\"%s\",\"collective\":\"allreduce\",\"workers\":%d,\"bytes\":%d,\"iters\":%d,"
            + "\"median_s\":%.6f,\"p99_s\":%.6f,\"algbw_gbps\":%.3f,\"busbw_gbps\":%.3f}",
        impl, comm.worldSize(), BYTES, sorted.length, median, p99, algbw, algbw);
  }

  static void worker(int iters) {
    Map<String, String> settings = new HashMap<>();
    System.getenv().forEach((k, v) -> {
      if (k.startsWith("WARREN_")) {
        settings.put(k, v);
      }
    });
    boolean critical = "critical".equals(settings.get("WARREN_JNI_ARRAY_ACCESS"));
    boolean whole = settings.containsKey("WARREN_JNI_ARRAY_SEGMENT_BYTES");
    String impl =
        critical ? "jvm-float[]-critical" : whole ? "jvm-float[]-copy-one-16MiB-piece" : "jvm-float[]-copy-1MiB-pieces";
    try (Communicator comm = Communicator.create(settings)) {
      float[] array = new float[BYTES / 4];
      double[] t = time(comm, () -> comm.allreduce(array, Op.SUM), iters);
      if (comm.rank() == 0) {
        System.out.println(json(impl, comm, t));
      }
      if (!critical && !whole) {
        ByteBuffer direct = ByteBuffer.allocateDirect(BYTES).order(ByteOrder.nativeOrder());
        t = time(comm, () -> comm.allreduce(direct, DataType.F32, Op.SUM), iters);
        if (comm.rank() == 0) {
          System.out.println(json("jvm-direct-buffer", comm, t));
        }
        ByteBuffer piece = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.nativeOrder());
        java.nio.FloatBuffer floats = piece.asFloatBuffer();
        t = time(comm, () -> {
          for (int off = 0; off < array.length; off += floats.capacity()) {
            int n = Math.min(floats.capacity(), array.length - off);
            floats.clear();
            floats.put(array, off, n);
            piece.clear().limit(n * 4);
            comm.allreduce(piece, DataType.F32, Op.SUM);
            floats.clear();
            floats.get(array, off, n);
          }
        }, iters);
        if (comm.rank() == 0) {
          System.out.println(json("jvm-float[]-java-copies-1MiB", comm, t));
        }
      }
    }
  }

  /** JNI overhead of a 4-byte allreduce in a world of one (no tracker). */
  static void overhead() {
    int calls = 2_000_000;
    List<Double> jvm = new ArrayList<>();
    List<Double> rust = new ArrayList<>();
    try (Communicator comm = Communicator.create(Map.of())) {
      float[] x = {1f};
      long h = comm.nativeHandle();
      for (int r = 0; r < 7; r++) {
        long s = System.nanoTime();
        for (int i = 0; i < calls; i++) {
          comm.allreduce(x, Op.SUM);
        }
        jvm.add((System.nanoTime() - s) / (double) calls);
        rust.add(Native.commBenchAllreduceF32(h, 1, calls) / (double) calls);
      }
    }
    // The first repetition warms up the JIT; report the median of the rest.
    double j = median(jvm.subList(1, jvm.size()));
    double n = median(rust.subList(1, rust.size()));
    System.out.println();
    System.out.println("## 4-byte allreduce, world of one, " + calls + " calls x 6 repetitions");
    System.out.println();
    System.out.println("| path | ns per call (median) |");
    System.out.println("|---|---|");
    System.out.printf(Locale.ROOT, "| Java -> JNI -> Rust (`allreduce(float[1], SUM)`) | %.1f |%n", j);
    System.out.printf(Locale.ROOT, "| the same call in a loop inside Rust | %.1f |%n", n);
    System.out.printf(Locale.ROOT, "| added by the JVM binding | %.1f |%n", j - n);
  }

  static double median(List<Double> xs) {
    double[] a = xs.stream().mapToDouble(d -> d).sorted().toArray();
    return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
  }

  static final class Paths {
    static String java() {
      return java.nio.file.Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    }
  }
}

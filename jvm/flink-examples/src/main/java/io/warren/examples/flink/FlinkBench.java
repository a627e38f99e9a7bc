package io.warren.examples.flink;

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * What a killed subtask costs under retry-one (Flink restarts it alone, it catches up from its
 * peers) against a full restart (fail-all: Flink restarts every subtask, all resume from the
 * durable checkpoint), on one MiniCluster of {@code workers} TaskManagers of one slot each, in
 * one run: each case's median wall time over the repeats, a failure's added time against the
 * same recovery mode without a failure, and their ratio. Prints a Markdown report.
 *
 * <p>{@code bin/run-bench [repeats] [extra LogisticRegression arguments]} (see the README).
 */
public final class FlinkBench {
  private FlinkBench() {}

  private static double median(List<Double> xs) {
    List<Double> s = new ArrayList<>(xs);
    Collections.sort(s);
    return s.get(s.size() / 2);
  }

  private static double once(URI rest, String... args) throws Exception {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.createRemoteEnvironment(rest.getHost(), rest.getPort());
    TrainingParams p = CommandLine.parse(args);
    env.setParallelism(p.workers);
    long t = System.nanoTime();
    List<WorkerResult> rs = LogisticRegression.run(env, p);
    double s = (System.nanoTime() - t) / 1e9;
    if (rs.size() != p.workers) {
      throw new IllegalStateException("expected " + p.workers + " results, got " + rs.size());
    }
    return s;
  }

  /**
   * Runs the benchmark.
   *
   * @param args {@code [repeats] [LogisticRegression arguments]}: 5 repeats and {@code --workers 3
   *     --rows 300000 --features 20 --iters 30} unless given; failures at iteration {@code
   *     iters/2}
   * @throws Exception if a run failed
   */
  public static void main(String[] args) throws Exception {
    int repeats = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    List<String> base = new ArrayList<>(List.of("--workers", "3", "--rows", "300000", "--features", "20", "--iters", "30"));
    for (int i = 1; i < args.length; i++) {
      base.add(args[i]);
    }
    TrainingParams p = CommandLine.parse(base.toArray(new String[0]));
    String kill = Integer.toString(p.iters / 2);
    Configuration conf = LogisticRegression.localConfiguration();
    conf.setString("restart-strategy.fixed-delay.delay", "100 ms");
    conf.setString("rest.bind-port", "0");
    Path ckpt = Files.createTempDirectory("warren-flink-bench");
    MiniClusterConfiguration mc =
        new MiniClusterConfiguration.Builder()
            .setConfiguration(conf)
            .setNumTaskManagers(p.workers)
            .setNumSlotsPerTaskManager(1)
            .build();
    String[][] cases = {
      {"retry-one"}, {"retry-one", "--kill-task", kill}, {"fail-all"}, {"fail-all", "--kill-task", kill},
    };
    List<List<Double>> times = new ArrayList<>();
    try (MiniCluster cluster = new MiniCluster(mc)) {
      cluster.start();
      URI rest = cluster.getRestAddress().get();
      once(rest, base.toArray(new String[0])); // warm-up
      for (String[] c : cases) {
        times.add(new ArrayList<>());
      }
      for (int r = 0; r < repeats; r++) {
        for (int i = 0; i < cases.length; i++) {
          List<String> a = new ArrayList<>(base);
          a.add("--recovery");
          a.add(cases[i][0]);
          if (cases[i][0].equals("fail-all")) {
            a.add("--checkpoint-dir");
            a.add(ckpt.toString());
          }
          for (int j = 1; j < cases[i].length; j++) {
            a.add(cases[i][j]);
          }
          times.get(i).add(once(rest, a.toArray(new String[0])));
        }
      }
    }
    double[] m = new double[cases.length];
    System.out.println("| case | median s | runs (s) |");
    System.out.println("|---|---|---|");
    for (int i = 0; i < cases.length; i++) {
      m[i] = median(times.get(i));
      StringBuilder runs = new StringBuilder();
      for (double t : times.get(i)) {
        runs.append(runs.length() == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%.2f", t));
      }
      System.out.printf(
          Locale.ROOT, "| %s | %.2f | %s |%n", String.join(" ", cases[i]), m[i], runs);
    }
    double one = m[1] - m[0];
    double all = m[3] - m[2];
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "%s, %d repeats, failure at iteration %s, restart delay 100 ms: a killed subtask adds %.2f s"
            + " under retry-one, a full restart adds %.2f s under fail-all: ratio %.2f (target <="
            + " 0.5)%n",
        String.join(" ", base), repeats, kill, one, all, all > 0 ? one / all : Double.NaN);
  }
}

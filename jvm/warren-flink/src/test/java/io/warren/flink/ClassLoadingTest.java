package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job submitted with a jar that bundles Warren, as {@code flink run} does, to a MiniCluster
 * whose own class path ("lib/") has Warren too: child-first (Flink's default) loads Warren in the
 * job's class loader and every worker fails at once with the error naming both set-ups;
 * {@code classloader.parent-first-patterns.additional: io.warren.} makes the parent's copy win and
 * the job trains the usual model.
 */
class ClassLoadingTest {
  private static final int WORKERS = 2;

  /** A jar of Warren's and these tests' classes (what a user's fat jar would bundle). */
  private static Path jobJar(Path dir) throws IOException {
    Path here = Path.of(System.getProperty("user.dir"));
    List<Path> roots =
        List.of(
            here.resolve("../warren-core/target/classes"),
            here.resolve("../warren-runner/target/classes"),
            here.resolve("target/classes"),
            here.resolve("target/test-classes"));
    Path jar = dir.resolve("job.jar");
    try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar))) {
      for (Path root : roots) {
        try (Stream<Path> files = Files.walk(root)) {
          for (Path f : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
            String name = root.relativize(f).toString().replace('\\', '/');
            if (name.startsWith("META-INF/")) {
              continue;
            }
            out.putNextEntry(new JarEntry(name));
            Files.copy(f, out);
            out.closeEntry();
          }
        }
      }
    }
    return jar;
  }

  private static String run(Configuration conf, Path jar) throws Exception {
    conf.setString("rest.bind-port", "0");
    conf.setString("restart-strategy.type", "fixed-delay");
    conf.setString("restart-strategy.fixed-delay.attempts", "3");
    conf.setString("restart-strategy.fixed-delay.delay", "200 ms");
    MiniClusterConfiguration mc =
        new MiniClusterConfiguration.Builder()
            .setConfiguration(conf)
            .setNumTaskManagers(WORKERS)
            .setNumSlotsPerTaskManager(1)
            .build();
    try (MiniCluster cluster = new MiniCluster(mc)) {
      cluster.start();
      URI rest = cluster.getRestAddress().get();
      StreamExecutionEnvironment env =
          StreamExecutionEnvironment.createRemoteEnvironment(rest.getHost(), rest.getPort(), jar.toString());
      env.setParallelism(WORKERS);
      String run = UUID.randomUUID().toString();
      Training.Plan plan = Training.Plan.clean(run, 5);
      DataStream<double[]> rows =
          env.fromSource(
                  new PartitionedSource<>(WORKERS, Training::partition),
                  WatermarkStrategy.noWatermarks(),
                  "partitions",
                  PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO)
              .setParallelism(WORKERS);
      WarrenFlink.train(
              rows,
              WORKERS,
              Map.of("slotWaitTimeout", "30"),
              (ctx, part) -> Training.train(ctx.communicator(), ctx.taskId(), ctx.attempt(), part, plan),
              PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO)
          .sinkTo(new DiscardingSink<>())
          .setParallelism(WORKERS);
      WarrenFlink.execute(env, "class-loading");
      return run;
    }
  }

  private static String chain(Throwable t) {
    StringBuilder b = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause()) {
      b.append(c).append('\n');
    }
    return b.toString();
  }

  @Test
  void warrenInTheJobsClassLoaderFailsAtOnceNamingBothSetUps(@TempDir Path dir) throws Exception {
    Path jar = jobJar(dir);
    Exception e = assertThrows(Exception.class, () -> run(new Configuration(), jar));
    String c = chain(e);
    assertTrue(c.contains("Warren's classes were loaded by the job's class loader"), c);
    assertTrue(c.contains("classloader.parent-first-patterns.additional: io.warren."), c);
  }

  @Test
  void parentFirstPatternsLoadWarrenFromFlinksClassPath(@TempDir Path dir) throws Exception {
    Path jar = jobJar(dir);
    Configuration conf = new Configuration();
    conf.setString("classloader.parent-first-patterns.additional", "io.warren.");
    String run = run(conf, jar);
    Map<String, Long> ended = Training.ENDED.get(run);
    assertEquals(WORKERS, ended == null ? 0 : ended.size(), "workers that ran in this JVM's classes");
    assertArrayEquals(new String[] {"0/0", "1/0"}, ended.keySet().stream().sorted().toArray());
  }
}

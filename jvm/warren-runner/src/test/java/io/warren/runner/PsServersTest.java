package io.warren.runner;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.TlsSettings;
import io.warren.ps.PsClient;
import io.warren.ps.PsGradients;
import io.warren.ps.PsJob;
import io.warren.ps.PsOptimizer;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The runner's parameter servers through the real native library: servers in this JVM,
 * trainers as threads of it over real sockets. SGD with learning rate 1 on zeros: after {@code
 * s} sync steps of trainers pushing {@code id + 1}, every weight is {@code -s * (1 + 2)}.
 */
class PsServersTest {
  private static final String PREFIX = "test.warren.";
  private static final PsSettings.Declarations DECLARED = PsSettings.declarations("client", "the client's host");
  private static final int TRAINERS = 2;
  private static final int STEPS = 8;
  private static final int WIDTH = 10;

  private static PsSettings settings(Map<String, String> raw) {
    return PsSettings.parse(raw, PREFIX, DECLARED, List.of());
  }

  private static PsJob job() {
    return PsJob.builder(TRAINERS).sync().dense("w", WIDTH, PsJob.zeros(), PsOptimizer.sgd(1f)).build();
  }

  /** One trainer from the servers' step on; {@code afterPush} runs after each push. */
  private static float[] train(PsClient ps, IntConsumer afterPush) {
    ps.define(job());
    for (long step = ps.step(); step < STEPS; step++) {
      ps.pullDense("w", 0, WIDTH);
      float[] g = new float[WIDTH];
      Arrays.fill(g, ps.trainer() + 1);
      ps.push(new PsGradients().dense("w", 0, g));
      afterPush.accept((int) step);
    }
    // sync: this pull waits for every trainer's last push
    return ps.pullDense("w", 0, WIDTH);
  }

  private static void assertFailureFree(float[] w) {
    for (float v : w) {
      assertEquals(-3f * STEPS, v, 0f, Arrays.toString(w));
    }
  }

  /** Runs {@code TRAINERS} trainers as threads; trainer {@code t} runs {@code bodies.get(t)}. */
  private static List<float[]> trainAll(List<PsTrainers.Body<float[]>> bodies, PsTrainers trainers) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(bodies.size());
    try {
      List<Future<float[]>> fs = new ArrayList<>();
      for (int t = 0; t < bodies.size(); t++) {
        int id = t;
        fs.add(pool.submit(() -> trainers.run(id, bodies.get(id))));
      }
      List<float[]> out = new ArrayList<>();
      for (Future<float[]> f : fs) {
        out.add(f.get(120, TimeUnit.SECONDS));
      }
      return out;
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aServerRestartedFromItsCheckpointMidRunLosesNoSyncUpdate(@TempDir Path dir) throws Exception {
    PsSettings s = settings(Map.of("ps.checkpointDir", dir.toString(), "ps.checkpointEvery", "2"));
    try (PsServers servers = PsServers.start(2, "127.0.0.1", s, TlsSettings.OFF)) {
      assertEquals(2, servers.count());
      List<String> before = servers.uris();
      PsTrainers trainers = servers.trainers();
      List<float[]> w =
          trainAll(
              List.of(
                  ps -> train(ps, step -> {
                    if (step == 4) {
                      servers.restart(0);
                    }
                  }),
                  ps -> train(ps, step -> {})),
              trainers);
      w.forEach(PsServersTest::assertFailureFree);
      assertEquals(before, servers.uris(), "a restarted server keeps its address");
      assertEquals(STEPS, servers.status(0).applied());
      assertEquals(0, servers.status(0).lost());
      try (var files = Files.list(dir)) {
        assertTrue(files.findAny().isPresent(), "the servers checkpointed to " + dir);
      }
    }
  }

  @Test
  void aTrainerThatThrowsIsAbortedWithoutLeavingAndItsReRunResumesAtTheServersStep() throws Exception {
    try (PsServers servers = PsServers.start(2, "127.0.0.1", PsSettings.DEFAULTS, TlsSettings.OFF)) {
      PsTrainers trainers = servers.trainers();
      long[] resumedAt = {-1};
      PsTrainers.Body<float[]> failing =
          ps ->
              train(ps, step -> {
                if (step == 2) {
                  throw new IllegalStateException("injected failure after step 2");
                }
              });
      PsTrainers.Body<float[]> reRun =
          ps -> {
            resumedAt[0] = ps.step();
            return train(ps, step -> {});
          };
      ExecutorService pool = Executors.newFixedThreadPool(2);
      try {
        Future<float[]> zero = pool.submit(() -> trainers.run(0, ps -> train(ps, step -> {})));
        Future<float[]> one =
            pool.submit(
                () -> {
                  IllegalStateException e =
                      assertThrows(IllegalStateException.class, () -> trainers.run(1, failing));
                  assertTrue(e.getMessage().startsWith("injected"), e.getMessage());
                  return trainers.run(1, reRun);
                });
        assertFailureFree(zero.get(120, TimeUnit.SECONDS));
        assertFailureFree(one.get(120, TimeUnit.SECONDS));
      } finally {
        pool.shutdownNow();
      }
      assertEquals(3, resumedAt[0], "the re-run resumed after the 3 steps its predecessor pushed");
    }
  }

  @Test
  void underTlsTheTrainersConnectAndTheirSideOfTheRunIsSerializable() throws Exception {
    TlsSettings tls = TlsSettings.jobSecret();
    try (PsServers servers = PsServers.start(1, "127.0.0.1", PsSettings.DEFAULTS, tls)) {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
        out.writeObject(servers.trainers());
      }
      PsTrainers shipped;
      try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
        shipped = (PsTrainers) in.readObject();
      }
      assertEquals(servers.uris(), shipped.uris());
      assertFalse(shipped.toString().contains(shipped.secret()), "toString shows no secret: " + shipped);
      List<float[]> w = trainAll(List.of(ps -> train(ps, s -> {}), ps -> train(ps, s -> {})), shipped);
      w.forEach(PsServersTest::assertFailureFree);
    }
  }

  @Test
  void closeIsIdempotentAndARestartAfterItDoesNothing(@TempDir Path dir) {
    // ps.checkpointEvery=0 (the default) with a directory: checkpoints by time
    PsServers servers =
        PsServers.start(2, "127.0.0.1", settings(Map.of("ps.checkpointDir", dir.toString())), TlsSettings.OFF);
    assertFalse(servers.isClosed());
    assertFalse(servers.status(1).defined());
    servers.close();
    servers.close();
    assertTrue(servers.isClosed());
    servers.restart(0);
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> servers.status(0));
    assertTrue(e.getMessage().contains("stopped"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> PsServers.start(0, "127.0.0.1", PsSettings.DEFAULTS, TlsSettings.OFF));
  }

  @Test
  void theSettingsParseWithTheirDefaultsAndABadKeyOrValueIsNamed() {
    assertEquals(PsSettings.DEFAULTS, settings(Map.of("timeout", "5")));
    Map<String, String> raw = new HashMap<>();
    raw.put("ps.checkpointDir", "/tmp/ps");
    raw.put("ps.checkpointEvery", "3");
    raw.put("ps.host", "10.0.0.2");
    raw.put("ps.pullTimeout", "1.5");
    raw.put("ps.connectTimeout", "7");
    raw.put("ps.callTimeout", "9");
    raw.put("ps.threads", "4");
    assertEquals(
        new PsSettings(
            Optional.of("/tmp/ps"),
            3,
            Optional.of("10.0.0.2"),
            Duration.ofMillis(1500),
            Duration.ofSeconds(7),
            Duration.ofSeconds(9),
            4),
        settings(raw));
    RunnerException typo = assertThrows(RunnerException.class, () -> settings(Map.of("ps.treads", "2")));
    assertTrue(
        typo.getMessage().startsWith("test.warren.ps.treads is not a Warren setting (did you mean test.warren.ps.threads?"),
        typo.getMessage());
    RunnerException bad = assertThrows(RunnerException.class, () -> settings(Map.of("ps.pullTimeout", "0")));
    assertTrue(bad.getMessage().startsWith("test.warren.ps.pullTimeout = \"0\": expected"), bad.getMessage());
    // an engine's own ps.* setting is accepted here and left to the engine
    Setting<String> own = new Setting<>("ps.servers", SettingType.oneOf("a", "b"), "a", "a", null, "engine's own");
    assertEquals(PsSettings.DEFAULTS, PsSettings.parse(Map.of("ps.servers", "b"), PREFIX, DECLARED, List.of(own)));
    assertTrue(DECLARED.checkpointDir().doc().contains("local directory of the client"));
    assertEquals("the client's host", DECLARED.host().defaultDoc());
  }
}

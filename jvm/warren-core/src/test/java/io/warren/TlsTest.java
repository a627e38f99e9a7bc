package io.warren;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.ps.PsClient;
import io.warren.ps.PsGradients;
import io.warren.ps.PsJob;
import io.warren.ps.PsOptimizer;
import io.warren.ps.PsServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Encryption in transit through the Java API, with a real tracker, master and parameter server
 * in this JVM and workers as its threads: TLS keyed from the job secret or from certificates
 * (made with the {@code openssl} tool) gives the same results as plain TCP; a plain end, or a
 * certificate of another authority, is refused at once with an error naming TLS, and the
 * tracker keeps nothing of it.
 */
class TlsTest {
  /** How long a refused worker may take to fail (a mismatch is seen at the first bytes). */
  private static final long PROMPT_MS = 5000;

  private static final Duration LIMIT = Duration.ofSeconds(60);

  /** Each rank's contribution: rank r holds {@code r + i / 8} at index i. */
  private static float[] contribution(int rank) {
    float[] v = new float[1000];
    for (int i = 0; i < v.length; i++) {
      v[i] = rank + i / 8f;
    }
    return v;
  }

  /** The sum over 2 ranks, computed here: {@code 1 + i / 4} (exact in float). */
  private static float[] expectedSum() {
    float[] v = new float[1000];
    for (int i = 0; i < v.length; i++) {
      v[i] = 1 + i / 4f;
    }
    return v;
  }

  /** Runs a 2-worker allreduce and broadcast on {@code tracker}; returns rank 0's results. */
  private static float[] job(Tracker tracker) throws Exception {
    List<TestSupport.Outcome<float[]>> out =
        TestSupport.threads(
            tracker,
            2,
            Map.of("WARREN_TIMEOUT_S", "60"),
            LIMIT,
            comm -> {
              float[] v = contribution(comm.rank());
              comm.allreduce(v, Op.SUM);
              byte[] b = comm.broadcast(comm.rank() == 0 ? new byte[] {7, 8, 9} : null, 0);
              assertArrayEquals(new byte[] {7, 8, 9}, b);
              return v;
            });
    assertArrayEquals(out.get(0).get(), out.get(1).get(), "every rank sees the same result");
    return out.get(0).get();
  }

  @Test
  @Timeout(120)
  void aJobKeyedFromTheSecretOrFromCertificatesGivesThePlainResult(@TempDir Path dir)
      throws Exception {
    float[] plain;
    try (Tracker t = Tracker.start(2, TestSupport.SECRET)) {
      plain = job(t);
    }
    assertArrayEquals(expectedSum(), plain);
    try (Tracker t = tracker(2, TlsSettings.jobSecret())) {
      assertEquals("1", t.workerSettings().get("WARREN_TLS"));
      assertArrayEquals(plain, job(t), "TLS keyed from the job secret");
    }
    TlsSettings pki = Pki.authority(dir, "a");
    try (Tracker t = tracker(2, pki)) {
      assertEquals(pki.workerSettings().get("WARREN_TLS_CA"), t.workerSettings().get("WARREN_TLS_CA"));
      assertArrayEquals(plain, job(t), "TLS with user certificates");
    }
  }

  @Test
  @Timeout(120)
  void aPlainWorkerOrAnotherAuthoritysCertificateIsRefusedAtOnceAndNothingIsKept(
      @TempDir Path dir) throws Exception {
    TlsSettings a = Pki.authority(dir, "a");
    TlsSettings b = Pki.authority(dir, "b");
    try (Tracker t = tracker(2, a)) {
      // Plain TCP to a TLS tracker: both see the other's preamble and name the mismatch.
      Map<String, String> plain = t.workerSettings("0");
      plain.keySet().removeIf(k -> k.startsWith("WARREN_TLS"));
      assertRefused(plain, "TLS mismatch");
      // Certificates of another authority: the TLS handshake fails.
      Map<String, String> other = t.workerSettings("0");
      other.putAll(b.workerSettings());
      assertRefused(other, "TLS certificate");
      // TLS keyed from the secret only: the tracker wants a certificate.
      Map<String, String> none = t.workerSettings("0");
      none.keySet().removeIf(k -> k.startsWith("WARREN_TLS"));
      none.putAll(TlsSettings.jobSecret().workerSettings());
      assertRefused(none, "TLS");
      // Nothing of the refused attempts was kept: task 0 joins as if it were the first.
      assertArrayEquals(expectedSum(), job(t));
      JobReport r = t.awaitCompletion(Duration.ofSeconds(30));
      assertEquals(2, r.workers());
      assertEquals(0, r.recoveries(), "no refused attempt counts as a lost worker");
    }
  }

  @Test
  @Timeout(60)
  void unreadableCertificatesAreNamedWhereTheTrackerStarts(@TempDir Path dir) {
    TlsSettings missing =
        TlsSettings.certificates(dir.resolve("ca.pem"), dir.resolve("c.pem"), dir.resolve("k.pem"));
    WarrenConfigException e = assertThrows(WarrenConfigException.class, () -> tracker(1, missing));
    assertTrue(e.getMessage().contains("WARREN_TLS_CA " + dir.resolve("ca.pem")), e.getMessage());
    WarrenConfigException f =
        assertThrows(
            WarrenConfigException.class,
            () -> tracker(1, TlsSettings.fromSettings(Map.of("WARREN_TLS", "maybe"))));
    assertTrue(f.getMessage().contains("WARREN_TLS=\"maybe\""), f.getMessage());
  }

  @Test
  @Timeout(120)
  void aMasterAndAParameterServerSpeakTlsToTheirClientsAndRefusePlainOnes(@TempDir Path dir)
      throws Exception {
    TlsSettings tls = TlsSettings.jobSecret();
    try (Master m =
        Master.builder().store("file:" + dir.resolve("q")).secret(TestSupport.SECRET).tls(tls).start()) {
      assertEquals("1", m.workerSettings().get("WARREN_TLS"));
      try (MasterClient c = MasterClient.connect(m.workerSettings())) {
        assertEquals(0, c.status().tasks());
      }
      long started = System.nanoTime();
      WarrenException e =
          assertThrows(
              WarrenException.class,
              () -> MasterClient.connect(m.address(), TestSupport.SECRET, Duration.ofSeconds(30)));
      assertPrompt(started, e, "TLS mismatch");
    }
    try (PsServer s = PsServer.builder(TestSupport.SECRET, 0, 1).tls(tls).start()) {
      List<String> uris = List.of(s.uri());
      Duration d = Duration.ofSeconds(30);
      try (PsClient c = PsClient.connect(uris, TestSupport.SECRET, 0, d, d, tls)) {
        c.define(PsJob.builder(1).sync().dense("w", 4, PsJob.zeros(), PsOptimizer.sgd(1f)).build());
        c.push(new PsGradients().dense("w", 0, new float[] {1, 2, 3, 4}));
        assertArrayEquals(new float[] {-1, -2, -3, -4}, c.pullDense("w", 0, 4)); // lr 1 from zeros
      }
      long started = System.nanoTime();
      WarrenException e =
          assertThrows(WarrenException.class, () -> PsClient.connect(uris, TestSupport.SECRET, 1, d, d));
      assertPrompt(started, e, "TLS mismatch");
      assertEquals(1, s.status().applied(), "the plain client pushed nothing");
    }
  }

  private static Tracker tracker(int workers, TlsSettings tls) {
    return Tracker.builder(workers, TestSupport.SECRET).tls(tls).start();
  }

  private static void assertRefused(Map<String, String> settings, String why) {
    Map<String, String> s = new HashMap<>(settings);
    s.put("WARREN_CONNECT_TIMEOUT_S", "60");
    long started = System.nanoTime();
    WarrenException e = assertThrows(WarrenException.class, () -> Communicator.create(s).abort());
    assertPrompt(started, e, why);
  }

  private static void assertPrompt(long started, WarrenException e, String why) {
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    System.out.printf("refused in %d ms: %s%n", ms, e.getMessage());
    assertTrue(e.getMessage().contains(why), e.getClass().getSimpleName() + ": " + e.getMessage());
    assertTrue(ms < PROMPT_MS, "refused after " + ms + " ms, not at once");
  }

  /** Certificate authorities made with the {@code openssl} tool, for the tests. */
  static final class Pki {
    private Pki() {}

    /**
     * An authority {@code name} and a certificate for 127.0.0.1 it signs (for servers and
     * clients alike), in {@code dir}.
     *
     * @return TLS settings with them
     */
    static TlsSettings authority(Path dir, String name) throws Exception {
      Path ca = dir.resolve(name + "-ca.pem");
      Path caKey = dir.resolve(name + "-ca-key.pem");
      Path key = dir.resolve(name + "-key.pem");
      Path csr = dir.resolve(name + ".csr");
      Path cert = dir.resolve(name + "-cert.pem");
      Path ext = dir.resolve(name + "-ext.cnf");
      Files.writeString(
          ext,
          "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
              + "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n");
      openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", caKey.toString());
      openssl(
          "req", "-x509", "-new", "-key", caKey.toString(), "-sha256", "-days", "2", "-subj",
          "/CN=warren-test-" + name, "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
          "keyUsage=critical,keyCertSign,cRLSign", "-out", ca.toString());
      openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key.toString());
      openssl("req", "-new", "-key", key.toString(), "-subj", "/CN=127.0.0.1", "-out", csr.toString());
      openssl(
          "x509", "-req", "-in", csr.toString(), "-CA", ca.toString(), "-CAkey", caKey.toString(),
          "-set_serial", "2", "-days", "2", "-sha256", "-extfile", ext.toString(), "-out",
          cert.toString());
      return TlsSettings.certificates(ca, cert, key);
    }

    private static void openssl(String... args) throws Exception {
      List<String> cmd = new java.util.ArrayList<>(List.of("openssl"));
      cmd.addAll(List.of(args));
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      assertTrue(p.waitFor(30, TimeUnit.SECONDS), "openssl did not finish: " + cmd);
      assertEquals(0, p.exitValue(), String.join(" ", cmd) + ": " + out);
    }
  }
}

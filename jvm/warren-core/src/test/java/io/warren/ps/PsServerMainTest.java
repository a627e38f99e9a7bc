package io.warren.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link PsServerMain} as a real child JVM: it prints its address, serves a trainer with the
 * secret from its environment, and exits 0 when its stdin closes; bad arguments are refused
 * naming them.
 */
class PsServerMainTest {

  @Test
  void badArgumentsAreRefusedNamingThem() {
    String[] ok = {"--index", "0", "--servers", "1"};
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> PsServerMain.builder(ok, null));
    assertTrue(e.getMessage().contains(PsServerMain.SECRET_ENV), e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> PsServerMain.builder(new String[] {"--servers", "1"}, "s"));
    assertTrue(e.getMessage().contains("--index is required"), e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> PsServerMain.builder(new String[] {"--index", "0", "--servers", "1", "--por", "1"}, "s"));
    assertTrue(e.getMessage().contains("unknown argument --por"), e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> PsServerMain.builder(new String[] {"--index", "x", "--servers", "1"}, "s"));
    assertTrue(e.getMessage().contains("--index x is not a number"), e.getMessage());
    assertThrows(
        IllegalArgumentException.class,
        () -> PsServerMain.builder(new String[] {"--index", "2", "--servers", "2"}, "s"));
    e =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                PsServerMain.builder(
                    new String[] {"--index", "0", "--servers", "1", "--threads", "0"}, "s"));
    assertTrue(e.getMessage().contains("at least one thread, not 0"), e.getMessage());
  }

  @Test
  void aChildJvmServesUntilItsStdinCloses() throws Exception {
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb =
        new ProcessBuilder(
                java,
                "-cp",
                System.getProperty("java.class.path"),
                PsServerMain.class.getName(),
                "--index",
                "1",
                "--servers",
                "2")
            .redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment().put(PsServerMain.SECRET_ENV, PsTest.SECRET);
    Process p = pb.start();
    try (PsServer zero = PsServer.builder(PsTest.SECRET, 0, 2).start()) {
      BufferedReader out =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
      String line = out.readLine(); // the child prints it once listening, or exits (null)
      assertTrue(line != null && line.startsWith("WARREN_PS_URI_1="), "address line: " + line);
      String uri = line.substring("WARREN_PS_URI_1=".length());
      try (PsClient c = PsClient.connect(List.of(zero.uri(), uri), PsTest.SECRET, 0)) {
        c.define(PsJob.builder(1).sync().dense("w", 4, PsJob.zeros(), PsOptimizer.sgd(1f)).build());
        c.push(new PsGradients().dense("w", 0, new float[] {1, 2, 3, 4}));
        float[] w = c.pullDense("w", 0, 4);
        assertEquals(-4f, w[3]); // the child holds the upper half: SGD lr 1 from zeros
        assertEquals(1, c.status().get(1).applied());
      }
      p.getOutputStream().close();
      assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the child exits once its stdin closes");
      assertEquals(0, p.exitValue());
    } finally {
      p.destroyForcibly();
    }
  }
}

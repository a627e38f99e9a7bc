package io.warren.readme;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.*;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Java example of docs/jvm-api.md, as written (outside package io.warren: public API only). */
class ReadmeJavaExampleTest {

  @Test
  @Timeout(60)
  void example() throws Exception {
    PrintStream stdout = System.out;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      // README-BEGIN
      try (Tracker tracker = Tracker.start(2, "s3cret")) {
        // worker "1" as a thread here; in a real job, another Spark task or process
        var peer = CompletableFuture.supplyAsync(() ->
            Communicator.run(tracker.workerSettings("1"), c -> c.allreduce(new float[] {10f, 20f}, Op.SUM)));
        float[] sum = Communicator.run(tracker.workerSettings("0"), c -> c.allreduce(new float[] {1f, 2f}, Op.SUM));
        System.out.println(Arrays.toString(sum));                             // [11.0, 22.0]
        System.out.println(Arrays.toString(peer.get(30, TimeUnit.SECONDS)));  // [11.0, 22.0]
        System.out.println(tracker.awaitCompletion(Duration.ofSeconds(30)));  // JobReport[workers=2, ...]
      }
      // README-END
    } finally {
      System.setOut(stdout);
    }
    String out = captured.toString(StandardCharsets.UTF_8);
    System.out.print(out);
    String[] lines = out.split("\\R");
    assertEquals("[11.0, 22.0]", lines[0]);
    assertEquals("[11.0, 22.0]", lines[1]);
    assertTrue(lines[2].startsWith("JobReport[workers=2, recoveries=0,"), lines[2]);
  }

  /** {@link Communicator#run}: closes after the body returns, aborts after it throws. */
  @Test
  @Timeout(60)
  void runClosesOnSuccessAndAbortsOnFailure() {
    try (Tracker tracker = Tracker.start(1, "s3cret")) {
      assertArrayEquals(new int[] {7}, Communicator.run(tracker.workerSettings("0"), c -> c.allreduce(new int[] {7}, Op.MAX)));
      assertEquals(1, tracker.awaitCompletion(Duration.ofSeconds(20)).workers());
    }
    try (Tracker tracker = Tracker.start(1, "s3cret")) {
      Communicator[] seen = new Communicator[1];
      IllegalStateException e =
          assertThrows(
              IllegalStateException.class,
              () ->
                  Communicator.run(
                      tracker.workerSettings("0"),
                      c -> {
                        seen[0] = c;
                        throw new IllegalStateException("the task failed");
                      }));
      assertEquals("the task failed", e.getMessage());
      assertTrue(seen[0].isClosed());
      // Aborted, not closed: the tracker waits for a replacement of task 0 instead of
      // reporting the job complete.
      assertThrows(WarrenException.class, () -> tracker.awaitCompletion(Duration.ofSeconds(2)));
    }
  }

  /** The docs page shows exactly the lines between the markers above. */
  @Test
  void readmeMatchesThisFile() throws Exception {
    Path readme = Path.of(System.getProperty("user.dir"), "..", "..", "docs", "jvm-api.md");
    Path self =
        Path.of(System.getProperty("user.dir"), "src/test/java/io/warren/readme/ReadmeJavaExampleTest.java");
    assertEquals(block(Files.readAllLines(self), "// README-BEGIN", "// README-END"),
        block(Files.readAllLines(readme), "```java", "```"));
  }

  static String block(List<String> lines, String begin, String end) {
    int b = -1;
    for (int i = 0; i < lines.size(); i++) {
      if (lines.get(i).trim().equals(begin)) {
        b = i;
        break;
      }
    }
    int e = b + 1;
    while (!lines.get(e).trim().equals(end)) {
      e++;
    }
    return lines.subList(b + 1, e).stream().map(String::strip).collect(Collectors.joining("\n"));
  }
}

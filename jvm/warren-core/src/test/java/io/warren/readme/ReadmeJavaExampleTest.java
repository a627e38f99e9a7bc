package io.warren.readme;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.warren.*;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Java example of jvm/README.md, as written (outside package io.warren: public API only). */
class ReadmeJavaExampleTest {

  @Test
  @Timeout(60)
  void example() throws Exception {
    // README-BEGIN
    try (Tracker tracker = Tracker.start(2, "s3cret")) {
      Thread peer = new Thread(() -> {  // stands for another Spark task or process
        try (Communicator c = Communicator.create(tracker.workerSettings("1"))) {
          c.allreduce(new float[] {10f, 20f}, Op.SUM);
        }
      });
      peer.start();
      try (Communicator comm = Communicator.create(tracker.workerSettings("0"))) {
        float[] grad = {1f, 2f};
        comm.allreduce(grad, Op.SUM);  // in place, on every worker: {11.0, 22.0}
        System.out.println("rank " + comm.rank() + ": " + Arrays.toString(grad));
      }
      peer.join();
      System.out.println(tracker.awaitCompletion(Duration.ofSeconds(30)));
    }
    // README-END
  }

  /** The README shows exactly the lines between the markers above. */
  @Test
  void readmeMatchesThisFile() throws Exception {
    Path readme = Path.of(System.getProperty("user.dir"), "..", "README.md");
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

package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A worker that stops answering while its TaskManager runs, on a MiniCluster of three
 * TaskManagers of one slot each (fixed-delay restarts, region failover): subtask 2 is cut off
 * from the tracker ({@code WARREN_MOCK} {@code ,cut}: its heartbeats stop, it hears nothing) and
 * its thread hangs outside Warren's calls. After {@code warren.peerTimeout} of silence it is
 * fenced (by the tracker, or by its own side, which times the same silence: whichever notices
 * first) and the others wait for its replacement; the runner's watch
 * fails the subtask through Flink ({@code failExternally}), which interrupts the hung thread and
 * restarts that subtask alone. Flink itself would never replace it here (the TaskManager answers
 * Flink's heartbeats), so without the watch the job would hang for the thread's ten minutes.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class FencedWorkerTest {
  private static final int WORKERS = 3; // WarrenFlinkTest's: its failure-free model is the reference
  private static final int ITERS = 30;
  private static final int HANG_TASK = 2;
  private static final int HANG_AT = 10;
  private static final double PEER_TIMEOUT_S = 3.0;

  @RegisterExtension static final MiniClusterExtension CLUSTER = WarrenFlinkTest.newCluster();

  @Test
  void aWorkerCutOffFromTheTrackerWithAHungThreadIsFencedAndOnlyItsSubtaskRestarts(
      @InjectMiniCluster MiniCluster mini) throws Exception {
    double[] want = WarrenFlinkTest.withoutFlink();
    String run = UUID.randomUUID().toString();
    Training.Plan plan = new Training.Plan(run, ITERS, -1, -1, 0, -1, HANG_TASK, HANG_AT);
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(WORKERS);
    // cut off at the gradient allreduce of the iteration before the hang (rank = task id here)
    Map<String, String> settings =
        Map.of(
            "warren.peerTimeout", Double.toString(PEER_TIMEOUT_S),
            "warren.setting.WARREN_MOCK", HANG_TASK + "," + (HANG_AT - 1) + ",0,0,cut");
    WarrenFlinkTest.job(env, plan, settings);
    JobClient client = env.executeAsync("fenced");
    client.getJobExecutionResult().get(180, TimeUnit.SECONDS);

    Map<Integer, double[]> r = Training.RESULTS.get(run);
    assertTrue(r != null && r.size() == WORKERS, "results: " + r);
    assertEquals(1, r.get(HANG_TASK)[1], "the hung task's attempt (Flink's attempt number)");
    assertEquals(0, r.get(0)[1], "task 0 ran once");
    assertEquals(0, r.get(1)[1], "task 1 ran once");
    assertEquals(HANG_AT, r.get(HANG_TASK)[2], "the replacement resumed from the last checkpoint");
    for (double[] row : r.values()) {
      assertArrayEquals(want, Training.weights(row), "the failure-free model");
    }

    Map<String, Long> ev = Training.EVENTS.get(run);
    Long hung = ev.get("hung");
    Long interrupted = ev.get("interrupted");
    assertNotNull(hung, "the task hung: " + ev);
    assertNotNull(interrupted, "Flink interrupted the hung thread (the fenced subtask was failed): " + ev);
    Long resumed = ev.get("0/0/" + HANG_AT);
    assertNotNull(resumed, "task 0 went on past the hang: " + ev);
    String exceptions = exceptions(mini, client);
    assertTrue(
        exceptions.contains("Warren fenced the worker of subtask " + HANG_TASK + " (attempt 0)"),
        "Flink's failure of the subtask names the fence: " + exceptions);
    System.out.printf(
        "FENCE_FLINK_MINICLUSTER peer_timeout_s=%.1f hang_to_interrupt_s=%.2f hang_to_resumed_s=%.2f%n",
        PEER_TIMEOUT_S, (interrupted - hung) / 1e9, (resumed - hung) / 1e9);
    // Behaviour, not speed: the job went on because Warren failed the subtask, long before the
    // hung thread's ten-minute sleep (which nothing else would end on a MiniCluster).
    assertTrue((resumed - hung) / 1e9 < 120, "the job went on " + (resumed - hung) / 1e9 + " s after the hang");
  }

  /** The job's exception history, from the MiniCluster's REST API. */
  private static String exceptions(MiniCluster mini, JobClient client) throws Exception {
    URI rest = mini.getRestAddress().get(30, TimeUnit.SECONDS);
    URI uri = rest.resolve("/jobs/" + client.getJobID() + "/exceptions");
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    HttpRequest req = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).GET().build();
    return http.send(req, HttpResponse.BodyHandlers.ofString()).body();
  }
}

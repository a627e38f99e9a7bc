package io.warren.examples.flink;

import io.warren.flink.WarrenContext;
import java.util.Locale;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Failure injection and pacing for {@link LogisticRegression}, for the tests and the demos: the
 * {@link Hooks} of a job run with {@code --kill-task}, {@code --kill-taskmanager}, {@code
 * --pause-taskmanager} or {@code --pause-ms} ({@link CommandLine}). Every failure hits task 1's
 * first attempt.
 */
public final class Faults implements Hooks {
  private static final long serialVersionUID = 1L;

  /** The main class of a TaskManager process of its own (a standalone cluster's). */
  static final String TASK_MANAGER_MAIN = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner";

  /** Throw in task 1's first attempt at this iteration (-1: never). */
  public int killTask = -1;

  /**
   * SIGKILL the TaskManager process of task 1's first attempt at this iteration (-1: never);
   * only on a cluster whose TaskManagers have their own processes.
   */
  public int killTaskManager = -1;

  /**
   * SIGSTOP the TaskManager process of task 1's first attempt at this iteration (-1: never): a
   * frozen TaskManager; only on a cluster whose TaskManagers have their own processes.
   */
  public int pauseTaskManager = -1;

  /** Milliseconds each worker sleeps after each checkpoint (0: none). */
  public int pauseMs;

  @Override
  public void beforeSubmit(StreamExecutionEnvironment env) {
    String target = env.getConfiguration().get(DeploymentOptions.TARGET);
    if ((killTaskManager >= 0 || pauseTaskManager >= 0) && (target == null || target.equals("local"))) {
      throw new IllegalArgumentException(
          "--kill-taskmanager and --pause-taskmanager need a cluster whose TaskManagers have processes of their own (flink"
              + " run on a standalone cluster); this local run's TaskManagers share this JVM: use"
              + " --kill-task");
    }
  }

  @Override
  public void beforeIteration(WarrenContext ctx, int it) throws Exception {
    if (ctx.taskId() != 1 || ctx.attempt() != 0) {
      return;
    }
    if (it == killTask) {
      throw new IllegalStateException("injected failure of task 1 at iteration " + it + " (attempt " + ctx.attempt() + ")");
    }
    if (it == killTaskManager) {
      signalThisTaskManager("KILL", it);
      Thread.sleep(60_000); // the signal ends the process first
      throw new IllegalStateException("this TaskManager survived its SIGKILL");
    }
    if (it == pauseTaskManager) {
      signalThisTaskManager("STOP", it);
      // Continued (SIGCONT) later: the tracker fenced this worker meanwhile, and the job
      // went on with its replacement.
      throw new IllegalStateException(
          "task 1 was paused at iteration " + it + " and continued: " + ctx.communicator().fenced().orElse("not fenced"));
    }
  }

  @Override
  public void afterCheckpoint(WarrenContext ctx, int it) throws InterruptedException {
    if (pauseMs > 0) {
      Thread.sleep(pauseMs);
    }
  }

  /**
   * Sends {@code SIG<signal>} to the process this worker runs in, a TaskManager of its own:
   * {@code KILL} ends it (Flink loses every task it ran, and a restarted subtask needs a slot on
   * another TaskManager); {@code STOP} freezes it (nothing in it runs or answers until a {@code
   * SIGCONT}).
   *
   * @param signal KILL or STOP
   * @param it the iteration (for the message)
   * @throws IllegalStateException if this TaskManager shares its process with others or with
   *     the JobManager (a MiniCluster): the signal would reach the whole job
   * @throws InterruptedException if interrupted while waiting for the signal
   */
  private static void signalThisTaskManager(String signal, int it) throws InterruptedException {
    String main = System.getProperty("sun.java.command", "").split(" ")[0];
    if (!main.equals(TASK_MANAGER_MAIN)) {
      throw new IllegalStateException(
          "--kill-taskmanager and --pause-taskmanager need TaskManagers in processes of their own (a"
              + " standalone cluster), but this worker runs in "
              + main
              + ", which the JobManager shares: use --kill-task");
    }
    long pid = ProcessHandle.current().pid();
    System.err.printf(Locale.ROOT, "task 1: SIG%s to this TaskManager (pid %d) at iteration %d%n", signal, pid, it);
    try {
      new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start().waitFor();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException("cannot run kill", e);
    }
  }
}

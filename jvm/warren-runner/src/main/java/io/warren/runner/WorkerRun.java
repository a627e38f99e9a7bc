package io.warren.runner;

import io.warren.Communicator;
import io.warren.JobFailedException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The body of one worker task, whatever the engine: joins the job with the task's identity,
 * watches for a kill, reports progress (rank 0), runs the user's work, and leaves: with {@code
 * close()} when it returns, with {@code abort()} when it throws (never {@code close}, which
 * would tell the tracker the worker finished and make it refuse the replacement), so that a new
 * attempt of the task can take over.
 */
public final class WorkerRun {
  private WorkerRun() {}

  /**
   * The user's work on a joined communicator.
   *
   * @param <R> its result
   */
  @FunctionalInterface
  public interface Body<R> {
    /**
     * Runs the work.
     *
     * @param comm the worker's communicator (do not close it)
     * @return the worker's result
     * @throws Exception anything; the worker then aborts its communicator
     */
    R apply(Communicator comm) throws Exception;
  }

  /**
   * Something to do after joining and before the work (load staged checkpoints, install a
   * checkpoint listener).
   */
  @FunctionalInterface
  public interface Setup {
    /**
     * Prepares the worker.
     *
     * @param comm the joined communicator
     * @throws Exception anything; the worker then aborts its communicator
     */
    void accept(Communicator comm) throws Exception;
  }

  /**
   * How a task runs its worker.
   *
   * @param killed whether the engine killed the task without an interrupt (null: never asked)
   * @param label the job's label in progress lines
   * @param progressIntervalS seconds between rank 0's progress lines, 0 for none
   * @param setup done after joining, before the work (null: nothing)
   * @param onFenced told the reason, from another thread, when the tracker fences the worker
   *     (see {@link KillWatch}): it should fail the task at once, without blocking (null: the
   *     task learns it at its next Warren call, which fails with {@code WorkerFencedException})
   */
  public record Options(
      BooleanSupplier killed, String label, double progressIntervalS, Setup setup, Consumer<String> onFenced) {
    /**
     * Options without a fence callback.
     *
     * @param killed whether the engine killed the task without an interrupt (null: never asked)
     * @param label the job's label in progress lines
     * @param progressIntervalS seconds between rank 0's progress lines, 0 for none
     * @param setup done after joining, before the work (null: nothing)
     */
    public Options(BooleanSupplier killed, String label, double progressIntervalS, Setup setup) {
      this(killed, label, progressIntervalS, setup, null);
    }

    /**
     * No kill watch, no progress lines, no setup.
     *
     * @return the options
     */
    public static Options plain() {
      return new Options(null, "", 0, null, null);
    }
  }

  /**
   * How long a task whose job another worker failed waits for the engine to kill it
   * (milliseconds).
   */
  static final long JOB_FAILED_KILL_WAIT_MS = 15000;

  /**
   * The worker settings of one task: {@code base} (the tracker's and the run's) with the task's
   * identity.
   *
   * @param base the settings every worker of the attempt shares
   * @param taskId the task's stable id (its partition or subtask index)
   * @param attempt how many times this task ran before ({@code WARREN_ATTEMPT})
   * @return a new map
   */
  public static Map<String, String> taskSettings(Map<String, String> base, String taskId, int attempt) {
    Map<String, String> m = new LinkedHashMap<>(base);
    m.put("WARREN_TASK_ID", taskId);
    m.put("WARREN_ATTEMPT", Integer.toString(attempt));
    return m;
  }

  /**
   * Runs one worker.
   *
   * @param settings the task's worker settings ({@link #taskSettings})
   * @param options the kill watch, progress and setup
   * @param body the user's work
   * @param <R> the result
   * @return what {@code body} returned
   * @throws Exception what joining, the setup, the work or leaving threw (after aborting)
   */
  public static <R> R run(Map<String, String> settings, Options options, Body<R> body) throws Exception {
    String task = settings.getOrDefault("WARREN_TASK_ID", "?");
    Communicator comm;
    if (options.killed() == null) {
      comm = Communicator.create(settings);
    } else {
      KillWatch joining = KillWatch.whileJoining(options.killed(), task);
      try {
        comm = Communicator.create(settings);
      } finally {
        joining.stop();
      }
    }
    KillWatch watch =
        options.killed() == null && options.onFenced() == null
            ? null
            : KillWatch.start(options.killed(), options.onFenced(), comm, task);
    Progress progress = null;
    try {
      if (options.setup() != null) {
        options.setup().accept(comm);
      }
      if (comm.rank() == 0 && options.progressIntervalS() > 0) {
        progress = Progress.start(comm, options.label(), options.progressIntervalS());
      }
      R result = body.apply(comm);
      if (progress != null) {
        progress.finish();
        progress = null;
      }
      if (watch != null) {
        watch.stop();
      }
      comm.close();
      return result;
    } catch (Throwable t) {
      if (progress != null) {
        progress.stop();
      }
      try {
        comm.abort();
      } catch (RuntimeException e) {
        t.addSuppressed(e);
      }
      if (t instanceof JobFailedException && options.killed() != null) {
        awaitKill(options.killed(), JOB_FAILED_KILL_WAIT_MS);
      }
      throw t;
    } finally {
      if (watch != null) {
        watch.stop();
      }
    }
  }

  /**
   * Waits until {@code killed} says the engine killed the task, for at most {@code limitMs}, or
   * until the thread is interrupted (an engine's kill may interrupt it).
   *
   * <p>Another worker's final error ended the job, and the engine's driver stops the job's tasks
   * once it hears of that error. A task that failed of it at once would be re-run first (and the
   * re-run held by the tracker until the stop); one that ends after the engine marked it killed
   * is reported as killed, and not re-run.
   *
   * @param killed whether the engine killed the task
   * @param limitMs the most milliseconds to wait
   */
  static void awaitKill(BooleanSupplier killed, long limitMs) {
    long deadline = System.nanoTime() + limitMs * 1_000_000L;
    try {
      while (!killed.getAsBoolean() && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}

/**
 * The engine-neutral runner of Warren jobs: what an adapter (warren-spark, warren-flink) needs
 * to run Warren workers as the tasks of a data engine. {@link io.warren.runner.RunnerSettings}
 * declares and validates the settings (each engine maps its own keys over them), {@link
 * io.warren.runner.Trackers} starts and stops the trackers of a run's attempts, {@link
 * io.warren.runner.WorkerRun} is the body of one worker task (join, run, close or abort), and
 * {@link io.warren.runner.Progress} and {@link io.warren.runner.KillWatch} observe it.
 */
package io.warren.runner;

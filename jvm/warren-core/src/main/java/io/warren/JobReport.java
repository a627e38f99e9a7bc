package io.warren;

import java.time.Duration;

/**
 * How a finished job went, from {@link Tracker#awaitCompletion(Duration)}.
 *
 * @param workers the number of workers
 * @param recoveries registrations of a task id that already had a rank (restarted workers)
 * @param elapsed time from the tracker's start to the last worker's shutdown
 */
public record JobReport(int workers, long recoveries, Duration elapsed) {}

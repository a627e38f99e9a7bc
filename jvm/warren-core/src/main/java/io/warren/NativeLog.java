package io.warren;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Receives the native library's log records and passes them to SLF4J.
 *
 * <p>A record of the Rust module {@code warren::engine} goes to the logger
 * {@code io.warren.native.warren.engine}. Levels are filtered in the native library, from the
 * level enabled for {@code io.warren.native} when the library is loaded; call {@link
 * #refreshLevel()} after changing the logging configuration at run time.
 */
public final class NativeLog {
  /** Prefix of the SLF4J logger names of native records. */
  public static final String LOGGER_PREFIX = "io.warren.native";

  private static final Logger ROOT = LoggerFactory.getLogger(LOGGER_PREFIX);
  private static final ConcurrentHashMap<String, Logger> LOGGERS = new ConcurrentHashMap<>();

  /** The native targets whose information lines {@link #echoTrackerToConsole} echoes. */
  private static final String TRACKER_TARGET = "warren::tracker";

  /** How many echoes are open (jobs of one driver may overlap). */
  private static final AtomicInteger ECHOES = new AtomicInteger();

  /** The open collections of {@link #collectTrackerLines}. */
  private static final List<TrackerLines> COLLECTORS = new CopyOnWriteArrayList<>();

  private NativeLog() {}

  /**
   * Re-reads the level enabled for {@code io.warren.native} and tells the native library, so
   * that records below it are not even formatted. Does nothing if the library is not loaded.
   */
  public static void refreshLevel() {
    if (NativeLoader.isLoaded()) {
      Native.setLogLevel(enabledLevel());
    }
  }

  /** The level code the native side filters with: 0 off, 1 error ... 5 trace. */
  static int enabledLevel() {
    if (ROOT.isTraceEnabled()) {
      return 5;
    } else if (ROOT.isDebugEnabled()) {
      return 4;
    } else if (ROOT.isInfoEnabled()) {
      return 3;
    } else if (ROOT.isWarnEnabled()) {
      return 2;
    } else if (ROOT.isErrorEnabled()) {
      return 1;
    }
    return 0;
  }

  /**
   * Also writes the tracker's information lines (workers arriving, recoveries, rank 0's
   * progress, the end of the job) to standard error, as {@code [warren] <line>}, until the
   * returned handle is closed. For an interactive shell (spark-shell, a notebook over it),
   * whose console shows only warnings of loggers without a level of their own; warnings and
   * errors go through SLF4J alone, as always.
   *
   * @return closes the echo (once; jobs that overlap each keep theirs)
   */
  public static AutoCloseable echoTrackerToConsole() {
    ECHOES.incrementAndGet();
    java.util.concurrent.atomic.AtomicBoolean open = new java.util.concurrent.atomic.AtomicBoolean(true);
    return () -> {
      if (open.getAndSet(false)) {
        ECHOES.decrementAndGet();
      }
    };
  }

  /**
   * Keeps the tracker's information lines (those {@link #echoTrackerToConsole} echoes) from
   * now until the returned collection is closed, for a caller that shows them on a console of
   * its own: PySpark's driver, whose users read Python's standard error (a notebook cell's
   * output), not the JVM's.
   *
   * @return the lines as they come; close it when the job ends
   */
  public static TrackerLines collectTrackerLines() {
    TrackerLines lines = new TrackerLines();
    COLLECTORS.add(lines);
    return lines;
  }

  /**
   * The tracker's information lines since {@link #collectTrackerLines}, up to {@link #LIMIT}
   * waiting at once (the newest are dropped beyond it: a caller that stopped reading must not
   * hold memory without bound).
   */
  public static final class TrackerLines implements AutoCloseable {
    /** The most lines kept unread. */
    public static final int LIMIT = 10_000;

    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>(LIMIT);

    private TrackerLines() {}

    /**
     * Takes the lines that came since the previous call, oldest first.
     *
     * @return the lines, possibly none
     */
    public List<String> drain() {
      List<String> out = new ArrayList<>();
      lines.drainTo(out);
      return out;
    }

    /** Stops collecting; lines not drained yet stay readable. */
    @Override
    public void close() {
      COLLECTORS.remove(this);
    }
  }

  /** Called from native code (any thread) with one record. Never throws. */
  static void log(int level, String target, String message) {
    if (level == 3 && target.startsWith(TRACKER_TARGET)) {
      if (ECHOES.get() > 0) {
        System.err.println("[warren] " + message);
      }
      for (TrackerLines c : COLLECTORS) {
        c.lines.offer(message);
      }
    }
    try {
      Logger logger =
          LOGGERS.computeIfAbsent(
              target, t -> LoggerFactory.getLogger(LOGGER_PREFIX + "." + t.replace("::", ".")));
      switch (level) {
        case 1:
          logger.error(message);
          break;
        case 2:
          logger.warn(message);
          break;
        case 3:
          logger.info(message);
          break;
        case 4:
          logger.debug(message);
          break;
        default:
          logger.trace(message);
          break;
      }
    } catch (RuntimeException | LinkageError e) {
      // A broken logging backend must not fail a collective.
    }
  }
}

package io.warren.examples.flink;


/**
 * The command line of {@link LogisticRegression}: the job's parameters, its {@code warren.*}
 * settings, and the failures of {@link Faults} for the demos and tests.
 */
public final class CommandLine {
  private CommandLine() {}

  /**
   * The command line's usage.
   *
   * @return one line
   */
  public static String usage() {
    return "usage: [--workers N] [--rows N] [--features N] [--iters N] [--step-size X] [--seed N]"
        + " [--kill-task ITER] [--kill-taskmanager ITER] [--pause-taskmanager ITER] [--pause-ms MS] [--recovery retry-one|fail-all] [--checkpoint-dir"
        + " DIR] [--set warren.KEY=VALUE]...";
  }

  /**
   * Parses command-line arguments.
   *
   * @param args the arguments (see {@link #usage()})
   * @return the parameters; their hooks are {@link Faults} if a failure or pause was asked for
   * @throws IllegalArgumentException naming an unknown argument, with the usage
   */
  public static TrainingParams parse(String... args) {
    TrainingParams p = new TrainingParams();
    Faults f = new Faults();
    boolean faults = false;
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("missing value of " + a + "; " + usage());
      }
      String v = args[++i];
      faults |= a.equals("--kill-task") || a.equals("--kill-taskmanager") || a.equals("--pause-taskmanager") || a.equals("--pause-ms");
      switch (a) {
        case "--workers" -> p.workers = integer(a, v);
        case "--rows" -> p.rows = integer(a, v);
        case "--features" -> p.features = integer(a, v);
        case "--iters" -> p.iters = integer(a, v);
        case "--step-size" -> p.stepSize = number(a, v);
        case "--seed" -> p.seed = wholeLong(a, v);
        case "--kill-task" -> f.killTask = integer(a, v);
        case "--kill-taskmanager" -> f.killTaskManager = integer(a, v);
        case "--pause-taskmanager" -> f.pauseTaskManager = integer(a, v);
        case "--pause-ms" -> f.pauseMs = integer(a, v);
        case "--recovery" -> p.settings.put("recovery", v);
        case "--checkpoint-dir" -> p.settings.put("checkpointDir", v);
        case "--set" -> {
          int eq = v.indexOf('=');
          if (eq < 0) {
            throw new IllegalArgumentException("--set wants KEY=VALUE, got " + v);
          }
          p.settings.put(v.substring(0, eq), v.substring(eq + 1));
        }
        default -> throw new IllegalArgumentException("unknown argument " + a + "; " + usage());
      }
    }
    if (faults) {
      p.hooks = f;
    }
    return p;
  }

  /** {@code v} as the whole number {@code arg} wants, or an error naming both and the usage. */
  private static int integer(String arg, String v) {
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(arg + " wants a whole number, got " + v + "; " + usage());
    }
  }

  /** {@code v} as the 64-bit whole number {@code arg} wants, or an error naming both. */
  private static long wholeLong(String arg, String v) {
    try {
      return Long.parseLong(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(arg + " wants a whole number, got " + v + "; " + usage());
    }
  }

  /** {@code v} as the number {@code arg} wants, or an error naming both and the usage. */
  private static double number(String arg, String v) {
    try {
      return Double.parseDouble(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(arg + " wants a number, got " + v + "; " + usage());
    }
  }
}

package io.warren;

import java.util.HashMap;
import java.util.Map;

/**
 * A worker JVM for the multi-process tests: reads its settings from the {@code WARREN_*}
 * environment and runs one mode. Prints {@code WORKER_OK ...} and exits 0 on success, prints
 * {@code WORKER_ERROR <exception class> <message>} and exits 3 on failure.
 */
public final class WorkerMain {
  private WorkerMain() {}

  public static void main(String[] args) throws Exception {
    String mode = args.length > 0 ? args[0] : "check";
    Map<String, String> settings = new HashMap<>();
    System.getenv().forEach((k, v) -> {
      if (k.startsWith("WARREN_")) {
        settings.put(k, v);
      }
    });
    try {
      switch (mode) {
        case "check":
          try (Communicator comm = Communicator.create(settings)) {
            Checks.all(comm);
            System.out.println("WORKER_OK rank=" + comm.rank() + " " + comm.stats());
          }
          break;
        case "hang":
          {
            Communicator comm = Communicator.create(settings);
            System.out.println("WORKER_READY rank=" + comm.rank());
            System.out.flush();
            Thread.sleep(600_000);
            break;
          }
        case "load":
          try (Communicator comm = Communicator.create(Map.of())) {
            float[] x = {1f};
            comm.allreduce(x, Op.SUM);
            System.out.println("WORKER_OK loaded from " + NativeLoader.loadedFrom());
          }
          break;
        case "load-fails":
          for (int i = 0; i < 2; i++) {
            try {
              Communicator.create(Map.of()).close();
              System.out.println("UNEXPECTED loaded");
            } catch (NativeLibraryException e) {
              System.out.println("LOAD_FAILED " + i + " " + e.getMessage());
            }
          }
          System.out.println("WORKER_OK");
          break;
        case "print":
          try (Communicator comm = Communicator.create(Map.of())) {
            comm.print("hello from the JVM");
            System.out.println("WORKER_OK printed");
          }
          break;
        default:
          throw new IllegalArgumentException("unknown mode " + mode);
      }
    } catch (Throwable t) {
      System.out.println("WORKER_ERROR " + t.getClass().getName() + " " + t.getMessage());
      System.out.flush();
      System.exit(3);
    }
    System.out.flush();
    System.exit(0);
  }
}

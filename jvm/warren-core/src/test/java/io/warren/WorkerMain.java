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

  /**
   * A small deterministic training loop with bootstrap calls and a checkpoint per iteration;
   * returns the hex SHA-256 of the final model.
   */
  static String train(Communicator comm, int iters, long sleepMs) throws Exception {
    int[] features = {8 + comm.rank()};
    comm.allreduce(features, Op.MAX, CallOptions.bootstrap()); // 8 + world - 1
    byte[] seed = comm.broadcast(new byte[] {42}, 0, CallOptions.bootstrap());
    Checkpoint ckpt = comm.loadCheckpoint();
    double[] model = new double[features[0]];
    long localIters = 0;
    if (ckpt.version() > 0) {
      java.nio.ByteBuffer.wrap(ckpt.global()).asDoubleBuffer().get(model);
      localIters = java.nio.ByteBuffer.wrap(ckpt.local()).getLong();
      if (localIters != ckpt.version()) {
        throw new AssertionError("local model " + localIters + " at version " + ckpt.version());
      }
      System.out.println("RESUMED version=" + ckpt.version());
    }
    for (int it = ckpt.version(); it < iters; it++) {
      double[] grad = new double[model.length];
      for (int j = 0; j < grad.length; j++) {
        grad[j] = Math.sin(seed[0] * 0.01 + comm.rank() * 1.7 + it * 0.3 + j) - 0.05 * model[j];
      }
      comm.allreduce(grad, Op.SUM);
      for (int j = 0; j < model.length; j++) {
        model[j] -= 0.1 * grad[j];
      }
      localIters++;
      java.nio.ByteBuffer g = java.nio.ByteBuffer.allocate(8 * model.length);
      g.asDoubleBuffer().put(model);
      comm.checkpoint(g.array(), java.nio.ByteBuffer.allocate(8).putLong(localIters).array());
      System.out.println("ITER " + (it + 1));
      System.out.flush();
      Thread.sleep(sleepMs);
    }
    java.nio.ByteBuffer g = java.nio.ByteBuffer.allocate(8 * model.length);
    g.asDoubleBuffer().put(model);
    StringBuilder hex = new StringBuilder();
    for (byte b : java.security.MessageDigest.getInstance("SHA-256").digest(g.array())) {
      hex.append(String.format("%02x", b));
    }
    return hex.toString();
  }

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
        case "train":
          {
            // train ITERS SLEEP_MS: a checkpointed loop (see RecoveryTest); on failure the
            // communicator is aborted, never closed, so that a replacement can take over.
            Communicator comm = Communicator.create(settings);
            try {
              System.out.println("MODEL " + train(comm, Integer.parseInt(args[1]), Long.parseLong(args[2])));
              System.out.println("WORKER_OK rank=" + comm.rank() + " recoveries=" + comm.recoveries());
              comm.close();
            } catch (Throwable t) {
              comm.abort();
              throw t;
            }
            break;
          }
        case "call-before-load":
          {
            // call-before-load [hang]: a plain (not bootstrap) allreduce, then with "hang" a
            // checkpoint and a wait to be killed. A replacement run without "hang" makes the
            // plain call again without loading the checkpoint, which no worker can replay:
            // recovery is impossible (see StructuredErrorsTest).
            Communicator comm = Communicator.create(settings);
            try {
              comm.allreduce(new float[] {1f}, Op.SUM);
              if (args.length > 1 && args[1].equals("hang")) {
                comm.checkpoint(new byte[] {1}, null);
                System.out.println("WORKER_READY rank=" + comm.rank());
                System.out.flush();
                Thread.sleep(600_000);
              }
              System.out.println("WORKER_OK rank=" + comm.rank());
              comm.close();
            } catch (RecoveryImpossibleException e) {
              System.out.println("LOST_TASK_IDS " + e.lostTaskIds());
              comm.abort();
              throw e;
            }
            break;
          }
        case "master-read":
          // Reads pass 0 from the master named by WARREN_MASTER_URI (see MasterTest): one
          // line REC <record as UTF-8> per record.
          try (MasterClient client = MasterClient.connect(settings);
              TaskReader records = client.reader(0, java.time.Duration.ofSeconds(60))) {
            long n = 0;
            while (records.hasNext()) {
              System.out.println("REC " + new String(records.next(), java.nio.charset.StandardCharsets.UTF_8));
              n++;
            }
            System.out.println("WORKER_OK records=" + n + " tasks=" + records.tasksFinished());
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

package io.warren.runner;

import io.warren.CheckpointListener;
import io.warren.Communicator;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StreamCapabilities;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Fail-all's durable checkpoints on a file system the native library cannot write itself
 * ({@code hdfs:}, {@code s3a:}, {@code viewfs:}, ...: any scheme but a local path or {@code
 * file:}, see {@link CheckpointDirs}), through Hadoop's {@code FileSystem} API. Hadoop is a
 * provided dependency: only a run with such a directory needs it on the class path.
 *
 * <p>The native library still writes and reads the files ({@code warren-ckpt-rank{r}-v{v}.bin},
 * see {@code native/warren/src/engine/checkpoint.rs}), in a local staging directory of each
 * task; this copies them between it and the run's remote directory:
 *
 * <ul>
 *   <li>before the worker loads its checkpoint, its rank's two newest remote versions are
 *       downloaded into the staging directory ({@link Staging#download});
 *   <li>after each checkpoint whose version is a multiple of {@code durableEvery}, the file the
 *       native library has just written is uploaded under a temporary name and renamed, so a
 *       half-written file is never read, and the version {@code 2 * durableEvery} older is
 *       deleted ({@link Staging#checkpointCommitted}, the communicator's checkpoint listener).
 * </ul>
 *
 * <p>Why two versions are enough, and why the upload happens synchronously in the listener: on a
 * fresh start the ranks agree on the newest version <em>every</em> rank has (the minimum of their
 * newest). The listener runs inside {@code checkpoint}, before the worker can make its next
 * collective call; committing checkpoint {@code v + 1} is a collective that needs every rank to
 * have entered it, so no rank can commit (let alone upload) durable version {@code v +
 * durableEvery} before every rank has returned from checkpoint {@code v}, i.e. finished
 * uploading {@code v} (a rank whose upload fails throws and never gets there). Hence the ranks'
 * newest remote versions differ by at most one durable step, the agreed version is a rank's
 * newest or the one before, and each rank keeps both remotely (it deletes {@code v - 2 *
 * durableEvery} only after uploading {@code v}).
 */
public final class HadoopCheckpoints {
  private static final Logger LOG = LoggerFactory.getLogger(HadoopCheckpoints.class);

  private HadoopCheckpoints() {}

  /**
   * A run's remote directory: {@code setting}'s subdirectory {@code name}, as Hadoop writes it.
   *
   * @param setting the {@code checkpointDir} setting (not local)
   * @param name the run's subdirectory
   * @return the directory's URI
   * @throws IllegalArgumentException if {@code setting} is not a valid Hadoop path
   */
  public static String child(String setting, String name) {
    return new Path(new Path(setting), name).toString();
  }

  /**
   * A copy of {@code conf} whose RPC clients give up quickly: the creation of the run directory
   * must not wait minutes for a namenode that is down (Hadoop's defaults retry a refused
   * connection 10 times a second apart, and a connection timeout 45 times, 20 s each).
   */
  private static Configuration impatient(Configuration conf) {
    Configuration c = new Configuration(conf);
    c.setInt("ipc.client.connect.max.retries", 1);
    c.setInt("ipc.client.connect.max.retries.on.timeouts", 1);
    c.setInt("ipc.client.connect.timeout", 10000);
    c.setInt("ipc.client.connect.retry.interval", 200);
    c.setBoolean("dfs.client.retry.policy.enabled", false);
    c.setInt("dfs.client.failover.max.attempts", 1);
    return c;
  }

  /**
   * The driver's (or client's) handle on a run's remote directory: created by {@link #create},
   * removed by {@link #close}. Its file system instance is its own (not Hadoop's shared cache)
   * and impatient.
   */
  public static final class RunDirectory implements AutoCloseable {
    private final String dir;
    private final FileSystem fs;
    private final double timeoutS;
    private final String timeoutSetting;

    private RunDirectory(String dir, FileSystem fs, double timeoutS, String timeoutSetting) {
      this.dir = dir;
      this.fs = fs;
      this.timeoutS = timeoutS;
      this.timeoutSetting = timeoutSetting;
    }

    /**
     * The directory.
     *
     * @return its URI
     */
    public String dir() {
      return dir;
    }

    /**
     * Removes the directory and every checkpoint in it (best effort, bounded in time), then
     * closes the file system instance.
     */
    @Override
    public void close() {
      try {
        timed("removing " + dir, timeoutS, timeoutSetting, () -> fs.delete(new Path(dir), true));
      } catch (Exception e) {
        LOG.warn("could not remove the checkpoint directory {}: {}", dir, e.toString());
      }
      try {
        fs.close();
      } catch (IOException e) {
        // nothing left to do
      }
    }
  }

  /**
   * Creates a run's directory before any task starts, within {@code timeoutS} seconds.
   *
   * @param prefix the engine's settings prefix ({@code spark.warren.}), for the message
   * @param setting the {@code checkpointDir} setting (for the message)
   * @param dir the run's directory (a subdirectory of {@code setting})
   * @param conf the Hadoop configuration
   * @param timeoutS the most seconds it may take ({@code checkpointDirTimeout})
   * @param reachableFrom who must reach it ("the driver and every executor"), for the message
   * @return the handle that removes it
   * @throws RunnerException naming the directory and the cause if it cannot be created
   */
  public static RunDirectory create(
      String prefix, String setting, String dir, Configuration conf, double timeoutS, String reachableFrom) {
    String timeoutSetting = prefix + RunnerSettings.CHECKPOINT_DIR_TIMEOUT.name();
    FileSystem[] fs = new FileSystem[1];
    try {
      timed(
          "creating " + dir,
          timeoutS,
          timeoutSetting,
          () -> {
            fs[0] = FileSystem.newInstance(new URI(dir), impatient(conf));
            if (!fs[0].mkdirs(new Path(dir))) {
              throw new IOException("mkdirs returned false");
            }
            return fs[0].getFileStatus(new Path(dir)); // it really is there
          });
      return new RunDirectory(dir, fs[0], timeoutS, timeoutSetting);
    } catch (Exception e) {
      if (fs[0] != null) {
        try {
          fs[0].close();
        } catch (IOException x) {
          e.addSuppressed(x);
        }
      }
      String cause = e instanceof TimeoutException ? e.getMessage() : rootCause(e);
      throw new RunnerException(
          prefix
              + RunnerSettings.CHECKPOINT_DIR.name()
              + "="
              + setting
              + ": cannot create the fail-all run directory "
              + dir
              + " through Hadoop's FileSystem (it must be reachable from "
              + reachableFrom
              + "): "
              + cause,
          e);
    }
  }

  /** Runs {@code body} in a daemon thread and waits at most {@code timeoutS} (then interrupts it). */
  private static <A> A timed(String what, double timeoutS, String setting, Callable<A> body) throws Exception {
    FutureTask<A> task = new FutureTask<>(body);
    Thread t = new Thread(task, "warren-checkpoint-dir");
    t.setDaemon(true);
    t.start();
    try {
      return task.get((long) (timeoutS * 1000), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw e.getCause() instanceof Exception x ? x : e;
    } catch (TimeoutException e) {
      task.cancel(true);
      throw new TimeoutException(
          what + " took over " + timeoutS + " s (" + setting + "); is the file system reachable?");
    }
  }

  private static String rootCause(Throwable e) {
    Throwable c = e;
    while (c.getCause() != null && c.getCause() != c) {
      c = c.getCause();
    }
    return c == e ? e.toString() : e + " (cause: " + c + ")";
  }

  /**
   * One task's local staging directory for a remote run directory: the native library's {@code
   * WARREN_CHECKPOINT_DIR}. Create it before the communicator, {@link #download} after it (the
   * rank is known then) and before the worker loads its checkpoint, install it as the
   * checkpoint listener, and {@link #close} it in {@code finally}.
   */
  public static final class Staging implements CheckpointListener, AutoCloseable {
    private final Path remoteDir;
    private final String remote;
    private final Configuration conf;
    private final int durableEvery;
    private final java.nio.file.Path local;
    private FileSystem fs;
    private volatile int rank = -1;

    /**
     * Creates the staging directory.
     *
     * @param remote the run's remote directory
     * @param conf the Hadoop configuration (the driver's or client's, shipped to the task)
     * @param durableEvery {@code durableEvery} (at least 1)
     * @param localBase where to create the staging directory (the executor's local directory)
     * @throws IOException if it cannot be created
     */
    public Staging(String remote, Configuration conf, int durableEvery, File localBase) throws IOException {
      if (durableEvery < 1) {
        throw new IllegalArgumentException("durableEvery " + durableEvery);
      }
      this.remote = remote;
      this.remoteDir = new Path(remote);
      this.conf = conf;
      this.durableEvery = durableEvery;
      localBase.mkdirs();
      this.local = Files.createTempDirectory(localBase.toPath(), "warren-ckpt-");
    }

    /**
     * The local directory to pass as {@code WARREN_CHECKPOINT_DIR}.
     *
     * @return it
     */
    public java.nio.file.Path local() {
      return local;
    }

    /** The shared (cached) instance, with the configuration's own retries: not closed here. */
    private synchronized FileSystem fs() throws IOException {
      if (fs == null) {
        fs = remoteDir.getFileSystem(conf);
      }
      return fs;
    }

    private String name(int v) {
      return "warren-ckpt-rank" + rank + "-v" + v + ".bin";
    }

    /**
     * Downloads this rank's two newest durable checkpoints from the remote directory (the ranks'
     * newest may differ by one durable version, see {@link HadoopCheckpoints}).
     *
     * @param comm the task's communicator (for its rank)
     * @return the versions downloaded, newest first
     * @throws IOException if the remote directory cannot be listed or a file copied
     */
    public List<Integer> download(Communicator comm) throws IOException {
      rank = comm.rank();
      String prefix = "warren-ckpt-rank" + rank + "-v";
      List<Integer> versions = new ArrayList<>();
      for (FileStatus st : fs().listStatus(remoteDir)) {
        String n = st.getPath().getName();
        if (n.startsWith(prefix) && n.endsWith(".bin")) {
          try {
            versions.add(Integer.parseInt(n.substring(prefix.length(), n.length() - 4)));
          } catch (NumberFormatException e) {
            // not a checkpoint of this rank
          }
        }
      }
      versions.sort(Comparator.reverseOrder());
      List<Integer> newest = List.copyOf(versions.subList(0, Math.min(2, versions.size())));
      for (int v : newest) {
        java.nio.file.Path tmp = local.resolve(name(v) + ".part");
        try (InputStream in = fs().open(new Path(remoteDir, name(v)))) {
          Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
        }
        Files.move(tmp, local.resolve(name(v)), StandardCopyOption.ATOMIC_MOVE);
      }
      if (!newest.isEmpty()) {
        LOG.info("rank {}: downloaded durable checkpoint(s) {} from {}", rank, newest, remote);
      }
      return newest;
    }

    /**
     * After each checkpoint: uploads a durable version to the remote directory (temporary name,
     * synced where the file system can, then renamed), then deletes the version {@code 2 *
     * durableEvery} older there. Synchronous: see {@link HadoopCheckpoints} for why.
     *
     * @param version the version just committed
     * @throws UncheckedIOException if the upload fails (the task fails, and fail-all re-runs
     *     every worker from the previous durable version)
     */
    @Override
    public void checkpointCommitted(int version) {
      if (version % durableEvery != 0) {
        return;
      }
      if (rank < 0) {
        throw new IllegalStateException("download() was not called");
      }
      Path dst = new Path(remoteDir, name(version));
      Path tmp = new Path(remoteDir, "." + name(version) + "." + UUID.randomUUID() + ".tmp");
      try {
        upload(local.resolve(name(version)), tmp, dst);
      } catch (IOException e) {
        try {
          fs().delete(tmp, false);
        } catch (IOException x) {
          e.addSuppressed(x);
        }
        throw new UncheckedIOException(
            "rank " + rank + ": uploading durable checkpoint " + version + " to " + dst + " failed: " + e, e);
      }
      int old = version - 2 * durableEvery;
      if (old > 0) {
        try {
          fs().delete(new Path(remoteDir, name(old)), false);
        } catch (IOException e) {
          LOG.warn("rank {}: could not delete old checkpoint {} in {}: {}", rank, old, remote, e.toString());
        }
      }
    }

    private void upload(java.nio.file.Path file, Path tmp, Path dst) throws IOException {
      FileSystem f = fs();
      try (FSDataOutputStream out = f.create(tmp, true)) {
        Files.copy(file, out);
        if (out.hasCapability(StreamCapabilities.HSYNC)) {
          out.hsync();
        }
      }
      // A re-run after a failure writes again versions an earlier attempt wrote (the same
      // bytes): FileSystem.rename does not replace an existing file.
      if (!f.rename(tmp, dst)) {
        f.delete(dst, false);
        if (!f.rename(tmp, dst)) {
          throw new IOException("cannot rename " + tmp + " to " + dst);
        }
      }
    }

    /** Removes the local staging directory and its files. */
    @Override
    public void close() {
      CheckpointDirs.removeLocal(local.toFile());
    }
  }
}

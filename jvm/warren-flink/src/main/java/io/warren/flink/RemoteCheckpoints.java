package io.warren.flink;

import io.warren.runner.HadoopCheckpoints;
import io.warren.runner.JobPlan;
import io.warren.runner.WorkerRun;
import java.io.File;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.flink.configuration.ReadableConfig;

/**
 * Fail-all checkpoints on a Hadoop file system ({@code hdfs:}, {@code s3a:}, {@code viewfs:},
 * ...) on Flink, through warren-runner's {@link HadoopCheckpoints}: the client creates the run's
 * directory before the job is submitted ({@link #create}, called by warren-runner's {@code
 * JobPlan}) and removes it at the end; each worker stages its checkpoints in a local directory
 * and copies them over. The Hadoop configuration is a new
 * {@code Configuration} (Hadoop's defaults and the {@code core-site.xml} on the class path) with
 * the {@code flink.hadoop.*} entries of the client's Flink configuration on top, the same on the
 * client and in every task. The only class of the adapter that touches Hadoop's classes, so that
 * a cluster without Hadoop runs every other job.
 */
final class RemoteCheckpoints {
  /** The prefix of the Flink settings passed to Hadoop (Flink's own convention). */
  static final String FLINK_HADOOP_PREFIX = "flink.hadoop.";

  private RemoteCheckpoints() {}

  /**
   * A worker's staging of the remote checkpoints, without Hadoop types.
   *
   * @param local the local directory to pass as {@code WARREN_CHECKPOINT_DIR}
   * @param setup downloads the rank's checkpoints and installs the upload listener
   * @param cleanup removes the local directory
   */
  record Stage(String local, WorkerRun.Setup setup, AutoCloseable cleanup) {}

  /**
   * The {@code flink.hadoop.*} entries of a Flink configuration, without the prefix.
   *
   * @param conf the client's configuration
   * @return the Hadoop settings to ship
   */
  static Map<String, String> hadoopSettings(ReadableConfig conf) {
    Map<String, String> out = new HashMap<>();
    conf.toMap()
        .forEach(
            (k, v) -> {
              if (k.startsWith(FLINK_HADOOP_PREFIX)) {
                out.put(k.substring(FLINK_HADOOP_PREFIX.length()), v);
              }
            });
    return out;
  }

  private static Configuration configuration(Map<String, String> hadoop) {
    Configuration c = new Configuration();
    hadoop.forEach(c::set);
    return c;
  }

  /**
   * Creates a fail-all run's remote directory on the client (for warren-runner's {@code
   * JobPlan}).
   *
   * @param engine the Flink engine of the run's plan
   * @param setting {@code warren.checkpointDir} (not local)
   * @param dir the run's directory, a subdirectory of {@code setting}
   * @param timeoutS {@code warren.checkpointDirTimeout}
   * @param conf the client's configuration, whose {@code flink.hadoop.*} entries go to Hadoop
   * @return the directory's handle: {@code close()} removes it
   * @throws io.warren.runner.RunnerException naming the directory and the cause if it cannot be
   *     created
   */
  static HadoopCheckpoints.RunDirectory create(
      JobPlan.Engine engine, String setting, String dir, double timeoutS, ReadableConfig conf) {
    return HadoopCheckpoints.create(
        engine.prefix(), setting, dir, configuration(hadoopSettings(conf)), timeoutS, engine.reachableFrom());
  }

  /**
   * Stages a worker's checkpoints for {@code run}'s remote directory.
   *
   * @param run the run (its {@code remoteDir} is set)
   * @return the staging
   * @throws IOException if the local directory cannot be created
   */
  static Stage stage(RunConfig run) throws IOException {
    HadoopCheckpoints.Staging s =
        new HadoopCheckpoints.Staging(
            run.remoteDir(),
            configuration(run.hadoop()),
            run.durableEvery(),
            new File(System.getProperty("java.io.tmpdir")));
    WorkerRun.Setup setup =
        comm -> {
          s.download(comm);
          comm.setCheckpointListener(s);
        };
    return new Stage(s.local().toString(), setup, s);
  }
}

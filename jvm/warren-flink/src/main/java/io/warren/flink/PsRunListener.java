package io.warren.flink;

import io.warren.runner.PsServers;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.JobListener;

/**
 * The client side of one {@link WarrenFlink#trainPS} run: claims the first job submitted after
 * {@code trainPS} and stops the run's parameter servers when that job ends (or fails to be
 * submitted).
 */
final class PsRunListener implements JobListener {
  private final PsServers servers;
  private final AtomicBoolean claimed = new AtomicBoolean();

  PsRunListener(PsServers servers) {
    this.servers = servers;
  }

  @Override
  public void onJobSubmitted(JobClient client, Throwable error) {
    if (!claimed.compareAndSet(false, true)) {
      return;
    }
    if (client == null || error != null) {
      servers.close();
      return;
    }
    client.getJobExecutionResult().whenComplete((r, e) -> servers.close());
  }

  @Override
  public void onJobExecuted(JobExecutionResult result, Throwable error) {
    if (claimed.get()) {
      servers.close();
    }
  }
}

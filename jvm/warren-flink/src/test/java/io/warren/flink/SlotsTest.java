package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.junit.jupiter.api.Test;

/** How many workers a run starts with on a cluster's slots, and the schedulers it refuses. */
class SlotsTest {
  private static Slots.Count free(int free, int total) {
    return new Slots.Count(free, total, total);
  }

  @Test
  void anElasticRunStartsWithEveryWorkerOrTheFreeSlotsDownToMinWorkers() {
    assertEquals(4, Slots.starting(4, 2, free(6, 6)));
    assertEquals(4, Slots.starting(4, 2, free(4, 4)));
    assertEquals(3, Slots.starting(4, 2, free(3, 3)));
    assertEquals(2, Slots.starting(4, 2, free(2, 4)));
    assertEquals(-1, Slots.starting(4, 2, free(1, 4)));
    assertNull(Slots.elasticShortage(4, 2, free(2, 2)));
    String why = Slots.elasticShortage(4, 3, free(2, 5));
    assertTrue(
        why.startsWith(
            "Warren's elastic run of 4 workers needs at least 3 task slots running at once"
                + " (warren.minWorkers) but the cluster has 2 free (of 5, in 5 TaskManagers)"),
        why);
    assertTrue(why.contains("warren.slotWaitTimeout"), why);
  }

  @Test
  void busySlotsGetTheGraceMissingOnesTheSlotWaitTimeout() {
    // every slot exists, some busy: a finished job frees its slots a moment later
    assertEquals(Slots.BUSY_GRACE_S, Slots.elasticPatience(4, 2, free(1, 4), 0));
    assertEquals(Slots.BUSY_GRACE_S, Slots.elasticPatience(4, 2, free(2, 4), 0));
    // minWorkers' slots exist but are busy
    assertEquals(Slots.BUSY_GRACE_S, Slots.elasticPatience(4, 2, free(1, 3), 0));
    // enough for minWorkers, the rest missing: no reason to wait beyond slotWaitTimeout
    assertEquals(0.0, Slots.elasticPatience(4, 2, free(3, 3), 0));
    assertEquals(30.0, Slots.elasticPatience(4, 2, free(3, 3), 30));
    assertEquals(0.0, Slots.elasticPatience(4, 2, free(1, 1), 0));
  }

  @Test
  void theAdaptiveSchedulerIsRefusedBeforeAnythingStarts() {
    for (Map.Entry<String, String> setting :
        List.of(Map.entry("jobmanager.scheduler", "adaptive"), Map.entry("scheduler-mode", "reactive"))) {
      Configuration conf = new Configuration();
      conf.setString(setting.getKey(), setting.getValue());
      StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
      env.setParallelism(2);
      WarrenFlinkException e =
          assertThrows(
              WarrenFlinkException.class,
              () ->
                  WarrenFlink.train(
                      env.fromSource(
                              new PartitionedSource<>(2, Training::partition),
                              WatermarkStrategy.noWatermarks(),
                              "partitions",
                              PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO)
                          .setParallelism(2),
                      2,
                      Map.of(),
                      (ctx, part) -> new double[0],
                      PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO));
      assertTrue(e.getMessage().startsWith("Warren needs Flink's default scheduler"), e.getMessage());
      assertTrue(e.getMessage().contains(setting.getKey()), e.getMessage());
    }
  }
}

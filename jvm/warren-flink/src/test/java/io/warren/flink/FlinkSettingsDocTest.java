package io.warren.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.junit.jupiter.api.Test;

/** The Flink settings: the table of docs/flink.md is the declaration, and bad values fail on the client. */
class FlinkSettingsDocTest {
  @Test
  void theReadmeTableIsTheDeclaration() throws Exception {
    Path readme = Path.of(System.getProperty("user.dir")).resolve("../../docs/flink.md");
    List<String> lines = Files.readAllLines(readme);
    int begin = -1;
    for (int i = 0; i < lines.size(); i++) {
      if (lines.get(i).startsWith("<!-- settings-table:")) {
        begin = i;
      }
    }
    assertTrue(begin >= 0, "no settings-table marker in " + readme);
    StringBuilder table = new StringBuilder();
    for (int i = begin + 1; i < lines.size() && lines.get(i).startsWith("|"); i++) {
      table.append(table.length() == 0 ? "" : "\n").append(lines.get(i));
    }
    String expected = WarrenFlink.markdownTable();
    assertEquals(expected, table.toString(), readme + ": put this there:\n" + expected + "\n");
  }

  @Test
  void anInvalidSettingFailsBeforeAnythingStartsNamingIt() {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    DataStream<Integer> in = env.fromData(1, 2, 3);
    WarrenFlinkException e =
        assertThrows(
            WarrenFlinkException.class,
            () -> WarrenFlink.train(in, 1, Map.of("warren.timout", "5"), (ctx, rows) -> 0));
    assertTrue(e.getMessage().startsWith("warren.timout is not a Warren setting (did you mean warren.timeout?"), e.getMessage());
    WarrenFlinkException f =
        assertThrows(
            WarrenFlinkException.class,
            () -> WarrenFlink.train(in, 2, Map.of("recovery", "fail-all"), (ctx, rows) -> 0));
    assertTrue(f.getMessage().startsWith("warren.recovery=fail-all needs warren.checkpointDir"), f.getMessage());
    WarrenFlinkException ps =
        assertThrows(
            WarrenFlinkException.class,
            () -> WarrenFlink.trainPS(in, 1, 1, Map.of("warren.ps.treads", "2"), (ctx, rows) -> 0, Types.INT));
    assertTrue(
        ps.getMessage().startsWith("warren.ps.treads is not a Warren setting (did you mean warren.ps.threads?"),
        ps.getMessage());
    WarrenFlinkException elasticFailAll =
        assertThrows(
            WarrenFlinkException.class,
            () ->
                WarrenFlink.train(
                    in, 2, Map.of("elastic", "true", "recovery", "fail-all", "checkpointDir", "/tmp/w"), (ctx, rows) -> 0));
    assertTrue(
        elasticFailAll.getMessage().startsWith("warren.elastic=true needs warren.recovery=retry-one"),
        elasticFailAll.getMessage());
    WarrenFlinkException min =
        assertThrows(
            WarrenFlinkException.class,
            () -> WarrenFlink.train(in, 2, Map.of("warren.elastic", "true", "warren.minWorkers", "3"), (ctx, rows) -> 0));
    assertTrue(min.getMessage().startsWith("warren.minWorkers = 3 is more than the job's 2 workers"), min.getMessage());
    WarrenFlinkException timeout =
        assertThrows(
            WarrenFlinkException.class,
            () -> WarrenFlink.train(in, 1, Map.of("ps.pullTimeout", "0"), (ctx, rows) -> 0));
    assertTrue(timeout.getMessage().startsWith("warren.ps.pullTimeout = \"0\": expected"), timeout.getMessage());
  }
}

package io.warren;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** RecordIOWriter / RecordIOReader round trips, ranges, damage and closed handles. */
class RecordIOTest {

  static byte[] record(int i) {
    return Checks.pattern(i, (i * 37) % 500);
  }

  @ParameterizedTest
  @EnumSource(RecordIOWriter.Compressor.class)
  void roundTrip(RecordIOWriter.Compressor c, @TempDir Path dir) {
    Path f = dir.resolve("data.recordio");
    try (RecordIOWriter w = RecordIOWriter.create(f, c, 4096)) {
      for (int i = 0; i < 1000; i++) {
        w.write(record(i));
      }
      byte[] padded = new byte[10];
      padded[3] = 42;
      w.write(padded, 3, 1);
      assertEquals(1001, w.recordsWritten());
    }
    List<byte[]> all = new ArrayList<>();
    try (RecordIOReader r = RecordIOReader.open(f)) {
      for (byte[] rec = r.next(); rec != null; rec = r.next()) {
        all.add(rec);
      }
      assertNull(r.next());
    }
    assertEquals(1001, all.size());
    for (int i = 0; i < 1000; i++) {
      assertArrayEquals(record(i), all.get(i), "record " + i);
    }
    assertArrayEquals(new byte[] {42}, all.get(1000));
    try (RecordIOReader r = RecordIOReader.open(f, 500, 503)) {
      assertArrayEquals(record(500), r.next());
      assertArrayEquals(record(501), r.next());
      assertArrayEquals(record(502), r.next());
      assertNull(r.next());
    }
  }

  @Test
  void damageIsCorruptData(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("data.recordio");
    try (RecordIOWriter w = RecordIOWriter.create(f, RecordIOWriter.Compressor.NONE, 1 << 20)) {
      for (int i = 0; i < 100; i++) {
        w.write(record(i));
      }
    }
    byte[] bytes = Files.readAllBytes(f);
    bytes[bytes.length - 10] ^= 0x55; // in the payload, behind the header's checksum
    Files.write(f, bytes);
    try (RecordIOReader r = RecordIOReader.open(f)) {
      CorruptDataException e = assertThrows(CorruptDataException.class, r::next);
      assertTrue(e.getMessage().contains("data.recordio"), e.getMessage());
      assertTrue(e.getMessage().contains("chunk 0"), e.getMessage());
    }
  }

  @Test
  void errorsAndClosedHandles(@TempDir Path dir) {
    assertThrows(WarrenIOException.class, () -> RecordIOReader.open(dir.resolve("missing")));
    assertThrows(
        WarrenIOException.class, () -> RecordIOWriter.create(dir.resolve("no/such/dir/f")));
    RecordIOWriter w = RecordIOWriter.create(dir.resolve("f"));
    w.close();
    w.close();
    assertThrows(IllegalStateException.class, () -> w.write(new byte[1]));
    RecordIOReader r = RecordIOReader.open(dir.resolve("f"));
    assertNull(r.next()); // an empty file has no records
    r.close();
    r.close();
    assertThrows(IllegalStateException.class, r::next);
  }
}

package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The data master through the real native library: a {@link Master} in this JVM over a file
 * store, read by {@link TaskReader}s in threads of this JVM and in a separate worker JVM.
 */
class MasterTest {
  static final Duration LIMIT = Duration.ofSeconds(120);
  static final int FILES = 3;
  static final int PER_FILE = 150;

  static String name(int file, int i) {
    return "file" + file + "-record" + i;
  }

  /** Writes FILES RecordIO files of PER_FILE records in small chunks; returns their glob. */
  static String dataset(Path dir) {
    for (int f = 0; f < FILES; f++) {
      try (RecordIOWriter w =
          RecordIOWriter.create(dir.resolve("part-" + f + ".rio"), RecordIOWriter.Compressor.NONE, 200)) {
        for (int i = 0; i < PER_FILE; i++) {
          w.write(name(f, i).getBytes(StandardCharsets.UTF_8));
        }
      }
    }
    return dir.resolve("part-*.rio").toString();
  }

  /** Every record name of the dataset, each counted once. */
  static Map<String, Integer> everyRecordOnce() {
    Map<String, Integer> out = new TreeMap<>();
    for (int f = 0; f < FILES; f++) {
      for (int i = 0; i < PER_FILE; i++) {
        out.put(name(f, i), 1);
      }
    }
    return out;
  }

  static Map<String, Integer> count(List<String> records) {
    Map<String, Integer> out = new TreeMap<>();
    for (String r : records) {
      out.merge(r, 1, Integer::sum);
    }
    return out;
  }

  static Master.Builder master(Path dir, String glob) {
    return Master.builder()
        .dataset(glob)
        .chunksPerTask(2)
        .store("file:" + dir.resolve("queue"))
        .secret(TestSupport.SECRET);
  }

  static List<String> readAll(TaskReader reader) {
    List<String> out = new ArrayList<>();
    reader.forEachRemaining(r -> out.add(new String(r, StandardCharsets.UTF_8)));
    return out;
  }

  @Test
  void threadsReadEveryRecordExactlyOncePerPass(@TempDir Path dir) throws Exception {
    String glob = dataset(dir);
    int readers = 4;
    ExecutorService pool = Executors.newFixedThreadPool(readers);
    try (Master m = master(dir, glob).start();
        MasterClient client = MasterClient.connect(m.workerSettings())) {
      MasterStatus before = client.status();
      assertTrue(before.hasDataset());
      assertEquals(0, before.pass());
      assertEquals(before.tasks(), before.todo());
      List<TaskReader> rs = new ArrayList<>();
      for (int i = 0; i < readers; i++) {
        rs.add(client.reader(0, LIMIT));
      }
      for (int pass = 0; pass < 2; pass++) {
        if (pass > 0) {
          for (TaskReader r : rs) {
            r.startPass(pass);
          }
        }
        List<String> all = Collections.synchronizedList(new ArrayList<>());
        List<Future<?>> fs = new ArrayList<>();
        for (TaskReader r : rs) {
          fs.add(pool.submit(() -> all.addAll(readAll(r))));
        }
        for (Future<?> f : fs) {
          f.get(LIMIT.toSeconds(), TimeUnit.SECONDS);
        }
        assertEquals(everyRecordOnce(), count(all), "pass " + pass);
        long finished = rs.stream().mapToLong(TaskReader::tasksFinished).sum();
        assertEquals(before.tasks() * (pass + 1), finished, "tasks reported finished after pass " + pass);
        assertFalse(rs.get(0).hasNext());
        assertThrows(NoSuchElementException.class, rs.get(0)::next);
      }
      MasterStatus after = m.status();
      assertEquals(2, after.pass());
      assertEquals(before.tasks(), after.todo());
      assertEquals(0, after.failed());
      for (TaskReader r : rs) {
        r.close();
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aWorkerJvmAndAThreadShareThePass(@TempDir Path dir) throws Exception {
    String glob = dataset(dir);
    try (Master m = master(dir, glob).start();
        TestSupport.Worker worker = new TestSupport.Worker(List.of(), m.workerSettings(), "master-read");
        MasterClient client = MasterClient.connect(m.workerSettings());
        TaskReader mine = client.reader(0, LIMIT)) {
      worker.awaitLine("REC ", LIMIT); // the worker JVM has a task before this thread starts
      List<String> all = new ArrayList<>(readAll(mine));
      assertEquals(0, worker.await(LIMIT), worker.output());
      for (String line : worker.output().split("\n")) {
        if (line.startsWith("REC ")) {
          all.add(line.substring(4));
        }
      }
      assertEquals(everyRecordOnce(), count(all), worker.output());
      assertEquals(1, m.status().pass());
    }
  }

  @Test
  void aCorruptChunkFailsItsTaskAndReadingGoesOn(@TempDir Path dir) throws Exception {
    String glob = dataset(dir);
    // One more file of a single chunk, damaged in its payload (the header stays readable, so
    // the master indexes it; the checksum fails when a reader reads it).
    Path bad = dir.resolve("part-9.rio");
    try (RecordIOWriter w = RecordIOWriter.create(bad, RecordIOWriter.Compressor.NONE, 1 << 20)) {
      for (int i = 0; i < 10; i++) {
        w.write(("bad" + i).getBytes(StandardCharsets.UTF_8));
      }
    }
    byte[] bytes = Files.readAllBytes(bad);
    bytes[bytes.length - 5] ^= 0x55;
    Files.write(bad, bytes);
    try (Master m = master(dir, glob).chunksPerTask(1).maxFailures(1).start();
        MasterClient client = MasterClient.connect(m.workerSettings());
        TaskReader r = client.reader(0, LIMIT)) {
      List<String> read = readAll(r);
      assertEquals(everyRecordOnce(), count(read), "every record of the sound files, once");
      assertEquals(2, r.tasksFailed(), "the damaged task, handed out twice (maxFailures 1)");
      MasterStatus s = m.status();
      assertEquals(1, s.failed());
      assertEquals(1, s.pass(), "the pass ended without the failed task");
    }
  }

  @Test
  void aTaskHeldByAReaderThatDiesComesBackAfterItsTimeout(@TempDir Path dir) {
    String glob = dataset(dir);
    try (Master m = master(dir, glob).timeouts(1000, 1000).start();
        MasterClient client = MasterClient.connect(m.workerSettings())) {
      long tasks = m.status().tasks();
      List<String> all = new ArrayList<>();
      String first;
      try (TaskReader dying = client.reader(0, LIMIT)) {
        // Takes a task, reads one record of it and goes away without finishing it.
        first = new String(dying.next(), StandardCharsets.UTF_8);
        all.add(first);
      }
      assertEquals(1, m.status().pending());
      try (TaskReader r = client.reader(0, LIMIT)) {
        all.addAll(readAll(r));
        assertTrue(r.tasksFinished() >= tasks, "finished " + r.tasksFinished() + " of " + tasks);
      }
      Map<String, Integer> seen = count(all);
      assertEquals(everyRecordOnce().keySet(), seen.keySet(), "every record at least once");
      assertTrue(seen.get(first) >= 2, "the abandoned task was read again");
      MasterStatus s = m.status();
      assertEquals(1, s.pass());
      assertEquals(0, s.failed(), "a timeout is retried, not a failure that discards the task");
    }
  }

  @Test
  void aWrongSecretIsAnAuthError(@TempDir Path dir) {
    try (Master m = master(dir, dataset(dir)).start()) {
      assertThrows(
          WarrenAuthException.class, () -> MasterClient.connect(m.address(), "wrong", Duration.ofSeconds(20)));
      Map<String, String> settings = m.workerSettings();
      settings.put(Master.SECRET_KEY, "also-wrong");
      assertThrows(WarrenAuthException.class, () -> MasterClient.connect(settings));
      settings.remove(Master.URI_KEY);
      assertThrows(WarrenConfigException.class, () -> MasterClient.connect(settings));
    }
  }

  @Test
  void badSettingsAreClearErrors(@TempDir Path dir) {
    String glob = dataset(dir);
    WarrenConfigException noStore =
        assertThrows(WarrenConfigException.class, () -> Master.builder().dataset(glob).secret("s").start());
    assertTrue(noStore.getMessage().contains("store"), noStore.getMessage());
    assertThrows(
        WarrenConfigException.class,
        () -> Master.builder().dataset(glob).store("s3:bucket").secret("s").start());
    assertThrows(
        WarrenConfigException.class,
        () -> Master.builder().dataset(glob).store("file:" + dir.resolve("q1")).start());
    WarrenArgumentException none =
        assertThrows(
            WarrenArgumentException.class,
            () -> master(dir, dir.resolve("nothing-*.rio").toString()).start());
    assertTrue(none.getMessage().contains("nothing-*.rio"), none.getMessage());
    assertThrows(IllegalArgumentException.class, () -> Master.builder().chunksPerTask(0));
  }

  @Test
  void aRestartedMasterKeepsItsQueuesAndRefusesAnotherDataset(@TempDir Path dir) {
    String glob = dataset(dir);
    long tasks;
    try (Master m = master(dir, glob).start();
        MasterClient client = MasterClient.connect(m.workerSettings());
        TaskReader r = client.reader(0, LIMIT)) {
      assertEquals(FILES * PER_FILE, readAll(r).size());
      tasks = m.status().tasks();
    }
    try (Master again = master(dir, glob).start()) {
      MasterStatus s = again.status();
      assertEquals(1, s.pass(), "pass 0 finished before the restart");
      assertEquals(tasks, s.todo());
    }
    assertThrows(DatasetMismatchException.class, () -> master(dir, glob).chunksPerTask(3).start());
  }

  @Test
  void closeIsIdempotentAndUseAfterCloseIsClear(@TempDir Path dir) {
    Master m = master(dir, dataset(dir)).start();
    MasterClient client = MasterClient.connect(m.workerSettings());
    TaskReader r = client.reader(0, LIMIT);
    assertTrue(r.hasNext());
    r.close();
    r.close();
    IllegalStateException e = assertThrows(IllegalStateException.class, r::hasNext);
    assertEquals("TaskReader is closed", e.getMessage());
    assertThrows(IllegalStateException.class, r::next);
    client.close();
    client.close();
    assertEquals("MasterClient is closed", assertThrows(IllegalStateException.class, client::status).getMessage());
    assertThrows(IllegalStateException.class, () -> client.reader(0));
    m.close();
    m.close();
    assertTrue(m.isClosed());
    assertEquals("Master is closed", assertThrows(IllegalStateException.class, m::status).getMessage());
    assertThrows(IllegalStateException.class, m::workerSettings);
    assertThrows(IllegalStateException.class, m::address);
  }
}

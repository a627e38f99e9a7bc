package io.warren.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.warren.WarrenArgumentException;
import io.warren.WarrenAuthException;
import io.warren.WarrenException;
import io.warren.WarrenTimeoutException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The parameter server through the real native library: servers started in this JVM, trainers
 * as threads of it, real sockets. Expected values are worked out by hand (SGD with learning
 * rate 1 on zeros: minus the sum of the pushed gradients).
 */
class PsTest {
  static final String SECRET = "ps-jvm-secret";
  static final Duration CONNECT = Duration.ofSeconds(30);
  static final Duration CALL = Duration.ofSeconds(120);

  static List<PsServer> servers(int n) {
    List<PsServer> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      // Every other server on one thread: the jobs of these tests run on both kinds.
      out.add(
          PsServer.builder(SECRET, i, n)
              .pullTimeout(Duration.ofSeconds(60))
              .threads(1 + i % 2)
              .start());
    }
    return out;
  }

  static List<String> uris(List<PsServer> servers) {
    List<String> out = new ArrayList<>();
    for (PsServer s : servers) {
      out.add(s.uri());
    }
    return out;
  }

  static void closeAll(List<PsServer> servers) {
    for (PsServer s : servers) {
      s.close();
    }
  }

  /** Dense "w" (10 floats, SGD lr 1, zeros) and sparse "emb" (rows of 4, SGD lr 0.5, uniform). */
  static PsJob job(int trainers, String mode) {
    return PsJob.builder(trainers)
        .mode(mode, 1)
        .dense("w", 10, PsJob.zeros(), PsOptimizer.sgd(1f))
        // The servers make room for 1,000 rows up front: the same rows, the same sums.
        .sparse("emb", 4, 1_000, PsJob.uniform(0.1f, 7), PsOptimizer.sgd(0.5f))
        .build();
  }

  static FloatBuffer direct(int n) {
    return ByteBuffer.allocateDirect(n * 4).order(ByteOrder.nativeOrder()).asFloatBuffer();
  }

  @Test
  void syncTrainersOverTwoServersGetTheSumsWorkedOutByHand() throws Exception {
    List<PsServer> servers = servers(2);
    int trainers = 3;
    int steps = 4;
    ExecutorService pool = Executors.newFixedThreadPool(trainers);
    try {
      List<Future<float[]>> results = new ArrayList<>();
      for (int t = 0; t < trainers; t++) {
        int id = t;
        results.add(
            pool.submit(
                () -> {
                  try (PsClient ps = PsClient.connect(uris(servers), SECRET, id, CONNECT, CALL)) {
                    ps.define(job(trainers, "sync"));
                    for (int step = 0; step < steps; step++) {
                      Thread.sleep(((id + step) % 3) * 10L); // vary the arrival order
                      float[] w = ps.pullDense("w", 0, 10);
                      // Before step `step`, w[i] = -step * (1 + 2 + 3): every trainer sees it.
                      for (float v : w) {
                        assertEquals(-6f * step, v, 0f, "trainer " + id + " step " + step);
                      }
                      float[] g = new float[10];
                      java.util.Arrays.fill(g, id + 1);
                      ps.push(new PsGradients().dense("w", 0, g));
                    }
                    float[] out = ps.pullDense("w", 0, 10);
                    ps.leave();
                    return out;
                  }
                }));
      }
      for (Future<float[]> f : results) {
        float[] w = f.get(120, TimeUnit.SECONDS);
        for (float v : w) {
          assertEquals(-6f * steps, v);
        }
      }
      assertEquals(steps, servers.get(0).status().applied());
      assertArrayEquals(new long[] {steps, steps, steps}, servers.get(1).status().clocks());
    } finally {
      pool.shutdownNow();
      closeAll(servers);
    }
  }

  @Test
  void sparseRowsAndDirectBuffersMatchArrays() {
    List<PsServer> servers = servers(2);
    try (PsClient ps = PsClient.connect(uris(servers), SECRET, 0, CONNECT, CALL)) {
      ps.define(job(1, "async"));
      long[] keys = {7, 1L << 40, -1L, 7}; // -1 is the unsigned key 2^64 - 1; 7 twice
      float[] rows = ps.pullSparse("emb", keys);
      assertEquals(16, rows.length);
      for (int c = 0; c < 4; c++) {
        assertEquals(rows[c], rows[12 + c], "the same key gives the same row");
        assertTrue(Math.abs(rows[c]) <= 0.1f, "uniform in [-0.1, 0.1)");
      }
      FloatBuffer buf = direct(20);
      buf.position(2);
      ps.pullSparse("emb", keys, buf);
      assertEquals(18, buf.position(), "the position moves past the rows");
      for (int i = 0; i < 16; i++) {
        assertEquals(rows[i], buf.get(2 + i));
      }
      // Key 7 given twice: rows summed; lr 0.5.
      FloatBuffer g = direct(8);
      for (int i = 0; i < 8; i++) {
        g.put(i, 1f);
      }
      ps.push(new PsGradients().sparse("emb", new long[] {7, 7}, g));
      float[] after = ps.pullSparse("emb", new long[] {7});
      for (int c = 0; c < 4; c++) {
        assertEquals(rows[c] - 0.5f * 2f, after[c], 1e-6f);
      }
      // Dense through buffers both ways.
      FloatBuffer dg = direct(10);
      for (int i = 0; i < 10; i++) {
        dg.put(i, i);
      }
      ps.push(new PsGradients().dense("w", 0, dg));
      FloatBuffer w = direct(4);
      ps.pullDense("w", 3, w);
      assertArrayEquals(new float[] {-3f, -4f, -5f, -6f}, new float[] {w.get(0), w.get(1), w.get(2), w.get(3)});
      // Floats one byte off their alignment (a slice of a byte buffer): copied, not pulled into.
      FloatBuffer odd =
          ByteBuffer.allocateDirect(17).position(1).slice().order(ByteOrder.nativeOrder()).asFloatBuffer();
      ps.pullDense("w", 3, odd);
      assertArrayEquals(new float[] {-3f, -4f, -5f, -6f}, new float[] {odd.get(0), odd.get(1), odd.get(2), odd.get(3)});
      FloatBuffer oddRows =
          ByteBuffer.allocateDirect(65).position(1).slice().order(ByteOrder.nativeOrder()).asFloatBuffer();
      ps.pullSparse("emb", keys, oddRows);
      float[] rowsNow = ps.pullSparse("emb", keys);
      for (int i = 0; i < 16; i++) {
        assertEquals(rowsNow[i], oddRows.get(i), "row float " + i);
      }
      assertEquals(2, ps.step());
    } finally {
      closeAll(servers);
    }
  }

  /**
   * A bagged pull gives each bag the sum of its rows (to float rounding: the servers' sums are
   * added in server order; the native tests check the bits); a bagged push moves each key by its
   * bags' rows (SGD lr 0.5), into arrays and direct buffers. Bad bags are refused before
   * anything is sent.
   */
  @Test
  void bagsPullTheSumsOfTheirRowsAndPushOneRowPerBag() {
    List<PsServer> servers = servers(2);
    try (PsClient ps = PsClient.connect(uris(servers), SECRET, 0, CONNECT, CALL)) {
      ps.define(job(1, "async"));
      long[] keys = {7, 1L << 40, -1L, 7, 12, 13};
      long[] ends = {3, 3, 6}; // bags {7, 2^40, 2^64 - 1}, {}, {7, 12, 13}
      float[] rows = ps.pullSparse("emb", keys);
      float[] sums = new float[12];
      FloatBuffer buf = direct(12);
      ps.pull(new PsPulls().sparseBags("emb", keys, ends, sums).sparseBags("emb", keys, ends, buf));
      assertEquals(12, buf.position(), "the position moves past the sums");
      for (int c = 0; c < 4; c++) {
        assertEquals(rows[c] + rows[4 + c] + rows[8 + c], sums[c], 1e-6f);
        assertEquals(0f, sums[4 + c], "an empty bag sums to zeros");
        assertEquals(rows[12 + c] + rows[16 + c] + rows[20 + c], sums[8 + c], 1e-6f);
        for (int b = 0; b < 3; b++) {
          assertEquals(sums[4 * b + c], buf.get(4 * b + c), "buffer and array agree");
        }
      }
      float[] bagRows = {1f, 1f, 1f, 1f, 5f, 5f, 5f, 5f, 2f, 2f, 2f, 2f};
      ps.push(new PsGradients().sparseBags("emb", keys, ends, bagRows));
      float[] after = ps.pullSparse("emb", keys);
      for (int c = 0; c < 4; c++) {
        assertEquals(rows[c] - 0.5f * (1f + 2f), after[c], 1e-6f, "key 7 is in bags 0 and 2");
        assertEquals(rows[4 + c] - 0.5f, after[4 + c], 1e-6f);
        assertEquals(rows[16 + c] - 0.5f * 2f, after[16 + c], 1e-6f);
      }
      long held = 0;
      for (PsStatus st : ps.status()) {
        held += st.rows();
      }
      WarrenArgumentException e =
          assertThrows(
              WarrenArgumentException.class,
              () -> ps.pull(new PsPulls().sparseBags("emb", new long[] {1L << 50}, new long[] {2}, new float[4])));
      assertTrue(e.getMessage().contains("the last bag ends at key 2, but there are 1 keys"), e.getMessage());
      IllegalArgumentException room =
          assertThrows(
              IllegalArgumentException.class,
              () -> ps.pull(new PsPulls().sparseBags("emb", keys, ends, new float[8])));
      assertTrue(room.getMessage().contains("3 bags of table \"emb\" need 12 floats"), room.getMessage());
      e =
          assertThrows(
              WarrenArgumentException.class,
              () -> ps.push(new PsGradients().sparseBags("emb", new long[] {1L << 50}, new long[] {1}, new float[8])));
      assertTrue(e.getMessage().contains("8 floats for 1 bags of width 4"), e.getMessage());
      long now = 0;
      for (PsStatus st : ps.status()) {
        now += st.rows();
      }
      assertEquals(held, now, "nothing was sent: no row was made for key 2^50");
    } finally {
      closeAll(servers);
    }
  }

  @Test
  void aPullOfSeveralTablesFillsEachAsItsOwnPullDoes() {
    List<PsServer> servers = servers(2);
    try (PsClient ps = PsClient.connect(uris(servers), SECRET, 0, CONNECT, CALL)) {
      ps.define(job(1, "async"));
      float[] dg = new float[10];
      for (int i = 0; i < 10; i++) {
        dg[i] = i;
      }
      ps.push(new PsGradients().dense("w", 0, dg));
      long[] keys = {7, 1L << 40, -1L, 7};
      float[] rows = new float[16];
      float[] w = new float[4];
      float[] shared = new float[3 + 16];
      ps.pull(
          new PsPulls()
              .sparse("emb", keys, rows)
              .dense("w", 3, w)
              .sparse("emb", keys, shared, 3)
              .dense("w", 7, shared, 0, 3));
      float[] each = ps.pullSparse("emb", keys);
      assertArrayEquals(each, rows);
      assertArrayEquals(new float[] {-3f, -4f, -5f, -6f}, w, "SGD lr 1 from zeros");
      assertArrayEquals(new float[] {-7f, -8f, -9f}, java.util.Arrays.copyOfRange(shared, 0, 3));
      assertArrayEquals(each, java.util.Arrays.copyOfRange(shared, 3, 19), "two pulls into one array");

      // Two pulls into one direct buffer, side by side; each position moves past its values.
      ByteBuffer bytes = ByteBuffer.allocateDirect(4 * 20).order(ByteOrder.nativeOrder());
      FloatBuffer rowsAt2 = bytes.asFloatBuffer().position(2);
      FloatBuffer wAt18 = bytes.asFloatBuffer().position(18);
      ps.pull(new PsPulls().sparse("emb", keys, rowsAt2).dense("w", 0, wAt18));
      assertEquals(18, rowsAt2.position());
      assertEquals(20, wAt18.position());
      for (int i = 0; i < 16; i++) {
        assertEquals(each[i], rowsAt2.get(2 + i), "row float " + i);
      }
      assertEquals(0f, wAt18.get(18));
      assertEquals(-1f, wAt18.get(19));

      // Overlapping parts of one direct buffer are refused; nothing is pulled or moved.
      FloatBuffer first = bytes.asFloatBuffer();
      FloatBuffer inside = bytes.asFloatBuffer().position(10).limit(12);
      IllegalArgumentException overlap =
          assertThrows(
              IllegalArgumentException.class,
              () -> ps.pull(new PsPulls().sparse("emb", keys, first).dense("w", 0, inside)));
      assertTrue(overlap.getMessage().contains("overlapping parts of one direct buffer"), overlap.getMessage());
      assertEquals(0, first.position());
      assertEquals(10, inside.position());
      WarrenException e = assertThrows(WarrenArgumentException.class, () -> ps.pull(new PsPulls().sparse("w", keys, new float[16])));
      assertTrue(e.getMessage().contains("is dense"), e.getMessage());
      IllegalArgumentException small =
          assertThrows(IllegalArgumentException.class, () -> ps.pull(new PsPulls().sparse("emb", keys, new float[15])));
      assertTrue(small.getMessage().contains("need 16 floats; there is room for 15"), small.getMessage());
      e = assertThrows(WarrenArgumentException.class, () -> ps.pull(new PsPulls().dense("w", 8, new float[5])));
      assertTrue(e.getMessage().contains("outside table"), e.getMessage());
      assertEquals(-4f, ps.pullDense("w", 4, 1)[0], "the client still works");
    } finally {
      closeAll(servers);
    }
  }

  @Test
  void badInputIsAClearErrorAndTheServersKeepServing() {
    List<PsServer> servers = servers(2);
    try (PsClient ps = PsClient.connect(uris(servers), SECRET, 0, CONNECT, CALL);
        PsClient other = PsClient.connect(uris(servers), SECRET, 1, CONNECT, CALL)) {
      ps.define(job(2, "async"));
      other.define(job(2, "async"));
      WarrenException e = assertThrows(WarrenArgumentException.class, () -> ps.pullDense("nope", 0, 1));
      assertTrue(e.getMessage().contains("no table named \"nope\""), e.getMessage());
      e = assertThrows(WarrenArgumentException.class, () -> ps.pullDense("w", 8, 5));
      assertTrue(e.getMessage().contains("outside table"), e.getMessage());
      e = assertThrows(WarrenArgumentException.class, () -> ps.pullSparse("w", new long[] {1}));
      assertTrue(e.getMessage().contains("is dense"), e.getMessage());
      e =
          assertThrows(
              WarrenArgumentException.class,
              () -> ps.push(new PsGradients().sparse("emb", new long[] {1, 2}, new float[5])));
      assertTrue(e.getMessage().contains("5 floats for 2 keys of width 4"), e.getMessage());
      assertEquals(1_000, job(2, "async").tables().get(1).expectedRows());
      assertThrows(
          IllegalArgumentException.class,
          () -> PsJob.builder(1).sparse("emb", 4, -1, PsJob.zeros(), PsOptimizer.sgd(1f)));
      e = assertThrows(WarrenArgumentException.class, () -> ps.define(job(3, "async")));
      assertTrue(e.getMessage().contains("already defined differently"), e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> ps.pullDense("w", 0, FloatBuffer.allocate(3)));
      assertThrows(
          IllegalArgumentException.class,
          () -> ps.pullDense("w", 0, ByteBuffer.allocateDirect(12).order(ByteOrder.BIG_ENDIAN).asFloatBuffer()),
          "a buffer in the other byte order is refused");
      // Nothing of that broke the servers or this client.
      other.push(new PsGradients().dense("w", 0, new float[] {1f}));
      assertEquals(-1f, ps.pullDense("w", 0, 1)[0]);
      try (PsClient observer = PsClient.observer(uris(servers), SECRET)) {
        assertThrows(WarrenArgumentException.class, () -> observer.push(new PsGradients()));
        assertEquals(1, observer.status().get(0).clocks()[1]);
      }
    } finally {
      closeAll(servers);
    }
  }

  @Test
  void aWrongSecretAndAMissingServerAreRefused() throws Exception {
    List<PsServer> servers = servers(1);
    try {
      WarrenException e =
          assertThrows(WarrenAuthException.class, () -> PsClient.connect(uris(servers), "wrong", 0, CONNECT, CALL));
      assertTrue(e.getMessage().contains("ps server 0"), e.getMessage());
      // A port bound and never listening while the client tries it: refused, and no other
      // listener can take it over meanwhile.
      try (SocketChannel refused = SocketChannel.open()) {
        refused.bind(new InetSocketAddress("127.0.0.1", 0));
        int port = ((InetSocketAddress) refused.getLocalAddress()).getPort();
        List<String> missing = List.of(servers.get(0).uri(), "127.0.0.1:" + port);
        long started = System.nanoTime();
        e =
            assertThrows(
                WarrenTimeoutException.class,
                () -> PsClient.connect(missing, SECRET, 0, Duration.ofSeconds(2), CALL));
        assertTrue(e.getMessage().contains("ps server 1"), e.getMessage());
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(60), "the deadline holds");
      }
      assertThrows(IllegalArgumentException.class, () -> PsServer.builder(SECRET, 2, 2));
      assertThrows(IllegalArgumentException.class, () -> PsServer.builder(SECRET, 0, 1).threads(0));
      assertThrows(io.warren.WarrenConfigException.class, () -> PsServer.builder("", 0, 1).start());
    } finally {
      closeAll(servers);
    }
  }

  /** Runs {@code body} on a new thread; returns the thread and what it threw. */
  static Thread start(Runnable body, AtomicReference<Throwable> thrown, AtomicReference<Boolean> flag) {
    Thread t =
        new Thread(
            () -> {
              try {
                body.run();
              } catch (Throwable e) {
                thrown.set(e);
                flag.set(Thread.currentThread().isInterrupted());
              }
            });
    t.start();
    return t;
  }

  @Test
  void anInterruptAbortsAPullWaitingForASlowerTrainer() throws Exception {
    List<PsServer> servers = servers(1);
    try (PsClient ps = PsClient.connect(uris(servers), SECRET, 0, CONNECT, CALL)) {
      ps.define(job(2, "sync"));
      ps.push(new PsGradients());
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      AtomicReference<Boolean> flag = new AtomicReference<>();
      // Trainer 1 never pushes step 0: this pull waits for it.
      Thread t = start(() -> ps.pullDense("w", 0, 10), thrown, flag);
      Thread.sleep(300);
      long interrupted = System.nanoTime();
      t.interrupt();
      t.join(30_000);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - interrupted);
      System.out.println("the pull ended " + ms + " ms after the interrupt");
      assertTrue(!t.isAlive(), "the pull is still waiting 30 s after the interrupt");
      assertTrue(thrown.get() instanceof PsInterruptedException, String.valueOf(thrown.get()));
      assertTrue(flag.get(), "the interrupt flag is set again");
      assertThrows(PsInterruptedException.class, ps::status, "the client is unusable after the abort");
      assertTrue(Thread.interrupted(), "the flag is set again on this thread too (cleared here)");
    } finally {
      closeAll(servers);
    }
  }

  @Test
  void abortFromAnotherThreadEndsACallWaitingForAServerThatWentAway() throws Exception {
    List<PsServer> servers = servers(1);
    PsClient ps = PsClient.connect(uris(servers), SECRET, 0, CONNECT, CALL);
    try {
      ps.define(job(1, "sync"));
      servers.get(0).close();
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      AtomicReference<Boolean> flag = new AtomicReference<>();
      Thread t = start(() -> ps.push(new PsGradients()), thrown, flag);
      Thread.sleep(500);
      long aborted = System.nanoTime();
      ps.abort();
      t.join(30_000);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - aborted);
      System.out.println("the push ended " + ms + " ms after the abort");
      assertTrue(!t.isAlive(), "the push is still waiting 30 s after the abort");
      assertTrue(thrown.get() instanceof io.warren.CollectiveAbortedException, String.valueOf(thrown.get()));
      assertTrue(ps.isClosed());
    } finally {
      ps.close();
      closeAll(servers);
    }
  }

  @Test
  void aServerRestartedFromItsCheckpointLosesNothingInSync(@TempDir Path dir) throws Exception {
    PsServer server =
        PsServer.builder(SECRET, 0, 1).checkpoint(dir, 1, Duration.ZERO).pullTimeout(Duration.ofSeconds(60)).start();
    String uri = server.uri();
    int port = Integer.parseInt(uri.substring(uri.lastIndexOf(':') + 1));
    try (PsClient ps = PsClient.connect(List.of(uri), SECRET, 0, CONNECT, CALL)) {
      ps.define(job(1, "sync"));
      for (int step = 0; step < 6; step++) {
        if (step == 3) {
          server.close();
          server =
              PsServer.builder(SECRET, 0, 1)
                  .bind("127.0.0.1", port)
                  .checkpoint(dir, 1, Duration.ZERO)
                  .pullTimeout(Duration.ofSeconds(60))
                  .start();
        }
        assertEquals(-step * (step - 1) / 2f, ps.pullDense("w", 0, 1)[0], 0f, "before step " + step);
        ps.push(new PsGradients().dense("w", 0, new float[] {step}));
      }
      // 0 + 1 + 2 + 3 + 4 + 5 = 15.
      assertEquals(-15f, ps.pullDense("w", 0, 1)[0]);
      assertEquals(0, ps.lostUpdates());
    } finally {
      server.close();
    }
  }
}

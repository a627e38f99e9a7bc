package io.warren;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Cancelling a blocked call from another thread: {@link Communicator#abort()} and {@link
 * Thread#interrupt()}, with real workers (threads of this JVM) on a real tracker.
 */
class CancelTest {
  /** How long a cancelled call may take to return (the brief: about a second). */
  private static final long PROMPT_MS = 1000;

  private static Map<String, String> settings(Tracker tracker, int task) {
    Map<String, String> s = new HashMap<>(tracker.workerSettings(Integer.toString(task)));
    s.put("WARREN_TIMEOUT_S", "60");
    s.put("WARREN_ROBUST", "0"); // the peer fails instead of waiting for a replacement
    return s;
  }

  /** A worker thread that joins, then blocks in an allreduce its peer never makes. */
  private static final class Blocked {
    final AtomicReference<Communicator> comm = new AtomicReference<>();
    final CountDownLatch joined = new CountDownLatch(1);
    final AtomicBoolean interruptedAfter = new AtomicBoolean();
    final CompletableFuture<Throwable> outcome = new CompletableFuture<>();
    final Thread thread;
    volatile long returnedNanos;

    Blocked(Map<String, String> settings) {
      thread =
          new Thread(
              () -> {
                try {
                  Communicator c = Communicator.create(settings);
                  comm.set(c);
                  joined.countDown();
                  c.allreduce(new float[1024], Op.SUM);
                  outcome.complete(null);
                } catch (Throwable t) {
                  returnedNanos = System.nanoTime();
                  interruptedAfter.set(Thread.currentThread().isInterrupted());
                  joined.countDown();
                  outcome.complete(t);
                }
              },
              "blocked-worker");
      thread.start();
    }
  }

  @Test
  @Timeout(60)
  void abortFromAnotherThreadEndsABlockedCallAndThePeerFails() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      Blocked zero = new Blocked(settings(tracker, 0));
      try (Communicator one = Communicator.create(settings(tracker, 1))) {
        assertTrue(zero.joined.await(30, TimeUnit.SECONDS));
        Thread.sleep(300); // rank 0 is now blocked in allreduce; rank 1 never calls
        long started = System.nanoTime();
        zero.comm.get().abort(); // not synchronized on the running call any more
        long abortMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
        Throwable t = zero.outcome.get(30, TimeUnit.SECONDS);
        long callMs = TimeUnit.NANOSECONDS.toMillis(zero.returnedNanos - started);
        System.out.printf("abort() returned in %d ms, the blocked call in %d ms%n", abortMs, callMs);
        assertInstanceOf(CollectiveAbortedException.class, t, String.valueOf(t));
        assertFalse(t instanceof CollectiveInterruptedException, String.valueOf(t));
        assertTrue(t.getMessage().contains("abort()"), t.getMessage());
        assertEquals(0, ((CollectiveAbortedException) t).rank(), "the cancelled worker's rank");
        assertTrue(abortMs < PROMPT_MS, "abort() took " + abortMs + " ms");
        assertTrue(callMs < PROMPT_MS, "the call returned " + callMs + " ms after abort()");
        assertTrue(zero.comm.get().isClosed());
        zero.comm.get().abort(); // idempotent

        // The peer learns at once that rank 0 is gone.
        long peerStarted = System.nanoTime();
        WarrenException e =
            org.junit.jupiter.api.Assertions.assertThrows(
                WarrenException.class, () -> one.allreduce(new float[1024], Op.SUM));
        long peerMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - peerStarted);
        assertInstanceOf(PeerLostException.class, e, String.valueOf(e));
        assertTrue(peerMs < PROMPT_MS, "the peer failed after " + peerMs + " ms");
      }
    }
  }

  @Test
  @Timeout(60)
  void interruptingABlockedThreadAbortsItsCall() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      Blocked zero = new Blocked(settings(tracker, 0));
      try (Communicator one = Communicator.create(settings(tracker, 1))) {
        assertTrue(zero.joined.await(30, TimeUnit.SECONDS));
        Thread.sleep(300);
        long started = System.nanoTime();
        zero.thread.interrupt();
        Throwable t = zero.outcome.get(30, TimeUnit.SECONDS);
        long callMs = TimeUnit.NANOSECONDS.toMillis(zero.returnedNanos - started);
        System.out.printf("the interrupted call returned in %d ms%n", callMs);
        assertInstanceOf(CollectiveInterruptedException.class, t, String.valueOf(t));
        assertTrue(t.getMessage().contains("interrupted"), t.getMessage());
        CollectiveInterruptedException ie = (CollectiveInterruptedException) t;
        assertEquals(0, ie.rank());
        assertTrue(ie.reason().contains("interrupted"), ie.reason());
        assertTrue(zero.interruptedAfter.get(), "the interrupt flag is set again");
        assertTrue(callMs < PROMPT_MS, "the call returned " + callMs + " ms after the interrupt");
        // Unusable afterwards, as after any failure; abort() frees it.
        Communicator c = zero.comm.get();
        org.junit.jupiter.api.Assertions.assertThrows(
            CollectiveAbortedException.class, () -> c.allreduce(new float[1], Op.SUM));
        c.abort();
      }
    }
  }

  @Test
  @Timeout(60)
  void interruptingAThreadThatWaitsToJoinAbortsTheJoin() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      // Task 1 never arrives: task 0 waits in create().
      CompletableFuture<Throwable> outcome = new CompletableFuture<>();
      AtomicBoolean flag = new AtomicBoolean();
      AtomicReference<Long> returned = new AtomicReference<>();
      Thread t =
          new Thread(
              () -> {
                try (Communicator c = Communicator.create(settings(tracker, 0))) {
                  outcome.complete(null);
                } catch (Throwable e) {
                  returned.set(System.nanoTime());
                  flag.set(Thread.currentThread().isInterrupted());
                  outcome.complete(e);
                }
              });
      t.start();
      Thread.sleep(500);
      long started = System.nanoTime();
      t.interrupt();
      Throwable e = outcome.get(30, TimeUnit.SECONDS);
      long ms = TimeUnit.NANOSECONDS.toMillis(returned.get() - started);
      System.out.printf("create() returned %d ms after the interrupt%n", ms);
      assertInstanceOf(CollectiveInterruptedException.class, e, String.valueOf(e));
      assertEquals(-1, ((CollectiveInterruptedException) e).rank(), "no rank yet while joining");
      assertTrue(flag.get(), "the interrupt flag is set again");
      assertTrue(ms < PROMPT_MS, "create() returned " + ms + " ms after the interrupt");
    }
  }

  @Test
  @Timeout(60)
  void anInterruptedThreadThatPrintsDoesNotCancelTheCommunicator() throws Exception {
    try (Tracker tracker = Tracker.start(2, TestSupport.SECRET)) {
      CompletableFuture<float[]> peer =
          CompletableFuture.supplyAsync(
              () -> {
                try (Communicator c = Communicator.create(settings(tracker, 1))) {
                  float[] v = {2f};
                  c.allreduce(v, Op.SUM);
                  return v;
                }
              });
      try (Communicator c = Communicator.create(settings(tracker, 0))) {
        Thread.currentThread().interrupt();
        try {
          c.print("logged by an interrupted thread");
          assertTrue(Thread.currentThread().isInterrupted(), "print leaves the flag set");
        } finally {
          Thread.interrupted();
        }
        float[] v = {1f};
        c.allreduce(v, Op.SUM);
        assertEquals(3f, v[0], "the communicator still works after the interrupted print");
      }
      assertEquals(3f, peer.get(30, TimeUnit.SECONDS)[0]);
    }
  }

  @Test
  @Timeout(30)
  void aPendingInterruptAbortsTheNextCallAndTheWatcherStopsWithTheLastCommunicator()
      throws Exception {
    Communicator c = Communicator.create(Map.of());
    assertTrue(InterruptWatcher.running());
    c.allreduce(new float[4], Op.SUM);
    Thread.currentThread().interrupt();
    try {
      org.junit.jupiter.api.Assertions.assertThrows(
          CollectiveInterruptedException.class, () -> c.allreduce(new float[4], Op.SUM));
      assertTrue(Thread.interrupted(), "the flag stays set (cleared here)");
    } finally {
      Thread.interrupted();
      c.abort();
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (InterruptWatcher.running() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    // Other test classes may have left communicators open in this JVM: then it keeps running.
    assertTrue(
        InterruptWatcher.targets() > 0 || !InterruptWatcher.running(),
        "the watcher thread ends with no target");
  }

  @Test
  @Timeout(30)
  void aCommunicatorCancelledByAnInterruptIsNotFenced() {
    Communicator c = Communicator.create(Map.of());
    try {
      assertEquals(java.util.Optional.empty(), c.fenced(), "a fresh worker");
      Thread.currentThread().interrupt();
      org.junit.jupiter.api.Assertions.assertThrows(
          CollectiveInterruptedException.class, () -> c.allreduce(new float[4], Op.SUM));
      Thread.interrupted();
      assertEquals(java.util.Optional.empty(), c.fenced(), "cancelled, not fenced");
    } finally {
      Thread.interrupted();
      c.abort();
    }
    assertEquals(java.util.Optional.empty(), c.fenced(), "after abort()");
  }

  @Test
  @Timeout(60)
  void anInterruptJustAfterTheJoinReturnedFailsCreateAndLeavesTheJobAsFailed() throws Exception {
    try (Tracker tracker = Tracker.start(1, TestSupport.SECRET)) {
      Map<String, String> first = tracker.workerSettings("0");
      // The interrupt lands after the native join returned, before create() closed its watch:
      // the hook waits (bounded) until the watcher thread has cancelled the fresh communicator.
      AtomicBoolean watcherFired = new AtomicBoolean();
      Communicator.joinedHook =
          watch -> {
            Thread.currentThread().interrupt();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (!watch.fired() && System.nanoTime() < until) {
              Thread.onSpinWait();
            }
            watcherFired.set(watch.fired());
          };
      Throwable t;
      try {
        t = org.junit.jupiter.api.Assertions.assertThrows(
            CollectiveAbortedException.class, () -> Communicator.create(first));
      } finally {
        Communicator.joinedHook = null;
      }
      boolean flag = Thread.interrupted();
      assertTrue(watcherFired.get(), "the watcher cancelled the join's communicator");
      assertInstanceOf(CollectiveInterruptedException.class, t, String.valueOf(t));
      assertTrue(t.getMessage().contains("joining the job"), t.getMessage());
      assertEquals(0, ((CollectiveInterruptedException) t).rank(), "joined as rank 0");
      assertTrue(flag, "the interrupt flag is set again");
      // Left as failed, not finished: the task's next attempt joins and the job completes.
      Map<String, String> next = tracker.workerSettings("0");
      next.put("WARREN_ATTEMPT", "1");
      try (Communicator c = Communicator.create(next)) {
        float[] v = {5f};
        c.allreduce(v, Op.SUM);
        assertEquals(5f, v[0]);
      }
      assertEquals(1, tracker.awaitCompletion(java.time.Duration.ofSeconds(30)).workers());
    }
  }
}

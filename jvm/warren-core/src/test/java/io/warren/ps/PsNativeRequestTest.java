package io.warren.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.warren.NativeLoader;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The request objects as the native side reads them: bad values the Java builders never pass
 * are still refused natively, with the messages the exports always gave.
 */
class PsNativeRequestTest {
  @BeforeAll
  static void load() {
    NativeLoader.ensureLoaded();
  }

  private static ServerStartRequest server(int index, int port, long pullTimeoutMs, String dir, long everySteps) {
    return new ServerStartRequest(
        "secret", index, 1, "127.0.0.1", port, pullTimeoutMs, dir, everySteps, 0, null, 1);
  }

  private static String refused(ServerStartRequest r) {
    return assertThrows(IllegalArgumentException.class, () -> PsNative.serverStart(r)).getMessage();
  }

  @Test
  void badServerSettingsAreRefusedNatively() {
    assertEquals("server index -1 of 1: negative", refused(server(-1, 0, 1000, null, 0)));
    assertEquals("port 70000 is out of range", refused(server(0, 70000, 1000, null, 0)));
    assertEquals("pullTimeout must be positive, got 0 ms", refused(server(0, 0, 0, null, 0)));
    assertEquals("checkpoint steps -1 is negative", refused(server(0, 0, 1000, "/nonexistent", -1)));
    assertEquals(
        "host is null",
        refused(new ServerStartRequest("s", 0, 1, null, 0, 1000, null, 0, 0, null, 1)));
    assertEquals("the server start request is null", refused(null));
  }

  @Test
  void badConnectSettingsAreRefusedNatively() {
    ClientConnectRequest r =
        new ClientConnectRequest(new String[] {"127.0.0.1:1"}, "s", -2, 1000, 1000, 0, null);
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> PsNative.clientConnect(r));
    assertEquals("trainer id -2 is negative", e.getMessage());
    ClientConnectRequest noUris = new ClientConnectRequest(null, "s", 0, 1000, 1000, 0, null);
    e = assertThrows(IllegalArgumentException.class, () -> PsNative.clientConnect(noUris));
    assertEquals("server addresses is null", e.getMessage());
  }
}

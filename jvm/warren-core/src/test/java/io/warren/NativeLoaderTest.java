package io.warren;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The loader: platform detection, the override property, extraction by several JVMs at once. */
class NativeLoaderTest {

  @Test
  void detectsOsAndArch() {
    assertEquals("linux", NativeLoader.os("Linux"));
    assertEquals("osx", NativeLoader.os("Mac OS X"));
    assertEquals("windows", NativeLoader.os("Windows 11"));
    assertEquals("freebsd", NativeLoader.os("FreeBSD"));
    assertEquals("x86_64", NativeLoader.arch("amd64"));
    assertEquals("x86_64", NativeLoader.arch("x86_64"));
    assertEquals("aarch64", NativeLoader.arch("aarch64"));
    assertEquals("aarch64", NativeLoader.arch("arm64"));
    assertEquals("riscv64", NativeLoader.arch("riscv64"));
    assertEquals(
        NativeLoader.os(System.getProperty("os.name"))
            + "-"
            + NativeLoader.arch(System.getProperty("os.arch")),
        NativeLoader.platform());
  }

  @Test
  void theBuildBundlesTheLibraryForThisPlatform() throws Exception {
    String resource = NativeLoader.resourcePath(NativeLoader.platform());
    try (InputStream in = getClass().getClassLoader().getResourceAsStream(resource)) {
      assertNotNull(in, "missing /" + resource + ": was `cargo build --release -p warren-jni` run?");
    }
    NativeLoader.ensureLoaded();
    assertEquals(NativeLoader.expectedVersion(), Native.version());
  }

  @Test
  void staleCopiesAreRemovedAndFreshOnesKept(@TempDir Path dir) throws Exception {
    Path keep = NativeLoader.extract("current".getBytes(), dir);
    Path oldCopy = NativeLoader.extract("old version".getBytes(), dir);
    Path recent = NativeLoader.extract("another JVM's, just written".getBytes(), dir);
    Path unrelated = Files.writeString(dir.resolve("notes.txt"), "x");
    java.nio.file.attribute.FileTime twoDaysAgo =
        java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis() - 48L * 3600 * 1000);
    Files.setLastModifiedTime(oldCopy, twoDaysAgo);
    Files.setLastModifiedTime(unrelated, twoDaysAgo);
    Files.setLastModifiedTime(keep, twoDaysAgo);
    NativeLoader.removeStaleCopies(keep);
    assertTrue(Files.exists(keep));
    assertTrue(Files.exists(recent));
    assertTrue(Files.exists(unrelated));
    assertTrue(!Files.exists(oldCopy));
  }

  @Test
  void extractionFromManyThreadsYieldsOneCompleteFile(@TempDir Path dir) throws Exception {
    byte[] bytes = new byte[3 << 20];
    new java.util.Random(1).nextBytes(bytes);
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try {
      List<Future<Path>> fs = new ArrayList<>();
      for (int i = 0; i < 16; i++) {
        fs.add(pool.submit(() -> NativeLoader.extract(bytes, dir)));
      }
      Set<Path> paths = new HashSet<>();
      for (Future<Path> f : fs) {
        paths.add(f.get());
      }
      assertEquals(1, paths.size());
      Path p = paths.iterator().next();
      assertTrue(p.getFileName().toString().contains(NativeLoader.sha256(bytes).substring(0, 32)));
      assertArrayEquals(bytes, Files.readAllBytes(p));
      try (Stream<Path> s = Files.list(dir)) {
        assertEquals(List.of(p), s.collect(Collectors.toList()), "no temporary files left");
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aDamagedExtractedCopyIsReplaced(@TempDir Path dir) throws Exception {
    byte[] bytes = "pretend library".getBytes();
    Path p = NativeLoader.extract(bytes, dir);
    Files.write(p, "pretend librarX".getBytes()); // same size, other content
    assertEquals(p, NativeLoader.extract(bytes, dir));
    assertArrayEquals(bytes, Files.readAllBytes(p));
  }

  @Test
  @Timeout(120)
  void twoJvmsLoadTheBundledCopyAtOnce(@TempDir Path dir) throws Exception {
    List<String> args = List.of("-Dwarren.native.tmpdir=" + dir, "-Djava.library.path=" + dir);
    try (TestSupport.Worker a = new TestSupport.Worker(args, Map.of(), "load");
        TestSupport.Worker b = new TestSupport.Worker(args, Map.of(), "load")) {
      assertEquals(0, a.await(Duration.ofSeconds(100)), a.output());
      assertEquals(0, b.await(Duration.ofSeconds(100)), b.output());
      assertTrue(a.output().contains("(bundled)"), a.output());
      assertTrue(b.output().contains("(bundled)"), b.output());
    }
    try (Stream<Path> s = Files.walk(dir)) {
      List<Path> files = s.filter(Files::isRegularFile).collect(Collectors.toList());
      assertEquals(1, files.size(), files.toString());
    }
  }

  @Test
  @Timeout(60)
  void theOverridePropertyIsUsed(@TempDir Path dir) throws Exception {
    // Find the extracted bundled copy by loading it in a child, then point the override at it.
    Path lib;
    try (InputStream in =
        getClass().getClassLoader().getResourceAsStream(NativeLoader.resourcePath(NativeLoader.platform()))) {
      lib = NativeLoader.extract(in.readAllBytes(), dir);
    }
    try (TestSupport.Worker w =
        new TestSupport.Worker(List.of("-Dwarren.native.lib=" + lib), Map.of(), "load")) {
      assertEquals(0, w.await(Duration.ofSeconds(50)), w.output());
      assertTrue(w.output().contains("WORKER_OK loaded from " + lib + " (-Dwarren.native.lib)"), w.output());
    }
  }

  @Test
  @Timeout(60)
  void aLoadFailureIsReportedOnEveryUseWithWhatToDo() throws Exception {
    try (TestSupport.Worker w =
        new TestSupport.Worker(
            List.of("-Dwarren.native.lib=/nonexistent/libwarren_jni.so"), Map.of(), "load-fails")) {
      assertEquals(0, w.await(Duration.ofSeconds(50)), w.output());
      String out = w.output();
      assertTrue(out.contains("LOAD_FAILED 0 "), out);
      assertTrue(out.contains("LOAD_FAILED 1 "), out); // the same error again, not NoClassDefFoundError
      assertTrue(out.contains("/nonexistent/libwarren_jni.so"), out);
      assertTrue(out.contains("platform " + NativeLoader.platform()), out);
      assertTrue(out.contains("cargo build --release -p warren-jni"), out);
    }
  }

  @Test
  @Timeout(60)
  void aMissingSlf4jIsNamedWithTheJarToAdd() throws Exception {
    String withoutSlf4j =
        Arrays.stream(TestSupport.classPath().split(File.pathSeparator))
            .filter(e -> !e.contains("slf4j"))
            .collect(Collectors.joining(File.pathSeparator));
    try (TestSupport.Worker w =
        new TestSupport.Worker(withoutSlf4j, List.of(), Map.of(), "load-fails")) {
      assertEquals(0, w.await(Duration.ofSeconds(50)), w.output());
      String out = w.output();
      assertTrue(out.contains("LOAD_FAILED 0 "), out);
      assertTrue(out.contains("the class org.slf4j."), out);
      assertTrue(out.contains("add the jar org.slf4j:slf4j-api"), out);
      assertFalse(out.contains("cargo build"), out); // the library itself is fine
    }
  }
}

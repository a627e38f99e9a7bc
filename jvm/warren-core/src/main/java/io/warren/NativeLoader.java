package io.warren;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;

/**
 * Loads {@code libwarren_jni} once per JVM, on first use.
 *
 * <p>Order: the file named by the system property {@value #OVERRIDE_PROPERTY}; then {@code
 * System.loadLibrary("warren_jni")} ({@code java.library.path}); then the copy bundled in the
 * jar under {@code io/warren/native/<os>-<arch>/}, extracted to a content-addressed file (its
 * SHA-256 in the name) that is written to a temporary file and atomically renamed, so JVMs
 * that load at the same time never see a partial file and stale copies are harmless. An
 * existing extracted file is used only if its content hash matches.
 *
 * <p>A failure is kept and thrown as a {@link NativeLibraryException} on every use; it is never
 * thrown from a static initializer (which would leave the class unusable with a bare {@code
 * NoClassDefFoundError}).
 *
 * <p>Public only for Warren's other packages ({@code io.warren.ps}), whose classes declare
 * native methods of the same library; not an API.
 */
public final class NativeLoader {
  static final String LIB_NAME = "warren_jni";
  static final String OVERRIDE_PROPERTY = "warren.native.lib";
  /** Where the bundled copy is extracted; default {@code java.io.tmpdir}. */
  static final String TMPDIR_PROPERTY = "warren.native.tmpdir";

  private static volatile boolean loaded;
  private static NativeLibraryException failure;
  private static String loadedFrom;

  private NativeLoader() {}

  static boolean isLoaded() {
    return loaded;
  }

  /** Where the library came from (for diagnostics); null before it is loaded. */
  static synchronized String loadedFrom() {
    return loadedFrom;
  }

  /**
   * Loads the library if needed.
   *
   * @throws NativeLibraryException if it cannot be loaded (now or in an earlier attempt)
   */
  public static void ensureLoaded() {
    if (loaded) {
      return;
    }
    synchronized (NativeLoader.class) {
      if (loaded) {
        return;
      }
      if (failure != null) {
        throw new NativeLibraryException(failure.getMessage(), failure.getCause());
      }
      List<String> tried = new ArrayList<>();
      try {
        loadedFrom = load(tried);
        checkVersion(loadedFrom);
        Native.init(NativeLog.enabledLevel());
        loaded = true;
      } catch (Throwable t) {
        failure = new NativeLibraryException(explain(tried, t), t);
        throw new NativeLibraryException(failure.getMessage(), t);
      }
    }
  }

  private static String load(List<String> tried) throws IOException {
    String override = System.getProperty(OVERRIDE_PROPERTY);
    if (override != null && !override.isEmpty()) {
      tried.add("-D" + OVERRIDE_PROPERTY + "=" + override);
      System.load(Paths.get(override).toAbsolutePath().toString());
      return override + " (-D" + OVERRIDE_PROPERTY + ")";
    }
    try {
      System.loadLibrary(LIB_NAME);
      return "java.library.path";
    } catch (UnsatisfiedLinkError e) {
      tried.add(
          "java.library.path="
              + System.getProperty("java.library.path")
              + ": "
              + e.getMessage());
    }
    String platform = platform();
    String resource = resourcePath(platform);
    tried.add("bundled resource /" + resource);
    try (InputStream in = NativeLoader.class.getClassLoader().getResourceAsStream(resource)) {
      if (in == null) {
        throw new IOException(
            "the jar has no native library for " + platform + " (/" + resource + ")");
      }
      Path file = extract(in.readAllBytes(), extractDir());
      System.load(file.toString());
      removeStaleCopies(file);
      return file + " (bundled)";
    }
  }

  /** The version of {@code libwarren_jni} this jar was built for. */
  static String expectedVersion() throws IOException {
    try (InputStream in =
        NativeLoader.class.getClassLoader().getResourceAsStream("io/warren/native/warren-jni.version")) {
      return in == null ? null : new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
    }
  }

  private static void checkVersion(String from) throws IOException {
    String want = expectedVersion();
    String got = Native.version();
    if (want != null && !want.equals(got)) {
      throw new UnsatisfiedLinkError(
          "the library loaded from "
              + from
              + " is version "
              + got
              + " but this jar needs "
              + want
              + " (an old copy on java.library.path or -D"
              + OVERRIDE_PROPERTY
              + "?)");
    }
  }

  private static String explain(List<String> tried, Throwable t) {
    String missing = missingSlf4j(t);
    if (missing != null) {
      return "Warren's native library was loaded from "
          + loadedFrom
          + " but Warren could not start its logging: the class "
          + missing
          + " is not on the classpath. Warren logs through SLF4J: add the jar org.slf4j:slf4j-api"
          + " (2.x) to the classpath, and a provider such as org.slf4j:slf4j-simple to see the"
          + " lines (Spark and Flink bring both). Last error: "
          + t;
    }
    return "Warren's native library could not be loaded on os.name="
        + System.getProperty("os.name")
        + ", os.arch="
        + System.getProperty("os.arch")
        + " (platform "
        + safePlatform()
        + "). Tried: "
        + String.join("; ", tried)
        + ". Last error: "
        + t
        + ". To fix: build it with `cargo build --release -p warren-jni` (or `make jvm`) and"
        + " either rebuild the jar (it bundles target/release/"
        + System.mapLibraryName(LIB_NAME)
        + ") or run with -D"
        + OVERRIDE_PROPERTY
        + "=/path/to/"
        + System.mapLibraryName(LIB_NAME)
        + ".";
  }

  /**
   * The SLF4J class whose absence {@code t} (or one of its causes) reports, in dotted form; null
   * when {@code t} is about something else.
   */
  static String missingSlf4j(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof NoClassDefFoundError || c instanceof ClassNotFoundException) {
        String name = String.valueOf(c.getMessage()).replace('/', '.');
        if (name.startsWith("org.slf4j.")) {
          return name;
        }
      }
    }
    return null;
  }

  private static String safePlatform() {
    try {
      return platform();
    } catch (RuntimeException e) {
      return "unknown";
    }
  }

  /** {@code <os>-<arch>} of this JVM, e.g. {@code linux-x86_64}. */
  static String platform() {
    return os(System.getProperty("os.name", "")) + "-" + arch(System.getProperty("os.arch", ""));
  }

  /** Normalises {@code os.name}: linux, osx, windows, or the lower-cased name. */
  static String os(String osName) {
    String n = osName.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]", "");
    if (n.startsWith("linux")) {
      return "linux";
    } else if (n.startsWith("mac") || n.startsWith("osx") || n.startsWith("darwin")) {
      return "osx";
    } else if (n.startsWith("windows")) {
      return "windows";
    }
    return n.isEmpty() ? "unknown" : n;
  }

  /** Normalises {@code os.arch}: x86_64, aarch64, or the lower-cased name. */
  static String arch(String osArch) {
    String a = osArch.toLowerCase(Locale.ROOT);
    switch (a) {
      case "amd64":
      case "x86_64":
      case "x86-64":
      case "x64":
        return "x86_64";
      case "aarch64":
      case "arm64":
        return "aarch64";
      default:
        return a.isEmpty() ? "unknown" : a;
    }
  }

  /** Path of the bundled library inside the jar for {@code platform}. */
  static String resourcePath(String platform) {
    return "io/warren/native/" + platform + "/" + System.mapLibraryName(LIB_NAME);
  }

  static Path extractDir() {
    String base = System.getProperty(TMPDIR_PROPERTY, System.getProperty("java.io.tmpdir"));
    String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_");
    return Paths.get(base, "warren-native-" + user);
  }

  /**
   * Writes {@code bytes} to {@code dir/<libname>-<sha256>.<ext>} unless a file with that
   * content is already there, and returns its path. Safe to call from several threads and
   * processes at once: each writes its own temporary file and renames it atomically.
   */
  static Path extract(byte[] bytes, Path dir) throws IOException {
    String hash = sha256(bytes);
    String mapped = System.mapLibraryName(LIB_NAME);
    int dot = mapped.lastIndexOf('.');
    String name = mapped.substring(0, dot) + "-" + hash.substring(0, 32) + mapped.substring(dot);
    Files.createDirectories(dir);
    Path target = dir.resolve(name);
    if (Files.isRegularFile(target)
        && Files.size(target) == bytes.length
        && sha256(Files.readAllBytes(target)).equals(hash)) {
      return target;
    }
    Path tmp = Files.createTempFile(dir, "." + name + ".", ".tmp");
    try {
      Files.write(tmp, bytes);
      try {
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
      }
    } finally {
      Files.deleteIfExists(tmp);
    }
    return target;
  }

  /**
   * Best effort: deletes other versions' copies and abandoned temporary files older than a
   * day in the extraction directory. A copy another JVM has loaded stays usable after its
   * name is removed (on POSIX systems; elsewhere the delete fails and is ignored).
   */
  static void removeStaleCopies(Path keep) {
    String prefix = System.mapLibraryName(LIB_NAME);
    prefix = prefix.substring(0, prefix.lastIndexOf('.')) + "-";
    long dayAgo = System.currentTimeMillis() - 24L * 3600 * 1000;
    try (var files = Files.list(keep.getParent())) {
      for (Path p : (Iterable<Path>) files::iterator) {
        String n = p.getFileName().toString();
        boolean ours = n.startsWith(prefix) || n.startsWith("." + prefix);
        if (ours && !p.equals(keep) && Files.getLastModifiedTime(p).toMillis() < dayAgo) {
          Files.deleteIfExists(p);
        }
      }
    } catch (IOException | RuntimeException e) {
      // Stale copies are harmless; never fail a load over them.
    }
  }

  static String sha256(byte[] bytes) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from this JVM", e);
    }
  }
}

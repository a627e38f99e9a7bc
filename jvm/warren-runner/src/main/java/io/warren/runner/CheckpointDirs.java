package io.warren.runner;

import java.io.File;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.Locale;
import java.util.Optional;

/**
 * Where a fail-all run's durable checkpoints go: a directory the native library writes itself
 * (a local path, a {@code file:} URI, a Windows drive letter), or one of another file system,
 * reached through Hadoop's {@code FileSystem} ({@link HadoopCheckpoints}). No Hadoop class here,
 * so an engine without Hadoop on its class path can still tell the two apart.
 */
public final class CheckpointDirs {
  private CheckpointDirs() {}

  /**
   * Whether {@code dir} is written by the native library directly.
   *
   * @param dir a {@code checkpointDir} setting or a run directory
   * @return true for a local path or a {@code file:} URI
   */
  public static boolean isLocal(String dir) {
    return localDirectory(dir).isPresent();
  }

  /**
   * The directory {@code dir} names on the local file system, if it is local.
   *
   * @param dir a {@code checkpointDir} setting or a run directory
   * @return the local directory (a {@code file:} URI's path), or empty for another file system
   */
  public static Optional<File> localDirectory(String dir) {
    String scheme = scheme(dir);
    if (scheme == null || scheme.length() == 1) {
      return Optional.of(new File(dir)); // no scheme, or a Windows drive letter
    }
    if (scheme.equals("file")) {
      return Optional.of(new File(URI.create(dir).getPath()));
    }
    return Optional.empty();
  }

  private static String scheme(String dir) {
    try {
      String s = new URI(dir).getScheme();
      return s == null ? null : s.toLowerCase(Locale.ROOT);
    } catch (URISyntaxException e) {
      return null; // a plain path with characters a URI refuses
    }
  }

  /**
   * Removes a local run directory and the checkpoint files in it (best effort).
   *
   * @param dir the run directory
   */
  public static void removeLocal(File dir) {
    File[] files = dir.listFiles();
    if (files != null) {
      for (File f : files) {
        f.delete();
      }
    }
    dir.delete();
  }
}

package io.warren;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Encryption in transit (TLS 1.3) for the endpoints this JVM starts or connects: a {@link
 * Tracker}, a {@link Master} and its {@link MasterClient}s, parameter servers ({@code
 * io.warren.ps.PsServer}) and their clients. Off by default. A {@link Communicator} takes the
 * same settings among its worker settings ({@link #workerSettings()}); every process of a job
 * must agree: a TLS end and a plain end refuse each other at once with an error naming the TLS
 * mismatch.
 *
 * <ul>
 *   <li>{@link #jobSecret()}: keyed from the job secret, nothing to set up. Each server presents
 *       an ephemeral certificate; inside the encrypted channel both ends prove that they hold
 *       the job secret, bound to that channel (a man in the middle can neither relay nor forge
 *       the proofs).
 *   <li>{@link #certificates(Path, Path, Path)}: user certificates (mutual TLS). Every end
 *       presents its certificate and checks the other's chain against the authorities in the
 *       CA bundle; host names are not checked. The files are read by each process that uses the
 *       settings, so they must exist at the same paths on every host of the job. The job
 *       secret is still proven inside the channel.
 * </ul>
 *
 * <p>These are the worker settings {@code WARREN_TLS}, {@code WARREN_TLS_CA}, {@code
 * WARREN_TLS_CERT} and {@code WARREN_TLS_KEY}, checked by the native library with the same rules
 * as a worker's: an invalid combination (certificates without {@code WARREN_TLS=1}, only some of
 * the three paths) or an unreadable file fails where they are used with a {@link
 * WarrenConfigException} naming it. Immutable and serializable (a Spark or Flink closure can
 * carry it to the workers).
 */
public final class TlsSettings implements java.io.Serializable {
  private static final long serialVersionUID = 1L;

  /** Worker setting: {@code 1} to encrypt every connection that can leave a host. */
  public static final String TLS_KEY = "WARREN_TLS";
  /** Worker setting: PEM bundle of the authorities that sign every end's certificate. */
  public static final String CA_KEY = "WARREN_TLS_CA";
  /** Worker setting: PEM certificate chain this process presents. */
  public static final String CERT_KEY = "WARREN_TLS_CERT";
  /** Worker setting: PEM private key of the certificate (PKCS#8, PKCS#1 or SEC1). */
  public static final String KEY_KEY = "WARREN_TLS_KEY";

  /** Every TLS key, in this order. */
  private static final List<String> KEYS = List.of(TLS_KEY, CA_KEY, CERT_KEY, KEY_KEY);

  /** Plain TCP (the default). */
  public static final TlsSettings OFF = new TlsSettings(Map.of());

  /** The {@code WARREN_TLS*} settings, in {@link #KEYS} order. */
  private final Map<String, String> settings;

  private TlsSettings(Map<String, String> settings) {
    this.settings = settings;
  }

  /**
   * TLS keyed from the job secret ({@code WARREN_TLS=1} alone).
   *
   * @return the settings
   */
  public static TlsSettings jobSecret() {
    return new TlsSettings(Map.of(TLS_KEY, "1"));
  }

  /**
   * TLS with user certificates (mutual TLS).
   *
   * @param ca PEM bundle of the trusted authorities
   * @param cert PEM certificate chain this process presents
   * @param key PEM private key of {@code cert}
   * @return the settings
   */
  public static TlsSettings certificates(Path ca, Path cert, Path key) {
    Map<String, String> m = new LinkedHashMap<>();
    m.put(TLS_KEY, "1");
    m.put(CA_KEY, Objects.requireNonNull(ca, "ca").toString());
    m.put(CERT_KEY, Objects.requireNonNull(cert, "cert").toString());
    m.put(KEY_KEY, Objects.requireNonNull(key, "key").toString());
    return new TlsSettings(Map.copyOf(m));
  }

  /**
   * The TLS settings among worker settings (the {@code WARREN_TLS*} keys of {@code settings};
   * the others are ignored), as a worker with these settings would use them.
   *
   * @param settings worker settings, such as {@link Tracker#workerSettings(String)}
   * @return the settings ({@link #OFF} if there are none)
   */
  public static TlsSettings fromSettings(Map<String, String> settings) {
    Objects.requireNonNull(settings, "settings");
    Map<String, String> m = new LinkedHashMap<>();
    for (String k : KEYS) {
      String v = settings.get(k);
      if (v != null) {
        m.put(k, v);
      }
    }
    return m.isEmpty() ? OFF : new TlsSettings(Map.copyOf(m));
  }

  /**
   * The worker settings these stand for ({@code WARREN_TLS=1} and the certificate paths, if
   * any): put them among a worker's settings so that it uses TLS alike.
   *
   * @return a new mutable map, empty for {@link #OFF}
   */
  public Map<String, String> workerSettings() {
    Map<String, String> m = new LinkedHashMap<>();
    for (String k : KEYS) {
      String v = settings.get(k);
      if (v != null) {
        m.put(k, v);
      }
    }
    return m;
  }

  /**
   * The settings as the native library takes them: {@code [key0, value0, key1, value1, ...]}.
   * Not an API: for Warren's other packages.
   *
   * @return a new array, empty for {@link #OFF}
   */
  public String[] flat() {
    List<String> out = new ArrayList<>();
    workerSettings().forEach((k, v) -> {
      out.add(k);
      out.add(v);
    });
    return out.toArray(new String[0]);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TlsSettings t && t.settings.equals(settings);
  }

  @Override
  public int hashCode() {
    return settings.hashCode();
  }

  @Override
  public String toString() {
    return settings.isEmpty() ? "TlsSettings[off]" : "TlsSettings" + workerSettings();
  }
}

package io.warren.runner;

import java.util.Map;
import java.util.Optional;

/**
 * One setting of a Warren run, named without any engine's prefix ({@code timeout}); each
 * engine shows it under its own ({@code spark.warren.timeout}, {@code warren.timeout}).
 *
 * @param name the key without a prefix
 * @param kind its type and accepted values
 * @param defaultValue its value when absent (null: absent means "not set", see {@code
 *     defaultDoc})
 * @param defaultDoc the default as the docs show it
 * @param worker the {@code WARREN_*} worker setting it becomes, or null
 * @param doc one line: what it does
 * @param <T> the parsed type
 */
public record Setting<T>(
    String name, SettingType<T> kind, T defaultValue, String defaultDoc, String worker, String doc) {

  /**
   * Its value in {@code raw} (keys without a prefix), else its default.
   *
   * @param raw the run's settings
   * @param prefix the engine's prefix, for the error message
   * @return the value, or empty if absent and without a default
   * @throws RunnerException naming the setting, the value and what it accepts
   */
  public Optional<T> from(Map<String, String> raw, String prefix) {
    String v = raw.get(name);
    return v == null ? Optional.ofNullable(defaultValue) : Optional.of(parse(v, prefix));
  }

  /**
   * Parses one value of this setting.
   *
   * @param value the value as given
   * @param prefix the engine's prefix, for the error message
   * @return the value
   * @throws RunnerException naming the setting, the value and what it accepts
   */
  public T parse(String value, String prefix) {
    return kind.parse(value)
        .orElseThrow(
            () ->
                new RunnerException(
                    prefix + name + " = \"" + value + "\": expected " + kind.expected(), null));
  }
}

package io.warren.runner;

import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Function;

/**
 * The type of a setting: parses a raw value, and says what it accepts.
 *
 * @param <T> the parsed type
 */
public final class SettingType<T> {
  private final String expected;
  private final Function<String, Optional<T>> parser;

  private SettingType(String expected, Function<String, Optional<T>> parser) {
    this.expected = expected;
    this.parser = parser;
  }

  /**
   * What a valid value is, for error messages and the docs ("an integer in 0..1000").
   *
   * @return the description
   */
  public String expected() {
    return expected;
  }

  /**
   * Parses a raw value.
   *
   * @param raw the value as given
   * @return the value, or empty if it is not one {@link #expected()} accepts
   */
  public Optional<T> parse(String raw) {
    return parser.apply(raw.trim());
  }

  /**
   * A whole number in {@code min..max}.
   *
   * @param min the smallest accepted value
   * @param max the largest accepted value
   * @return the type
   */
  public static SettingType<Integer> intIn(int min, int max) {
    return new SettingType<>(
        "an integer in " + min + ".." + max,
        s -> {
          try {
            int v = Integer.parseInt(s);
            return v >= min && v <= max ? Optional.of(v) : Optional.empty();
          } catch (NumberFormatException e) {
            return Optional.empty();
          }
        });
  }

  /**
   * A number of seconds, at most {@code max}, and above 0 ({@code positive}) or at least 0.
   *
   * @param positive whether 0 is refused
   * @param max the largest accepted value
   * @return the type
   */
  public static SettingType<Double> seconds(boolean positive, double max) {
    String m = fmt(max);
    return new SettingType<>(
        positive ? "a number of seconds > 0 and <= " + m : "a number of seconds in 0.." + m,
        s -> {
          try {
            double v = Double.parseDouble(s);
            boolean ok = !Double.isNaN(v) && v <= max && (positive ? v > 0 : v >= 0);
            return ok ? Optional.of(v) : Optional.empty();
          } catch (NumberFormatException e) {
            return Optional.empty();
          }
        });
  }

  /**
   * {@code true} or {@code false} (also {@code 1}/{@code 0}, {@code yes}/{@code no}, {@code
   * on}/{@code off}, as the native library accepts).
   *
   * @return the type
   */
  public static SettingType<Boolean> bool() {
    return new SettingType<>(
        "true or false",
        s -> {
          switch (s.toLowerCase(Locale.ROOT)) {
            case "true", "1", "yes", "on" -> {
              return Optional.of(true);
            }
            case "false", "0", "no", "off" -> {
              return Optional.of(false);
            }
            default -> {
              return Optional.empty();
            }
          }
        });
  }

  /**
   * One of {@code values} (case-insensitive; the value is returned in lower case).
   *
   * @param values the accepted values, in lower case
   * @return the type
   */
  public static SettingType<String> oneOf(String... values) {
    List<String> vs = List.of(values);
    return new SettingType<>(
        "one of " + String.join(", ", vs),
        s -> Optional.of(s.toLowerCase(Locale.ROOT)).filter(vs::contains));
  }

  /**
   * Any non-empty text (trimmed).
   *
   * @return the type
   */
  public static SettingType<String> text() {
    return new SettingType<>("a non-empty string", s -> Optional.of(s).filter(x -> !x.isEmpty()));
  }

  private static String fmt(double d) {
    return d == Math.floor(d) ? Long.toString((long) d) : Double.toString(d);
  }
}

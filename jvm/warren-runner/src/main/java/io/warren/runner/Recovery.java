package io.warren.runner;

/** How a Warren run survives a lost worker (the {@code recovery} setting). */
public enum Recovery {
  /** The engine re-runs only the failed worker; it catches up from its peers. */
  RETRY_ONE("retry-one"),
  /** The engine re-runs every worker; they resume from the last durable checkpoint. */
  FAIL_ALL("fail-all");

  private final String value;

  Recovery(String value) {
    this.value = value;
  }

  /**
   * The setting's value.
   *
   * @return {@code retry-one} or {@code fail-all}
   */
  public String value() {
    return value;
  }

  /**
   * The strategy a (validated) setting names.
   *
   * @param value {@code retry-one} or {@code fail-all}, any case
   * @return the strategy
   * @throws IllegalArgumentException for any other value
   */
  public static Recovery of(String value) {
    for (Recovery r : values()) {
      if (r.value.equalsIgnoreCase(value.trim())) {
        return r;
      }
    }
    throw new IllegalArgumentException("recovery = " + value + ": must be retry-one or fail-all");
  }
}

package io.warren;

import java.util.Objects;

/**
 * What a collective call says besides its data: whether it is a <em>bootstrap</em> call (and
 * under which key), and a tag every worker must pass alike. Immutable; {@link #defaults()} is a
 * plain call with no tag.
 *
 * <pre>{@code
 * comm.allreduce(dims, Op.MAX, CallOptions.bootstrap());         // keyed by this line
 * comm.broadcast(seed, 0, CallOptions.bootstrap().withKey("seed")); // keyed by "seed"
 * comm.allreduce(grad, Op.SUM, CallOptions.defaults().withTag(7));
 * }</pre>
 *
 * <p>A bootstrap call is made once before the first checkpoint (a feature count, a seed): its
 * result is kept for the whole job and served to a restarted worker by key (unless {@code
 * WARREN_BOOTSTRAP_CACHE=0}). Each use of one key gets the next count ({@code key#0}, {@code
 * key#1}, ...), so a key used in a loop still names every call, as long as every worker makes
 * the calls in the same order. Workers passing different keys or tags get a {@link
 * CollectiveMismatchException}.
 */
public final class CallOptions {
  private static final CallOptions DEFAULTS = new CallOptions(null, 0);

  /** The bootstrap key; null for an ordinary call. */
  private final String key;

  private final int tag;

  private CallOptions(String key, int tag) {
    this.key = key;
    this.tag = tag;
  }

  /**
   * A plain call with no tag (what the calls without options use).
   *
   * @return the default options
   */
  public static CallOptions defaults() {
    return DEFAULTS;
  }

  /**
   * A bootstrap call keyed by the code that calls this method (class, method and line, from the
   * stack), which is the same in every JVM running the same code: build the options where the
   * call is made. Use {@link #withKey(String)} where that place does not tell calls apart (a
   * helper called from several places).
   *
   * @return bootstrap options with no tag
   */
  public static CallOptions bootstrap() {
    return new CallOptions(callSite(), 0);
  }

  /**
   * These options as a bootstrap call under an explicit key.
   *
   * @param key the bootstrap key, the same on every worker; not empty
   * @return the new options (the tag is kept)
   * @throws IllegalArgumentException if {@code key} is empty
   */
  public CallOptions withKey(String key) {
    Objects.requireNonNull(key, "key");
    if (key.isEmpty()) {
      throw new IllegalArgumentException("a bootstrap key may not be empty");
    }
    return new CallOptions(key, tag);
  }

  /**
   * These options with a tag that every worker must pass alike: an identity of what the call
   * means, so that workers at different calls of the same shape are told so. 0 is no tag.
   *
   * @param tag any value (all 32 bits count)
   * @return the new options (the bootstrap key is kept)
   */
  public CallOptions withTag(int tag) {
    return new CallOptions(key, tag);
  }

  /**
   * Whether these options make a bootstrap call.
   *
   * @return true for {@link #bootstrap()} and options {@link #withKey(String) with a key}
   */
  public boolean isBootstrap() {
    return key != null;
  }

  /**
   * The bootstrap key: the explicit key, or the call site of {@link #bootstrap()}.
   *
   * @return the key, or null for an ordinary call
   */
  public String key() {
    return key;
  }

  /**
   * The tag.
   *
   * @return the tag; 0 for none
   */
  public int tag() {
    return tag;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CallOptions
        && Objects.equals(key, ((CallOptions) o).key)
        && tag == ((CallOptions) o).tag;
  }

  @Override
  public int hashCode() {
    return Objects.hashCode(key) * 31 + tag;
  }

  @Override
  public String toString() {
    return "CallOptions[" + (key == null ? "plain" : "bootstrap " + key) + ", tag " + tag + "]";
  }

  /**
   * The first stack frame outside this class, as {@code class#method:line}: the same in every
   * JVM running the same code.
   */
  private static String callSite() {
    return StackWalker.getInstance()
        .walk(
            frames ->
                frames
                    .filter(f -> !f.getClassName().equals(CallOptions.class.getName()))
                    .findFirst()
                    .map(f -> f.getClassName() + "#" + f.getMethodName() + ":" + f.getLineNumber())
                    .orElse("unknown"));
  }
}

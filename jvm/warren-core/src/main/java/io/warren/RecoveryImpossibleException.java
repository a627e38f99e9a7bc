package io.warren;

import java.util.Arrays;
import java.util.List;

/**
 * Recovery cannot proceed: the data a restarted worker needs is held by no live worker (every
 * replica of a local model lost, or calls from before the last checkpoint that were not
 * bootstrap calls). Raised on every worker; {@link #lostTaskIds()} names the workers whose loss
 * made it impossible.
 */
public class RecoveryImpossibleException extends WarrenException {
  private static final long serialVersionUID = 1L;

  private final List<String> lostTaskIds;
  private final String reason;

  /**
   * Creates the exception without fields ({@link #lostTaskIds()} is empty).
   *
   * @param message what went wrong, as reported by the native library
   */
  public RecoveryImpossibleException(String message) {
    this(message, (Throwable) null);
  }

  /**
   * Creates the exception with a cause, without fields.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public RecoveryImpossibleException(String message, Throwable cause) {
    super(message, cause);
    this.lostTaskIds = List.of();
    this.reason = message;
  }

  /**
   * Creates the exception with its fields (as the native library does).
   *
   * @param message the full message
   * @param lostTaskIds task ids of the workers whose loss made recovery impossible
   * @param reason what is missing, by rank
   */
  public RecoveryImpossibleException(String message, String[] lostTaskIds, String reason) {
    super(message);
    this.lostTaskIds = List.copyOf(Arrays.asList(lostTaskIds));
    this.reason = reason;
  }

  /**
   * The task ids of the workers whose loss made recovery impossible (the restarted workers, or
   * every worker that kept a copy of what is now missing).
   *
   * @return the task ids, possibly empty, never {@code null}
   */
  public List<String> lostTaskIds() {
    return lostTaskIds;
  }

  /**
   * What is missing, by rank, and how to avoid it.
   *
   * @return the reason
   */
  public String reason() {
    return reason;
  }
}

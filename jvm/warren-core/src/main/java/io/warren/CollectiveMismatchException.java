package io.warren;

/**
 * Workers called a collective with different arguments (size, type, operator, root or call
 * order). Thrown on every worker; {@link #first()} and {@link #second()} are the two
 * declarations that disagree.
 */
public class CollectiveMismatchException extends WarrenException {
  private static final long serialVersionUID = 1L;

  private final CallDeclaration first;
  private final CallDeclaration second;
  private final String context;

  /**
   * Creates the exception without declarations ({@link #first()} is {@code null}).
   *
   * @param message what went wrong, as reported by the native library
   */
  public CollectiveMismatchException(String message) {
    this(message, (Throwable) null);
  }

  /**
   * Creates the exception with a cause, without declarations.
   *
   * @param message what went wrong
   * @param cause the underlying error
   */
  public CollectiveMismatchException(String message, Throwable cause) {
    super(message, cause);
    this.first = null;
    this.second = null;
    this.context = "";
  }

  /**
   * Creates the exception with both declarations (as the native library does).
   *
   * @param message the full message
   * @param first the first declaration
   * @param second the declaration that disagrees with it
   * @param context where the disagreement was found (empty if nowhere in particular)
   */
  public CollectiveMismatchException(
      String message, CallDeclaration first, CallDeclaration second, String context) {
    super(message);
    this.first = first;
    this.second = second;
    this.context = context == null ? "" : context;
  }

  /**
   * The first declaration: the detecting worker's own call, or rank 0's after a recovery.
   *
   * @return the declaration, or {@code null} if this exception was created without one
   */
  public CallDeclaration first() {
    return first;
  }

  /**
   * The declaration that disagrees with {@link #first()}.
   *
   * @return the declaration, or {@code null} if this exception was created without one
   */
  public CallDeclaration second() {
    return second;
  }

  /**
   * Where the disagreement was found: {@code "detected by rank 3"}, {@code "bootstrap key
   * collision"}, {@code "after a recovery, at call #2 of version 5"}, ...
   *
   * @return the context, empty if none
   */
  public String context() {
    return context;
  }
}

package io.warren;

/**
 * A reduction operator. The codes are the native library's wire codes ({@code reduce.rs}).
 */
public enum Op {
  /** Sum (wrapping for integers). */
  SUM(1),
  /** Product (wrapping for integers). */
  PROD(2),
  /** Minimum (for floats, a NaN is ignored unless both operands are NaN). */
  MIN(3),
  /** Maximum (for floats, a NaN is ignored unless both operands are NaN). */
  MAX(4),
  /** Bitwise and (integer types only). */
  BIT_AND(5),
  /** Bitwise or (integer types only). */
  BIT_OR(6),
  /** Bitwise xor (integer types only). */
  BIT_XOR(7);

  private final int code;

  Op(int code) {
    this.code = code;
  }

  /**
   * The native wire code of this operator.
   *
   * @return the code, 1 to 7
   */
  public int code() {
    return code;
  }

  /**
   * Whether this operator is defined for {@code type} (bitwise operators are not defined for
   * floating-point types).
   *
   * @param type an element type
   * @return true if {@code allreduce} accepts this pair
   */
  public boolean supports(DataType type) {
    switch (this) {
      case BIT_AND:
      case BIT_OR:
      case BIT_XOR:
        return !type.isFloatingPoint();
      default:
        return true;
    }
  }
}

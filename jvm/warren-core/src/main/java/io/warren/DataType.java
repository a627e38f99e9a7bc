package io.warren;

/**
 * The element type of a buffer given to {@link Communicator#allreduce(java.nio.ByteBuffer,
 * DataType, Op)}. The codes are the native library's wire codes ({@code reduce.rs}). Unsigned
 * types are reduced as unsigned numbers (matters for {@link Op#MIN} and {@link Op#MAX}).
 */
public enum DataType {
  /** Signed 8-bit integer ({@code byte}). */
  I8(1, 1),
  /** Signed 16-bit integer ({@code short}). */
  I16(2, 2),
  /** Signed 32-bit integer ({@code int}). */
  I32(3, 4),
  /** Signed 64-bit integer ({@code long}). */
  I64(4, 8),
  /** Unsigned 8-bit integer. */
  U8(5, 1),
  /** Unsigned 16-bit integer. */
  U16(6, 2),
  /** Unsigned 32-bit integer. */
  U32(7, 4),
  /** Unsigned 64-bit integer. */
  U64(8, 8),
  /** 32-bit IEEE float ({@code float}). */
  F32(9, 4),
  /** 64-bit IEEE float ({@code double}). */
  F64(10, 8);

  private final int code;
  private final int size;

  DataType(int code, int size) {
    this.code = code;
    this.size = size;
  }

  /**
   * The native wire code of this type.
   *
   * @return the code, 1 to 10
   */
  public int code() {
    return code;
  }

  /**
   * Size of one element in bytes.
   *
   * @return 1, 2, 4 or 8
   */
  public int size() {
    return size;
  }

  /**
   * Whether this is {@link #F32} or {@link #F64}.
   *
   * @return true for the floating-point types
   */
  public boolean isFloatingPoint() {
    return this == F32 || this == F64;
  }
}

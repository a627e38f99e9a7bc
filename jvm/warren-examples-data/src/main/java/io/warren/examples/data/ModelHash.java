package io.warren.examples.data;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** The {@code MODEL_HASH} the examples print: equal hashes mean bit-identical models. */
public final class ModelHash {
  private ModelHash() {}

  /**
   * SHA-256 of {@code w} as little-endian doubles, in hex.
   *
   * @param w the weights
   * @return 64 hex digits
   */
  public static String of(double[] w) {
    ByteBuffer b = ByteBuffer.allocate(8 * w.length).order(ByteOrder.LITTLE_ENDIAN);
    for (double x : w) {
      b.putDouble(x);
    }
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b.array()));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}

package io.warren;

import java.nio.file.Path;
import java.util.Objects;

/**
 * Reads the records of a RecordIO file (PaddlePaddle format), or of a dmlc {@code .rec} file
 * (MXNet, XGBoost; detected from its first bytes).
 *
 * <pre>{@code
 * try (RecordIOReader r = RecordIOReader.open(path)) {
 *   for (byte[] rec = r.next(); rec != null; rec = r.next()) { ... }
 * }
 * }</pre>
 *
 * <p>Every chunk's checksum is verified; damage is reported as {@link CorruptDataException}
 * naming the file, chunk and byte offset, after which the reader returns no more records.
 */
public final class RecordIOReader implements AutoCloseable {
  private long handle;

  private RecordIOReader(long handle) {
    this.handle = handle;
  }

  /**
   * Opens {@code path} to read all its records; the format (RecordIO or dmlc) is detected.
   *
   * @param path the file
   * @return the reader; close it
   * @throws WarrenIOException if the file cannot be opened
   * @throws CorruptDataException if its first bytes are not a known format
   */
  public static RecordIOReader open(Path path) {
    Objects.requireNonNull(path, "path");
    NativeLoader.ensureLoaded();
    return new RecordIOReader(Native.rioReaderOpen(path.toString(), -1, -1));
  }

  /**
   * Opens a RecordIO file to read the records {@code [fromRecord, toRecord)} (indices in the
   * file, clamped to it); only the chunks holding them are read.
   *
   * @param path the file
   * @param fromRecord index of the first record, from 0
   * @param toRecord index after the last record
   * @return the reader; close it
   * @throws WarrenIOException if the file cannot be opened
   * @throws CorruptDataException if its chunk headers are damaged
   */
  public static RecordIOReader open(Path path, long fromRecord, long toRecord) {
    Objects.requireNonNull(path, "path");
    if (fromRecord < 0) {
      throw new IllegalArgumentException("fromRecord must not be negative: " + fromRecord);
    }
    NativeLoader.ensureLoaded();
    return new RecordIOReader(Native.rioReaderOpen(path.toString(), fromRecord, toRecord));
  }

  /**
   * The next record.
   *
   * @return its bytes, or null after the last one
   * @throws CorruptDataException if the chunk holding it is damaged
   * @throws WarrenIOException if reading fails
   */
  public synchronized byte[] next() {
    if (handle == 0) {
      throw new IllegalStateException("RecordIOReader is closed");
    }
    return Native.rioReaderNext(handle);
  }

  /** Closes the file. Idempotent. */
  @Override
  public synchronized void close() {
    long h = handle;
    if (h == 0) {
      return;
    }
    handle = 0;
    Native.rioReaderClose(h);
  }
}

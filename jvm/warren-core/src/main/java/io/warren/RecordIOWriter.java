package io.warren;

import java.nio.file.Path;
import java.util.Objects;

/**
 * Writes a RecordIO file (PaddlePaddle's chunked format: records grouped into checksummed,
 * compressed chunks), as Warren's data master and {@code warren recordio} read it.
 *
 * <pre>{@code
 * try (RecordIOWriter w = RecordIOWriter.create(path)) {
 *   w.write(record);
 * }
 * }</pre>
 *
 * <p>{@link #close()} writes the last chunk: records of a writer that is never closed are lost.
 * Not thread-safe beyond the serialisation of its own calls.
 */
public final class RecordIOWriter implements AutoCloseable {
  /** How chunks are compressed. The codes are those stored in chunk headers. */
  public enum Compressor {
    /** Stored as is. */
    NONE(0),
    /** Snappy framing format (PaddlePaddle's default). */
    SNAPPY(1),
    /** Gzip. */
    GZIP(2);

    private final int code;

    Compressor(int code) {
      this.code = code;
    }

    /**
     * The code stored in chunk headers.
     *
     * @return 0, 1 or 2
     */
    public int code() {
      return code;
    }
  }

  /** Default limit on the record bytes of one chunk: 32 MiB, as in PaddlePaddle. */
  public static final long DEFAULT_MAX_CHUNK_BYTES = 32L << 20;

  private long handle;

  private RecordIOWriter(long handle) {
    this.handle = handle;
  }

  /**
   * Creates (or truncates) {@code path} with Snappy compression and 32 MiB chunks.
   *
   * @param path the file to write
   * @return the writer; close it to write the last chunk
   * @throws WarrenIOException if the file cannot be created
   */
  public static RecordIOWriter create(Path path) {
    return create(path, Compressor.SNAPPY, DEFAULT_MAX_CHUNK_BYTES);
  }

  /**
   * Creates (or truncates) {@code path}.
   *
   * @param path the file to write
   * @param compressor how chunks are compressed
   * @param maxChunkBytes a chunk is cut before a record that would make its record bytes
   *     exceed this (a larger record gets a chunk of its own)
   * @return the writer; close it to write the last chunk
   * @throws WarrenIOException if the file cannot be created
   */
  public static RecordIOWriter create(Path path, Compressor compressor, long maxChunkBytes) {
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(compressor, "compressor");
    NativeLoader.ensureLoaded();
    return new RecordIOWriter(
        Native.rioWriterCreate(path.toString(), compressor.code(), maxChunkBytes));
  }

  private long live() {
    if (handle == 0) {
      throw new IllegalStateException("RecordIOWriter is closed");
    }
    return handle;
  }

  /**
   * Appends one record.
   *
   * @param record the record's bytes
   * @throws WarrenIOException if writing a full chunk fails
   */
  public synchronized void write(byte[] record) {
    Objects.requireNonNull(record, "record");
    Native.rioWriterWrite(live(), record, 0, record.length);
  }

  /**
   * Appends {@code record[offset, offset + length)} as one record.
   *
   * @param record an array holding the record
   * @param offset where the record starts
   * @param length its length
   * @throws WarrenIOException if writing a full chunk fails
   */
  public synchronized void write(byte[] record, int offset, int length) {
    Objects.requireNonNull(record, "record");
    Objects.checkFromIndexSize(offset, length, record.length);
    Native.rioWriterWrite(live(), record, offset, length);
  }

  /**
   * The number of records written so far (including those of the unfinished chunk).
   *
   * @return the count
   */
  public synchronized long recordsWritten() {
    return Native.rioWriterRecords(live());
  }

  /**
   * Writes the last chunk and closes the file. Idempotent.
   *
   * @throws WarrenIOException if the last write fails
   */
  @Override
  public synchronized void close() {
    long h = handle;
    if (h == 0) {
      return;
    }
    handle = 0;
    Native.rioWriterClose(h);
  }
}

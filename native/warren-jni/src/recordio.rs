//! Exports behind `io.warren.RecordIOWriter` and `io.warren.RecordIOReader`: RecordIO files
//! (PaddlePaddle format; the reader also reads dmlc `.rec` files). Handles as for the
//! communicator: `Box` pointers released once by the Java side.

use std::fs::File;
use std::io::BufWriter;

use jni::EnvUnowned;
use jni::objects::{JByteArray, JClass, JString};
use jni::sys::{jint, jlong};
use warren::recordio::{self, Compressor, Reader, RecordIter, Writer, WriterOptions};

use crate::errors::{JniError, JniResult, run};
use crate::handle;

/// What a writer handle points to.
pub struct WriterHandle {
    writer: Writer<BufWriter<File>>,
    /// Reused copy of the record being written.
    scratch: Vec<u8>,
}

fn writer<'a>(h: jlong) -> JniResult<&'a mut WriterHandle> {
    handle::exclusive(h, "RecordIOWriter")
}

fn reader<'a>(h: jlong) -> JniResult<&'a mut RecordIter> {
    handle::exclusive(h, "RecordIOReader")
}

fn path_of(env: &jni::Env<'_>, path: &JString<'_>) -> JniResult<String> {
    if path.is_null() {
        return Err(JniError::Argument("path is null".into()));
    }
    Ok(path.try_to_string(env)?)
}

/// Creates (or truncates) a RecordIO file. `compressor`: 0 none, 1 snappy, 2 gzip.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_rioWriterCreate<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
    compressor: jint,
    max_chunk_bytes: jlong,
) -> jlong {
    run(&mut env, |env| {
        let path = path_of(env, &path)?;
        let compressor = u32::try_from(compressor)
            .ok()
            .and_then(Compressor::from_code)
            .ok_or_else(|| JniError::Argument(format!("unknown compressor code {compressor}")))?;
        let max_chunk_bytes = usize::try_from(max_chunk_bytes)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| JniError::Argument(format!("maxChunkBytes {max_chunk_bytes} must be positive")))?;
        let opts = WriterOptions { max_chunk_bytes, compressor };
        let writer = Writer::create(&path, opts)?;
        Ok(handle::into_handle(WriterHandle { writer, scratch: Vec::new() }))
    })
}

/// Appends `data[off..off + len]` as one record.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_rioWriterWrite<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    data: JByteArray<'l>,
    off: jint,
    len: jint,
) {
    run(&mut env, |env| {
        let w = writer(h)?;
        if data.is_null() {
            return Err(JniError::Argument("record is null".into()));
        }
        let total = data.len(env)?;
        let (Ok(o), Ok(n)) = (usize::try_from(off), usize::try_from(len)) else {
            return Err(JniError::Argument(format!("negative range {off}+{len}")));
        };
        if o.checked_add(n).is_none_or(|end| end > total) {
            return Err(JniError::Argument(format!("range {o}+{n} is past the array's length {total}")));
        }
        w.scratch.resize(n, 0);
        let buf: &mut [i8] = bytemuck::cast_slice_mut(&mut w.scratch[..]);
        data.get_region(env, off, buf)?;
        w.writer.write(&w.scratch)?;
        Ok(())
    })
}

/// Records written so far.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_rioWriterRecords<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> jlong {
    run(&mut env, |_| Ok(writer(h)?.writer.records_written() as jlong))
}

/// Writes the last chunk, flushes, closes the file and frees the handle (freed even if the
/// final write fails; the error is then thrown).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_rioWriterClose<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| {
        if let Some(w) = handle::release::<WriterHandle>(h) {
            w.writer.finish()?;
        }
        Ok(())
    })
}

/// Opens a record file for reading. With `from < 0`, every record of a RecordIO or dmlc
/// file (format detected); otherwise records `[from, to)` of a RecordIO file (only the chunks
/// holding them are read).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_rioReaderOpen<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
    from: jlong,
    to: jlong,
) -> jlong {
    run(&mut env, |env| {
        let path = path_of(env, &path)?;
        let iter: RecordIter = if from < 0 {
            recordio::open(&path)?
        } else {
            let to = u64::try_from(to).unwrap_or(0);
            Box::new(Reader::open(&path)?.records_range(from as u64..to))
        };
        Ok(handle::into_handle(iter))
    })
}

/// The next record, or null at the end.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_rioReaderNext<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JByteArray<'l> {
    run(&mut env, |env| match reader(h)?.next() {
        None => Ok(JByteArray::null()),
        Some(r) => Ok(env.byte_array_from_slice(&r?)?),
    })
}

/// Closes the file and frees the handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_rioReaderClose<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| {
        drop(handle::release::<RecordIter>(h));
        Ok(())
    })
}

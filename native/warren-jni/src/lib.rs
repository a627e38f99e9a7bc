//! # warren-jni: the JNI exports behind `io.warren.Native`
//!
//! A thin layer; all logic lives in the `warren` crate.
//!
//! - [`errors`]: the one helper every export runs through ([`errors::run`]): it catches
//!   panics and maps each `warren::Error` *variant* to a Java exception class.
//! - [`logging`]: the `log` crate routed to SLF4J, filtered natively.
//! - [`recordio`]: the exports of `RecordIOWriter` / `RecordIOReader`.
//! - [`master`]: the exports of `Master`, `MasterClient` and `TaskReader`.
//! - [`ps`]: the exports of `io.warren.ps` (`PsServer`, `PsClient`): parameter servers;
//!   `ps_request`: the request object each of those exports takes, read into plain values
//!   and checked apart from the exports; `pull_plan`: a multi-table pull assembled apart
//!   from the JNI, with its tests.
//! - [`view`]: the export of `Communicator.takeViewChange()` (elastic jobs).
//! - [`tls`]: the TLS settings the exports that open a connection or a listener take.
//! - [`handle`]: native objects cross as `long` handles (`Box` pointers) that the Java side
//!   releases explicitly (`commClose`, `trackerClose`, ...); a zero handle raises
//!   `IllegalStateException`. Every dereference of a handle goes through that module, under
//!   the one contract the Java classes keep (calls serialised, the handle zeroed before its
//!   release, so it is never used after).
//! - This file: the exports of `Communicator` and `Tracker`.
//!
//! ## Arrays: copies or critical access
//!
//! A collective blocks until every peer has called it, which can take as long as the slowest
//! worker (up to `WARREN_TIMEOUT_S`). On JDK 17 and 21 a JNI critical region
//! (`GetPrimitiveArrayCritical`) held that long stalls garbage collection in the whole JVM (the
//! GC locker), and a second rank in the same JVM that tries to enter its own critical region
//! while a collection is pending waits for the first to leave it: a deadlock until the
//! deadline (reproduced by `GcPressureTest` in `jvm/warren-core`). There Java arrays are
//! copied (`Get/Set<Type>ArrayRegion`) into a buffer the communicator keeps and reuses, and
//! the collective runs on that buffer with no JNI resource held. An array larger than
//! `WARREN_JNI_ARRAY_SEGMENT_BYTES` (default 1 MiB) is reduced in pieces of that size: each
//! piece is copied in, reduced (one collective call, tagged with the array's length) and
//! copied out while it is still in the CPU cache (`docs/benchmarks-jvm.md`). A failed call may
//! leave some pieces reduced (the communicator is unusable after a failure anyway).
//!
//! From JDK 22, G1 pins only the heap region holding an array in a critical region (JEP 423)
//! and collects the rest as usual, so neither hazard exists: there the Java side's default
//! (`WARREN_JNI_ARRAY_ACCESS=auto`, resolved by `io.warren.ArrayAccess`) asks for critical
//! access, and the collective runs on the array itself, with no copy. `copy` and `critical`
//! force either; critical access is also used in a world of one, where no call waits on a
//! peer. Direct `ByteBuffer`s are never copied.
#![deny(missing_docs)]

pub mod errors;
mod handle;
pub mod logging;
pub mod master;
pub mod ps;
mod ps_request;
mod pull_plan;
pub mod recordio;
mod string_array;
mod strings;
mod tls;
pub mod view;

use std::collections::HashMap;
use std::time::Duration;

use jni::elements::ReleaseMode;
use jni::objects::{
    JByteArray, JByteBuffer, JClass, JDoubleArray, JFloatArray, JIntArray, JLongArray, JObjectArray, JPrimitiveArray,
    JString, TypeArray,
};
use jni::sys::{jint, jlong};
use jni::{Env, EnvUnowned};
use warren::membership::Limits;
use warren::{CallOptions, Communicator, DataType, Element, Op, Tracker, TrackerConfig};

use errors::{JniError, JniResult, run};
use string_array::string_array;

/// Map key choosing how Java arrays reach a collective: `copy` or `critical` (the Java side
/// resolves its default, `auto`, to one of them before it creates the communicator).
pub const ARRAY_ACCESS_KEY: &str = warren::config::keys::JNI_ARRAY_ACCESS;

/// Map key of the piece size (bytes) in which copied Java arrays are reduced (default
/// [`DEFAULT_SEGMENT_BYTES`]; the same on every rank).
pub const ARRAY_SEGMENT_KEY: &str = warren::config::keys::JNI_ARRAY_SEGMENT_BYTES;

/// Default piece size of a copied Java array: 1 MiB.
pub const DEFAULT_SEGMENT_BYTES: usize = 1 << 20;

/// The tag of every piece of a segmented allreduce of `total_bytes` under the caller's `tag`:
/// non-zero (unsegmented calls without a tag have tag 0) and different for different lengths,
/// so ranks whose arrays differ in length get a mismatch error instead of pairing pieces of
/// different calls (and, with the caller's tag mixed in, ranks passing different tags too).
fn segment_tag(total_bytes: usize, tag: u32) -> u32 {
    let h =
        (total_bytes as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(tag).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    ((h >> 32) as u32) | 1
}

/// What a communicator handle points to.
pub struct CommHandle {
    comm: Communicator,
    /// Reused copy buffer for Java arrays (u64 words, so aligned for every element type).
    scratch: Vec<u64>,
    /// Whether every array call uses critical access (`WARREN_JNI_ARRAY_ACCESS=critical`).
    always_critical: bool,
    /// Piece size of copied arrays in bytes (`WARREN_JNI_ARRAY_SEGMENT_BYTES`).
    segment_bytes: usize,
}

fn comm<'a>(h: jlong) -> JniResult<&'a mut CommHandle> {
    handle::exclusive(h, "Communicator")
}

fn tracker<'a>(h: jlong) -> JniResult<&'a Tracker> {
    handle::shared(h, "Tracker")
}

fn op_from(code: jint) -> JniResult<Op> {
    u8::try_from(code)
        .ok()
        .and_then(Op::from_code)
        .filter(|o| *o != Op::User)
        .ok_or_else(|| JniError::Argument(format!("unknown reduction operator code {code}")))
}

fn dtype_from(code: jint) -> JniResult<DataType> {
    u8::try_from(code)
        .ok()
        .and_then(DataType::from_code)
        .filter(|d| *d != DataType::User)
        .ok_or_else(|| JniError::Argument(format!("unknown data type code {code}")))
}

fn root_from(root: jint) -> JniResult<usize> {
    usize::try_from(root).map_err(|_| JniError::Argument(format!("root {root} is negative")))
}

/// `[offset, offset + len)` of a direct buffer as a mutable byte slice.
fn direct_slice<'a>(env: &Env<'_>, buf: &JByteBuffer<'_>, offset: jlong, len: jlong) -> JniResult<&'a mut [u8]> {
    if buf.is_null() {
        return Err(JniError::Argument("buffer is null".into()));
    }
    let addr = env
        .get_direct_buffer_address(buf)
        .map_err(|_| JniError::Argument("the ByteBuffer is not direct (use ByteBuffer.allocateDirect)".into()))?;
    let cap = env.get_direct_buffer_capacity(buf)?;
    let (Ok(off), Ok(n)) = (usize::try_from(offset), usize::try_from(len)) else {
        return Err(JniError::Argument(format!("negative range {offset}+{len}")));
    };
    if off.checked_add(n).is_none_or(|end| end > cap) {
        return Err(JniError::Argument(format!("range {off}+{n} is past the buffer's capacity {cap}")));
    }
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: the range lies inside the buffer's memory, which stays valid while the Java
    // caller holds the buffer (it does for the duration of the native call).
    Ok(unsafe { std::slice::from_raw_parts_mut(addr.add(off), n) })
}

/// Installs the SLF4J bridge and sets the native log level (codes as in `NativeLog`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_init<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, log_level: jint) {
    run(&mut env, |env| Ok(logging::install(env, log_level)?))
}

/// Changes the native log level.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_setLogLevel<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    log_level: jint,
) {
    run(&mut env, |_| {
        log::set_max_level(logging::level_filter(log_level));
        Ok(())
    })
}

/// The version of this library (the crate version), to check the jar and library match.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_version<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>) -> JString<'l> {
    run(&mut env, |env| Ok(env.new_string(env!("CARGO_PKG_VERSION"))?))
}

/// A new cancel handle ([`warren::CancelHandle`]), released by `cancelFree`: the one cancel of
/// every Java class whose calls block (`io.warren.CallCanceller`). A `Communicator` makes one
/// before joining and a `PsClient` before connecting, so that this and every later call can be
/// cancelled.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_cancelCreate<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>) -> jlong {
    run(&mut env, |_| Ok(handle::into_handle(warren::CancelHandle::new())))
}

/// Cancels the communicator or client of cancel handle `ch` with `reason` (null:
/// "cancelled"): its running call (on another thread) fails with `CollectiveAbortedException`
/// within milliseconds, and so does every later call. Never blocks (takes the cancel handle
/// shared, not the object).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_cancel<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    ch: jlong,
    reason: JString<'l>,
) {
    run(&mut env, |env| {
        let cancel = handle::shared::<warren::CancelHandle>(ch, "CallCanceller")?;
        let reason = if reason.is_null() { "cancelled".to_string() } else { reason.try_to_string(env)? };
        cancel.cancel(&reason);
        Ok(())
    })
}

/// Why the communicator of cancel handle `ch` was fenced (the tracker fenced it, or it took
/// itself for cut off from the tracker), or null while it was not. Never blocks.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_cancelFenced<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    ch: jlong,
) -> JString<'l> {
    run(&mut env, |env| match handle::shared::<warren::CancelHandle>(ch, "CallCanceller")?.fenced() {
        Some(why) => Ok(env.new_string(why)?),
        None => Ok(JString::null()),
    })
}

/// Releases a cancel handle (the communicator or client keeps its own clone).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_cancelFree<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, ch: jlong) {
    run(&mut env, |_| {
        drop(handle::release::<warren::CancelHandle>(ch));
        Ok(())
    })
}

/// Joins a job: `keys[i] = values[i]` are the worker settings (`WARREN_*`). Blocks until the
/// rendezvous is done; cancel handle `ch` (from `cancelCreate`) cancels the join and, later,
/// the communicator's calls. Returns the communicator handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commCreate<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    keys: JObjectArray<'l, JString<'l>>,
    values: JObjectArray<'l, JString<'l>>,
    ch: jlong,
) -> jlong {
    run(&mut env, |env| {
        let cancel = handle::shared::<warren::CancelHandle>(ch, "Communicator")?.clone();
        let n = keys.len(env)?;
        if values.len(env)? != n {
            return Err(JniError::Argument("keys and values differ in length".into()));
        }
        let mut map = HashMap::with_capacity(n);
        for i in 0..n {
            let k = keys.get_element(env, i)?;
            let v = values.get_element(env, i)?;
            if k.is_null() || v.is_null() {
                return Err(JniError::Argument("settings may not hold null".into()));
            }
            map.insert(k.try_to_string(env)?, v.try_to_string(env)?);
            env.delete_local_ref(k);
            env.delete_local_ref(v);
        }
        let always_critical = match map.get(ARRAY_ACCESS_KEY).map(String::as_str) {
            None | Some("copy") => false,
            Some("critical") => true,
            Some(other) => {
                return Err(JniError::Warren(warren::Error::Config(format!(
                    "{ARRAY_ACCESS_KEY}={other:?}: expected \"auto\" (the default), \"copy\" or \"critical\""
                ))));
            }
        };
        let segment_bytes = match map.get(ARRAY_SEGMENT_KEY) {
            None => DEFAULT_SEGMENT_BYTES,
            Some(v) => v.parse::<usize>().ok().filter(|n| *n >= 8).ok_or_else(|| {
                JniError::Warren(warren::Error::Config(format!(
                    "{ARRAY_SEGMENT_KEY}={v:?}: expected a number of bytes, at least 8"
                )))
            })?,
        };
        let cfg = warren::Config::from_map(&map)?;
        let comm = Communicator::init_cancellable(cfg, &cancel)?;
        Ok(handle::into_handle(CommHandle { comm, scratch: Vec::new(), always_critical, segment_bytes }))
    })
}

/// This worker's rank.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commRank<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> jint {
    run(&mut env, |_| Ok(comm(h)?.comm.rank() as jint))
}

/// The number of workers.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commWorldSize<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> jint {
    run(&mut env, |_| Ok(comm(h)?.comm.world_size() as jint))
}

/// The call options of an export: `key` null for an ordinary call, else a bootstrap call under
/// that key (non-empty; the Java side passes the call site for `CallOptions.bootstrap()`), and
/// the caller's `tag` (its bits; 0 for none). The plain path allocates nothing.
fn options_from(env: &mut Env<'_>, key: &JString<'_>, tag: jint) -> JniResult<CallOptions> {
    let opts = CallOptions::new().tag(tag as u32);
    if key.is_null() {
        return Ok(opts);
    }
    let k = key.try_to_string(env)?;
    if k.is_empty() {
        return Err(JniError::Argument("bootstrap key is empty".into()));
    }
    Ok(opts.bootstrap_key(k))
}

/// Allreduce of a Java array in place with `opts`; a bootstrap call always goes whole
/// through the copy buffer (its result is kept whole).
fn allreduce_array<'l, T>(
    env: &mut Env<'l>,
    h: jlong,
    array: &JPrimitiveArray<'l, T>,
    op: jint,
    opts: &CallOptions,
) -> JniResult<()>
where
    T: TypeArray + Element,
{
    let handle = comm(h)?;
    let op = op_from(op)?;
    if array.is_null() {
        return Err(JniError::Argument("array is null".into()));
    }
    let bootstrap = opts.is_bootstrap();
    if !bootstrap && (handle.always_critical || handle.comm.world_size() == 1) {
        // No peer to wait for (or the caller asked for it): the region is short.
        let comm = &mut handle.comm;
        return logging::deferred(|| {
            // SAFETY: no JNI call is made while `elems` lives (log records are deferred), the
            // array is not aliased, and the Java side does not touch it during the call.
            let mut elems = unsafe { array.get_elements_critical(env, ReleaseMode::CopyBack)? };
            let result = comm.allreduce_with::<T>(&mut elems, op, opts);
            if result.is_err() {
                elems.discard();
            } else {
                drop(elems);
            }
            Ok(result?)
        });
    }
    let len = array.len(env)?;
    let segment = (handle.segment_bytes / size_of::<T>()).max(1);
    if bootstrap || len <= segment {
        let buf = scratch::<T>(&mut handle.scratch, len);
        array.get_region(env, 0, buf)?;
        return reduce_copied(env, &mut handle.comm, array, 0, buf, op, opts);
    }
    // Piece by piece: each piece is copied in, reduced and copied out while it is still in
    // the CPU cache (see "Arrays" above).
    let pieces = CallOptions::new().tag(segment_tag(len * size_of::<T>(), opts.tag_value()));
    let buf = scratch::<T>(&mut handle.scratch, segment);
    for start in (0..len).step_by(segment) {
        let piece = &mut buf[..segment.min(len - start)];
        let at = start as jni::sys::jsize; // a Java array's length fits a jsize
        array.get_region(env, at, piece)?;
        reduce_copied(env, &mut handle.comm, array, at, piece, op, &pieces)?;
    }
    Ok(())
}

/// Reduces `copy`, the copy of `array`'s elements from `at`, and writes the result into them.
/// In robust mode an ordinary call lends its result (`allreduce_lent_with`), which is copied
/// into the array straight from the buffer the communicator keeps it in: an in-place call
/// would keep a copy of it and write it into `copy` first, one more pass over the memory.
fn reduce_copied<'l, T>(
    env: &mut Env<'l>,
    comm: &mut Communicator,
    array: &JPrimitiveArray<'l, T>,
    at: jni::sys::jsize,
    copy: &mut [T],
    op: Op,
    opts: &CallOptions,
) -> JniResult<()>
where
    T: TypeArray + Element,
{
    if comm.config().robust && !opts.is_bootstrap() {
        let result = comm.allreduce_lent_with::<T>(copy, op, opts)?;
        array.set_region(env, at, &result)?;
    } else {
        comm.allreduce_with::<T>(copy, op, opts)?;
        array.set_region(env, at, copy)?;
    }
    Ok(())
}

/// The first `len` elements of the reused copy buffer, grown as needed.
fn scratch<T: Element>(words: &mut Vec<u64>, len: usize) -> &mut [T] {
    let n = (len * size_of::<T>()).div_ceil(8);
    if words.len() < n {
        words.resize(n, 0);
    }
    &mut bytemuck::cast_slice_mut(&mut words[..n])[..len]
}

/// The `Native.commAllreduce<T>` exports, one per Java array type: each reduces the array in
/// place ([`allreduce_array`]), with the call options `key` (null: not a bootstrap call) and
/// `tag`.
macro_rules! allreduce_exports {
    ($($export:ident: $array:ident of $java:literal;)*) => {$(
        #[doc = concat!("Allreduce of a `", $java, "` in place, with the call options `key` (null: not a bootstrap call) and `tag`.")]
        #[unsafe(no_mangle)]
        pub extern "system" fn $export<'l>(
            mut env: EnvUnowned<'l>,
            _class: JClass<'l>,
            h: jlong,
            array: $array<'l>,
            op: jint,
            key: JString<'l>,
            tag: jint,
        ) {
            run(&mut env, |env| {
                let opts = options_from(env, &key, tag)?;
                allreduce_array(env, h, &array, op, &opts)
            })
        }
    )*};
}

allreduce_exports! {
    Java_io_warren_Native_commAllreduceF32: JFloatArray of "float[]";
    Java_io_warren_Native_commAllreduceF64: JDoubleArray of "double[]";
    Java_io_warren_Native_commAllreduceI32: JIntArray of "int[]";
    Java_io_warren_Native_commAllreduceI64: JLongArray of "long[]";
}

/// Allreduce of `len` bytes of a direct buffer from `offset`, holding elements of `dtype`, with
/// the call options `key` (null: not a bootstrap call) and `tag`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_Native_commAllreduceDirect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    buf: JByteBuffer<'l>,
    offset: jlong,
    len: jlong,
    dtype: jint,
    op: jint,
    key: JString<'l>,
    tag: jint,
) {
    run(&mut env, |env| {
        let handle = comm(h)?;
        let (dtype, op) = (dtype_from(dtype)?, op_from(op)?);
        let opts = options_from(env, &key, tag)?;
        let bytes = direct_slice(env, &buf, offset, len)?;
        handle.comm.allreduce_bytes(bytes, dtype, op, &opts)?;
        Ok(())
    })
}

/// Broadcast of a `byte[]` from `root` with `opts`; returns the root's bytes (on the root:
/// `data` itself).
fn broadcast_array<'l>(
    env: &mut Env<'l>,
    h: jlong,
    data: JByteArray<'l>,
    root: jint,
    opts: &CallOptions,
) -> JniResult<JByteArray<'l>> {
    let handle = comm(h)?;
    let root = root_from(root)?;
    let is_root = handle.comm.rank() == root;
    let mut bytes = if is_root {
        if data.is_null() {
            return Err(JniError::Argument("the root's data is null".into()));
        }
        env.convert_byte_array(&data)?
    } else {
        Vec::new()
    };
    handle.comm.broadcast_with(&mut bytes, root, opts)?;
    if is_root {
        return Ok(data);
    }
    Ok(env.byte_array_from_slice(&bytes)?)
}

/// Broadcast of a `byte[]` from `root`, with the call options `key` (null: not a bootstrap
/// call) and `tag`; returns the root's bytes (on the root: `data` itself).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commBroadcast<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    data: JByteArray<'l>,
    root: jint,
    key: JString<'l>,
    tag: jint,
) -> JByteArray<'l> {
    run(&mut env, |env| {
        let opts = options_from(env, &key, tag)?;
        broadcast_array(env, h, data, root, &opts)
    })
}

/// Broadcast of `len` bytes of a direct buffer from `offset` (every rank passes the same
/// length), with the call options `key` (null: not a bootstrap call) and `tag`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_Native_commBroadcastDirect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    buf: JByteBuffer<'l>,
    offset: jlong,
    len: jlong,
    root: jint,
    key: JString<'l>,
    tag: jint,
) {
    run(&mut env, |env| {
        let handle = comm(h)?;
        let root = root_from(root)?;
        let opts = options_from(env, &key, tag)?;
        let bytes = direct_slice(env, &buf, offset, len)?;
        handle.comm.broadcast_with(bytes, root, &opts)?;
        Ok(())
    })
}

/// Allgather of one `byte[]` per worker (sizes may differ); returns them in rank order.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commAllgather<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    mine: JByteArray<'l>,
) -> JObjectArray<'l, JByteArray<'l>> {
    run(&mut env, |env| {
        let handle = comm(h)?;
        if mine.is_null() {
            return Err(JniError::Argument("data is null".into()));
        }
        let bytes = env.convert_byte_array(&mine)?;
        let (flat, offsets) = handle.comm.allgather_flat(&bytes)?;
        let out = JObjectArray::<JByteArray>::new(env, offsets.len() - 1, JByteArray::null())?;
        for (i, w) in offsets.windows(2).enumerate() {
            let block = env.byte_array_from_slice(&flat[w[0]..w[1]])?;
            out.set_element(env, i, &block)?;
            env.delete_local_ref(block);
        }
        Ok(out)
    })
}

/// Returns once every worker has called `barrier`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commBarrier<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| Ok(comm(h)?.comm.barrier()?))
}

/// Writes a line to the tracker's log.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commPrint<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    msg: JString<'l>,
) {
    run(&mut env, |env| {
        let handle = comm(h)?;
        if msg.is_null() {
            return Err(JniError::Argument("message is null".into()));
        }
        let msg = msg.try_to_string(env)?;
        Ok(handle.comm.print(&msg)?)
    })
}

/// Fails the job with an error that no re-run can mend (`Communicator::fail_job`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commFailJob<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    reason: JString<'l>,
) {
    run(&mut env, |env| {
        let handle = comm(h)?;
        if reason.is_null() {
            return Err(JniError::Argument("reason is null".into()));
        }
        let reason = reason.try_to_string(env)?;
        handle.comm.fail_job(&reason);
        Ok(())
    })
}

/// One line of latency statistics per collective (`CallStats::summary`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commStats<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JString<'l> {
    run(&mut env, |env| {
        let summary = comm(h)?.comm.stats().summary();
        Ok(env.new_string(summary)?)
    })
}

/// Diagnostic for the benchmark: runs `iters` allreduce (sum) calls of an `elems`-long `f32`
/// buffer entirely in Rust on this communicator and returns the elapsed nanoseconds, so the
/// JVM can subtract the native cost of a call from what it measures through JNI.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commBenchAllreduceF32<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    elems: jint,
    iters: jint,
) -> jlong {
    run(&mut env, |_| {
        let handle = comm(h)?;
        let n = usize::try_from(elems).map_err(|_| JniError::Argument(format!("elems {elems} is negative")))?;
        let mut buf = vec![1.0f32; n];
        let started = std::time::Instant::now();
        for _ in 0..iters.max(0) {
            handle.comm.allreduce(&mut buf, Op::Sum)?;
        }
        Ok(started.elapsed().as_nanos().min(i64::MAX as u128) as jlong)
    })
}

/// Commits a checkpoint: `global` (the same on every worker) and this worker's `local` model
/// (may be null: none).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commCheckpoint<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    global: JByteArray<'l>,
    local: JByteArray<'l>,
) {
    run(&mut env, |env| {
        let handle = comm(h)?;
        if global.is_null() {
            return Err(JniError::Argument("the global model is null".into()));
        }
        let global = env.convert_byte_array(&global)?;
        let local = if local.is_null() { None } else { Some(env.convert_byte_array(&local)?) };
        Ok(handle.comm.checkpoint(&global, local.as_deref())?)
    })
}

/// Loads the latest checkpoint; returns `{global, local}` (`local` null if there is none). The
/// version is then `commVersion`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commLoadCheckpoint<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JObjectArray<'l, JByteArray<'l>> {
    run(&mut env, |env| {
        let ckpt = comm(h)?.comm.load_checkpoint()?;
        let out = JObjectArray::<JByteArray>::new(env, 2, JByteArray::null())?;
        let global = env.byte_array_from_slice(&ckpt.global)?;
        out.set_element(env, 0, &global)?;
        if let Some(local) = ckpt.local {
            let local = env.byte_array_from_slice(&local)?;
            out.set_element(env, 1, &local)?;
        }
        Ok(out)
    })
}

/// The number of checkpoints committed (or loaded).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commVersion<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> jint {
    run(&mut env, |_| Ok(comm(h)?.comm.version() as jint))
}

/// How many recoveries this worker took part in.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commRecoveries<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> jlong {
    run(&mut env, |_| Ok(comm(h)?.comm.recoveries().min(i64::MAX as u64) as jlong))
}

/// Frees the handle *without* finalizing: the links and the tracker connection close, so the
/// tracker marks this worker lost (not finished) and accepts a replacement with its task id.
/// The failure path of a task that will be retried.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commAbort<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| {
        drop(handle::release::<CommHandle>(h));
        Ok(())
    })
}

/// Leaves the job (`Communicator::finalize`) and frees the handle. The handle is freed even
/// when finalizing fails (the error is then thrown).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commClose<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| match handle::release::<CommHandle>(h) {
        Some(handle) => Ok(handle.comm.finalize()?),
        None => Ok(()),
    })
}

/// Starts a tracker for `workers` workers. `host` may be null (127.0.0.1), `port` 0 (any),
/// `rendezvous_ms` 0 (the default, 600 s), `peer_timeout_ms` negative (the default, 30 s) or
/// 0 (no heartbeats: a hung worker is not fenced); `tls` the TLS settings (see [`tls`]; null:
/// plain TCP). `limits` is empty (a fixed world) or `[min_workers, max_workers,
/// rejoin_timeout_ms, admit_arrivals]` (an elastic job; a negative rejoin timeout for none;
/// `admit_arrivals` 1 to add newcomers without an `add`, see [`Limits::admit_arrivals`]).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_Native_trackerStart<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    workers: jint,
    secret: JString<'l>,
    host: JString<'l>,
    port: jint,
    rendezvous_ms: jlong,
    peer_timeout_ms: jlong,
    tls: JObjectArray<'l, JString<'l>>,
    limits: JLongArray<'l>,
) -> jlong {
    run(&mut env, |env| {
        let workers =
            usize::try_from(workers).map_err(|_| JniError::Argument(format!("workers {workers} is negative")))?;
        let port = u16::try_from(port).map_err(|_| JniError::Argument(format!("port {port} is out of range")))?;
        if secret.is_null() {
            return Err(JniError::Argument("secret is null".into()));
        }
        let mut cfg = TrackerConfig::new(workers, secret.try_to_string(env)?);
        if !host.is_null() {
            cfg.host = host.try_to_string(env)?;
        }
        cfg.port = port;
        if rendezvous_ms > 0 {
            cfg.rendezvous_timeout = Duration::from_millis(rendezvous_ms as u64);
        }
        if peer_timeout_ms >= 0 {
            cfg.peer_timeout = (peer_timeout_ms > 0).then(|| Duration::from_millis(peer_timeout_ms as u64));
        }
        cfg.tls = tls::context(env, &tls)?;
        if !limits.is_null() {
            elastic_limits(env, &limits, &mut cfg)?;
        }
        let t = Tracker::start(cfg)?;
        Ok(handle::into_handle(t))
    })
}

/// Reads `[min_workers, max_workers, rejoin_timeout_ms, admit_arrivals]` (none: a fixed
/// world; `admit_arrivals` 1 or 0) into `cfg`.
fn elastic_limits(env: &mut Env<'_>, limits: &JLongArray<'_>, cfg: &mut TrackerConfig) -> JniResult<()> {
    let mut v = [0i64; 4];
    match limits.len(env)? {
        0 => return Ok(()),
        4 => limits.get_region(env, 0, &mut v)?,
        n => return Err(JniError::Argument(format!("elastic limits need 4 values, got {n}"))),
    }
    let count =
        |what: &str, n: i64| usize::try_from(n).map_err(|_| JniError::Argument(format!("{what} {n} is negative")));
    let (min, max) = (count("min workers", v[0])?, count("max workers", v[1])?);
    cfg.elastic = Some(Limits { admit_arrivals: v[3] != 0, ..Limits::new(min, max) });
    cfg.rejoin_timeout = (v[2] >= 0).then(|| Duration::from_millis(v[2] as u64));
    Ok(())
}

/// Every task of an elastic job, flattened: `[task0, state0, rank0, ...]` (the rank `""` for a
/// task that is not a member of the current view).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_trackerList<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JObjectArray<'l, JString<'l>> {
    run(&mut env, |env| {
        let tasks = tracker(h)?.list()?;
        let flat: Vec<String> = tasks
            .into_iter()
            .flat_map(|t| [t.task_id, t.state, t.rank.map(|r| r.to_string()).unwrap_or_default()])
            .collect();
        Ok(string_array(env, &flat)?)
    })
}

/// A control request on an elastic job: `change` is `add`, `remove`, `restart` or `give-up`,
/// applied at checkpoint version `at` or later (negative: the next boundary).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_trackerControl<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    change: JString<'l>,
    task: JString<'l>,
    at: jlong,
) {
    run(&mut env, |env| {
        if change.is_null() || task.is_null() {
            return Err(JniError::Argument("change and task may not be null".into()));
        }
        let t = tracker(h)?;
        let task = task.try_to_string(env)?;
        let at = if at < 0 {
            None
        } else {
            Some(u32::try_from(at).map_err(|_| JniError::Argument(format!("version {at} is out of range")))?)
        };
        match change.try_to_string(env)?.as_str() {
            "add" => t.add_worker(&task, at)?,
            "remove" => t.remove_worker(&task, at)?,
            "restart" => t.restart(&task, at)?,
            "give-up" => t.give_up(&task)?,
            other => {
                return Err(JniError::Argument(format!("change {other:?}: expected add, remove, restart or give-up")));
            }
        }
        Ok(())
    })
}

/// The tracker's `host:port`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_trackerUri<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JString<'l> {
    run(&mut env, |env| {
        let uri = tracker(h)?.uri().to_string();
        Ok(env.new_string(uri)?)
    })
}

/// The settings every worker needs, flattened: `[key0, value0, key1, value1, ...]`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_trackerWorkerEnv<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JObjectArray<'l, JString<'l>> {
    run(&mut env, |env| {
        let flat: Vec<String> = tracker(h)?.worker_env().into_iter().flat_map(|(k, v)| [k, v]).collect();
        Ok(string_array(env, &flat)?)
    })
}

/// The workers the tracker fenced since the last call (no heartbeat within the peer
/// timeout), oldest first, each as `"<attempt>:<task id>"`: the engine kills those task
/// attempts and runs them again.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_trackerTakeFenced<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JObjectArray<'l, JString<'l>> {
    run(&mut env, |env| {
        let fenced: Vec<String> =
            tracker(h)?.take_fenced().into_iter().map(|f| format!("{}:{}", f.attempt, f.task_id)).collect();
        Ok(string_array(env, &fenced)?)
    })
}

/// Waits for the job to end: returns `[world, recoveries, elapsed_nanos]`, or throws
/// `TrackerException` (the job failed) or `WarrenTimeoutException`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_trackerWait<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    timeout_ms: jlong,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let t = tracker(h)?;
        let timeout = (timeout_ms >= 0).then(|| Duration::from_millis(timeout_ms as u64));
        let report = t.wait(timeout)?;
        let out = env.new_long_array(3)?;
        let values =
            [report.world as i64, report.recoveries as i64, report.elapsed.as_nanos().min(i64::MAX as u128) as i64];
        out.set_region(env, 0, &values)?;
        Ok(out)
    })
}

/// Stops the tracker and frees the handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_trackerClose<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| {
        if let Some(t) = handle::release::<Tracker>(h) {
            t.stop();
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_wire_codes_and_user_codes_are_refused() {
        for op in Op::ALL {
            assert_eq!(op_from(op as jint).unwrap(), op);
        }
        for d in DataType::ALL {
            assert_eq!(dtype_from(d as jint).unwrap(), d);
        }
        for bad in [0, -1, 256, Op::User as jint] {
            assert!(matches!(op_from(bad), Err(JniError::Argument(_))), "{bad}");
        }
        for bad in [0, -1, 300, DataType::User as jint] {
            assert!(matches!(dtype_from(bad), Err(JniError::Argument(_))), "{bad}");
        }
        assert!(root_from(-1).is_err());
    }

    #[test]
    fn piece_tags_are_nonzero_and_tell_lengths_and_caller_tags_apart() {
        let tags: std::collections::HashSet<u32> = (1..10_000usize).map(|n| segment_tag(n * 4, 0)).collect();
        assert_eq!(tags.len(), 9_999);
        assert!(!tags.contains(&0), "0 is the tag of unsegmented calls");
        let by_caller: std::collections::HashSet<u32> = (0..10_000u32).map(|t| segment_tag(1 << 22, t)).collect();
        assert_eq!(by_caller.len(), 10_000);
        assert!(!by_caller.contains(&0));
    }

    #[test]
    fn log_level_codes() {
        use log::LevelFilter;
        assert_eq!(logging::level_filter(0), LevelFilter::Off);
        assert_eq!(logging::level_filter(1), LevelFilter::Error);
        assert_eq!(logging::level_filter(3), LevelFilter::Info);
        assert_eq!(logging::level_filter(5), LevelFilter::Trace);
        assert_eq!(logging::level_filter(99), LevelFilter::Trace);
    }
}

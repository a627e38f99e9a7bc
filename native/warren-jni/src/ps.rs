//! Exports behind `io.warren.ps.PsNative`: parameter servers run in the JVM
//! (`io.warren.ps.PsServer`) and a trainer's client of them (`io.warren.ps.PsClient`).
//! Handles as for the communicator (see [`crate::handle`]): `Box` pointers released once by
//! the Java side; a server's handle is shared (its native type is thread-safe), a client's
//! is exclusive (the Java object serialises its calls), and a client is cancelled from
//! another thread through its own cancel handle (`Native.cancelCreate`, the one cancel export
//! of every blocking class), never through the client's handle.
//!
//! Floats reach a pull or a push either as Java arrays, copied with `Get/SetFloatArrayRegion`
//! (no critical region: a sync pull can wait for the slowest trainer), or as direct
//! `FloatBuffer`s in the platform's byte order, read and written in place.

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use jni::objects::{
    JByteBuffer, JClass, JFloatArray, JIntArray, JLongArray, JObjectArray, JPrimitiveArray, JString, TypeArray,
};
use jni::sys::{jint, jlong};
use jni::{Env, EnvUnowned};
use warren::CancelHandle;
use warren::ps::{
    CheckpointPolicy, DEFAULT_LOG_SYNC, Grad, Init, JobSpec, Mode, Optimizer, PsClient, PsClientOptions, PsConfig,
    PsServer, ServerStatus, TableKind, TableSpec,
};

use crate::errors::{JniError, JniResult, run};
use crate::handle;
use crate::master::{millis, string};
use crate::pull_plan::{PullEntry, PullOut, SparseEntry, pull_all};
use crate::strings::strings;

fn server<'a>(h: jlong) -> JniResult<&'a PsServer> {
    handle::shared(h, "PsServer")
}

fn client<'a>(h: jlong) -> JniResult<&'a mut PsClient> {
    handle::exclusive(h, "PsClient")
}

fn argument(m: String) -> JniError {
    JniError::Argument(m)
}

fn unsigned(v: jlong, what: &str) -> JniResult<u64> {
    u64::try_from(v).map_err(|_| argument(format!("{what} {v} is negative")))
}

/// Server `index` of `servers` with `secret`, bound to `host:port` (0: any free port).
/// `checkpoint_dir` null: no checkpoints; else one every `every_steps` steps or `every_ms`
/// milliseconds (0: not by that measure), and a checkpoint found there is loaded first.
/// `tls`: the TLS settings (see [`crate::tls`]; null: plain TCP). `threads`: threads serving
/// connections (`PsConfig::threads`).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_ps_PsNative_serverStart<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    secret: JString<'l>,
    index: jint,
    servers: jint,
    host: JString<'l>,
    port: jint,
    pull_timeout_ms: jlong,
    checkpoint_dir: JString<'l>,
    every_steps: jlong,
    every_ms: jlong,
    tls: JObjectArray<'l, JString<'l>>,
    threads: jint,
) -> jlong {
    run(&mut env, |env| {
        let (Ok(index), Ok(servers)) = (usize::try_from(index), usize::try_from(servers)) else {
            return Err(argument(format!("server index {index} of {servers}: negative")));
        };
        let mut cfg = PsConfig::new(string(env, &secret, "secret")?, index, servers);
        cfg.host = string(env, &host, "host")?;
        cfg.port = u16::try_from(port).map_err(|_| argument(format!("port {port} is out of range")))?;
        cfg.pull_timeout = millis(pull_timeout_ms, "pullTimeout")?;
        if !checkpoint_dir.is_null() {
            cfg.checkpoint = Some(CheckpointPolicy {
                dir: PathBuf::from(string(env, &checkpoint_dir, "checkpoint directory")?),
                every_steps: unsigned(every_steps, "checkpoint steps")?,
                every: Duration::from_millis(unsigned(every_ms, "checkpoint interval")?),
                log_sync: DEFAULT_LOG_SYNC,
            });
        }
        cfg.tls = crate::tls::context(env, &tls)?;
        // A negative count is refused as 0 is, by `PsServer::start` (the Java builder first).
        cfg.threads = usize::try_from(threads).unwrap_or(0);
        Ok(handle::into_handle(PsServer::start(cfg)?))
    })
}

/// The `host:port` trainers connect to.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_serverUri<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JString<'l> {
    run(&mut env, |env| Ok(env.new_string(server(h)?.uri())?))
}

/// The server's state (see `status_values`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_serverStatus<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let values = status_values(&[server(h)?.status()]);
        long_array(env, &values)
    })
}

/// Stops the server (closing its connections, letting a checkpoint being written finish)
/// and frees it.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_serverClose<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) {
    run(&mut env, |_| {
        if let Some(s) = handle::release::<PsServer>(h) {
            s.stop();
        }
        Ok(())
    })
}

/// Servers' states as `long`s, server after server: `[index, servers, defined, applied,
/// rows, pushes, lost, n, clock_0 .. clock_n-1]`.
fn status_values(all: &[ServerStatus]) -> Vec<i64> {
    let mut out = Vec::new();
    for s in all {
        out.extend([
            s.index as i64,
            s.servers as i64,
            s.job.is_some() as i64,
            s.applied as i64,
            s.rows as i64,
            s.pushes as i64,
            s.lost as i64,
            s.clocks.len() as i64,
        ]);
        out.extend(s.clocks.iter().map(|&c| c as i64));
    }
    out
}

fn long_array<'l>(env: &mut Env<'l>, values: &[i64]) -> JniResult<JLongArray<'l>> {
    let out = env.new_long_array(values.len())?;
    out.set_region(env, 0, values)?;
    Ok(out)
}

/// Connects to the servers `uris` (server `i` at `uris[i]`) as trainer `trainer` (-1: an
/// observer), waiting up to `connect_timeout_ms` for servers still starting; cancel handle
/// `ch` cancels this and every later call. `tls`: the TLS settings (see [`crate::tls`];
/// null: plain TCP).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientConnect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    uris: JObjectArray<'l, JString<'l>>,
    secret: JString<'l>,
    trainer: jint,
    connect_timeout_ms: jlong,
    call_timeout_ms: jlong,
    ch: jlong,
    tls: JObjectArray<'l, JString<'l>>,
) -> jlong {
    run(&mut env, |env| {
        let uris = strings(env, &uris, "server addresses")?;
        let secret = string(env, &secret, "secret")?;
        let trainer = match trainer {
            -1 => None,
            t => Some(u32::try_from(t).map_err(|_| argument(format!("trainer id {t} is negative")))?),
        };
        let opts = PsClientOptions {
            connect_timeout: millis(connect_timeout_ms, "connectTimeout")?,
            call_timeout: millis(call_timeout_ms, "callTimeout")?,
            tls: crate::tls::context(env, &tls)?,
        };
        let cancel = handle::shared::<CancelHandle>(ch, "PsClient")?.clone();
        Ok(handle::into_handle(PsClient::connect_cancellable(&uris, secret, trainer, opts, cancel)?))
    })
}

/// The `i`-th element of a Java array read whole, or an error naming it.
fn at<T: Copy>(values: &[T], i: usize, what: &str) -> JniResult<T> {
    values.get(i).copied().ok_or_else(|| argument(format!("{what} has fewer elements than the tables")))
}

/// Reads a whole primitive array (`int[]`, `long[]`, `float[]`...).
fn whole<T: TypeArray + Default + Clone>(env: &Env<'_>, a: &JPrimitiveArray<'_, T>, what: &str) -> JniResult<Vec<T>> {
    if a.is_null() {
        return Err(argument(format!("{what} is null")));
    }
    let mut v = vec![T::default(); a.len(env)?];
    a.get_region(env, 0, &mut v)?;
    Ok(v)
}

/// The tables of a job, from parallel arrays: `kinds[i]` 0 dense (`sizes[i]` elements) or 1
/// sparse (rows of `sizes[i]` floats); initializer zeros if `scales[i]` is NaN, else uniform
/// in `[-scales[i], scales[i])` seeded by `seeds[i]`; `optimizers[i]` as `sgd:LR`, `adam:LR`...;
/// `expected[i]`: the rows a sparse table expects (0: not known; ignored for a dense table).
struct TableArrays {
    names: Vec<String>,
    kinds: Vec<i32>,
    sizes: Vec<i64>,
    scales: Vec<f32>,
    seeds: Vec<i64>,
    optimizers: Vec<String>,
    expected: Vec<i64>,
}

impl TableArrays {
    fn specs(&self) -> JniResult<Vec<TableSpec>> {
        let mut out = Vec::with_capacity(self.names.len());
        for (i, name) in self.names.iter().enumerate() {
            let size = at(&self.sizes, i, "sizes")?;
            let kind = match at(&self.kinds, i, "kinds")? {
                0 => TableKind::Dense { len: unsigned(size, "table length")? },
                1 => TableKind::Sparse {
                    width: u32::try_from(size).map_err(|_| argument(format!("row width {size} is out of range")))?,
                    expected_rows: unsigned(at(&self.expected, i, "expected")?, "expected rows")?,
                },
                k => return Err(argument(format!("unknown table kind {k}"))),
            };
            let scale = at(&self.scales, i, "scales")?;
            let init = if scale.is_nan() {
                Init::Zeros
            } else {
                Init::Uniform { scale, seed: at(&self.seeds, i, "seeds")? as u64 }
            };
            let spec = self.optimizers.get(i).ok_or_else(|| argument("optimizers has fewer elements".into()))?;
            let optimizer =
                Optimizer::parse(spec).map_err(|m| warren::Error::InvalidArgument(format!("table {name:?}: {m}")))?;
            let table = TableSpec { name: name.clone(), kind, init, optimizer };
            table.validate()?;
            out.push(table);
        }
        Ok(out)
    }
}

/// Defines the job on every server (see `TableArrays` for the tables); `mode` is `sync`,
/// `async` or `ssp` (bounded by `staleness`).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientDefine<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    trainers: jint,
    mode: JString<'l>,
    staleness: jlong,
    names: JObjectArray<'l, JString<'l>>,
    kinds: JIntArray<'l>,
    sizes: JLongArray<'l>,
    scales: JFloatArray<'l>,
    seeds: JLongArray<'l>,
    optimizers: JObjectArray<'l, JString<'l>>,
    expected: JLongArray<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let trainers = u32::try_from(trainers).map_err(|_| argument(format!("trainers {trainers} is negative")))?;
        let mode = Mode::parse(&string(env, &mode, "mode")?, unsigned(staleness, "staleness")?)?;
        let tables = TableArrays {
            names: strings(env, &names, "table names")?,
            kinds: whole(env, &kinds, "kinds")?,
            sizes: whole(env, &sizes, "sizes")?,
            scales: whole(env, &scales, "scales")?,
            seeds: whole(env, &seeds, "seeds")?,
            optimizers: strings(env, &optimizers, "optimizers")?,
            expected: whole(env, &expected, "expected rows")?,
        }
        .specs()?;
        Ok(c.define(&JobSpec { trainers, mode, tables, joining: Vec::new() })?)
    })
}

/// `[kind, size]` of `table` in the job the client knows: kind 0 dense (size: its length),
/// 1 sparse (size: its row width), -1 no such table (or no job yet).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientTable<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    table: JString<'l>,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let c = client(h)?;
        let name = string(env, &table, "table")?;
        let shape = match c.job().and_then(|j| j.tables.iter().find(|t| t.name == name)).map(|t| &t.kind) {
            Some(TableKind::Dense { len }) => [0, *len as i64],
            Some(TableKind::Sparse { width, .. }) => [1, i64::from(*width)],
            None => [-1, 0],
        };
        long_array(env, &shape)
    })
}

/// `count` floats at `offset` of a Java array, checked.
fn array_range(env: &Env<'_>, a: &JFloatArray<'_>, offset: jint, count: jint) -> JniResult<Range<usize>> {
    if a.is_null() {
        return Err(argument("the float array is null".into()));
    }
    let len = a.len(env)?;
    match (usize::try_from(offset), usize::try_from(count)) {
        (Ok(o), Ok(n)) if o.checked_add(n).is_some_and(|e| e <= len) => Ok(o..o + n),
        _ => Err(argument(format!("range {offset}+{count} is outside the array of {len} floats"))),
    }
}

/// The address of `count` floats from element `position` of a direct float buffer, checked.
/// (`JByteBuffer` stands for any direct `java.nio.Buffer`: JNI's direct-buffer calls take any,
/// and a `FloatBuffer`'s capacity is counted in floats.)
fn buffer_floats(env: &Env<'_>, buf: &JByteBuffer<'_>, position: jint, count: jint) -> JniResult<(*mut u8, usize)> {
    if buf.is_null() {
        return Err(argument("the buffer is null".into()));
    }
    let addr = env.get_direct_buffer_address(buf).map_err(|_| {
        argument("the FloatBuffer is not direct (use ByteBuffer.allocateDirect(..).asFloatBuffer())".into())
    })?;
    let cap = env.get_direct_buffer_capacity(buf)?;
    match (usize::try_from(position), usize::try_from(count)) {
        // SAFETY (of the `add`): the offset stays inside the buffer's memory, checked here.
        (Ok(p), Ok(n)) if p.checked_add(n).is_some_and(|e| e <= cap) => Ok((unsafe { addr.add(p * 4) }, n)),
        _ => Err(argument(format!("range {position}+{count} is outside the buffer of {cap} floats"))),
    }
}

/// The `count` floats of the direct buffer `buf` from `position`, to pull straight into,
/// if `a` (the Java array given instead) is null and the buffer's floats are aligned as
/// `f32`s are (as `ByteBuffer.allocateDirect(..).asFloatBuffer()` is); `None` otherwise
/// (the pull then goes through [`write_out`]).
fn direct_out<'b>(
    env: &Env<'_>,
    a: &JFloatArray<'_>,
    buf: &JByteBuffer<'_>,
    position: jint,
    count: jint,
) -> JniResult<Option<&'b mut [f32]>> {
    if !a.is_null() {
        return Ok(None);
    }
    let (dst, n) = buffer_floats(env, buf, position, count)?;
    Ok(aligned_floats(dst, n))
}

/// The `n` floats at `dst` (from [`buffer_floats`]) to pull straight into, if they are
/// aligned as `f32`s are; `None` otherwise.
fn aligned_floats<'b>(dst: *mut u8, n: usize) -> Option<&'b mut [f32]> {
    if !dst.cast::<f32>().is_aligned() {
        return None;
    }
    // SAFETY: `dst` points to `n * 4` writable bytes of a direct buffer (checked by
    // `buffer_floats`), aligned for `f32` (checked above), which stay valid while the Java
    // caller holds the buffer: for the whole native call, in which the slice lives.
    Some(unsafe { std::slice::from_raw_parts_mut(dst.cast::<f32>(), n) })
}

/// Writes `values` to `count` floats of the Java array `a` at `offset`, or of the direct
/// buffer `buf` from `position` (whichever is not null).
fn write_out(
    env: &Env<'_>,
    values: &[f32],
    a: &JFloatArray<'_>,
    buf: &JByteBuffer<'_>,
    offset: jint,
    count: jint,
) -> JniResult<()> {
    if a.is_null() {
        let (dst, n) = buffer_floats(env, buf, offset, count)?;
        if n != values.len() {
            return Err(argument(format!("the buffer range holds {n} floats, the pull returned {}", values.len())));
        }
        // SAFETY: `dst` points to `n * 4` writable bytes of the buffer (checked above), which
        // stays valid while the Java caller holds it (for the whole native call); bytes are
        // copied, so the buffer need not be aligned.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr().cast::<u8>(), dst, n * 4) };
        return Ok(());
    }
    let r = array_range(env, a, offset, count)?;
    if r.len() != values.len() {
        return Err(argument(format!("the array range holds {} floats, the pull returned {}", r.len(), values.len())));
    }
    a.set_region(env, r.start as jni::sys::jsize, values)?; // a Java array's index fits a jsize
    Ok(())
}

/// Reads `count` floats of the Java array `a` from `offset`, or of the direct buffer `buf`
/// from `position` (whichever is not null).
fn read_in(
    env: &Env<'_>,
    a: &JFloatArray<'_>,
    buf: &JByteBuffer<'_>,
    offset: jint,
    count: jint,
) -> JniResult<Vec<f32>> {
    if a.is_null() {
        let (src, n) = buffer_floats(env, buf, offset, count)?;
        let mut v = vec![0f32; n];
        // SAFETY: `src` points to `n * 4` readable bytes of the buffer (checked above); `v`
        // has room for them.
        unsafe { std::ptr::copy_nonoverlapping(src, v.as_mut_ptr().cast::<u8>(), n * 4) };
        return Ok(v);
    }
    let r = array_range(env, a, offset, count)?;
    let mut v = vec![0f32; r.len()];
    a.get_region(env, r.start as jni::sys::jsize, &mut v)?;
    Ok(v)
}

/// Pulls elements `start..start + count` of dense table `table` into `out` (a `float[]` at
/// `offset`) or `buf` (a direct `FloatBuffer` from element `offset`); one of them is null.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPullDense<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    table: JString<'l>,
    start: jlong,
    out: JFloatArray<'l>,
    buf: JByteBuffer<'l>,
    offset: jint,
    count: jint,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let table = string(env, &table, "table")?;
        let start = unsigned(start, "start")?;
        let n = u64::try_from(count).map_err(|_| argument(format!("count {count} is negative")))?;
        let end = start.checked_add(n).ok_or_else(|| argument("start + count overflows".into()))?;
        if let Some(dst) = direct_out(env, &out, &buf, offset, count)? {
            return Ok(c.pull_dense_into(&table, start..end, dst)?);
        }
        let values = c.pull_dense(&table, start..end)?;
        write_out(env, &values, &out, &buf, offset, count)
    })
}

/// Pulls the rows of `keys` of sparse table `table` into `out` (at `offset`) or `buf` (from
/// element `offset`): `count` floats, the rows in the order of `keys`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPullSparse<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    table: JString<'l>,
    keys: JLongArray<'l>,
    out: JFloatArray<'l>,
    buf: JByteBuffer<'l>,
    offset: jint,
    count: jint,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let table = string(env, &table, "table")?;
        let keys: Vec<u64> = whole(env, &keys, "keys")?.into_iter().map(|k| k as u64).collect();
        if let Some(dst) = direct_out(env, &out, &buf, offset, count)? {
            return Ok(c.pull_sparse_into(&table, &keys, dst)?);
        }
        let values = c.pull_sparse(&table, &keys)?;
        write_out(env, &values, &out, &buf, offset, count)
    })
}

/// The parallel arrays of a push or a pull, read whole: entry `i` is table `names[i]`, from
/// element `firsts[i]` (a dense entry), with `counts[i]` floats from `positions[i]` of its
/// array or buffer.
struct Entries {
    names: Vec<String>,
    firsts: Vec<i64>,
    positions: Vec<i32>,
    counts: Vec<i32>,
}

impl Entries {
    /// Reads them; `firsts` is named `.1` in errors.
    fn read(
        env: &mut Env<'_>,
        tables: &JObjectArray<'_, JString<'_>>,
        firsts: (&JLongArray<'_>, &str),
        positions: &JIntArray<'_>,
        counts: &JIntArray<'_>,
    ) -> JniResult<Entries> {
        Ok(Entries {
            names: strings(env, tables, "tables")?,
            firsts: whole(env, firsts.0, firsts.1)?,
            positions: whole(env, positions, "positions")?,
            counts: whole(env, counts, "counts")?,
        })
    }

    fn first(&self, i: usize) -> JniResult<i64> {
        at(&self.firsts, i, "the first elements")
    }

    fn position(&self, i: usize) -> JniResult<i32> {
        at(&self.positions, i, "positions")
    }

    fn count(&self, i: usize) -> JniResult<i32> {
        at(&self.counts, i, "counts")
    }
}

/// Entry `i`'s keys (`None`: a dense entry), or its bags' ends (`None`: not bagged).
fn entry_keys(env: &mut Env<'_>, keys: &JObjectArray<'_, JLongArray<'_>>, i: usize) -> JniResult<Option<Vec<u64>>> {
    let k = keys.get_element(env, i)?;
    let out = if k.is_null() { None } else { Some(whole(env, &k, "keys")?.into_iter().map(|k| k as u64).collect()) };
    env.delete_local_ref(k);
    Ok(out)
}

/// Entry `i`'s keys and, if it is bagged, its bags' ends (`None`: a dense entry).
fn entry_sparse(
    env: &mut Env<'_>,
    keys: &JObjectArray<'_, JLongArray<'_>>,
    ends: &JObjectArray<'_, JLongArray<'_>>,
    i: usize,
) -> JniResult<Option<SparseEntry>> {
    let (k, e) = (entry_keys(env, keys, i)?, entry_keys(env, ends, i)?);
    match (k, e) {
        (Some(k), e) => Ok(Some((k, e))),
        (None, None) => Ok(None),
        (None, Some(_)) => Err(argument("bags' ends without keys".into())),
    }
}

/// Pulls several tables in one round trip, entry `i` of the parallel arrays being one
/// table's: dense if `keys[i]` is null (elements `starts[i]..starts[i] + counts[i]`), else
/// sparse (rows of `keys[i]`, `counts[i]` floats; if `ends[i]` is not null, the sum of each
/// bag's rows, bag `b` ending at key `ends[i][b]`); into `arrays[i]` from `positions[i]`, or
/// into the direct buffer `buffers[i]` if `arrays[i]` is null. Bad input, direct buffers
/// pulled into where they overlap included, fails before anything is sent.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPull<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    tables: JObjectArray<'l, JString<'l>>,
    starts: JLongArray<'l>,
    keys: JObjectArray<'l, JLongArray<'l>>,
    ends: JObjectArray<'l, JLongArray<'l>>,
    arrays: JObjectArray<'l, JFloatArray<'l>>,
    buffers: JObjectArray<'l, JByteBuffer<'l>>,
    positions: JIntArray<'l>,
    counts: JIntArray<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let e = Entries::read(env, &tables, (&starts, "starts"), &positions, &counts)?;
        let mut entries = Vec::with_capacity(e.names.len());
        // The bytes of direct buffers pulled into, aligned or not.
        let mut direct: Vec<Range<usize>> = Vec::new();
        for (i, table) in e.names.iter().enumerate() {
            let (position, count) = (e.position(i)?, e.count(i)?);
            let sparse = entry_sparse(env, &keys, &ends, i)?;
            let a = arrays.get_element(env, i)?;
            let b = buffers.get_element(env, i)?;
            let out = if a.is_null() {
                // The buffer's address and size asked of the JVM once.
                let (at, n) = buffer_floats(env, &b, position, count)?;
                direct.push(at as usize..at as usize + 4 * n);
                aligned_floats(at, n).map_or_else(|| PullOut::Copied(vec![0f32; n]), PullOut::Direct)
            } else {
                PullOut::Copied(vec![0f32; array_range(env, &a, position, count)?.len()])
            };
            env.delete_local_ref(a);
            env.delete_local_ref(b);
            let start = if sparse.is_none() { e.first(i)? } else { 0 };
            entries.push(PullEntry { table: table.clone(), start, sparse, out });
        }
        pull_all(&mut entries, direct, |pulls| c.pull(pulls))?;
        for (i, entry) in entries.iter().enumerate() {
            if let PullOut::Copied(values) = &entry.out {
                let a = arrays.get_element(env, i)?;
                let b = buffers.get_element(env, i)?;
                write_out(env, values, &a, &b, e.position(i)?, e.count(i)?)?;
                env.delete_local_ref(a);
                env.delete_local_ref(b);
            }
        }
        Ok(())
    })
}

/// Pushes this step's gradients, entry `i` of the parallel arrays being one table's: dense
/// if `keys[i]` is null (elements from `offsets[i]`), else sparse (rows of `keys[i]`; if
/// `ends[i]` is not null, a row per bag of them, bag `b` ending at key `ends[i][b]`); the
/// values are `counts[i]` floats of `arrays[i]` from `positions[i]`, or of the direct buffer
/// `buffers[i]` if `arrays[i]` is null.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPush<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    tables: JObjectArray<'l, JString<'l>>,
    offsets: JLongArray<'l>,
    keys: JObjectArray<'l, JLongArray<'l>>,
    ends: JObjectArray<'l, JLongArray<'l>>,
    arrays: JObjectArray<'l, JFloatArray<'l>>,
    buffers: JObjectArray<'l, JByteBuffer<'l>>,
    positions: JIntArray<'l>,
    counts: JIntArray<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let e = Entries::read(env, &tables, (&offsets, "offsets"), &positions, &counts)?;
        let mut grads = Vec::with_capacity(e.names.len());
        for (i, table) in e.names.iter().enumerate() {
            let a = arrays.get_element(env, i)?;
            let b = buffers.get_element(env, i)?;
            let values = read_in(env, &a, &b, e.position(i)?, e.count(i)?)?;
            let table = table.clone();
            grads.push(match entry_sparse(env, &keys, &ends, i)? {
                None => Grad::Dense { table, offset: unsigned(e.first(i)?, "offset")?, values },
                Some((keys, None)) => Grad::Sparse { table, keys, values },
                Some((keys, Some(ends))) => Grad::SparseBags { table, keys, ends, values },
            });
            env.delete_local_ref(a);
            env.delete_local_ref(b);
        }
        Ok(c.push(&grads)?)
    })
}

/// Leaves the job: this trainer holds nobody back any more.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientLeave<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) {
    run(&mut env, |_| Ok(client(h)?.leave()?))
}

/// Every server's state, asked over the network (see `status_values`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientStatus<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let values = status_values(&client(h)?.status()?);
        long_array(env, &values)
    })
}

/// `[next step, updates lost (a dead predecessor's last push), servers]` of the client.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientInfo<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let c = client(h)?;
        long_array(env, &[c.step() as i64, c.lost_updates() as i64, c.servers() as i64])
    })
}

/// Closes the connections and frees the client.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientClose<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) {
    run(&mut env, |_| {
        drop(handle::release::<PsClient>(h));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(kinds: Vec<i32>, sizes: Vec<i64>, optimizers: [&str; 2]) -> TableArrays {
        TableArrays {
            names: vec!["w".into(), "emb".into()],
            kinds,
            sizes,
            scales: vec![f32::NAN, 0.1],
            seeds: vec![0, -1],
            optimizers: optimizers.iter().map(|s| s.to_string()).collect(),
            expected: vec![0, 1 << 20],
        }
    }

    #[test]
    fn tables_come_from_the_parallel_arrays() {
        let specs = tables(vec![0, 1], vec![10, 4], ["sgd:0.5", "adam:0.01"]).specs().unwrap();
        assert_eq!(specs[0].kind, TableKind::Dense { len: 10 });
        assert_eq!(specs[0].init, Init::Zeros, "a NaN scale means zeros");
        assert_eq!(specs[0].optimizer, Optimizer::Sgd { lr: 0.5 });
        assert_eq!(specs[1].kind, TableKind::Sparse { width: 4, expected_rows: 1 << 20 });
        // A Java long's bits are the unsigned seed.
        assert_eq!(specs[1].init, Init::Uniform { scale: 0.1, seed: u64::MAX });
        assert_eq!(specs[1].optimizer, Optimizer::Adam { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 });
    }

    #[test]
    fn bad_tables_are_clear_errors() {
        let message = |t: TableArrays| t.specs().unwrap_err().to_string();
        assert_eq!(message(tables(vec![0, 2], vec![10, 4], ["sgd:1", "sgd:1"])), "unknown table kind 2");
        assert!(message(tables(vec![0, 1], vec![10, 0], ["sgd:1", "sgd:1"])).contains("width 0"));
        assert!(message(tables(vec![0, 1], vec![-3, 4], ["sgd:1", "sgd:1"])).contains("table length -3 is negative"));
        let m = message(tables(vec![0, 1], vec![10, 4], ["sgd:x", "sgd:1"]));
        assert!(m.contains("table \"w\"") && m.contains("\"x\" is not a number"), "{m}");
        assert!(message(tables(vec![0], vec![10, 4], ["sgd:1", "sgd:1"])).contains("kinds has fewer elements"));
        let mut negative = tables(vec![0, 1], vec![10, 4], ["sgd:1", "sgd:1"]);
        negative.expected[1] = -1;
        assert!(message(negative).contains("expected rows -1 is negative"));
    }

    #[test]
    fn statuses_flatten_server_after_server() {
        let s = |index, clocks: Vec<u64>| ServerStatus {
            index,
            servers: 2,
            job: None,
            clocks,
            applied: 3,
            rows: 4,
            pushes: 5,
            lost: 6,
        };
        assert_eq!(
            status_values(&[s(0, vec![7]), s(1, vec![8, 9])]),
            vec![0, 2, 0, 3, 4, 5, 6, 1, 7, 1, 2, 0, 3, 4, 5, 6, 2, 8, 9]
        );
    }
}

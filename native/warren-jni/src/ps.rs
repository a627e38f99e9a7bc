//! Exports behind `io.warren.ps.PsNative`: parameter servers run in the JVM
//! (`io.warren.ps.PsServer`) and a trainer's client of them (`io.warren.ps.PsClient`).
//! Handles as for the communicator (see [`crate::handle`]): `Box` pointers released once by
//! the Java side; a server's handle is shared (its native type is thread-safe), a client's
//! is exclusive (the Java object serialises its calls), and a client is cancelled from
//! another thread through its own cancel handle (`Native.cancelCreate`, the one cancel export
//! of every blocking class), never through the client's handle.
//!
//! An export that takes more than a handle and a name takes one request object, read once
//! into plain values by [`crate::ps_request`], where its arguments are also checked.
//!
//! Floats reach a pull or a push either as Java arrays, copied with `Get/SetFloatArrayRegion`
//! (no critical region: a sync pull can wait for the slowest trainer), or as direct
//! `FloatBuffer`s in the platform's byte order, read and written in place.

use std::ops::Range;

use jni::objects::{JByteBuffer, JClass, JFloatArray, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jint, jlong};
use jni::{Env, EnvUnowned};
use warren::CancelHandle;
use warren::ps::{Grad, PsClient, PsServer, ServerStatus, TableKind};

use crate::errors::{JniError, JniResult, run};
use crate::handle;
use crate::master::string;
use crate::ps_request::{ClientConnect, Connect, Define, Pieces, ServerStart, TablePull, unsigned, whole};
use crate::pull_plan::{PullEntry, PullOut, SparseEntry, pull_all};

fn server<'a>(h: jlong) -> JniResult<&'a PsServer> {
    handle::shared(h, "PsServer")
}

fn client<'a>(h: jlong) -> JniResult<&'a mut PsClient> {
    handle::exclusive(h, "PsClient")
}

fn argument(m: String) -> JniError {
    JniError::Argument(m)
}

/// Starts a server with the settings of an `io.warren.ps.ServerStartRequest` (see
/// [`ServerStart::config`]): a checkpoint found in its directory is loaded first.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_serverStart<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    request: JObject<'l>,
) -> jlong {
    run(&mut env, |env| {
        let cfg = ServerStart::read(env, &request)?.config()?;
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

/// Connects with the settings of an `io.warren.ps.ClientConnectRequest`: to the servers
/// `uris` (server `i` at `uris[i]`) as trainer `trainer` (-1: an observer), waiting up to
/// `connectTimeoutMs` for servers still starting; its cancel handle cancels this and every
/// later call.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientConnect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    request: JObject<'l>,
) -> jlong {
    run(&mut env, |env| {
        let request = ClientConnect::read(env, &request)?;
        let ch = request.cancel_handle;
        let Connect { uris, secret, trainer, options } = request.settings()?;
        let cancel = handle::shared::<CancelHandle>(ch, "PsClient")?.clone();
        Ok(handle::into_handle(PsClient::connect_cancellable(&uris, secret, trainer, options, cancel)?))
    })
}

/// Defines the job of an `io.warren.ps.DefineRequest` on every server (see [`Define::job`]).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientDefine<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    request: JObject<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let job = Define::read(env, &request)?.job()?;
        Ok(c.define(&job)?)
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

/// Pulls elements `start..start + count` of the dense table of an `io.warren.ps.TablePull`
/// into its `array` (at `offset`) or its direct `buffer` (from element `offset`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPullDense<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    request: JObject<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let p = TablePull::read(env, &request)?;
        let table = p.table()?;
        let (count, offset) = (p.count, p.offset);
        let start = unsigned(p.start, "start")?;
        let n = u64::try_from(count).map_err(|_| argument(format!("count {count} is negative")))?;
        let end = start.checked_add(n).ok_or_else(|| argument("start + count overflows".into()))?;
        if let Some(dst) = direct_out(env, &p.array, &p.buffer, offset, count)? {
            return Ok(c.pull_dense_into(table, start..end, dst)?);
        }
        let values = c.pull_dense(table, start..end)?;
        write_out(env, &values, &p.array, &p.buffer, offset, count)
    })
}

/// Pulls the rows of the `keys` of the sparse table of an `io.warren.ps.TablePull` into its
/// `array` (at `offset`) or its direct `buffer` (from element `offset`): `count` floats, the
/// rows in the order of `keys`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPullSparse<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    request: JObject<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let p = TablePull::read(env, &request)?;
        let (table, keys) = (p.table()?, p.keys()?);
        if let Some(dst) = direct_out(env, &p.array, &p.buffer, p.offset, p.count)? {
            return Ok(c.pull_sparse_into(table, keys, dst)?);
        }
        let values = c.pull_sparse(table, keys)?;
        write_out(env, &values, &p.array, &p.buffer, p.offset, p.count)
    })
}

/// Entry `i`'s keys (`None`: a dense entry), or its bags' ends (`None`: not bagged).
fn entry_keys(env: &mut Env<'_>, keys: &JObjectArray<'_, JLongArray<'_>>, i: usize) -> JniResult<Option<Vec<u64>>> {
    let k = keys.get_element(env, i)?;
    let out = if k.is_null() { None } else { Some(whole(env, &k, "keys")?.into_iter().map(|k| k as u64).collect()) };
    env.delete_local_ref(k);
    Ok(out)
}

/// Piece `i`'s keys and, if it is bagged, its bags' ends (`None`: a dense piece).
fn entry_sparse(env: &mut Env<'_>, p: &Pieces<'_>, i: usize) -> JniResult<Option<SparseEntry>> {
    let (k, e) = (entry_keys(env, &p.keys, i)?, entry_keys(env, &p.ends, i)?);
    match (k, e) {
        (Some(k), e) => Ok(Some((k, e))),
        (None, None) => Ok(None),
        (None, Some(_)) => Err(argument("bags' ends without keys".into())),
    }
}

/// Pulls several tables in one round trip, piece `i` of an `io.warren.ps.PiecesRequest`
/// being one table's: dense if `keys[i]` is null (elements `firsts[i]..firsts[i] +
/// counts[i]`), else sparse (rows of `keys[i]`, `counts[i]` floats; if `ends[i]` is not
/// null, the sum of each bag's rows, bag `b` ending at key `ends[i][b]`); into `arrays[i]`
/// from `positions[i]`, or into the direct buffer `buffers[i]` if `arrays[i]` is null. Bad
/// input, direct buffers pulled into where they overlap included, fails before anything is
/// sent.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPull<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    request: JObject<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let e = Pieces::read(env, &request, "starts")?;
        let mut entries = Vec::with_capacity(e.names.len());
        // The bytes of direct buffers pulled into, aligned or not.
        let mut direct: Vec<Range<usize>> = Vec::new();
        for (i, table) in e.names.iter().enumerate() {
            let (position, count) = (e.position(i)?, e.count(i)?);
            let sparse = entry_sparse(env, &e, i)?;
            let a = e.arrays.get_element(env, i)?;
            let b = e.buffers.get_element(env, i)?;
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
                let a = e.arrays.get_element(env, i)?;
                let b = e.buffers.get_element(env, i)?;
                write_out(env, values, &a, &b, e.position(i)?, e.count(i)?)?;
                env.delete_local_ref(a);
                env.delete_local_ref(b);
            }
        }
        Ok(())
    })
}

/// Pushes this step's gradients, piece `i` of an `io.warren.ps.PiecesRequest` being one
/// table's: dense if `keys[i]` is null (elements from `firsts[i]`), else sparse (rows of
/// `keys[i]`; if `ends[i]` is not null, a row per bag of them, bag `b` ending at key
/// `ends[i][b]`); the values are `counts[i]` floats of `arrays[i]` from `positions[i]`, or of
/// the direct buffer `buffers[i]` if `arrays[i]` is null.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_ps_PsNative_clientPush<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    request: JObject<'l>,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let e = Pieces::read(env, &request, "offsets")?;
        let mut grads = Vec::with_capacity(e.names.len());
        for (i, table) in e.names.iter().enumerate() {
            let a = e.arrays.get_element(env, i)?;
            let b = e.buffers.get_element(env, i)?;
            let values = read_in(env, &a, &b, e.position(i)?, e.count(i)?)?;
            let table = table.clone();
            grads.push(match entry_sparse(env, &e, i)? {
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

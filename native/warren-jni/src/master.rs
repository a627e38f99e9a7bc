//! Exports behind `io.warren.Master`, `io.warren.MasterClient` and `io.warren.TaskReader`:
//! the data master run in the JVM (the Spark driver, say), a worker's client of it, and the
//! worker's iterator over the records of the tasks it obtains. Handles as for the
//! communicator: `Box` pointers released once by the Java side.

use std::time::Duration;

use jni::objects::{JByteArray, JClass, JLongArray, JObjectArray, JString};
use jni::sys::{jint, jlong};
use jni::{Env, EnvUnowned};
use warren::master::{
    Ack, ClientOptions, GetTask, MasterClient, MasterConfig, MasterService, MasterStatus, ReaderOptions, TaskId,
    TaskReader, read_task,
};

use crate::errors::{JniError, JniResult, run};
use crate::handle;
use crate::strings::strings;

fn master<'a>(h: jlong) -> JniResult<&'a MasterService> {
    handle::shared(h, "Master")
}

fn client<'a>(h: jlong) -> JniResult<&'a mut MasterClient> {
    handle::exclusive(h, "MasterClient")
}

fn reader<'a>(h: jlong) -> JniResult<&'a mut TaskReader> {
    handle::exclusive(h, "TaskReader")
}

pub(crate) fn string(env: &Env<'_>, s: &JString<'_>, what: &str) -> JniResult<String> {
    if s.is_null() {
        return Err(JniError::Argument(format!("{what} is null")));
    }
    Ok(s.try_to_string(env)?)
}

pub(crate) fn millis(ms: jlong, what: &str) -> JniResult<Duration> {
    u64::try_from(ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| JniError::Argument(format!("{what} must be positive, got {ms} ms")))
}

fn parse<T: std::str::FromStr>(key: &str, value: &str) -> JniResult<T> {
    value.parse().map_err(|_| {
        JniError::Warren(warren::Error::Config(format!("master setting {key}={value:?} is not a valid value")))
    })
}

/// A [`MasterConfig`] and store spec from the settings `keys[i] = values[i]` (names as in
/// `io.warren.Master.Builder`; TLS as `WARREN_TLS*` keys, see [`crate::tls`]) and the
/// dataset's glob `patterns`.
fn master_config(patterns: Vec<String>, keys: &[String], values: &[String]) -> JniResult<(MasterConfig, String)> {
    if keys.len() != values.len() {
        return Err(JniError::Argument("keys and values differ in length".into()));
    }
    let mut cfg = MasterConfig::new("");
    let mut store = None;
    let mut chunks_per_task = 1;
    let mut tls = Vec::new();
    for (k, v) in keys.iter().zip(values) {
        match k.as_str() {
            k if k.starts_with("WARREN_TLS") => tls.extend([k.to_string(), v.clone()]),
            "secret" => cfg.secret = v.clone(),
            "store" => store = Some(v.clone()),
            "host" => cfg.host = v.clone(),
            "port" => cfg.port = parse(k, v)?,
            "chunksPerTask" => chunks_per_task = parse(k, v)?,
            "maxFailures" => cfg.settings.max_failures = parse(k, v)?,
            "initialTimeoutMs" => cfg.settings.initial_timeout_ms = parse(k, v)?,
            "minTimeoutMs" => cfg.settings.min_timeout_ms = parse(k, v)?,
            "retryFailedNextPass" => cfg.settings.retry_failed_next_pass = parse(k, v)?,
            "seed" => cfg.settings.seed = parse(k, v)?,
            "durableHandOuts" => cfg.durable_hand_outs = parse(k, v)?,
            _ => return Err(JniError::Warren(warren::Error::Config(format!("unknown master setting {k:?}")))),
        }
    }
    let store = store.ok_or_else(|| {
        JniError::Warren(warren::Error::Config("a master needs a store (file:DIR or etcd:HOST:PORT/PREFIX)".into()))
    })?;
    if !patterns.is_empty() {
        cfg.dataset = Some((patterns, chunks_per_task));
    }
    cfg.tls = crate::tls::from_pairs(&tls)?;
    Ok((cfg, store))
}

/// `[has_dataset, pass, tasks, todo, pending, done, failed]` as a Java `long[]`.
fn status_array<'l>(env: &mut Env<'l>, s: &MasterStatus) -> JniResult<JLongArray<'l>> {
    let c = &s.counts;
    let values = [
        s.has_dataset as i64,
        s.pass as i64,
        s.tasks as i64,
        c.todo as i64,
        c.pending as i64,
        c.done as i64,
        c.failed as i64,
    ];
    let out = env.new_long_array(values.len())?;
    out.set_region(env, 0, &values)?;
    Ok(out)
}

/// Opens the store, sets the dataset (`patterns`, unless empty) and starts serving.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_masterStart<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    patterns: JObjectArray<'l, JString<'l>>,
    keys: JObjectArray<'l, JString<'l>>,
    values: JObjectArray<'l, JString<'l>>,
) -> jlong {
    run(&mut env, |env| {
        let patterns = strings(env, &patterns, "dataset patterns")?;
        let keys = strings(env, &keys, "setting names")?;
        let values = strings(env, &values, "setting values")?;
        let (cfg, spec) = master_config(patterns, &keys, &values)?;
        if cfg.secret.is_empty() {
            return Err(JniError::Warren(warren::Error::Config("a master needs a non-empty job secret".into())));
        }
        let store = warren::store::open::<warren::master::QueueCodec>(&spec)?;
        let service = MasterService::start(cfg, store)?;
        Ok(handle::into_handle(service))
    })
}

/// The `host:port` workers connect to.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_masterAddress<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JString<'l> {
    run(&mut env, |env| Ok(env.new_string(master(h)?.uri())?))
}

/// The master's counts (see `status_array`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_masterStatus<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let s = master(h)?.status()?;
        status_array(env, &s)
    })
}

/// Why the master stopped working (its store failed), or null.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_masterFailure<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JString<'l> {
    run(&mut env, |env| match master(h)?.failure() {
        Some(why) => Ok(env.new_string(why)?),
        None => Ok(JString::null()),
    })
}

/// Stops the master (waiting for calls in flight, so its store is released) and frees it.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_masterClose<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| {
        if let Some(service) = handle::release::<MasterService>(h) {
            service.stop();
        }
        Ok(())
    })
}

/// Connects and authenticates to the master at `uri` now (a wrong secret or address fails
/// here); every later call retries for at most `call_timeout_ms`. `tls`: the TLS settings
/// (see [`crate::tls`]; null: plain TCP).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_mclientConnect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    uri: JString<'l>,
    secret: JString<'l>,
    call_timeout_ms: jlong,
    tls: JObjectArray<'l, JString<'l>>,
) -> jlong {
    run(&mut env, |env| {
        let (uri, secret) = (string(env, &uri, "address")?, string(env, &secret, "secret")?);
        let opts = ClientOptions {
            call_timeout: millis(call_timeout_ms, "callTimeout")?,
            tls: crate::tls::context(env, &tls)?,
            ..Default::default()
        };
        let c = MasterClient::connect(uri, secret, opts)?;
        Ok(handle::into_handle(c))
    })
}

/// The master's counts, asked over the network.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_mclientStatus<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let s = client(h)?.status()?;
        status_array(env, &s)
    })
}

/// Sets the dataset (a no-op if the master has this one already).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_mclientSetDataset<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    patterns: JObjectArray<'l, JString<'l>>,
    chunks_per_task: jint,
) {
    run(&mut env, |env| {
        let c = client(h)?;
        let patterns = strings(env, &patterns, "dataset patterns")?;
        let k = u32::try_from(chunks_per_task)
            .map_err(|_| JniError::Argument(format!("chunksPerTask {chunks_per_task} is negative")))?;
        Ok(c.set_dataset(&patterns, k)?)
    })
}

/// What `mclientGetTask` writes to `out[0]`: a task, whose records are returned.
const GOT_TASK: i64 = 0;
/// `out[0]`: no task now, but tasks are pending elsewhere (ask again later).
const NO_TASK_NOW: i64 = 1;
/// `out[0]`: the pass asked about is over; `out[3]` is the master's current pass.
const PASS_FINISHED: i64 = 2;

/// Asks once for a task of `pass` without waiting and reports the task in `out` as
/// `[kind, id, epoch, pass]` (kinds above); for a task, returns its records (read now)
/// without reporting it finished: the caller does that with `mclientTaskFinished`. A task
/// whose chunk cannot be read is reported failed and the next one is asked for.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_mclientGetTask<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    pass: jlong,
    out: JLongArray<'l>,
) -> JObjectArray<'l, JByteArray<'l>> {
    run(&mut env, |env| {
        let c = client(h)?;
        let pass = u64::try_from(pass).map_err(|_| JniError::Argument(format!("pass {pass} is negative")))?;
        if out.is_null() || out.len(env)? < 4 {
            return Err(JniError::Argument("the task description array needs 4 elements".into()));
        }
        let (head, records) = loop {
            match c.get_task(pass)? {
                GetTask::Task(t) => match read_task(&t) {
                    Ok(records) => break ([GOT_TASK, t.id.0 as i64, t.epoch as i64, t.pass as i64], Some(records)),
                    Err(e) => {
                        log::warn!("task {} epoch {} failed: {e}", t.id, t.epoch);
                        c.task_failed(t.id, t.epoch, e.to_string())?;
                    }
                },
                GetTask::NoMoreTasksNow => break ([NO_TASK_NOW, 0, 0, pass as i64], None),
                GetTask::PassFinished { current_pass } => break ([PASS_FINISHED, 0, 0, current_pass as i64], None),
                GetTask::WrongPass { current_pass } if current_pass > pass => {
                    break ([PASS_FINISHED, 0, 0, current_pass as i64], None);
                }
                GetTask::WrongPass { current_pass } => {
                    return Err(JniError::Warren(warren::Error::InvalidArgument(format!(
                        "master {} is at pass {current_pass}; a task of pass {pass} was asked for",
                        c.uri()
                    ))));
                }
                GetTask::AllTasksFailed => {
                    return Err(JniError::Warren(warren::Error::Master(format!(
                        "{}: every remaining task of pass {pass} failed too often",
                        c.uri()
                    ))));
                }
            }
        };
        out.set_region(env, 0, &head)?;
        let Some(records) = records else {
            return Ok(JObjectArray::<JByteArray>::null());
        };
        let array = JObjectArray::<JByteArray>::new(env, records.len(), JByteArray::null())?;
        for (i, r) in records.iter().enumerate() {
            let bytes = env.byte_array_from_slice(r)?;
            array.set_element(env, i, &bytes)?;
            env.delete_local_ref(bytes);
        }
        Ok(array)
    })
}

fn task_id(id: jlong, epoch: jlong) -> JniResult<(TaskId, u64)> {
    match (u64::try_from(id), u64::try_from(epoch)) {
        (Ok(id), Ok(epoch)) => Ok((TaskId(id), epoch)),
        _ => Err(JniError::Argument(format!("task {id} epoch {epoch}: negative"))),
    }
}

/// Reports task `id` (hand-out `epoch`) finished: 1 if recorded, 0 if stale (the hand-out
/// timed out and the task went back to the queue, or it was reported already).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_mclientTaskFinished<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    id: jlong,
    epoch: jlong,
) -> jint {
    run(&mut env, |_| {
        let (id, epoch) = task_id(id, epoch)?;
        Ok((client(h)?.task_finished(id, epoch)? == Ack::Accepted) as jint)
    })
}

/// Reports task `id` (hand-out `epoch`) failed, so that it is handed out again at once: 1 if
/// recorded, 0 if stale.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_mclientTaskFailed<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    id: jlong,
    epoch: jlong,
    reason: JString<'l>,
) -> jint {
    run(&mut env, |env| {
        let (id, epoch) = task_id(id, epoch)?;
        let reason = string(env, &reason, "reason")?;
        Ok((client(h)?.task_failed(id, epoch, reason)? == Ack::Accepted) as jint)
    })
}

/// Closes the connection and frees the client.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_mclientClose<'l>(mut env: EnvUnowned<'l>, _class: JClass<'l>, h: jlong) {
    run(&mut env, |_| {
        drop(handle::release::<MasterClient>(h));
        Ok(())
    })
}

/// A task reader for pass `pass` on its own connection to the master at `uri` (connected
/// and authenticated now). `idle_timeout_ms`: longest wait for a task while others are
/// pending elsewhere; `tls` as for `mclientConnect`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_warren_Native_taskReaderOpen<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    uri: JString<'l>,
    secret: JString<'l>,
    pass: jlong,
    call_timeout_ms: jlong,
    idle_timeout_ms: jlong,
    tls: JObjectArray<'l, JString<'l>>,
) -> jlong {
    run(&mut env, |env| {
        let (uri, secret) = (string(env, &uri, "address")?, string(env, &secret, "secret")?);
        let pass = u64::try_from(pass).map_err(|_| JniError::Argument(format!("pass {pass} is negative")))?;
        let opts = ClientOptions {
            call_timeout: millis(call_timeout_ms, "callTimeout")?,
            tls: crate::tls::context(env, &tls)?,
            ..Default::default()
        };
        let ropts = ReaderOptions { idle_timeout: millis(idle_timeout_ms, "idleTimeout")?, ..Default::default() };
        let c = MasterClient::connect(uri, secret, opts)?;
        Ok(handle::into_handle(TaskReader::new(c, pass, ropts)))
    })
}

/// The next record of the pass, or null when the pass is over. A task is reported finished
/// once its records are all returned, failed when one of its chunks cannot be read.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_taskReaderNext<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JByteArray<'l> {
    run(&mut env, |env| match reader(h)?.next() {
        None => Ok(JByteArray::null()),
        Some(r) => Ok(env.byte_array_from_slice(&r?)?),
    })
}

/// Starts reading pass `pass` (after the previous one ended).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_taskReaderStartPass<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
    pass: jlong,
) {
    run(&mut env, |_| {
        let r = reader(h)?;
        let pass = u64::try_from(pass).map_err(|_| JniError::Argument(format!("pass {pass} is negative")))?;
        r.start_pass(pass);
        Ok(())
    })
}

/// `[pass, tasks finished, tasks failed]` of this reader.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_taskReaderCounts<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JLongArray<'l> {
    run(&mut env, |env| {
        let r = reader(h)?;
        let values = [r.pass() as i64, r.tasks_finished() as i64, r.tasks_failed() as i64];
        let out = env.new_long_array(values.len())?;
        out.set_region(env, 0, &values)?;
        Ok(out)
    })
}

/// Closes the reader's connection and frees it (a task it holds comes back after its timeout).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_taskReaderClose<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) {
    run(&mut env, |_| {
        drop(handle::release::<TaskReader>(h));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn settings_reach_the_config() {
        let (cfg, store) = master_config(
            v(&["/d/*.rio"]),
            &v(&["secret", "store", "port", "chunksPerTask", "maxFailures", "minTimeoutMs", "retryFailedNextPass"]),
            &v(&["s", "file:/q", "7000", "4", "1", "50", "true"]),
        )
        .unwrap();
        assert_eq!((cfg.secret.as_str(), store.as_str(), cfg.port), ("s", "file:/q", 7000));
        assert_eq!(cfg.dataset, Some((v(&["/d/*.rio"]), 4)));
        assert_eq!((cfg.settings.max_failures, cfg.settings.min_timeout_ms), (1, 50));
        assert!(cfg.settings.retry_failed_next_pass);
    }

    #[test]
    fn bad_settings_are_config_errors() {
        let cfg = |k: &[&str], val: &[&str]| master_config(vec![], &v(k), &v(val));
        for (k, val) in [
            (&["store", "port"][..], &["file:/q", "x"][..]),
            (&["store", "colour"], &["file:/q", "red"]),
            (&["secret"], &["s"]),
        ] {
            assert!(matches!(cfg(k, val), Err(JniError::Warren(warren::Error::Config(_)))), "{k:?}");
        }
        assert!(matches!(millis(0, "t"), Err(JniError::Argument(_))));
        assert!(matches!(master(0), Err(JniError::Closed("Master"))));
        assert!(matches!(client(0), Err(JniError::Closed("MasterClient"))));
        assert!(matches!(reader(0), Err(JniError::Closed("TaskReader"))));
    }
}

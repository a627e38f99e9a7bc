//! In-process benchmark of the master's durable task queue (no network).
//!
//! C client threads share one `DurableQueue` (a `Mutex<Queue>` whose changes go through a
//! `Store` before each call returns) and loop: `get_task`, then `task_finished`, each call
//! durable before it returns. Prints one JSON line per (store, clients) run with
//! `completions_per_s`.
//!
//! ```text
//! cargo run --release -p warren --example master_queue_bench -- \
//!     [--tasks 100000] [--clients 1,8,32] [--store file,snapshot] [--mode separate|combined]
//!     [--snapshot-completions 300] [--compact-after-mb 16] [--dir DIR]
//! ```
//!
//! - `file`: [`FileStore`], write-ahead log with group commit and periodic compaction.
//! - `snapshot`: [`SnapshotEveryChangeStore`], the seed design (whole queue gzipped and
//!   written on every change). It is far too slow for a whole pass of a large dataset, so
//!   it runs on the same queue but stops after `--snapshot-completions` completions; the
//!   line then has `"partial": true` and `full_pass_estimate_s` (tasks / rate).
//! - `--mode combined` uses `finish_and_get_task` (one durable call per completion, the
//!   seed's `GetTask(finished, result)` shape) instead of two calls.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use warren::error::Result;
use warren::master::{Ack, ChunkRef, DurableQueue, GetTask, QueueCodec, QueueSettings};
use warren::store::{FileStore, FileStoreOptions, SnapshotEveryChangeStore, Store};

struct Args {
    tasks: u64,
    clients: Vec<u64>,
    stores: Vec<String>,
    combined: bool,
    snapshot_completions: u64,
    compact_after_mb: u64,
    dir: PathBuf,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        tasks: 100_000,
        clients: vec![1, 8, 32],
        stores: vec!["file".into(), "snapshot".into()],
        combined: false,
        snapshot_completions: 300,
        compact_after_mb: 16,
        dir: std::env::temp_dir().join(format!("warren-master-bench-{}", std::process::id())),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
        match flag.as_str() {
            "--tasks" => args.tasks = num(value()?)?,
            "--clients" => {
                args.clients = value()?.split(',').map(|c| num(c.to_string())).collect::<std::result::Result<_, _>>()?
            }
            "--store" => args.stores = value()?.split(',').map(str::to_string).collect(),
            "--mode" => {
                args.combined = match value()?.as_str() {
                    "separate" => false,
                    "combined" => true,
                    other => return Err(format!("unknown mode {other}")),
                }
            }
            "--snapshot-completions" => args.snapshot_completions = num(value()?)?,
            "--compact-after-mb" => args.compact_after_mb = num(value()?)?,
            "--dir" => args.dir = PathBuf::from(value()?),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

/// `n` chunks of RecordIO files, 1000 chunks per file.
fn dataset(n: u64) -> Vec<ChunkRef> {
    (0..n)
        .map(|i| ChunkRef {
            path: format!("/data/train/part-{:05}.recordio", i / 1000),
            index: i % 1000,
            offset: (i % 1000) * (1 << 20),
            len: 1 << 20,
            records: 1000,
        })
        .collect()
}

struct Outcome {
    completions: u64,
    seconds: f64,
    latency_us: Histogram<u64>,
}

/// Runs `clients` threads against `dq` until the pass ends or `limit` completions.
fn drive<S: Store<QueueCodec>>(dq: &DurableQueue<S>, clients: u64, combined: bool, limit: u64) -> Result<Outcome> {
    let start = Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    let completions = AtomicU64::new(0);
    let results: Vec<Result<Histogram<u64>>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..clients)
            .map(|_| {
                let completions = &completions;
                s.spawn(move || -> Result<Histogram<u64>> {
                    let mut hist = Histogram::<u64>::new(3).expect("histogram");
                    let mut held = None;
                    loop {
                        if completions.load(Ordering::Relaxed) >= limit {
                            return Ok(hist);
                        }
                        let t0 = Instant::now();
                        let next = match (combined, held.take()) {
                            (true, Some((id, epoch))) => {
                                let (ack, next) = dq.finish_and_get_task(id, epoch, 0, now())?;
                                assert_eq!(ack, Ack::Accepted);
                                completions.fetch_add(1, Ordering::Relaxed);
                                next
                            }
                            _ => dq.get_task(0, now())?,
                        };
                        match next {
                            GetTask::Task(t) if combined => held = Some((t.id, t.epoch)),
                            GetTask::Task(t) => {
                                let ack = dq.task_finished(t.id, t.epoch, now())?;
                                assert_eq!(ack, Ack::Accepted);
                                completions.fetch_add(1, Ordering::Relaxed);
                            }
                            GetTask::NoMoreTasksNow => std::thread::yield_now(),
                            GetTask::PassFinished { .. } => return Ok(hist),
                            other => panic!("unexpected answer {other:?}"),
                        }
                        let _ = hist.record(t0.elapsed().as_micros() as u64);
                        dq.compact_if_wanted()?;
                    }
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("client thread panicked")).collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut latency_us = Histogram::<u64>::new(3).expect("histogram");
    for r in results {
        latency_us.add(r?).expect("same histogram shape");
    }
    Ok(Outcome { completions: completions.load(Ordering::Relaxed), seconds, latency_us })
}

fn fresh_dir(base: &Path, name: &str) -> PathBuf {
    let dir = base.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn main() -> Result<()> {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("master_queue_bench: {e}");
            std::process::exit(2);
        }
    };
    let chunks = dataset(args.tasks);
    let mode = if args.combined { "combined" } else { "separate" };
    for store in &args.stores {
        for &clients in &args.clients {
            let dir = fresh_dir(&args.dir, &format!("{store}-{clients}"));
            let (outcome, extra) = match store.as_str() {
                "file" => {
                    let opts =
                        FileStoreOptions { compact_after_bytes: args.compact_after_mb << 20, ..Default::default() };
                    let fs = Arc::new(FileStore::open_with(&dir, opts)?);
                    let dq = DurableQueue::open(QueueSettings::default(), Arc::clone(&fs), 0)?;
                    dq.set_dataset(chunks.clone(), 1)?;
                    let base = fs.stats();
                    let outcome = drive(&dq, clients, args.combined, u64::MAX)?;
                    let st = fs.stats();
                    let extra = format!(
                        r#","partial":false,"fsyncs":{},"log_records":{},"changes_per_fsync":{:.2},"compactions":{}"#,
                        st.syncs - base.syncs,
                        st.submits - base.submits,
                        (st.records - base.records) as f64 / (st.syncs - base.syncs).max(1) as f64,
                        st.compactions - base.compactions
                    );
                    (outcome, extra)
                }
                "snapshot" => {
                    let s = SnapshotEveryChangeStore::open(&dir, 6)?;
                    let dq = DurableQueue::open(QueueSettings::default(), s, 0)?;
                    dq.set_dataset(chunks.clone(), 1)?;
                    let limit = args.snapshot_completions.min(args.tasks);
                    let outcome = drive(&dq, clients, args.combined, limit)?;
                    let rate = outcome.completions as f64 / outcome.seconds;
                    let extra = format!(
                        r#","partial":{},"full_pass_estimate_s":{:.0}"#,
                        outcome.completions < args.tasks,
                        args.tasks as f64 / rate
                    );
                    (outcome, extra)
                }
                other => {
                    eprintln!("master_queue_bench: unknown store {other} (file, snapshot)");
                    std::process::exit(2);
                }
            };
            let _ = std::fs::remove_dir_all(&dir);
            let h = &outcome.latency_us;
            println!(
                r#"{{"bench":"master_queue","store":"{store}","mode":"{mode}","tasks":{},"clients":{clients},"completions":{},"seconds":{:.3},"completions_per_s":{:.1},"completion_p50_us":{},"completion_p99_us":{}{extra}}}"#,
                args.tasks,
                outcome.completions,
                outcome.seconds,
                outcome.completions as f64 / outcome.seconds,
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99),
            );
        }
    }
    let _ = std::fs::remove_dir(&args.dir);
    Ok(())
}

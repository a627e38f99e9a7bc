//! `warren example ps-train --master URI`: a trainer's examples come from the data master's
//! task queues instead of being made from `(seed, trainer, step)`. Each record of the master's
//! dataset is one example, as text: `LABEL KEY KEY ...` (what `--write-dataset` writes). A
//! trainer takes a task, trains its records in batches of `--batch` (a batch never spans two
//! tasks), and reports the task finished once the push of its last batch is committed; a task
//! of a trainer that died is handed out again when its time is up (`warren master
//! --min-timeout-s`), so every example is trained at least once. The job trains one pass
//! (`--pass`) and ends when the master says it is over.
//!
//! Under sync and SSP every step needs every live trainer's push: a trainer that has no task
//! for the moment (the rest are handed out) pushes an empty step, so that it holds nobody
//! back, and asks again.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use warren::Error;
use warren::master::{ClientOptions, GetTask, MasterClient, Task, read_task};
use warren::recordio::{Compressor, Writer, WriterOptions};

/// One example: its feature keys and its label.
#[derive(Debug)]
pub(crate) struct Example {
    /// Its feature keys, below `--buckets`.
    pub keys: Vec<u64>,
    /// 0 or 1.
    pub label: f32,
}

/// How long a trainer without a task waits before it asks again.
const IDLE_PAUSE: Duration = Duration::from_millis(20);

/// What a trainer trains next.
pub enum Next {
    /// A batch of the task in hand (at most `--batch` examples; fewer at the task's end).
    Batch(Vec<Example>),
    /// No task for now: every remaining one is handed out to another trainer.
    Idle,
    /// The pass is over: every task of it is finished.
    PassOver,
}

/// A trainer's feed of examples from the master.
pub struct Feed {
    master: MasterClient,
    pass: u64,
    buckets: u64,
    task: Option<(Task, VecDeque<Example>)>,
    /// Examples trained.
    pub examples: u64,
    /// Tasks reported finished.
    pub tasks: u64,
}

impl Feed {
    /// A feed of pass `pass` from the master at `uri`; keys are taken modulo `buckets`.
    pub fn new(uri: &str, secret: &str, pass: u64, buckets: u64, opts: ClientOptions) -> Feed {
        Feed { master: MasterClient::new(uri, secret, opts), pass, buckets, task: None, examples: 0, tasks: 0 }
    }

    /// The next batch of at most `size` examples, or why there is none.
    pub fn next(&mut self, size: usize) -> warren::Result<Next> {
        if self.task.is_none() {
            match self.master.get_task(self.pass)? {
                GetTask::Task(task) => {
                    let examples = read_task(&task)?
                        .iter()
                        .enumerate()
                        .map(|(i, r)| parse(r, self.buckets).map_err(|why| bad_record(&task, i, &why)))
                        .collect::<warren::Result<VecDeque<_>>>()?;
                    self.task = Some((task, examples));
                }
                GetTask::NoMoreTasksNow => {
                    std::thread::sleep(IDLE_PAUSE);
                    return Ok(Next::Idle);
                }
                GetTask::PassFinished { .. } => return Ok(Next::PassOver),
                GetTask::AllTasksFailed => {
                    return Err(Error::Master(format!(
                        "every remaining task of pass {} failed too often; see the master's log",
                        self.pass
                    )));
                }
                GetTask::WrongPass { current_pass } => {
                    return Err(Error::Master(format!(
                        "pass {} is not reached yet: the master is at pass {current_pass}",
                        self.pass
                    )));
                }
            }
        }
        let (_, examples) = self.task.as_mut().expect("set above");
        let n = size.min(examples.len());
        Ok(Next::Batch(examples.drain(..n).collect()))
    }

    /// After the push of the last batch [`Feed::next`] gave was committed: counts it, and
    /// reports the task finished if that batch was its last.
    pub fn trained(&mut self, batch: usize) -> warren::Result<()> {
        self.examples += batch as u64;
        if self.task.as_ref().is_some_and(|(_, rest)| rest.is_empty()) {
            let (task, _) = self.task.take().expect("checked");
            // A report on a hand-out that timed out is not acknowledged: the task went back
            // to the queue and its examples are trained again (at least once).
            self.master.task_finished(task.id, task.epoch)?;
            self.tasks += 1;
        }
        Ok(())
    }
}

fn bad_record(task: &Task, i: usize, why: &str) -> Error {
    Error::InvalidArgument(format!("record {i} of task {} (pass {}): {why}", task.id, task.pass))
}

/// One example from its record, `LABEL KEY KEY ...` (label 0 or 1, keys as decimal `u64`s,
/// taken modulo `buckets`).
pub fn parse(record: &[u8], buckets: u64) -> Result<Example, String> {
    let text = std::str::from_utf8(record).map_err(|_| "not UTF-8 text: expected `LABEL KEY KEY ...`".to_string())?;
    let mut fields = text.split_ascii_whitespace();
    let label = match fields.next() {
        Some("0") => 0.0,
        Some("1") => 1.0,
        other => return Err(format!("label {other:?}: expected 0 or 1 first, then the keys")),
    };
    let keys = fields
        .map(|k| k.parse::<u64>().map(|k| k % buckets).map_err(|_| format!("key {k:?} is not a whole number")))
        .collect::<Result<Vec<_>, _>>()?;
    if keys.is_empty() {
        return Err("no keys after the label".into());
    }
    Ok(Example { keys, label })
}

/// The record of `e` (what [`parse`] reads).
fn record(e: &Example) -> String {
    let keys: Vec<String> = e.keys.iter().map(u64::to_string).collect();
    format!("{} {}", e.label as u8, keys.join(" "))
}

/// Writes `examples` to `dir/part-0.rio` in chunks of about `chunk_bytes` (with `warren master
/// --chunks-per-task 1`, a task each); returns the file's path.
pub fn write_dataset(
    dir: &Path,
    examples: impl Iterator<Item = Example>,
    chunk_bytes: usize,
) -> warren::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let path = dir.join("part-0.rio");
    let mut w = Writer::create(&path, WriterOptions { max_chunk_bytes: chunk_bytes, compressor: Compressor::None })?;
    for e in examples {
        w.write(record(&e).as_bytes())?;
    }
    w.finish()?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_the_example_written_and_bad_ones_say_why() {
        let e = Example { keys: vec![3, 0, 17], label: 1.0 };
        let back = parse(record(&e).as_bytes(), 100).unwrap();
        assert_eq!((back.keys, back.label), (e.keys, e.label));
        assert_eq!(parse(b"0 250 7", 100).unwrap().keys, vec![50, 7], "keys are taken modulo the buckets");
        for (bad, why) in [
            (&b"2 1 2"[..], "expected 0 or 1"),
            (b"", "expected 0 or 1"),
            (b"1", "no keys"),
            (b"1 4 x", "key \"x\""),
            (b"1 \xff", "not UTF-8"),
        ] {
            let e = parse(bad, 100).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}

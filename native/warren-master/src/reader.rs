//! [`TaskReader`]: what a worker reads its data through. It obtains tasks from the master,
//! yields the records of their chunks, and reports each task finished once its records are
//! all read, or failed when a chunk cannot be read (then it goes on to the next task).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::time::{Duration, Instant};

use super::client::MasterClient;
use super::queue::{ChunkRef, GetTask, Task};
use warren_base::error::{Error, Result};
use warren_recordio::Reader;

/// How a [`TaskReader`] waits when the master has nothing to hand out for the moment.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// Pause before asking again after [`GetTask::NoMoreTasksNow`] (default 100 ms).
    pub poll: Duration,
    /// Longest wait for a task while others are pending elsewhere (default 1 hour: a task
    /// held by a dead worker comes back after its timeout).
    pub idle_timeout: Duration,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions { poll: Duration::from_millis(100), idle_timeout: Duration::from_secs(3600) }
    }
}

/// An iterator over the records of the tasks of one pass, obtained from the master.
///
/// The iteration ends when the master says the pass is over. An item is `Err` when the
/// master cannot be reached (after the client's retries), when every remaining task failed,
/// or when no task came within [`ReaderOptions::idle_timeout`]; the iteration ends after it.
/// A corrupt chunk is not an error of the iteration: its task is reported failed (records
/// of that task already yielded stay yielded) and reading goes on with the next task.
#[derive(Debug)]
pub struct TaskReader {
    client: MasterClient,
    opts: ReaderOptions,
    pass: u64,
    task: Option<Task>,
    next_chunk: usize,
    records: VecDeque<Vec<u8>>,
    files: HashMap<String, Reader<File>>,
    next: Option<GetTask>,
    ended: bool,
    finished: u64,
    failed: u64,
}

impl TaskReader {
    /// Reads pass `pass` through `client`.
    pub fn new(client: MasterClient, pass: u64, opts: ReaderOptions) -> TaskReader {
        TaskReader {
            client,
            opts,
            pass,
            task: None,
            next_chunk: 0,
            records: VecDeque::new(),
            files: HashMap::new(),
            next: None,
            ended: false,
            finished: 0,
            failed: 0,
        }
    }

    /// The pass being read.
    pub fn pass(&self) -> u64 {
        self.pass
    }

    /// Starts reading pass `pass` (after the previous one ended).
    pub fn start_pass(&mut self, pass: u64) {
        self.pass = pass;
        self.ended = false;
        self.next = None;
    }

    /// The task whose records are being yielded.
    pub fn current_task(&self) -> Option<&Task> {
        self.task.as_ref()
    }

    /// Tasks reported finished so far.
    pub fn tasks_finished(&self) -> u64 {
        self.finished
    }

    /// Tasks reported failed so far.
    pub fn tasks_failed(&self) -> u64 {
        self.failed
    }

    /// The client, e.g. to ask for the master's status.
    pub fn client(&mut self) -> &mut MasterClient {
        &mut self.client
    }

    fn step(&mut self) -> Result<Option<Vec<u8>>> {
        let mut idle_since: Option<Instant> = None;
        loop {
            if let Some(r) = self.records.pop_front() {
                return Ok(Some(r));
            }
            if let Some((id, epoch, chunk)) =
                self.task.as_ref().map(|t| (t.id, t.epoch, t.chunks.get(self.next_chunk).cloned()))
            {
                if let Some(chunk) = chunk {
                    self.next_chunk += 1;
                    match self.read_chunk(&chunk) {
                        Ok(records) => self.records = records.into(),
                        Err(e) => {
                            log::warn!("task {id} epoch {epoch} failed: {e}");
                            self.task = None;
                            self.failed += 1;
                            self.client.task_failed(id, epoch, e.to_string())?;
                        }
                    }
                    continue;
                }
                self.task = None;
                let (_, next) = self.client.finish_and_get_task(id, epoch, self.pass)?;
                self.finished += 1;
                self.next = Some(next);
            }
            let next = match self.next.take() {
                Some(n) => n,
                None => self.client.get_task(self.pass)?,
            };
            match next {
                GetTask::Task(t) => {
                    self.task = Some(t);
                    self.next_chunk = 0;
                    idle_since = None;
                }
                GetTask::PassFinished { .. } => return Ok(None),
                GetTask::NoMoreTasksNow => {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= self.opts.idle_timeout {
                        return Err(Error::Timeout {
                            what: format!("a task of pass {} from master {}", self.pass, self.client.uri()),
                            after: self.opts.idle_timeout,
                        });
                    }
                    std::thread::sleep(self.opts.poll);
                }
                GetTask::AllTasksFailed => {
                    return Err(Error::Master(format!(
                        "{}: every remaining task of pass {} failed too often",
                        self.client.uri(),
                        self.pass
                    )));
                }
                GetTask::WrongPass { current_pass } => {
                    return Err(Error::InvalidArgument(format!(
                        "master {} is at pass {current_pass}; this reader asked for pass {}",
                        self.client.uri(),
                        self.pass
                    )));
                }
            }
        }
    }

    fn read_chunk(&mut self, c: &ChunkRef) -> Result<Vec<Vec<u8>>> {
        read_chunk(&mut self.files, c)
    }
}

/// The records of every chunk of `task`, in order: what a worker that reports its tasks
/// itself (finished only once their contribution is safe) reads. Fails with
/// [`Error::Corrupt`] when a chunk cannot be read or its file changed since the master
/// indexed it; report the task failed then.
pub fn read_task(task: &Task) -> Result<Vec<Vec<u8>>> {
    let mut files = HashMap::new();
    let mut out = Vec::new();
    for c in &task.chunks {
        out.extend(read_chunk(&mut files, c)?);
    }
    Ok(out)
}

/// Reads chunk `c`, opening its file into `files` if needed and checking that the chunk is
/// still where the master indexed it.
fn read_chunk(files: &mut HashMap<String, Reader<File>>, c: &ChunkRef) -> Result<Vec<Vec<u8>>> {
    if !files.contains_key(&c.path) {
        files.insert(c.path.clone(), Reader::open(&c.path)?);
    }
    let reader = files.get_mut(&c.path).expect("inserted above");
    let info = reader.index().chunk(c.index as usize).copied();
    if info.map(|i| i.offset) != Some(c.offset) {
        return Err(Error::Corrupt {
            file: c.path.clone(),
            chunk: c.index,
            offset: c.offset,
            reason: "the file changed since the master indexed it".into(),
        });
    }
    Ok(reader.read_chunk(c.index as usize)?.to_vecs())
}

impl Iterator for TaskReader {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        match self.step() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.ended = true;
                None
            }
            Err(e) => {
                self.ended = true;
                Some(Err(e))
            }
        }
    }
}

//! The Python binding of Warren's communicator: the extension module `warren._native`, which
//! the pure-Python package `warren` (`python/warren/__init__.py`) re-exports.
//!
//! Layout:
//! - [`PyCommunicator`] (`warren.Communicator`): one `warren::Communicator` behind a mutex;
//!   every call that waits on the network releases the GIL (`Python::detach`), so other
//!   Python threads run meanwhile, and [`PyCommunicator::cancel`] works from one of them.
//! - [`arrays`]: numpy arrays borrowed in place (no copy) as the slices the calls take.
//! - [`errors`]: one Python exception class per `warren::Error` variant, under
//!   `warren.WarrenError`.
//! - [`logging`]: Warren's log records on stderr.
//!
//! The crate builds as a `cdylib` for Python only with the `extension-module` feature, which
//! maturin turns on (pyproject.toml); without it, `cargo build` and `cargo test` of the
//! workspace link it against libpython like any other crate.
#![deny(missing_docs)]

pub mod arrays;
pub mod errors;
pub mod logging;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use arrays::Slice;
use warren::{CancelHandle, Communicator, Config, Op};

/// What `load_checkpoint` returns: the version, the global model and the local model.
type LoadedCheckpoint<'py> = (u32, Option<Bound<'py, PyBytes>>, Option<Bound<'py, PyBytes>>);

/// A worker's communicator: `warren.Communicator()` joins the job its environment describes
/// (`WARREN_*`, as `warren run` sets it); `warren.Communicator(settings)` or keyword settings
/// (`tracker_uri="host:port"` or `WARREN_TRACKER_URI="host:port"`) give the settings instead.
#[pyclass(name = "Communicator", module = "warren")]
pub struct PyCommunicator {
    comm: Mutex<Option<Communicator>>,
    cancel: CancelHandle,
    rank: usize,
    world_size: usize,
}

/// The settings map of the constructor's arguments: keys as given when they start with
/// `WARREN_`, otherwise upper-cased and prefixed (`tracker_uri` is `WARREN_TRACKER_URI`).
fn settings_map(
    settings: Option<&Bound<'_, PyDict>>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<HashMap<String, String>> {
    let mut map = HashMap::new();
    for dict in [settings, kwargs].into_iter().flatten() {
        for (k, v) in dict.iter() {
            let k: String = k.extract()?;
            let key = if k.starts_with("WARREN_") { k } else { format!("WARREN_{}", k.to_ascii_uppercase()) };
            map.insert(key, v.str()?.to_string());
        }
    }
    Ok(map)
}

fn parse_op(op: &str) -> PyResult<Op> {
    Op::from_name(&op.to_ascii_lowercase()).filter(|o| *o != Op::User).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown reduction op {op:?}: use one of sum, prod, min, max, bitand, bitor, bitxor"
        ))
    })
}

impl PyCommunicator {
    fn lock(&self) -> MutexGuard<'_, Option<Communicator>> {
        self.comm.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the communicator with the GIL released; a Warren error becomes its Python
    /// exception, a finalized communicator a `ClosedError`.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Communicator) -> warren::Result<T> + Send,
    ) -> PyResult<T> {
        let r = py.detach(|| {
            let mut guard = self.lock();
            guard.as_mut().map(f)
        });
        match r {
            None => Err(errors::closed()),
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(errors::to_py_err(py, &e)),
        }
    }
}

#[pymethods]
impl PyCommunicator {
    /// Joins the job: from the environment without arguments, else from the settings given.
    #[new]
    #[pyo3(signature = (settings=None, **kwargs))]
    fn new(py: Python<'_>, settings: Option<&Bound<'_, PyDict>>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let cfg = if settings.is_none() && kwargs.is_none_or(|k| k.is_empty()) {
            Config::from_env()
        } else {
            Config::from_map(&settings_map(settings, kwargs)?)
        }
        .map_err(|e| errors::to_py_err(py, &e))?;
        let cancel = CancelHandle::new();
        let comm = py.detach(|| Communicator::init_cancellable(cfg, &cancel)).map_err(|e| errors::to_py_err(py, &e))?;
        let (rank, world_size) = (comm.rank(), comm.world_size());
        Ok(PyCommunicator { comm: Mutex::new(Some(comm)), cancel, rank, world_size })
    }

    /// This worker's rank, from 0.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// The number of workers.
    #[getter]
    fn world_size(&self) -> usize {
        self.world_size
    }

    /// Checkpoints committed so far (0 before the first); a re-run worker starts at the
    /// version it loaded.
    #[getter]
    fn version(&self, py: Python<'_>) -> PyResult<u32> {
        self.with(py, |c| Ok(c.version()))
    }

    /// Recoveries this communicator took part in (replacements of lost workers it served).
    #[getter]
    fn recoveries(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |c| Ok(c.recoveries()))
    }

    /// Reduces `array` in place over every worker with `op` (`sum`, `prod`, `min`, `max`;
    /// `bitand`, `bitor`, `bitxor` for integers), without a copy; returns the same array.
    #[pyo3(signature = (array, op="sum"))]
    fn allreduce<'py>(&self, py: Python<'py>, array: Bound<'py, PyAny>, op: &str) -> PyResult<Bound<'py, PyAny>> {
        let op = parse_op(op)?;
        let mut borrowed = arrays::borrow(&array, "allreduce")?;
        match borrowed.slice()? {
            Slice::I8(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::I16(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::I32(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::I64(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::U8(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::U16(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::U32(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::U64(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::F32(s) => self.with(py, |c| c.allreduce(s, op)),
            Slice::F64(s) => self.with(py, |c| c.allreduce(s, op)),
        }?;
        drop(borrowed);
        Ok(array)
    }

    /// Broadcasts from rank `root`. A numpy array is overwritten in place with the root's
    /// (same size on every worker) and returned; bytes (or `None` off the root) return the
    /// root's bytes, of any length.
    #[pyo3(signature = (data, root=0))]
    fn broadcast<'py>(&self, py: Python<'py>, data: Bound<'py, PyAny>, root: usize) -> PyResult<Bound<'py, PyAny>> {
        if data.is_none() || data.is_instance_of::<PyBytes>() {
            let mut buf: Vec<u8> = if data.is_none() { Vec::new() } else { data.extract::<&[u8]>()?.to_vec() };
            self.with(py, |c| c.broadcast(&mut buf, root))?;
            return Ok(PyBytes::new(py, &buf).into_any());
        }
        let mut borrowed = arrays::borrow(&data, "broadcast")?;
        let bytes = borrowed.slice()?.into_bytes();
        self.with(py, |c| c.broadcast(bytes, root))?;
        drop(borrowed);
        Ok(data)
    }

    /// Every worker's `data`, in rank order (sizes may differ).
    fn allgather<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let parts = self.with(py, |c| c.allgather(data))?;
        PyList::new(py, parts.iter().map(|p| PyBytes::new(py, p)))
    }

    /// Waits until every worker has called `barrier`.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.barrier())
    }

    /// The latency of this worker's collective calls so far, one part per kind of call:
    /// count, median, p99 and max in microseconds (`allreduce(tree): n=9 p50=2100us
    /// p99=4000us max=4100us; broadcast: ...`); empty before the first call.
    fn stats(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |c| Ok(c.stats().summary()))
    }

    /// Writes `msg` to the tracker's log (the `warren run` output), prefixed with the rank.
    fn print(&self, py: Python<'_>, msg: &str) -> PyResult<()> {
        self.with(py, |c| c.print(msg))
    }

    /// Commits checkpoint `version + 1`: `global_model`, the same on every worker, and this
    /// worker's `local_model`, if any. A re-run worker loads it from the survivors.
    #[pyo3(signature = (global_model, local_model=None))]
    fn checkpoint(&self, py: Python<'_>, global_model: &[u8], local_model: Option<&[u8]>) -> PyResult<()> {
        self.with(py, |c| c.checkpoint(global_model, local_model))
    }

    /// The latest checkpoint as `(version, global_model, local_model)`: `(0, None, None)` on
    /// a fresh start; `local_model` is `None` when this worker checkpointed none.
    fn load_checkpoint<'py>(&self, py: Python<'py>) -> PyResult<LoadedCheckpoint<'py>> {
        let ck = self.with(py, |c| c.load_checkpoint())?;
        let global = (ck.version > 0).then(|| PyBytes::new(py, &ck.global));
        let local = ck.local.as_deref().map(|l| PyBytes::new(py, l));
        Ok((ck.version, global, local))
    }

    /// Cancels the communicator from another thread: its running call, and every later one,
    /// fails with `AbortedError` (`reason` in the message) within milliseconds.
    #[pyo3(signature = (reason="cancelled"))]
    fn cancel(&self, reason: &str) {
        self.cancel.cancel(reason);
    }

    /// Leaves the job cleanly: waits until every worker reaches `finalize` (serving a
    /// replacement of a worker lost meanwhile), then tells the tracker. Later calls raise
    /// `ClosedError`; a second `finalize` does nothing.
    fn finalize(&self, py: Python<'_>) -> PyResult<()> {
        let r = py.detach(|| self.lock().take().map(Communicator::finalize));
        match r {
            None | Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(errors::to_py_err(py, &e)),
        }
    }

    /// Leaves the job as failed, at once: cancels a running call, then closes the links and
    /// the tracker connection without telling the tracker the worker finished (which
    /// `finalize` does, and which would make it refuse a replacement), so that a new attempt
    /// of the same task can take this worker's place. What a launcher calls when the work
    /// raised. Later calls raise `ClosedError`; on a finalized communicator it does nothing.
    fn abort(&self, py: Python<'_>) {
        self.cancel.cancel("aborted: the worker failed");
        let comm = py.detach(|| self.lock().take());
        drop(comm);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Finalizes on a normal exit of the `with` block; on an exception, leaves it to
    /// propagate (the worker then exits with an error and `warren run` re-runs it alone).
    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_none_or(|t| t.is_none()) {
            self.finalize(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<warren.Communicator rank {} of {}>", self.rank, self.world_size)
    }
}

/// The module `warren._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logging::init();
    m.add_class::<PyCommunicator>()?;
    errors::add_classes(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

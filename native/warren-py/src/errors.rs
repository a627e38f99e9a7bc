//! Python exceptions of the binding: one class per `warren::Error` variant, all under
//! `warren.WarrenError`, chosen by the error *variant* ([`to_py_err`]), never by message text.
//!
//! Each exception carries the Rust error's message unchanged and an attribute `final`: `True`
//! when running the worker again cannot succeed ([`warren::Error::is_final`]), which the
//! Python package turns into the exit status `warren run` reads (3: stop the job; any other
//! failure: re-run this worker alone).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{PyErr, Python, create_exception};

create_exception!(
    warren,
    WarrenError,
    PyException,
    "Base class of every exception Warren raises; `final` says whether a re-run can succeed."
);

/// Declares one exception class per entry (a subclass of `WarrenError`) and [`class_name`],
/// [`add_classes`] and the variant-to-class mapping, from one list.
macro_rules! exceptions {
    ($( $variant:ident => $class:ident : $doc:literal ),* $(,)?) => {
        $( create_exception!(warren, $class, WarrenError, $doc); )*

        /// The Python class name of each `warren::Error` variant. The match is exhaustive on
        /// purpose: a new variant does not compile until it has its class here.
        pub fn class_name(e: &warren::Error) -> &'static str {
            match e {
                $( warren::Error::$variant { .. } => stringify!($class), )*
            }
        }

        fn new_err(e: &warren::Error) -> PyErr {
            let msg = e.to_string();
            match e {
                $( warren::Error::$variant { .. } => PyErr::new::<$class, _>(msg), )*
            }
        }

        /// Adds `WarrenError` and every subclass to module `m`.
        pub fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
            let py = m.py();
            m.add("WarrenError", py.get_type::<WarrenError>())?;
            m.add("ClosedError", py.get_type::<ClosedError>())?;
            $( m.add(stringify!($class), py.get_type::<$class>())?; )*
            Ok(())
        }
    };
}

exceptions! {
    Config => ConfigError: "A setting is missing or malformed (environment variable or keyword setting).",
    Io => WarrenIOError: "An operating-system I/O error outside of a peer link (socket, file, tracker).",
    Timeout => WarrenTimeoutError: "A wait ran past its deadline; the message names what was waited for.",
    PeerLost => PeerLostError: "A link to a peer broke; `rank` is the peer's rank.",
    Mismatch => CallMismatchError: "Ranks called a collective with different arguments (size, type, op, root, order).",
    Protocol => ProtocolError: "A peer or the tracker sent bytes that do not follow the protocol.",
    Auth => AuthError: "The job secret could not be proved, by this worker or by a peer.",
    Aborted => AbortedError: "The call was aborted: another rank failed, or this communicator was cancelled.",
    InvalidArgument => InvalidArgumentError: "The API was used wrongly (root out of range, an op a type lacks, ...).",
    Tracker => TrackerError: "The tracker reported a job-level failure.",
    JobFailed => JobFailedError: "Another worker failed with an error a re-run cannot fix, and the job ended.",
    Corrupt => CorruptDataError: "A data file is corrupt or truncated.",
    RecoveryImpossible => RecoveryImpossibleError: "The data a re-run worker needs is held by no live worker.",
    RelinkSuperseded => RelinkSupersededError: "Linking to the peers was superseded by a new re-link round.",
    RolledBack => RolledBackError: "Elastic membership: rolled back to the last checkpoint; call load_checkpoint().",
    Fenced => FencedError: "The tracker fenced this worker (no heartbeat in time); it must exit.",
    DatasetMismatch => DatasetMismatchError: "A trainer reported another dataset than the job's.",
    StoreCorrupt => StoreCorruptError: "A file of a durable store is damaged.",
    InvalidChange => InvalidChangeError: "A logged change does not fit the state it is replayed onto.",
    StoreFailed => StoreFailedError: "A durable store failed earlier and is unusable until restart.",
    Master => MasterError: "The data master answered with an error.",
    Left => LeftError: "Elastic membership: this task is not a member of the job any more.",
}

create_exception!(
    warren,
    ClosedError,
    WarrenError,
    "The communicator was finalized (or its finalize failed): it takes no more calls."
);

/// The Python exception of `e`: its class by variant, its message, `final`, and for the
/// variants with a field a caller acts on, that field (`rank` of `PeerLostError` and
/// `AbortedError`, `version` of `RolledBackError`, `lost` of `RecoveryImpossibleError`).
pub fn to_py_err(py: Python<'_>, e: &warren::Error) -> PyErr {
    let err = new_err(e);
    let value = err.value(py);
    let _ = value.setattr("final", e.is_final());
    let _ = match e {
        warren::Error::PeerLost { rank, .. } | warren::Error::Aborted { rank, .. } => value.setattr("rank", *rank),
        warren::Error::RolledBack { version, .. } => value.setattr("version", *version),
        warren::Error::RecoveryImpossible { lost, .. } => value.setattr("lost", lost.clone()),
        _ => Ok(()),
    };
    err
}

/// The `ClosedError` of a call on a finalized or aborted communicator.
pub fn closed() -> PyErr {
    PyErr::new::<ClosedError, _>("the communicator is finalized or aborted: it takes no more calls")
}

#[cfg(test)]
mod tests {
    use super::class_name;

    #[test]
    fn every_variant_has_its_own_class() {
        let errors = [
            warren::Error::Config("x".into()),
            warren::Error::RelinkSuperseded("x".into()),
            warren::Error::JobFailed("x".into()),
            warren::Error::Aborted { rank: 1, reason: "cancelled".into() },
            warren::Error::Fenced("x".into()),
            warren::Error::InvalidArgument("x".into()),
        ];
        let names: Vec<&str> = errors.iter().map(class_name).collect();
        assert_eq!(
            names,
            [
                "ConfigError",
                "RelinkSupersededError",
                "JobFailedError",
                "AbortedError",
                "FencedError",
                "InvalidArgumentError"
            ]
        );
    }
}

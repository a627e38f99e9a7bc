//! Errors of the JNI layer and the one helper every export runs its body through.
//!
//! [`run`] upgrades the JNI environment, catches panics, and turns an error into a pending
//! Java exception chosen by the error *variant* ([`exception_class`]), never by message text.
//! An export's body returns `Result<T, JniError>` and may use `?` freely: nothing escapes the
//! `extern "system"` function.

use std::any::Any;

use jni::errors::ErrorPolicy;
use jni::strings::JNIString;
use jni::{Env, EnvUnowned};

/// Base class of every exception Warren throws.
pub const WARREN_EXCEPTION: &str = "io/warren/WarrenException";
/// Thrown when a closed (or zero) handle is used.
pub const ILLEGAL_STATE: &str = "java/lang/IllegalStateException";
/// Thrown for arguments the JNI layer rejects before calling Warren (bad codes, ranges).
pub const ILLEGAL_ARGUMENT: &str = "java/lang/IllegalArgumentException";

/// Everything that can fail in an export.
#[derive(Debug)]
pub enum JniError {
    /// An error of the `warren` crate: mapped by variant with [`exception_class`].
    Warren(warren::Error),
    /// A JNI call failed. If it left a Java exception pending, that exception is what the
    /// caller sees; otherwise a `WarrenException` describing the JNI failure.
    Jni(jni::errors::Error),
    /// A closed or zero handle was used; names the kind of object.
    Closed(&'static str),
    /// A bad argument detected in the JNI layer (an unknown op code, a range past the end of
    /// a buffer, ...).
    Argument(String),
}

impl std::fmt::Display for JniError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JniError::Warren(e) => write!(f, "{e}"),
            JniError::Jni(e) => write!(f, "JNI call failed: {e}"),
            JniError::Closed(what) => write!(f, "{what} is closed"),
            JniError::Argument(m) => write!(f, "{m}"),
        }
    }
}

impl From<warren::Error> for JniError {
    fn from(e: warren::Error) -> Self {
        JniError::Warren(e)
    }
}

impl From<jni::errors::Error> for JniError {
    fn from(e: jni::errors::Error) -> Self {
        JniError::Jni(e)
    }
}

/// Result of an export's body.
pub type JniResult<T> = std::result::Result<T, JniError>;

/// The Java exception class (JNI internal name) of each `warren::Error` variant.
///
/// The match is exhaustive on purpose: a new variant does not compile until it is mapped here
/// (and, by the test in `tests/jvm_errors.rs`, until its class exists and extends
/// `WarrenException`).
pub fn exception_class(e: &warren::Error) -> &'static str {
    use warren::Error::*;
    match e {
        Config(_) => "io/warren/WarrenConfigException",
        Io { .. } => "io/warren/WarrenIOException",
        Timeout { .. } => "io/warren/WarrenTimeoutException",
        PeerLost { .. } => "io/warren/PeerLostException",
        Mismatch(_) => "io/warren/CollectiveMismatchException",
        Protocol(_) => "io/warren/WarrenProtocolException",
        Auth(_) => "io/warren/WarrenAuthException",
        Aborted { .. } => "io/warren/CollectiveAbortedException",
        InvalidArgument(_) => "io/warren/WarrenArgumentException",
        Tracker(_) => "io/warren/TrackerException",
        Corrupt { .. } => "io/warren/CorruptDataException",
        RecoveryImpossible { .. } => "io/warren/RecoveryImpossibleException",
        RelinkSuperseded(_) => "io/warren/RelinkSupersededException",
        DatasetMismatch(_) => "io/warren/DatasetMismatchException",
        StoreCorrupt { .. } => "io/warren/StoreCorruptException",
        InvalidChange { .. } => "io/warren/InvalidChangeException",
        StoreFailed(_) => "io/warren/StoreFailedException",
        Master(_) => "io/warren/MasterException",
    }
}

/// The class and message of the exception that reports `err`.
pub fn exception_for(err: &JniError) -> (&'static str, String) {
    match err {
        JniError::Warren(e) => (exception_class(e), e.to_string()),
        JniError::Jni(e) => (WARREN_EXCEPTION, format!("JNI call failed: {e}")),
        JniError::Closed(what) => (ILLEGAL_STATE, format!("{what} is closed")),
        JniError::Argument(m) => (ILLEGAL_ARGUMENT, m.clone()),
    }
}

/// Makes `err` the pending Java exception of `env`, unless one is pending already (a JNI call
/// that failed because Java threw keeps that exception). If the mapped class cannot be thrown
/// (not found, say), falls back to a `RuntimeException` carrying the same message.
pub fn throw(env: &mut Env<'_>, err: &JniError) {
    if env.exception_check() {
        return;
    }
    let (class, msg) = exception_for(err);
    let _ = env.throw_new(JNIString::from(class), JNIString::from(msg.as_str()));
    if !env.exception_check() {
        let _ = env.throw(format!("{class}: {msg}"));
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// The [`ErrorPolicy`] of every export: errors become exceptions by variant, panics become a
/// `WarrenException`, and the export returns the default value (0, `null`) to the JVM.
#[derive(Debug)]
pub struct ThrowByVariant;

impl<T: Default> ErrorPolicy<T, JniError> for ThrowByVariant {
    type Captures<'unowned_env_local: 'native_method, 'native_method> = ();

    fn on_error<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        err: JniError,
    ) -> jni::errors::Result<T> {
        throw(env, &err);
        Ok(T::default())
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        payload: Box<dyn Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        let msg = panic_message(payload.as_ref());
        // Dropping a payload can itself panic; leak it rather than risk unwinding into the JVM.
        std::mem::forget(payload);
        if !env.exception_check() {
            let _ = env.throw_new(
                JNIString::from(WARREN_EXCEPTION),
                JNIString::from(format!("internal error in the native library (Rust panic): {msg}")),
            );
        }
        Ok(T::default())
    }
}

/// Runs an export's body: upgrades `env`, catches panics, maps errors to Java exceptions.
/// Every `extern "system"` function of this crate is one call to this.
pub fn run<'local, T, F>(env: &mut EnvUnowned<'local>, body: F) -> T
where
    T: Default,
    F: FnOnce(&mut Env<'local>) -> JniResult<T>,
{
    env.with_env(body).resolve::<ThrowByVariant>()
}

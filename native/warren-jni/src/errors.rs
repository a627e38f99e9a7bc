//! Errors of the JNI layer and the one helper every export runs its body through.
//!
//! [`run`] upgrades the JNI environment, catches panics, and turns an error into a pending
//! Java exception chosen by the error *variant* ([`exception_class`]), never by message text.
//! Variants with fields a caller acts on (the lost peer's rank, the two declarations of a
//! mismatch, the lost task ids, the aborting rank) are constructed with those fields
//! ([`structured`]), so Java code reads them from accessors instead of parsing the message.
//! An export's body returns `Result<T, JniError>` and may use `?` freely: nothing escapes the
//! `extern "system"` function.

use std::any::Any;

use jni::errors::ErrorPolicy;
use jni::objects::{JObject, JThrowable, JValue};
use jni::strings::JNIString;
use jni::{Env, EnvUnowned, jni_sig};

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
        JobFailed(_) => "io/warren/JobFailedException",
        Corrupt { .. } => "io/warren/CorruptDataException",
        RecoveryImpossible { .. } => "io/warren/RecoveryImpossibleException",
        RelinkSuperseded(_) => "io/warren/RelinkSupersededException",
        RolledBack { .. } => "io/warren/RolledBackException",
        Fenced(_) => "io/warren/WorkerFencedException",
        DatasetMismatch(_) => "io/warren/DatasetMismatchException",
        StoreCorrupt { .. } => "io/warren/StoreCorruptException",
        InvalidChange { .. } => "io/warren/InvalidChangeException",
        StoreFailed(_) => "io/warren/StoreFailedException",
        Master(_) => "io/warren/MasterException",
        Left(_) => "io/warren/TaskLeftException",
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
    let built = match err {
        JniError::Warren(e) => structured(env, class, &msg, e),
        _ => Ok(None),
    };
    match built {
        Ok(Some(t)) => {
            let _ = env.throw(&t);
        }
        // The structured constructor failed (a pending exception from it is replaced, so the
        // caller sees Warren's error, with its class, rather than a JNI failure).
        _ => {
            if env.exception_check() {
                env.exception_clear();
            }
            let _ = env.throw_new(JNIString::from(class), JNIString::from(msg.as_str()));
        }
    }
    if !env.exception_check() {
        let _ = env.throw(format!("{class}: {msg}"));
    }
}

/// Builds the exception of `e` with its fields, for the variants that carry some a caller acts
/// on; `None` for the others (thrown with the message only). Each class has a constructor
/// `(String message, <fields>)`.
pub fn structured<'l>(
    env: &mut Env<'l>,
    class: &str,
    msg: &str,
    e: &warren::Error,
) -> jni::errors::Result<Option<JThrowable<'l>>> {
    use warren::Error::*;
    let class = JNIString::from(class);
    let m = JObject::from(env.new_string(msg)?);
    let obj = match e {
        PeerLost { rank, task, reason } => {
            let task = optional_string(env, task.as_deref())?;
            let reason = JObject::from(env.new_string(reason)?);
            let sig = jni_sig!("(Ljava/lang/String;ILjava/lang/String;Ljava/lang/String;)V");
            let args =
                [JValue::Object(&m), JValue::Int(rank_arg(*rank)), JValue::Object(&task), JValue::Object(&reason)];
            env.new_object(class, sig, &args)?
        }
        Mismatch(mm) => {
            let first = declaration(env, &mm.first)?;
            let second = declaration(env, &mm.second)?;
            let context = JObject::from(env.new_string(&mm.context)?);
            let sig = jni_sig!(
                "(Ljava/lang/String;Lio/warren/CallDeclaration;Lio/warren/CallDeclaration;Ljava/lang/String;)V"
            );
            let args = [JValue::Object(&m), JValue::Object(&first), JValue::Object(&second), JValue::Object(&context)];
            env.new_object(class, sig, &args)?
        }
        RecoveryImpossible { lost, reason } => {
            let ids = JObject::from(crate::string_array::string_array(env, lost)?);
            let reason = JObject::from(env.new_string(reason)?);
            let sig = jni_sig!("(Ljava/lang/String;[Ljava/lang/String;Ljava/lang/String;)V");
            env.new_object(class, sig, &[JValue::Object(&m), JValue::Object(&ids), JValue::Object(&reason)])?
        }
        Aborted { rank, reason } => {
            let reason = JObject::from(env.new_string(reason)?);
            let sig = jni_sig!("(Ljava/lang/String;ILjava/lang/String;)V");
            env.new_object(class, sig, &[JValue::Object(&m), JValue::Int(rank_arg(*rank)), JValue::Object(&reason)])?
        }
        _ => return Ok(None),
    };
    Ok(Some(env.cast_local::<JThrowable>(obj)?))
}

/// The `io.warren.CallDeclaration` of `d`, with its fields where the error has them.
fn declaration<'l>(env: &mut Env<'l>, d: &warren::Declaration) -> jni::errors::Result<JObject<'l>> {
    const CLASS: &str = "io/warren/CallDeclaration";
    let call = JObject::from(env.new_string(&d.call)?);
    let rank = JValue::Int(rank_arg(d.rank));
    let Some(a) = &d.args else {
        let sig = jni_sig!("(ILjava/lang/String;)V");
        return env.new_object(JNIString::from(CLASS), sig, &[rank, JValue::Object(&call)]);
    };
    let collective = JObject::from(env.new_string(&a.collective)?);
    let dtype = JObject::from(env.new_string(&a.dtype)?);
    let op = JObject::from(env.new_string(&a.op)?);
    let key = optional_string(env, a.key.as_deref())?;
    let sig =
        jni_sig!("(ILjava/lang/String;Ljava/lang/String;JJLjava/lang/String;Ljava/lang/String;IJLjava/lang/String;)V");
    let args = [
        rank,
        JValue::Object(&call),
        JValue::Object(&collective),
        // The position is an unsigned 64-bit value; Java reads the same bits as a long.
        JValue::Long(a.seq as i64),
        JValue::Long(a.bytes.and_then(|b| i64::try_from(b).ok()).unwrap_or(-1)),
        JValue::Object(&dtype),
        JValue::Object(&op),
        JValue::Int(a.root.and_then(|r| i32::try_from(r).ok()).unwrap_or(-1)),
        JValue::Long(a.tag.map_or(-1, i64::from)),
        JValue::Object(&key),
    ];
    env.new_object(JNIString::from(CLASS), sig, &args)
}

/// A rank as a Java `int` (ranks are far below `i32::MAX`; a larger one shows as -1).
fn rank_arg(rank: usize) -> i32 {
    i32::try_from(rank).unwrap_or(-1)
}

fn optional_string<'l>(env: &mut Env<'l>, s: Option<&str>) -> jni::errors::Result<JObject<'l>> {
    Ok(match s {
        Some(s) => JObject::from(env.new_string(s)?),
        None => JObject::null(),
    })
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

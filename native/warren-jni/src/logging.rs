//! Routes the `log` crate to SLF4J through `io.warren.NativeLog.log(int, String, String)`.
//!
//! The class and method are looked up once, from a Java thread, when the library is
//! initialised, and kept as a global reference and a method id: threads Warren starts itself
//! (the tracker's) are attached on their first record and would not find `io.warren` classes
//! through `FindClass` inside a Spark executor's class loader.
//!
//! Levels are filtered natively with `log::set_max_level`, set from the level SLF4J has
//! enabled for `io.warren.native`; a disabled record costs one comparison and never reaches
//! JNI. Records made while a thread holds a JNI critical region (where no JNI call is allowed)
//! are kept and sent when the region ends ([`deferred`]).

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

use jni::JavaVM;
use jni::objects::{Global, JClass, JStaticMethodID, JValue};
use jni::signature::{Primitive, ReturnType};
use jni::sys::jvalue;
use jni::{Env, jni_sig, jni_str};
use log::{Level, LevelFilter, Log, Metadata, Record};

struct JvmLogger {
    class: Global<JClass<'static>>,
    method: JStaticMethodID,
}

static LOGGER: OnceLock<JvmLogger> = OnceLock::new();

thread_local! {
    /// Set while this thread is inside the logger (a JNI call made by the logger must not log
    /// back into it) or inside a critical region.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    static DEFERRED: RefCell<Option<Vec<(Level, String, String)>>> = const { RefCell::new(None) };
}

/// The JVM's level code (`NativeLog`): 0 off, 1 error, 2 warn, 3 info, 4 debug, 5 trace.
pub fn level_filter(code: i32) -> LevelFilter {
    match code {
        i32::MIN..=0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

fn level_code(level: Level) -> i32 {
    match level {
        Level::Error => 1,
        Level::Warn => 2,
        Level::Info => 3,
        Level::Debug => 4,
        Level::Trace => 5,
    }
}

/// Installs the logger (once per process; later calls only change the level). Must run on a
/// thread called from Java, so that `io.warren.NativeLog` is found through the right loader.
pub fn install(env: &mut Env<'_>, level: i32) -> jni::errors::Result<()> {
    if LOGGER.get().is_none() {
        let class = env.find_class(jni_str!("io/warren/NativeLog"))?;
        let method =
            env.get_static_method_id(&class, jni_str!("log"), jni_sig!("(ILjava/lang/String;Ljava/lang/String;)V"))?;
        let class = env.new_global_ref(class)?;
        if LOGGER.set(JvmLogger { class, method }).is_ok() {
            // Fails only if another logger was installed in this process first (a host
            // program embedding the library); its records then go there instead.
            let _ = log::set_logger(&Bridge);
        }
    }
    log::set_max_level(level_filter(level));
    Ok(())
}

struct Bridge;

impl Log for Bridge {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let deferred = DEFERRED.with(|d| {
            if let Some(q) = d.borrow_mut().as_mut() {
                q.push((record.level(), record.target().to_string(), record.args().to_string()));
                true
            } else {
                false
            }
        });
        if deferred || BUSY.with(|b| b.get()) {
            return;
        }
        send(record.level(), record.target(), &record.args().to_string());
    }

    fn flush(&self) {}
}

fn send(level: Level, target: &str, msg: &str) {
    let Some(logger) = LOGGER.get() else { return };
    let Ok(vm) = JavaVM::singleton() else { return };
    BUSY.with(|b| b.set(true));
    let sent = vm.attach_current_thread(|env| -> jni::errors::Result<()> {
        let target = env.new_string(target)?;
        let msg = env.new_string(msg)?;
        let args =
            [JValue::Int(level_code(level)).as_jni(), JValue::Object(&target).as_jni(), JValue::Object(&msg).as_jni()];
        // SAFETY: the method id was looked up on this class with exactly this signature.
        unsafe {
            env.call_static_method_unchecked(
                &logger.class,
                logger.method,
                ReturnType::Primitive(Primitive::Void),
                &args as &[jvalue],
            )?;
        }
        Ok(())
    });
    BUSY.with(|b| b.set(false));
    if sent.is_err() {
        eprintln!("[warren {level} {target}] {msg}");
    }
}

/// Runs `f` (which holds a JNI critical region) with log records kept back, then sends them.
pub fn deferred<R>(f: impl FnOnce() -> R) -> R {
    struct Flush;
    impl Drop for Flush {
        fn drop(&mut self) {
            let records = DEFERRED.with(|d| d.borrow_mut().take()).unwrap_or_default();
            for (level, target, msg) in records {
                send(level, &target, &msg);
            }
        }
    }
    DEFERRED.with(|d| *d.borrow_mut() = Some(Vec::new()));
    let _flush = Flush;
    f()
}

//! The JNI error mapping, checked against a real JVM embedded in this test process
//! (`jni`'s `invocation` feature) running with `-Xcheck:jni`.
//!
//! The outer test re-runs this test binary with `WARREN_JNI_INNER=1` so that it can read the
//! JVM's output: `-Xcheck:jni` reports misuse as warnings on stdout and carries on, so the outer
//! test fails on any such warning.
//!
//! The exception classes are compiled with `javac` from `jvm/warren-core/src/main/java`, so
//! the test checks the real classes the jar ships.

use std::path::{Path, PathBuf};
use std::process::Command;

use jni::objects::{JClass, JObject, JThrowable};
use jni::strings::JNIString;
use jni::vm::{InitArgsBuilder, JavaVM};
use jni::{Env, EnvUnowned};
use warren::Error;
use warren_jni::errors::{self, JniError, JniResult};

/// Number of variants of `warren::Error`; [`variant_index`] must cover `0..VARIANTS`.
const VARIANTS: usize = 22;

/// An index per variant. No wildcard arm: a new variant does not compile until it is listed
/// here (then bump [`VARIANTS`] and add a sample to [`samples`]).
fn variant_index(e: &Error) -> usize {
    match e {
        Error::Config(_) => 0,
        Error::Io { .. } => 1,
        Error::Timeout { .. } => 2,
        Error::PeerLost { .. } => 3,
        Error::Mismatch(_) => 4,
        Error::Protocol(_) => 5,
        Error::Auth(_) => 6,
        Error::Aborted { .. } => 7,
        Error::InvalidArgument(_) => 8,
        Error::Tracker(_) => 9,
        Error::Corrupt { .. } => 10,
        Error::RecoveryImpossible { .. } => 11,
        Error::RelinkSuperseded(_) => 12,
        Error::DatasetMismatch(_) => 13,
        Error::StoreCorrupt { .. } => 14,
        Error::InvalidChange { .. } => 15,
        Error::StoreFailed(_) => 16,
        Error::Master(_) => 17,
        Error::Fenced(_) => 18,
        Error::RolledBack { .. } => 19,
        Error::Left(_) => 20,
        Error::JobFailed(_) => 21,
    }
}

fn samples() -> Vec<Error> {
    vec![
        Error::Config("WARREN_NUM_WORKERS=\"four\"".into()),
        Error::io("binding tracker", std::io::Error::new(std::io::ErrorKind::AddrInUse, "in use")),
        Error::Timeout { what: "peer rank 1".into(), after: std::time::Duration::from_secs(2) },
        Error::PeerLost { rank: 3, task: Some("3".into()), reason: "connection reset".into() },
        Error::Mismatch(warren::CallMismatch::new(
            warren::Declaration::described(0, "allreduce(tree) #3 of 40 bytes f32 sum"),
            warren::Declaration::described(2, "allreduce(tree) #3 of 44 bytes f32 sum"),
            "",
        )),
        Error::Protocol("bad magic".into()),
        Error::Auth("wrong secret".into()),
        Error::Aborted { rank: 2, reason: "earlier failure".into() },
        Error::InvalidArgument("root 9".into()),
        Error::Tracker("worker lost".into()),
        Error::Corrupt { file: "a.rec".into(), chunk: 4, offset: 4096, reason: "checksum mismatch".into() },
        Error::RecoveryImpossible { lost: vec!["9".into(), "0".into()], reason: "local model of rank 9 lost".into() },
        Error::RelinkSuperseded("rank 2".into()),
        Error::DatasetMismatch("other glob".into()),
        Error::StoreCorrupt { path: "wal.log".into(), offset: 64, reason: "bad checksum".into() },
        Error::InvalidChange { seq: 7, reason: "task in the wrong queue".into() },
        Error::StoreFailed("fsync failed".into()),
        Error::Master("no dataset set".into()),
        Error::Fenced("no heartbeat for 3.0s".into()),
        Error::RolledBack { version: 7, reason: "task 2 was dropped".into() },
        Error::Left("task 2 was removed from the elastic job and has left it".into()),
        Error::JobFailed("rank 1 (task 1) failed with an error that cannot succeed on retry: bad setting".into()),
    ]
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles the exception classes into `out` and returns it.
fn compile_exceptions(out: &Path) {
    let src = repo_root().join("jvm/warren-core/src/main/java/io/warren");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with("Exception.java") || name.ends_with("/CallDeclaration.java")
        })
        .collect();
    files.sort();
    assert!(files.len() > VARIANTS, "exception sources missing in {}", src.display());
    let javac = std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/javac"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "javac".into());
    let status = Command::new(javac)
        .arg("-d")
        .arg(out)
        .args(&files)
        .status()
        .expect("javac (install a JDK 17 or set JAVA_HOME)");
    assert!(status.success(), "javac failed");
}

fn class_name(env: &mut Env<'_>, t: &JThrowable<'_>) -> String {
    let class = env.get_object_class(t).unwrap();
    let name = env
        .call_method(&class, jni::jni_str!("getName"), jni::jni_sig!("()Ljava/lang/String;"), &[])
        .unwrap()
        .l()
        .unwrap();
    let name = env.cast_local::<jni::objects::JString>(name).unwrap();
    name.try_to_string(env).unwrap()
}

fn message(env: &mut Env<'_>, t: &JThrowable<'_>) -> String {
    let m = env
        .call_method(t, jni::jni_str!("getMessage"), jni::jni_sig!("()Ljava/lang/String;"), &[])
        .unwrap()
        .l()
        .unwrap();
    let m = env.cast_local::<jni::objects::JString>(m).unwrap();
    m.try_to_string(env).unwrap()
}

fn int_method(env: &mut Env<'_>, o: &JObject<'_>, name: &'static str) -> i32 {
    env.call_method(o, JNIString::from(name), jni::jni_sig!("()I"), &[]).unwrap().i().unwrap()
}

fn long_method(env: &mut Env<'_>, o: &JObject<'_>, name: &'static str) -> i64 {
    env.call_method(o, JNIString::from(name), jni::jni_sig!("()J"), &[]).unwrap().j().unwrap()
}

fn object_method<'l, 's, 'a>(
    env: &mut Env<'l>,
    o: &JObject<'_>,
    name: &'static str,
    sig: jni::signature::MethodSignature<'s, 'a>,
) -> JObject<'l> {
    env.call_method(o, JNIString::from(name), sig, &[]).unwrap().l().unwrap()
}

/// `o.name()` for a method returning a `String` (`None` for `null`).
fn string_method(env: &mut Env<'_>, o: &JObject<'_>, name: &'static str) -> Option<String> {
    let s = object_method(env, o, name, jni::jni_sig!("()Ljava/lang/String;"));
    if s.is_null() {
        return None;
    }
    let s = env.cast_local::<jni::objects::JString>(s).unwrap();
    Some(s.try_to_string(env).unwrap())
}

/// Throws `err` and returns the pending exception, cleared.
fn throwable<'l>(env: &mut Env<'l>, err: Error) -> JThrowable<'l> {
    errors::throw(env, &JniError::Warren(err));
    let t = env.exception_occurred().expect("an exception is pending");
    env.exception_clear();
    t
}

/// The structured variants are built with their fields, read back through the accessors.
fn check_fields(env: &mut Env<'_>) {
    let t = throwable(env, Error::PeerLost { rank: 3, task: Some("7".into()), reason: "reset".into() });
    assert_eq!(int_method(env, &t, "rank"), 3);
    assert_eq!(string_method(env, &t, "taskId").as_deref(), Some("7"));
    assert_eq!(string_method(env, &t, "reason").as_deref(), Some("reset"));
    let t = throwable(env, Error::PeerLost { rank: 1, task: None, reason: "reset".into() });
    assert_eq!(int_method(env, &t, "rank"), 1);
    assert_eq!(string_method(env, &t, "taskId"), None);

    let args = warren::CallArgs {
        collective: "broadcast".into(),
        seq: u64::MAX - 1,
        bytes: Some(44),
        dtype: "u8".into(),
        op: "none".into(),
        root: Some(1),
        tag: None,
        key: Some("src/main.rs:42:9#0".into()),
    };
    let with_args = warren::Declaration {
        rank: 2,
        call: "allreduce(tree) #3 of 44 bytes f32 sum".into(),
        args: Some(Box::new(args)),
    };
    let t = throwable(
        env,
        Error::Mismatch(warren::CallMismatch::new(
            warren::Declaration::described(0, "allreduce(tree) #3 of 40 bytes f32 sum"),
            with_args,
            "detected by rank 0",
        )),
    );
    let first = object_method(env, &t, "first", jni::jni_sig!("()Lio/warren/CallDeclaration;"));
    let second = object_method(env, &t, "second", jni::jni_sig!("()Lio/warren/CallDeclaration;"));
    assert_eq!(int_method(env, &first, "rank"), 0);
    assert_eq!(string_method(env, &first, "call").unwrap(), "allreduce(tree) #3 of 40 bytes f32 sum");
    assert_eq!(int_method(env, &second, "rank"), 2);
    assert_eq!(string_method(env, &second, "call").unwrap(), "allreduce(tree) #3 of 44 bytes f32 sum");
    assert_eq!(string_method(env, &t, "context").unwrap(), "detected by rank 0");
    // Fields: unknown on the described one, set on the other.
    assert_eq!(string_method(env, &first, "collective"), None);
    assert_eq!(long_method(env, &first, "bytes"), -1);
    assert_eq!(string_method(env, &second, "collective").as_deref(), Some("broadcast"));
    assert_eq!(long_method(env, &second, "seq"), -2);
    assert_eq!(long_method(env, &second, "bytes"), 44);
    assert_eq!(string_method(env, &second, "dataType").as_deref(), Some("u8"));
    assert_eq!(string_method(env, &second, "op").as_deref(), Some("none"));
    assert_eq!(int_method(env, &second, "root"), 1);
    assert_eq!(long_method(env, &second, "tag"), -1);
    assert_eq!(string_method(env, &second, "key").as_deref(), Some("src/main.rs:42:9#0"));

    let t = throwable(env, Error::RecoveryImpossible { lost: vec!["9".into(), "0".into()], reason: "gone".into() });
    let ids = object_method(env, &t, "lostTaskIds", jni::jni_sig!("()Ljava/util/List;"));
    assert_eq!(string_method(env, &ids, "toString").unwrap(), "[9, 0]");
    assert_eq!(string_method(env, &t, "reason").unwrap(), "gone");

    let t = throwable(env, Error::Aborted { rank: 2, reason: "earlier failure".into() });
    assert_eq!(int_method(env, &t, "rank"), 2);
    assert_eq!(string_method(env, &t, "reason").unwrap(), "earlier failure");
}

/// Throws `err` through the mapping and returns (class name, message, is a WarrenException).
fn thrown(env: &mut Env<'_>, err: &JniError) -> (String, String, bool) {
    errors::throw(env, err);
    let t = env.exception_occurred().expect("an exception is pending");
    env.exception_clear();
    let base: JClass = env.find_class(JNIString::from(errors::WARREN_EXCEPTION)).unwrap();
    let is_warren = env.is_instance_of(&t, &base).unwrap();
    (class_name(env, &t), message(env, &t), is_warren)
}

fn inner(classes: &Path) {
    let args = InitArgsBuilder::new()
        .option(format!("-Djava.class.path={}", classes.display()))
        .option("-Xcheck:jni")
        .build()
        .unwrap();
    let vm = JavaVM::new(args).expect("start an embedded JVM (JAVA_HOME or java on PATH)");
    vm.attach_current_thread(|env| -> jni::errors::Result<()> {
        // Every variant maps to a distinct class that exists and extends WarrenException.
        let samples = samples();
        let mut seen = vec![false; VARIANTS];
        let mut classes = std::collections::HashSet::new();
        for e in &samples {
            seen[variant_index(e)] = true;
            let want = errors::exception_class(e).replace('/', ".");
            let text = e.to_string();
            let (class, msg, is_warren) = thrown(env, &JniError::Warren(e.clone_for_test()));
            assert_eq!(class, want, "{e:?}");
            assert_eq!(msg, text);
            assert!(is_warren, "{class} must extend WarrenException");
            assert!(classes.insert(class.clone()), "{class} is used twice");
        }
        assert!(seen.iter().all(|s| *s), "add a sample of every variant: {seen:?}");
        check_fields(env);

        let (class, msg, _) = thrown(env, &JniError::Closed("Communicator"));
        assert_eq!(class, "java.lang.IllegalStateException");
        assert_eq!(msg, "Communicator is closed");
        let (class, _, _) = thrown(env, &JniError::Argument("bad op".into()));
        assert_eq!(class, "java.lang.IllegalArgumentException");

        // The export helper: an error and a panic both become exceptions, never an unwind.
        // SAFETY: `env` is this thread's valid attachment; the helper does not outlive it.
        let mut unowned = unsafe { EnvUnowned::from_raw(env.get_raw()) };
        let v: i32 = errors::run(&mut unowned, |_| -> JniResult<i32> {
            Err(Error::PeerLost { rank: 1, task: None, reason: "reset".into() }.into())
        });
        assert_eq!(v, 0);
        let t = env.exception_occurred().expect("pending");
        env.exception_clear();
        assert_eq!(class_name(env, &t), "io.warren.PeerLostException");

        let v: i64 = errors::run(&mut unowned, |_| -> JniResult<i64> { panic!("boom in an export") });
        assert_eq!(v, 0);
        let t = env.exception_occurred().expect("pending");
        env.exception_clear();
        assert_eq!(class_name(env, &t), "io.warren.WarrenException");
        let m = message(env, &t);
        assert!(m.contains("boom in an export"), "{m}");

        let v: i32 = errors::run(&mut unowned, |_| Ok(7));
        assert_eq!(v, 7);
        assert!(!env.exception_check());
        Ok(())
    })
    .unwrap();
    println!("INNER_OK");
}

/// `warren::Error` is not `Clone`; rebuild a sample with the same variant and text.
trait CloneForTest {
    fn clone_for_test(&self) -> Error;
}

impl CloneForTest for Error {
    fn clone_for_test(&self) -> Error {
        let i = variant_index(self);
        samples().into_iter().nth(i).unwrap()
    }
}

#[test]
fn every_error_variant_maps_to_a_java_class_under_check_jni() {
    if std::env::var_os("WARREN_JNI_INNER").is_some() {
        let classes = PathBuf::from(std::env::var_os("WARREN_JNI_CLASSES").unwrap());
        inner(&classes);
        return;
    }
    let dir = std::env::temp_dir().join(format!("warren-jni-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    compile_exceptions(&dir);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "every_error_variant_maps_to_a_java_class_under_check_jni",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WARREN_JNI_INNER", "1")
        .env("WARREN_JNI_CLASSES", &dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "embedded JVM test failed:\n{text}");
    assert!(text.contains("INNER_OK"), "{text}");
    assert!(
        !text.contains("WARNING in native method") && !text.contains("FATAL ERROR"),
        "-Xcheck:jni complained:\n{text}"
    );
}

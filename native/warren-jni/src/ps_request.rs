//! The request objects of `io.warren.ps.PsNative` (`ServerStartRequest`,
//! `ClientConnectRequest`, `DefineRequest`, `TablePull`, `PiecesRequest`), each read once into
//! a plain Rust value here, so that the exports in [`crate::ps`] only check and call the
//! library.
//!
//! Reading is split in two: [`FieldIds`] reads an object's fields (JNI calls, nothing else),
//! into structs of raw values (`Option` where Java may pass null); the conversions to library
//! types ([`ServerStart::config`], [`ClientConnect::settings`], [`Define::job`]) are pure and
//! check the values in the order the exports always did, with the same messages.
//!
//! Field IDs are looked up once per request class, from the class of the first request
//! passed, and kept with a global reference to that class (which keeps them valid); a later
//! request costs one `IsInstanceOf` and one `Get<Type>Field` per field. Push and pull are on
//! the per-step path: their request carries the pieces as arrays read whole (a few calls per
//! request, not per piece), and the floats stay in the caller's arrays and direct buffers.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use jni::objects::{
    Global, JByteBuffer, JClass, JFieldID, JFloatArray, JLongArray, JObject, JObjectArray, JPrimitiveArray, JString,
    TypeArray,
};
use jni::refs::Reference;
use jni::signature::{FieldSignature, JavaType, Primitive};
use jni::strings::JNIStr;
use jni::{Env, jni_sig, jni_str};
use warren::ps::{
    CheckpointPolicy, DEFAULT_LOG_SYNC, Init, JobSpec, Mode, Optimizer, PsClientOptions, PsConfig, TableKind, TableSpec,
};

use crate::errors::{JniError, JniResult};
use crate::master::millis;
use crate::strings::strings;

fn argument(m: String) -> JniError {
    JniError::Argument(m)
}

/// `v` as an unsigned value, or an error naming it `what`.
pub(crate) fn unsigned(v: i64, what: &str) -> JniResult<u64> {
    u64::try_from(v).map_err(|_| argument(format!("{what} {v} is negative")))
}

/// The value `s`, or an error naming it `what` if Java passed null.
fn given<T>(s: Option<T>, what: &str) -> JniResult<T> {
    s.ok_or_else(|| argument(format!("{what} is null")))
}

/// Reads a whole primitive array (`int[]`, `long[]`, `float[]`...); `what` names it in errors.
pub(crate) fn whole<T: TypeArray + Default + Clone>(
    env: &Env<'_>,
    a: &JPrimitiveArray<'_, T>,
    what: &str,
) -> JniResult<Vec<T>> {
    if a.is_null() {
        return Err(argument(format!("{what} is null")));
    }
    let mut v = vec![T::default(); a.len(env)?];
    a.get_region(env, 0, &mut v)?;
    Ok(v)
}

/// A Java field: its name and type, as the request class declares them.
type Field = (&'static JNIStr, FieldSignature<'static>);

/// The field IDs of one request class, in the order of its field list.
pub(crate) struct FieldIds<const N: usize> {
    fields: [Field; N],
    cache: OnceLock<(Global<JClass<'static>>, [JFieldID; N])>,
}

impl<const N: usize> FieldIds<N> {
    /// The IDs of `fields`, looked up on first use.
    const fn new(fields: [Field; N]) -> Self {
        FieldIds { fields, cache: OnceLock::new() }
    }

    /// A reader of the fields of `obj` (an instance of the class that declares them), or an
    /// error naming it `what` if it is null.
    fn of<'o, 'l>(&'static self, env: &mut Env<'l>, obj: &'o JObject<'l>, what: &str) -> JniResult<Fields<'o, 'l, N>> {
        if obj.is_null() {
            return Err(argument(format!("{what} is null")));
        }
        if let Some((class, ids)) = self.cache.get() {
            if env.is_instance_of(obj, class)? {
                return Ok(Fields { obj, ids: *ids, fields: &self.fields });
            }
            // A copy of the class from another class loader: its own IDs, not cached.
            let class = env.get_object_class(obj)?;
            let ids = self.lookup(env, &class)?;
            env.delete_local_ref(class);
            return Ok(Fields { obj, ids, fields: &self.fields });
        }
        let class = env.get_object_class(obj)?;
        let ids = self.lookup(env, &class)?;
        let global = env.new_global_ref(&class)?;
        env.delete_local_ref(class);
        // Another thread may have cached the same class's IDs first: either is right.
        let _ = self.cache.set((global, ids));
        Ok(Fields { obj, ids, fields: &self.fields })
    }

    fn lookup(&self, env: &mut Env<'_>, class: &JClass<'_>) -> JniResult<[JFieldID; N]> {
        let mut ids = Vec::with_capacity(N);
        for (name, sig) in &self.fields {
            ids.push(env.get_field_id(class, name, sig)?);
        }
        Ok(ids.try_into().unwrap_or_else(|_| unreachable!("one ID per field")))
    }
}

/// The fields of one request object, read by their index in the class's field list. Each
/// getter checks the type it reads against the field's declared one, so a wrong index is an
/// error, never a read of the wrong type.
struct Fields<'o, 'l, const N: usize> {
    obj: &'o JObject<'l>,
    ids: [JFieldID; N],
    fields: &'static [Field; N],
}

impl<'l, const N: usize> Fields<'_, 'l, N> {
    fn get(&self, env: &mut Env<'l>, i: usize, ty: JavaType) -> JniResult<jni::objects::JValueOwned<'l>> {
        let declared = self.fields[i].1.ty();
        let same = match (declared, ty) {
            (JavaType::Object | JavaType::Array, JavaType::Object) => true,
            (d, t) => d == t,
        };
        if !same {
            return Err(argument(format!("request field {} is not of the type read", self.fields[i].0)));
        }
        // SAFETY: `obj` is not null and is an instance of the class whose field `i` has ID
        // `ids[i]` (checked by `FieldIds::of`), and the field's type is `ty` (checked above).
        Ok(unsafe { env.get_field_unchecked(self.obj, self.ids[i], ty) }?)
    }

    fn int(&self, env: &mut Env<'l>, i: usize) -> JniResult<i32> {
        Ok(self.get(env, i, JavaType::Primitive(Primitive::Int))?.i()?)
    }

    fn long(&self, env: &mut Env<'l>, i: usize) -> JniResult<i64> {
        Ok(self.get(env, i, JavaType::Primitive(Primitive::Long))?.j()?)
    }

    fn float(&self, env: &mut Env<'l>, i: usize) -> JniResult<f32> {
        Ok(self.get(env, i, JavaType::Primitive(Primitive::Float))?.f()?)
    }

    /// Field `i`, a reference of type `T` (the type its signature declares).
    fn object<T: Reference>(&self, env: &mut Env<'l>, i: usize) -> JniResult<T::Kind<'l>> {
        let obj = self.get(env, i, JavaType::Object)?.l()?;
        // SAFETY: the field is declared of type `T` (its signature, checked by `GetFieldID`),
        // so the JVM holds nothing else in it; the local reference is moved, not copied.
        Ok(unsafe { T::kind_from_raw(obj.into_raw()) })
    }

    /// Field `i`, a `String` (`None`: null).
    fn string(&self, env: &mut Env<'l>, i: usize) -> JniResult<Option<String>> {
        let s = self.object::<JString>(env, i)?;
        let out = if s.is_null() { None } else { Some(s.try_to_string(env)?) };
        env.delete_local_ref(s);
        Ok(out)
    }

    /// Field `i`, a `String[]` (`None`: null; an element null is an error naming it `what`).
    fn strings(&self, env: &mut Env<'l>, i: usize, what: &str) -> JniResult<Option<Vec<String>>> {
        let a = self.object::<JObjectArray<JString>>(env, i)?;
        let out = if a.is_null() { None } else { Some(strings(env, &a, what)?) };
        env.delete_local_ref(a);
        Ok(out)
    }

    /// Field `i`, a primitive array read whole (null: an error naming it `what`).
    fn whole<T: TypeArray + Default + Clone>(&self, env: &mut Env<'l>, i: usize, what: &str) -> JniResult<Vec<T>>
    where
        JPrimitiveArray<'static, T>: Reference<Kind<'l> = JPrimitiveArray<'l, T>>,
    {
        let a = self.object::<JPrimitiveArray<T>>(env, i)?;
        let out = whole(env, &a, what);
        env.delete_local_ref(a);
        out
    }
}

/// The settings of `serverStart`, as Java passed them.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStart {
    /// The job's shared secret.
    pub secret: Option<String>,
    /// This server's index.
    pub index: i32,
    /// The number of servers.
    pub servers: i32,
    /// The address to bind.
    pub host: Option<String>,
    /// The port to bind (0: any free port).
    pub port: i32,
    /// The pull timeout, in milliseconds.
    pub pull_timeout_ms: i64,
    /// Where checkpoints go (`None`: no checkpoints).
    pub checkpoint_dir: Option<String>,
    /// Steps between checkpoints (0: not by steps).
    pub every_steps: i64,
    /// Milliseconds between checkpoints (0: not by time).
    pub every_ms: i64,
    /// The TLS settings as key/value pairs (`None`: plain TCP).
    pub tls: Option<Vec<String>>,
    /// Threads serving connections.
    pub threads: i32,
}

static SERVER_START: FieldIds<11> = FieldIds::new([
    (jni_str!("secret"), jni_sig!(java.lang.String)),
    (jni_str!("index"), jni_sig!(jint)),
    (jni_str!("servers"), jni_sig!(jint)),
    (jni_str!("host"), jni_sig!(java.lang.String)),
    (jni_str!("port"), jni_sig!(jint)),
    (jni_str!("pullTimeoutMs"), jni_sig!(jlong)),
    (jni_str!("checkpointDir"), jni_sig!(java.lang.String)),
    (jni_str!("everySteps"), jni_sig!(jlong)),
    (jni_str!("everyMs"), jni_sig!(jlong)),
    (jni_str!("tls"), jni_sig!(java.lang.String[])),
    (jni_str!("threads"), jni_sig!(jint)),
]);

impl ServerStart {
    /// Reads an `io.warren.ps.ServerStartRequest`.
    pub fn read<'l>(env: &mut Env<'l>, request: &JObject<'l>) -> JniResult<ServerStart> {
        let f = SERVER_START.of(env, request, "the server start request")?;
        Ok(ServerStart {
            secret: f.string(env, 0)?,
            index: f.int(env, 1)?,
            servers: f.int(env, 2)?,
            host: f.string(env, 3)?,
            port: f.int(env, 4)?,
            pull_timeout_ms: f.long(env, 5)?,
            checkpoint_dir: f.string(env, 6)?,
            every_steps: f.long(env, 7)?,
            every_ms: f.long(env, 8)?,
            tls: f.strings(env, 9, "TLS settings")?,
            threads: f.int(env, 10)?,
        })
    }

    /// The server's configuration: server `index` of `servers` bound to `host:port`; with
    /// `checkpoint_dir`, one checkpoint every `every_steps` steps or `every_ms` milliseconds
    /// (0: not by that measure); TLS from `tls` (see [`crate::tls`]).
    pub fn config(self) -> JniResult<PsConfig> {
        let (index, servers) = (self.index, self.servers);
        let (Ok(index), Ok(servers)) = (usize::try_from(index), usize::try_from(servers)) else {
            return Err(argument(format!("server index {index} of {servers}: negative")));
        };
        let mut cfg = PsConfig::new(given(self.secret, "secret")?, index, servers);
        cfg.host = given(self.host, "host")?;
        let port = self.port;
        cfg.port = u16::try_from(port).map_err(|_| argument(format!("port {port} is out of range")))?;
        cfg.pull_timeout = millis(self.pull_timeout_ms, "pullTimeout")?;
        if let Some(dir) = self.checkpoint_dir {
            cfg.checkpoint = Some(CheckpointPolicy {
                dir: PathBuf::from(dir),
                every_steps: unsigned(self.every_steps, "checkpoint steps")?,
                every: Duration::from_millis(unsigned(self.every_ms, "checkpoint interval")?),
                log_sync: DEFAULT_LOG_SYNC,
            });
        }
        cfg.tls = match &self.tls {
            Some(kv) => crate::tls::from_pairs(kv)?,
            None => None,
        };
        // A negative count is refused as 0 is, by `PsServer::start` (the Java builder first).
        cfg.threads = usize::try_from(self.threads).unwrap_or(0);
        Ok(cfg)
    }
}

/// The settings of `clientConnect`, as Java passed them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConnect {
    /// The servers' addresses, server `i` at `uris[i]`.
    pub uris: Option<Vec<String>>,
    /// The job's shared secret.
    pub secret: Option<String>,
    /// The trainer's id (-1: an observer).
    pub trainer: i32,
    /// How long to wait for servers still starting, in milliseconds.
    pub connect_timeout_ms: i64,
    /// How long one call may take, in milliseconds.
    pub call_timeout_ms: i64,
    /// The cancel handle (`Native.cancelCreate`) that cancels this and every later call.
    pub cancel_handle: i64,
    /// The TLS settings as key/value pairs (`None`: plain TCP).
    pub tls: Option<Vec<String>>,
}

/// A connection's settings, checked: what `PsClient::connect_cancellable` takes.
pub struct Connect {
    /// The servers' addresses.
    pub uris: Vec<String>,
    /// The job's shared secret.
    pub secret: String,
    /// The trainer's id (`None`: an observer).
    pub trainer: Option<u32>,
    /// Timeouts and TLS.
    pub options: PsClientOptions,
}

static CLIENT_CONNECT: FieldIds<7> = FieldIds::new([
    (jni_str!("uris"), jni_sig!(java.lang.String[])),
    (jni_str!("secret"), jni_sig!(java.lang.String)),
    (jni_str!("trainer"), jni_sig!(jint)),
    (jni_str!("connectTimeoutMs"), jni_sig!(jlong)),
    (jni_str!("callTimeoutMs"), jni_sig!(jlong)),
    (jni_str!("cancelHandle"), jni_sig!(jlong)),
    (jni_str!("tls"), jni_sig!(java.lang.String[])),
]);

impl ClientConnect {
    /// Reads an `io.warren.ps.ClientConnectRequest`.
    pub fn read<'l>(env: &mut Env<'l>, request: &JObject<'l>) -> JniResult<ClientConnect> {
        let f = CLIENT_CONNECT.of(env, request, "the connect request")?;
        Ok(ClientConnect {
            uris: f.strings(env, 0, "server addresses")?,
            secret: f.string(env, 1)?,
            trainer: f.int(env, 2)?,
            connect_timeout_ms: f.long(env, 3)?,
            call_timeout_ms: f.long(env, 4)?,
            cancel_handle: f.long(env, 5)?,
            tls: f.strings(env, 6, "TLS settings")?,
        })
    }

    /// The connection's settings, checked (the cancel handle apart: [`Self::cancel_handle`]).
    pub fn settings(self) -> JniResult<Connect> {
        let uris = given(self.uris, "server addresses")?;
        let secret = given(self.secret, "secret")?;
        let trainer = match self.trainer {
            -1 => None,
            t => Some(u32::try_from(t).map_err(|_| argument(format!("trainer id {t} is negative")))?),
        };
        let options = PsClientOptions {
            connect_timeout: millis(self.connect_timeout_ms, "connectTimeout")?,
            call_timeout: millis(self.call_timeout_ms, "callTimeout")?,
            tls: match &self.tls {
                Some(kv) => crate::tls::from_pairs(kv)?,
                None => None,
            },
        };
        Ok(Connect { uris, secret, trainer, options })
    }
}

/// One table of a job, as Java passed it: `kind` 0 dense (`size` elements) or 1 sparse (rows
/// of `size` floats); initializer zeros if `scale` is NaN, else uniform in `[-scale, scale)`
/// seeded by `seed`; `optimizer` as `sgd:LR`, `adam:LR`...; `expected_rows`: the rows a sparse
/// table expects (0: not known; ignored for a dense table).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The table's name.
    pub name: String,
    /// 0 dense, 1 sparse.
    pub kind: i32,
    /// A dense table's length, a sparse table's row width.
    pub size: i64,
    /// The initializer's scale (NaN: zeros).
    pub scale: f32,
    /// The initializer's seed (its bits, unsigned).
    pub seed: i64,
    /// The optimizer's spec.
    pub optimizer: Option<String>,
    /// The rows a sparse table expects.
    pub expected_rows: i64,
}

static TABLE: FieldIds<7> = FieldIds::new([
    (jni_str!("name"), jni_sig!(java.lang.String)),
    (jni_str!("kind"), jni_sig!(jint)),
    (jni_str!("size"), jni_sig!(jlong)),
    (jni_str!("scale"), jni_sig!(jfloat)),
    (jni_str!("seed"), jni_sig!(jlong)),
    (jni_str!("optimizer"), jni_sig!(java.lang.String)),
    (jni_str!("expectedRows"), jni_sig!(jlong)),
]);

impl Table {
    /// Reads an `io.warren.ps.DefineRequest$Table`.
    fn read<'l>(env: &mut Env<'l>, table: &JObject<'l>) -> JniResult<Table> {
        let f = TABLE.of(env, table, "a table")?;
        Ok(Table {
            name: f.string(env, 0)?.ok_or_else(|| argument("table names holds null".into()))?,
            kind: f.int(env, 1)?,
            size: f.long(env, 2)?,
            scale: f.float(env, 3)?,
            seed: f.long(env, 4)?,
            optimizer: f.string(env, 5)?,
            expected_rows: f.long(env, 6)?,
        })
    }

    /// The table's spec, checked.
    pub fn spec(&self) -> JniResult<TableSpec> {
        let (name, size) = (&self.name, self.size);
        let kind = match self.kind {
            0 => TableKind::Dense { len: unsigned(size, "table length")? },
            1 => TableKind::Sparse {
                width: u32::try_from(size).map_err(|_| argument(format!("row width {size} is out of range")))?,
                expected_rows: unsigned(self.expected_rows, "expected rows")?,
            },
            k => return Err(argument(format!("unknown table kind {k}"))),
        };
        let init =
            if self.scale.is_nan() { Init::Zeros } else { Init::Uniform { scale: self.scale, seed: self.seed as u64 } };
        let spec = self.optimizer.as_deref().ok_or_else(|| argument("optimizers holds null".into()))?;
        let optimizer =
            Optimizer::parse(spec).map_err(|m| warren::Error::InvalidArgument(format!("table {name:?}: {m}")))?;
        let table = TableSpec { name: name.clone(), kind, init, optimizer };
        table.validate()?;
        Ok(table)
    }
}

/// The job of `clientDefine`, as Java passed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Define {
    /// The number of trainers.
    pub trainers: i32,
    /// `sync`, `async` or `ssp`.
    pub mode: Option<String>,
    /// The bound of `ssp`.
    pub staleness: i64,
    /// The tables, in order.
    pub tables: Vec<Table>,
}

static DEFINE: FieldIds<4> = FieldIds::new([
    (jni_str!("trainers"), jni_sig!(jint)),
    (jni_str!("mode"), jni_sig!(java.lang.String)),
    (jni_str!("staleness"), jni_sig!(jlong)),
    (jni_str!("tables"), jni_sig!("[Lio/warren/ps/DefineRequest$Table;")),
]);

impl Define {
    /// Reads an `io.warren.ps.DefineRequest` and its tables.
    pub fn read<'l>(env: &mut Env<'l>, request: &JObject<'l>) -> JniResult<Define> {
        let f = DEFINE.of(env, request, "the define request")?;
        let (trainers, mode, staleness) = (f.int(env, 0)?, f.string(env, 1)?, f.long(env, 2)?);
        let all = f.object::<JObjectArray<JObject>>(env, 3)?;
        if all.is_null() {
            return Err(argument("tables is null".into()));
        }
        let n = all.len(env)?;
        let mut tables = Vec::with_capacity(n);
        for i in 0..n {
            let t = all.get_element(env, i)?;
            tables.push(Table::read(env, &t)?);
            env.delete_local_ref(t);
        }
        env.delete_local_ref(all);
        Ok(Define { trainers, mode, staleness, tables })
    }

    /// The job spec, checked; `mode` bounded by `staleness` if it is `ssp`.
    pub fn job(&self) -> JniResult<JobSpec> {
        let trainers = self.trainers;
        let trainers = u32::try_from(trainers).map_err(|_| argument(format!("trainers {trainers} is negative")))?;
        let mode = Mode::parse(given(self.mode.as_deref(), "mode")?, unsigned(self.staleness, "staleness")?)?;
        let tables = self.tables.iter().map(Table::spec).collect::<JniResult<Vec<_>>>()?;
        Ok(JobSpec { trainers, mode, tables, joining: Vec::new() })
    }
}

/// A pull of one table (`clientPullDense`, `clientPullSparse`), as Java passed it: the
/// floats go to `count` elements of `array` from `offset`, or of the direct `buffer` from
/// element `offset` if `array` is null.
pub struct TablePull<'l> {
    /// The table.
    pub table: Option<String>,
    /// A dense pull's first element.
    pub start: i64,
    /// A sparse pull's keys (`None`: null, as for a dense pull).
    pub keys: Option<Vec<u64>>,
    /// The array written into, or null.
    pub array: JFloatArray<'l>,
    /// The direct buffer written into if `array` is null.
    pub buffer: JByteBuffer<'l>,
    /// The first index or element written.
    pub offset: i32,
    /// How many floats.
    pub count: i32,
}

static TABLE_PULL: FieldIds<7> = FieldIds::new([
    (jni_str!("table"), jni_sig!(java.lang.String)),
    (jni_str!("start"), jni_sig!(jlong)),
    (jni_str!("keys"), jni_sig!(jlong[])),
    (jni_str!("array"), jni_sig!(jfloat[])),
    (jni_str!("buffer"), jni_sig!(java.nio.FloatBuffer)),
    (jni_str!("offset"), jni_sig!(jint)),
    (jni_str!("count"), jni_sig!(jint)),
]);

impl<'l> TablePull<'l> {
    /// Reads an `io.warren.ps.TablePull` (seven field reads; the floats are not touched).
    pub fn read(env: &mut Env<'l>, request: &JObject<'l>) -> JniResult<TablePull<'l>> {
        let f = TABLE_PULL.of(env, request, "the pull request")?;
        let keys = f.object::<JLongArray>(env, 2)?;
        let keys = if keys.is_null() {
            None
        } else {
            let k = whole(env, &keys, "keys")?.into_iter().map(|k| k as u64).collect();
            env.delete_local_ref(keys);
            Some(k)
        };
        Ok(TablePull {
            table: f.string(env, 0)?,
            start: f.long(env, 1)?,
            keys,
            array: f.object::<JFloatArray>(env, 3)?,
            // A `FloatBuffer` read as `JByteBuffer`: JNI's direct-buffer calls take any buffer.
            buffer: f.object::<JByteBuffer>(env, 4)?,
            offset: f.int(env, 5)?,
            count: f.int(env, 6)?,
        })
    }

    /// The table's name (null: an error).
    pub fn table(&self) -> JniResult<&str> {
        given(self.table.as_deref(), "table")
    }

    /// A sparse pull's keys (null: an error).
    pub fn keys(&self) -> JniResult<&[u64]> {
        given(self.keys.as_deref(), "keys")
    }
}

/// The pieces of a multi-table push or pull (`PiecesRequest`): the scalar columns read whole,
/// the per-piece arrays and buffers left as Java arrays, read element by element where used.
pub struct Pieces<'l> {
    /// Each piece's table.
    pub names: Vec<String>,
    /// Each dense piece's first element.
    pub firsts: Vec<i64>,
    /// Each piece's first index or element.
    pub positions: Vec<i32>,
    /// Each piece's number of floats.
    pub counts: Vec<i32>,
    /// Each sparse piece's keys (an element null: a dense piece).
    pub keys: JObjectArray<'l, JLongArray<'l>>,
    /// Each bagged piece's bags' ends (an element null: not bagged).
    pub ends: JObjectArray<'l, JLongArray<'l>>,
    /// Each piece's array (an element null: its buffer).
    pub arrays: JObjectArray<'l, JFloatArray<'l>>,
    /// Each piece's direct buffer.
    pub buffers: JObjectArray<'l, JByteBuffer<'l>>,
}

static PIECES: FieldIds<8> = FieldIds::new([
    (jni_str!("tables"), jni_sig!(java.lang.String[])),
    (jni_str!("firsts"), jni_sig!(jlong[])),
    (jni_str!("keys"), jni_sig!(jlong[][])),
    (jni_str!("ends"), jni_sig!(jlong[][])),
    (jni_str!("arrays"), jni_sig!(jfloat[][])),
    (jni_str!("buffers"), jni_sig!(java.nio.FloatBuffer[])),
    (jni_str!("positions"), jni_sig!(jint[])),
    (jni_str!("counts"), jni_sig!(jint[])),
]);

impl<'l> Pieces<'l> {
    /// Reads an `io.warren.ps.PiecesRequest`; `firsts` is named `firsts` in errors (`starts`
    /// of a pull, `offsets` of a push).
    pub fn read(env: &mut Env<'l>, request: &JObject<'l>, firsts: &str) -> JniResult<Pieces<'l>> {
        let f = PIECES.of(env, request, "the pieces")?;
        let names = f.strings(env, 0, "tables")?.ok_or_else(|| argument("tables is null".into()))?;
        Ok(Pieces {
            names,
            firsts: f.whole(env, 1, firsts)?,
            positions: f.whole(env, 6, "positions")?,
            counts: f.whole(env, 7, "counts")?,
            keys: f.object::<JObjectArray<JLongArray>>(env, 2)?,
            ends: f.object::<JObjectArray<JLongArray>>(env, 3)?,
            arrays: f.object::<JObjectArray<JFloatArray>>(env, 4)?,
            buffers: f.object::<JObjectArray<JByteBuffer>>(env, 5)?,
        })
    }

    /// Piece `i`'s first element.
    pub fn first(&self, i: usize) -> JniResult<i64> {
        at(&self.firsts, i, "the first elements")
    }

    /// Piece `i`'s first index or element.
    pub fn position(&self, i: usize) -> JniResult<i32> {
        at(&self.positions, i, "positions")
    }

    /// Piece `i`'s number of floats.
    pub fn count(&self, i: usize) -> JniResult<i32> {
        at(&self.counts, i, "counts")
    }
}

/// The `i`-th element of a Java array read whole, or an error naming it.
fn at<T: Copy>(values: &[T], i: usize, what: &str) -> JniResult<T> {
    values.get(i).copied().ok_or_else(|| argument(format!("{what} has fewer elements than the tables")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, kind: i32, size: i64, optimizer: &str) -> Table {
        Table {
            name: name.into(),
            kind,
            size,
            scale: f32::NAN,
            seed: 0,
            optimizer: Some(optimizer.into()),
            expected_rows: 0,
        }
    }

    #[test]
    fn tables_come_from_their_fields() {
        let dense = table("w", 0, 10, "sgd:0.5").spec().unwrap();
        assert_eq!(dense.kind, TableKind::Dense { len: 10 });
        assert_eq!(dense.init, Init::Zeros, "a NaN scale means zeros");
        assert_eq!(dense.optimizer, Optimizer::Sgd { lr: 0.5 });
        let sparse =
            Table { scale: 0.1, seed: -1, expected_rows: 1 << 20, ..table("emb", 1, 4, "adam:0.01") }.spec().unwrap();
        assert_eq!(sparse.kind, TableKind::Sparse { width: 4, expected_rows: 1 << 20 });
        // A Java long's bits are the unsigned seed.
        assert_eq!(sparse.init, Init::Uniform { scale: 0.1, seed: u64::MAX });
        assert_eq!(sparse.optimizer, Optimizer::Adam { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 });
    }

    #[test]
    fn bad_tables_are_clear_errors() {
        let message = |t: Table| t.spec().unwrap_err().to_string();
        assert_eq!(message(table("w", 2, 10, "sgd:1")), "unknown table kind 2");
        assert!(message(table("emb", 1, 0, "sgd:1")).contains("width 0"));
        assert!(message(table("w", 0, -3, "sgd:1")).contains("table length -3 is negative"));
        let m = message(table("w", 0, 10, "sgd:x"));
        assert!(m.contains("table \"w\"") && m.contains("\"x\" is not a number"), "{m}");
        assert!(message(Table { expected_rows: -1, ..table("emb", 1, 4, "sgd:1") }).contains("expected rows -1"));
        assert_eq!(message(Table { optimizer: None, ..table("w", 0, 1, "") }), "optimizers holds null");
    }

    fn define() -> Define {
        Define { trainers: 2, mode: Some("ssp".into()), staleness: 3, tables: vec![table("w", 0, 10, "sgd:1")] }
    }

    #[test]
    fn a_job_is_checked_in_order() {
        let job = define().job().unwrap();
        assert_eq!((job.trainers, job.mode, job.tables.len()), (2, Mode::Ssp { staleness: 3 }, 1));
        let message = |d: Define| d.job().unwrap_err().to_string();
        assert_eq!(message(Define { trainers: -1, mode: None, ..define() }), "trainers -1 is negative");
        assert_eq!(message(Define { mode: None, ..define() }), "mode is null");
        assert_eq!(message(Define { staleness: -2, ..define() }), "staleness -2 is negative");
    }

    fn server() -> ServerStart {
        ServerStart {
            secret: Some("s".into()),
            index: 0,
            servers: 2,
            host: Some("127.0.0.1".into()),
            port: 0,
            pull_timeout_ms: 1000,
            checkpoint_dir: None,
            every_steps: 0,
            every_ms: 0,
            tls: None,
            threads: 4,
        }
    }

    #[test]
    fn a_server_config_comes_from_its_fields() {
        let cfg = server().config().unwrap();
        assert_eq!((cfg.index, cfg.servers, cfg.port, cfg.threads), (0, 2, 0, 4));
        assert!(cfg.checkpoint.is_none() && cfg.tls.is_none());
        let cfg = ServerStart { checkpoint_dir: Some("/tmp/c".into()), every_steps: 5, ..server() }.config().unwrap();
        let policy = cfg.checkpoint.unwrap();
        assert_eq!((policy.dir, policy.every_steps, policy.every), ("/tmp/c".into(), 5, Duration::ZERO));
        assert_eq!(ServerStart { threads: -1, ..server() }.config().unwrap().threads, 0, "refused by start");
    }

    #[test]
    fn bad_server_settings_keep_their_messages() {
        let message = |s: ServerStart| s.config().unwrap_err().to_string();
        assert_eq!(message(ServerStart { index: -1, ..server() }), "server index -1 of 2: negative");
        assert_eq!(message(ServerStart { secret: None, host: None, ..server() }), "secret is null");
        assert_eq!(message(ServerStart { host: None, ..server() }), "host is null");
        assert_eq!(message(ServerStart { port: 70000, ..server() }), "port 70000 is out of range");
        assert_eq!(message(ServerStart { port: -1, ..server() }), "port -1 is out of range");
        assert_eq!(message(ServerStart { pull_timeout_ms: 0, ..server() }), "pullTimeout must be positive, got 0 ms");
        let dir = Some("/tmp/c".to_string());
        let m = message(ServerStart { checkpoint_dir: dir.clone(), every_steps: -1, ..server() });
        assert_eq!(m, "checkpoint steps -1 is negative");
        let m = message(ServerStart { checkpoint_dir: dir, every_ms: -5, ..server() });
        assert_eq!(m, "checkpoint interval -5 is negative");
        let m = message(ServerStart { tls: Some(vec!["WARREN_TLS".into()]), ..server() });
        assert_eq!(m, "TLS settings must be key/value pairs");
    }

    fn connect() -> ClientConnect {
        ClientConnect {
            uris: Some(vec!["127.0.0.1:1".into()]),
            secret: Some("s".into()),
            trainer: 0,
            connect_timeout_ms: 1000,
            call_timeout_ms: 2000,
            cancel_handle: 0,
            tls: None,
        }
    }

    #[test]
    fn connect_settings_keep_their_messages() {
        let c = connect().settings().unwrap();
        assert_eq!((c.trainer, c.options.call_timeout), (Some(0), Duration::from_secs(2)));
        assert_eq!(ClientConnect { trainer: -1, ..connect() }.settings().unwrap().trainer, None, "an observer");
        let message = |c: ClientConnect| c.settings().err().unwrap().to_string();
        assert_eq!(message(ClientConnect { uris: None, secret: None, ..connect() }), "server addresses is null");
        assert_eq!(message(ClientConnect { secret: None, ..connect() }), "secret is null");
        assert_eq!(message(ClientConnect { trainer: -2, ..connect() }), "trainer id -2 is negative");
        let m = message(ClientConnect { connect_timeout_ms: -1, ..connect() });
        assert_eq!(m, "connectTimeout must be positive, got -1 ms");
        assert_eq!(
            message(ClientConnect { call_timeout_ms: 0, ..connect() }),
            "callTimeout must be positive, got 0 ms"
        );
    }
}

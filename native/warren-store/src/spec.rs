//! [`open`]: a store named by a one-line spec, as the CLI's `--store` and the JVM's
//! `Master` take it.

use super::etcd_limits::{DEFAULT_ETCD_PREFIX, DEFAULT_FLUSHES_IN_FLIGHT, DEFAULT_LEASE_TTL_S};
#[cfg(feature = "etcd")]
use super::{EtcdOptions, EtcdStore};
use super::{FileStore, Replay, SnapshotEveryChangeStore, Store};
use warren_base::error::{Error, Result};

/// Settings of [`open_with`] that a spec does not carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Lease time to live of the etcd store's leader lock, in seconds ([`MIN_LEASE_TTL_S`](super::MIN_LEASE_TTL_S)
    /// to [`MAX_LEASE_TTL_S`](super::MAX_LEASE_TTL_S), default 5; see `EtcdOptions::lease_ttl_s`); unused by the
    /// other stores.
    pub etcd_lease_ttl_s: i64,
    /// etcd log transactions in flight at once (see `EtcdOptions::flushes_in_flight`,
    /// default [`DEFAULT_FLUSHES_IN_FLIGHT`]); unused by the other stores.
    pub etcd_flushes_in_flight: usize,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            etcd_lease_ttl_s: DEFAULT_LEASE_TTL_S,
            etcd_flushes_in_flight: usize::from(DEFAULT_FLUSHES_IN_FLIGHT),
        }
    }
}

/// `HOST:PORT[,HOST:PORT...][/PREFIX]` as endpoints and prefix (`default_prefix` if none).
fn etcd_parts<'a>(rest: &'a str, default_prefix: &'a str) -> (Vec<String>, &'a str) {
    let (endpoint, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, default_prefix),
    };
    (endpoint.split(',').map(String::from).collect(), prefix)
}

/// The endpoints and key prefix of a spec `etcd:HOST:PORT[,HOST:PORT...][/PREFIX]`
/// (`default_prefix` when it names none), for services that keep something other than a
/// store in etcd (the parameter servers' registration). Anything else is [`Error::Config`].
pub fn parse_etcd_spec(spec: &str, default_prefix: &str) -> Result<(Vec<String>, String)> {
    match spec.split_once(':') {
        Some(("etcd", rest)) if !rest.is_empty() => {
            let (endpoints, prefix) = etcd_parts(rest, default_prefix);
            Ok((endpoints, prefix.to_string()))
        }
        _ => Err(Error::Config(format!("{spec:?}: expected etcd:HOST:PORT[,HOST:PORT...][/PREFIX]"))),
    }
}

/// Opens the store named by `spec` with default [`OpenOptions`]; see [`open_with`].
pub fn open<C: Replay>(spec: &str) -> Result<Box<dyn Store<C>>> {
    open_with(spec, &OpenOptions::default())
}

/// A parsed store spec.
#[derive(Debug, PartialEq, Eq)]
enum Spec<'a> {
    File(&'a str),
    Snapshot(&'a str),
    Etcd { endpoints: Vec<String>, prefix: &'a str },
}

fn parse(spec: &str) -> Result<Spec<'_>> {
    match spec.split_once(':') {
        Some(("file", dir)) if !dir.is_empty() => Ok(Spec::File(dir)),
        Some(("snapshot", dir)) if !dir.is_empty() => Ok(Spec::Snapshot(dir)),
        Some(("etcd", rest)) if !rest.is_empty() => {
            let (endpoints, prefix) = etcd_parts(rest, DEFAULT_ETCD_PREFIX);
            Ok(Spec::Etcd { endpoints, prefix })
        }
        _ => Err(Error::Config(format!(
            "store {spec:?}: expected file:DIR, snapshot:DIR or etcd:HOST:PORT[,HOST:PORT...][/PREFIX]"
        ))),
    }
}

/// Opens the store named by `spec`: `file:DIR` (write-ahead log), `snapshot:DIR` (the seed's
/// snapshot on every change; slow) or `etcd:HOST:PORT[,HOST:PORT...][/PREFIX]` (one prefix per
/// dataset: one master serves it at a time; another one started on the same prefix waits and
/// takes over). Anything else is [`Error::Config`] naming the accepted forms; so is an
/// `etcd:` spec in a build without the Cargo feature `etcd`.
///
/// `C` must implement [`Replay`] because `snapshot:` keeps a replica of the state.
pub fn open_with<C: Replay>(spec: &str, options: &OpenOptions) -> Result<Box<dyn Store<C>>> {
    match parse(spec)? {
        Spec::File(dir) => Ok(Box::new(FileStore::<C>::open(dir)?)),
        Spec::Snapshot(dir) => Ok(Box::new(SnapshotEveryChangeStore::<C>::open(dir, 6)?)),
        Spec::Etcd { endpoints, prefix } => open_etcd(endpoints, prefix, options),
    }
}

#[cfg(feature = "etcd")]
fn open_etcd<C: Replay>(endpoints: Vec<String>, prefix: &str, options: &OpenOptions) -> Result<Box<dyn Store<C>>> {
    let mut opts = EtcdOptions::new(endpoints, prefix);
    opts.lease_ttl_s = options.etcd_lease_ttl_s;
    opts.flushes_in_flight = options.etcd_flushes_in_flight;
    Ok(Box::new(EtcdStore::<C>::open(opts)?))
}

#[cfg(not(feature = "etcd"))]
fn open_etcd<C: Replay>(endpoints: Vec<String>, prefix: &str, _: &OpenOptions) -> Result<Box<dyn Store<C>>> {
    Err(Error::Config(format!(
        "store etcd:{}{prefix}: this build of Warren has no etcd support (the `warren` crate was built \
         without its Cargo feature `etcd`); rebuild with `--features etcd` or use file:DIR",
        endpoints.join(",")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;
    use crate::testkit::Kv;

    #[test]
    fn bad_specs_are_config_errors_naming_the_forms() {
        for bad in ["", "file:", "dir", "s3:bucket", "etcd:"] {
            match open::<Kv>(bad) {
                Err(Error::Config(m)) => assert!(m.contains("file:DIR") && m.contains(&format!("{bad:?}")), "{m}"),
                Err(e) => panic!("{bad:?}: {e}"),
                Ok(_) => panic!("{bad:?} opened a store"),
            }
        }
    }

    #[test]
    fn etcd_specs_name_endpoints_and_prefix() {
        assert_eq!(
            parse("etcd:a:1,b:2/job/x").unwrap(),
            Spec::Etcd { endpoints: vec!["a:1".into(), "b:2".into()], prefix: "/job/x" }
        );
        assert_eq!(
            parse("etcd:127.0.0.1:2379").unwrap(),
            Spec::Etcd { endpoints: vec!["127.0.0.1:2379".into()], prefix: DEFAULT_ETCD_PREFIX }
        );
        assert_eq!(parse_etcd_spec("etcd:a:1/j", "/d").unwrap(), (vec!["a:1".to_string()], "/j".to_string()));
        assert_eq!(parse_etcd_spec("etcd:a:1", "/d").unwrap(), (vec!["a:1".to_string()], "/d".to_string()));
        assert!(matches!(parse_etcd_spec("file:x", "/d"), Err(Error::Config(m)) if m.contains("etcd:HOST:PORT")));
    }

    #[test]
    fn a_file_spec_opens_a_file_store_in_that_directory() {
        let dir = TestDir::new("spec-file");
        let store_dir = dir.path().join("queue");
        let store = open::<Kv>(&format!("file:{}", store_dir.display())).unwrap();
        let (snapshot, records) = store.load().unwrap();
        assert!(snapshot.is_none() && records.is_empty());
        assert!(store_dir.join("LOCK").exists(), "the file store locks its directory");
    }

    /// Without the feature, an etcd spec is refused at once, naming the feature; with it,
    /// the spec reaches the etcd client (here: nothing listens, so connecting fails).
    #[test]
    fn an_etcd_spec_needs_the_etcd_feature() {
        // A port nothing listens on: bind one and close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let spec = format!("etcd:127.0.0.1:{port}/t");
        let started = std::time::Instant::now();
        let err = open::<Kv>(&spec).err().expect("no etcd there");
        let msg = err.to_string();
        if cfg!(feature = "etcd") {
            assert!(!msg.contains("Cargo feature"), "{msg}");
            assert!(matches!(err, Error::StoreFailed(_) | Error::Timeout { .. }), "{msg}");
        } else {
            assert!(matches!(err, Error::Config(_)), "{msg}");
            assert!(msg.contains("feature `etcd`") && msg.contains(&port.to_string()), "{msg}");
            assert!(started.elapsed() < std::time::Duration::from_secs(1), "refused without trying to connect");
        }
    }
}

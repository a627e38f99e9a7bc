//! [`open`]: a store named by a one-line spec, as the CLI's `--store` and the JVM's
//! `Master` take it.

use super::{EtcdOptions, EtcdStore, FileStore, SnapshotEveryChangeStore, Store};
use crate::error::{Error, Result};

/// Key prefix in etcd when a spec `etcd:HOST:PORT` names none.
pub const DEFAULT_ETCD_PREFIX: &str = "/warren/master/default";

/// Settings of [`open_with`] that a spec does not carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Lease time to live of the etcd store's leader lock, in seconds (see
    /// [`EtcdOptions::lease_ttl_s`]); unused by the other stores.
    pub etcd_lease_ttl_s: i64,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { etcd_lease_ttl_s: EtcdOptions::new(Vec::new(), DEFAULT_ETCD_PREFIX).lease_ttl_s }
    }
}

/// Opens the store named by `spec` with default [`OpenOptions`]; see [`open_with`].
pub fn open(spec: &str) -> Result<Box<dyn Store>> {
    open_with(spec, &OpenOptions::default())
}

/// Opens the store named by `spec`: `file:DIR` (write-ahead log), `snapshot:DIR` (the seed's
/// snapshot on every change; slow) or `etcd:HOST:PORT[,HOST:PORT...][/PREFIX]` (one prefix per
/// dataset: one master serves it at a time; another one started on the same prefix waits and
/// takes over). Anything else is [`Error::Config`] naming the accepted forms.
pub fn open_with(spec: &str, options: &OpenOptions) -> Result<Box<dyn Store>> {
    match spec.split_once(':') {
        Some(("file", dir)) if !dir.is_empty() => Ok(Box::new(FileStore::open(dir)?)),
        Some(("snapshot", dir)) if !dir.is_empty() => Ok(Box::new(SnapshotEveryChangeStore::open(dir, 6)?)),
        Some(("etcd", rest)) if !rest.is_empty() => {
            let (endpoint, prefix) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, DEFAULT_ETCD_PREFIX),
            };
            let endpoints = endpoint.split(',').map(String::from).collect();
            let mut opts = EtcdOptions::new(endpoints, prefix);
            opts.lease_ttl_s = options.etcd_lease_ttl_s;
            Ok(Box::new(EtcdStore::open(opts)?))
        }
        _ => Err(Error::Config(format!(
            "store {spec:?}: expected file:DIR, snapshot:DIR or etcd:HOST:PORT[,HOST:PORT...][/PREFIX]"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testdir::TestDir;

    #[test]
    fn bad_specs_are_config_errors_naming_the_forms() {
        for bad in ["", "file:", "dir", "s3:bucket", "etcd:"] {
            match open(bad) {
                Err(Error::Config(m)) => assert!(m.contains("file:DIR") && m.contains(&format!("{bad:?}")), "{m}"),
                Err(e) => panic!("{bad:?}: {e}"),
                Ok(_) => panic!("{bad:?} opened a store"),
            }
        }
    }

    #[test]
    fn a_file_spec_opens_a_file_store_in_that_directory() {
        let dir = TestDir::new("spec-file");
        let store_dir = dir.path().join("queue");
        let store = open(&format!("file:{}", store_dir.display())).unwrap();
        let (snapshot, changes) = store.load().unwrap();
        assert!(snapshot.is_none() && changes.is_empty());
        assert!(store_dir.join("LOCK").exists(), "the file store locks its directory");
    }
}

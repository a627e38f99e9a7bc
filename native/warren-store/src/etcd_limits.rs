//! The etcd store's bounds and defaults, known with or without the `etcd` feature (a spec
//! naming etcd is parsed and checked either way).

/// Key prefix in etcd when a spec `etcd:HOST:PORT` names none.
pub const DEFAULT_ETCD_PREFIX: &str = "/warren/master/default";

/// Smallest etcd lease time to live, in seconds (etcd counts leases in whole seconds).
pub const MIN_LEASE_TTL_S: i64 = 1;
/// Largest etcd lease time to live, in seconds: a successor never waits more than an hour.
pub const MAX_LEASE_TTL_S: i64 = 3600;
/// The etcd lease time to live unless set otherwise, in seconds.
pub(crate) const DEFAULT_LEASE_TTL_S: i64 = 5;
/// etcd log transactions in flight at once unless set otherwise: one, since on a machine
/// whose CPU etcd shares, more transactions of fewer records each cost more CPU than the
/// overlap saves (docs/benchmarks-master.md).
pub const DEFAULT_FLUSHES_IN_FLIGHT: u16 = 1;

//! The settings of the etcd store, checked before it connects.

use std::time::Duration;

use crate::etcd_limits::{DEFAULT_FLUSHES_IN_FLIGHT, DEFAULT_LEASE_TTL_S, MAX_LEASE_TTL_S, MIN_LEASE_TTL_S};
use warren_base::error::{Error, Result};

/// Settings of an [`EtcdStore`](crate::EtcdStore).
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// etcd client endpoints (`host:port` or `http://host:port`).
    pub endpoints: Vec<String>,
    /// Key prefix of this service's state (one per dataset / job), e.g. `/warren/master/job1`.
    pub prefix: String,
    /// Lease time to live in seconds ([`MIN_LEASE_TTL_S`](crate::MIN_LEASE_TTL_S) to
    /// [`MAX_LEASE_TTL_S`](crate::MAX_LEASE_TTL_S)): how long after a writer dies its
    /// successor waits, and how long a writer may go without renewing its lease (a pause,
    /// a partition) before it loses the lock. etcd raises a TTL below its own minimum (1.5 ×
    /// its `--election-timeout`, rounded up: 2 s by default) to that minimum; the TTL
    /// granted is logged.
    pub lease_ttl_s: i64,
    /// How long [`EtcdStore::open`](crate::EtcdStore::open) waits for the leader lock.
    pub lock_timeout: Duration,
    /// Deadline of each etcd request.
    pub request_timeout: Duration,
    /// [`Store::wants_compaction`](crate::Store::wants_compaction) turns true after this many records since the last
    /// snapshot.
    pub compact_after_changes: u64,
    /// Flushes (transactions of queued records) in flight at once. Default 1: each flush
    /// takes every record queued during the previous one. More overlap round trips, which
    /// pays where etcd's fsync latency dominates and CPU is spare; where etcd shares the
    /// CPU, smaller transactions cost more than they save (docs/benchmarks-master.md).
    pub flushes_in_flight: usize,
    /// Byte budget of one log transaction: a flush whose records exceed it is cut into
    /// several keys (between submits). Keep it below etcd's `--max-request-bytes` (default
    /// 1.5 MiB). Default 1 MiB.
    pub max_request_bytes: usize,
}

impl EtcdOptions {
    /// Defaults for `endpoints` and `prefix`: 5 s lease, 1 hour lock wait, 10 s requests,
    /// a snapshot every 10,000 records, 1 flush in flight, 1 MiB per transaction.
    pub fn new(endpoints: Vec<String>, prefix: impl Into<String>) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            prefix: prefix.into().trim_end_matches('/').to_string(),
            lease_ttl_s: DEFAULT_LEASE_TTL_S,
            lock_timeout: Duration::from_secs(3600),
            request_timeout: Duration::from_secs(10),
            compact_after_changes: 10_000,
            flushes_in_flight: usize::from(DEFAULT_FLUSHES_IN_FLIGHT),
            max_request_bytes: 1 << 20,
        }
    }

    /// Checks the settings: a clear [`Error::Config`] for a lease TTL out of bounds, no
    /// endpoint, a relative prefix, a zero request timeout, no flush or no request bytes.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_LEASE_TTL_S..=MAX_LEASE_TTL_S).contains(&self.lease_ttl_s) {
            return Err(Error::Config(format!(
                "etcd lease TTL {} s is out of bounds: it must be between {MIN_LEASE_TTL_S} and {MAX_LEASE_TTL_S} s",
                self.lease_ttl_s
            )));
        }
        if self.endpoints.is_empty() || self.endpoints.iter().any(|e| e.trim().is_empty()) {
            return Err(Error::Config(format!(
                "etcd endpoints {:?}: expected HOST:PORT[,HOST:PORT...]",
                self.endpoints
            )));
        }
        if !self.prefix.starts_with('/') {
            return Err(Error::Config(format!("etcd key prefix {:?} must start with '/'", self.prefix)));
        }
        if self.request_timeout.is_zero() {
            return Err(Error::Config("the etcd request timeout must be positive".into()));
        }
        if self.flushes_in_flight == 0 || self.max_request_bytes == 0 {
            return Err(Error::Config("etcd flushes in flight and request bytes must be at least 1".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_out_of_bounds_are_clear_errors() {
        let ok = EtcdOptions::new(vec!["127.0.0.1:2379".into()], "/warren/x");
        assert!(ok.validate().is_ok());
        for ttl in [0, -1, 3601] {
            let err = EtcdOptions { lease_ttl_s: ttl, ..ok.clone() }.validate().unwrap_err();
            assert!(
                matches!(&err, Error::Config(m) if m.contains("lease TTL") && m.contains("between 1 and 3600")),
                "{err}"
            );
        }
        for ttl in [1, 3600] {
            assert!(EtcdOptions { lease_ttl_s: ttl, ..ok.clone() }.validate().is_ok());
        }
        assert!(matches!(EtcdOptions { endpoints: vec![], ..ok.clone() }.validate(), Err(Error::Config(_))));
        assert!(matches!(EtcdOptions { prefix: "x".into(), ..ok.clone() }.validate(), Err(Error::Config(_))));
        assert!(matches!(EtcdOptions { request_timeout: Duration::ZERO, ..ok }.validate(), Err(Error::Config(_))));
    }
}

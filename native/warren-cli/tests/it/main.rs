//! The integration tests of the `warren` command, in one test binary: each module is one
//! suite, `support` their shared harness (the etcd server of `warren`'s tests included). One
//! binary compiles the harness once and links the dependency graph once; the tests run the
//! `warren` binary cargo builds for them (`CARGO_BIN_EXE_warren`).
//!
//! One suite: `cargo test -p warren-cli --test it elastic::`; one test: its full name, e.g.
//! `cargo test -p warren-cli --test it faults::a_long_pause -- --nocapture` (TESTING.md).
//! The timing-sensitive suites (`faults`, `netns`) run one test at a time between them
//! (`support::procs::one_at_a_time`).

mod support;

mod bench_scale;
mod elastic;
mod faults;
mod master_crash;
mod master_etcd;
mod master_etcd_crash;
mod netns;
mod placement;
mod processes;
mod ps_etcd;
mod ps_master;
mod ps_recovery;
mod ps_train;
mod recordio_cli;
mod recovery;
mod recovery_sweeps;
mod tls;

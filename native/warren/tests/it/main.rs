//! The integration tests of `warren`, in one test binary: each module is one suite, `common`
//! and `support` their shared harness. One binary compiles the harness once and links the
//! dependency graph once.
//!
//! One suite: `cargo test -p warren --test it collectives::`; one test, by its full name:
//! `cargo test -p warren --test it collectives::ring_slices_give_the_bits_of_whole_chunks`
//! (TESTING.md).

mod common;
#[cfg(feature = "etcd")]
mod support {
    pub mod etcd;
}

mod bad_input;
mod cancel;
mod collectives;
#[cfg(feature = "etcd")]
mod etcd_store;
mod feature_gate;
mod master_service;
mod mem_links;
mod ps_cancel;
mod ps_service;
mod recordio;
mod recordio_compat;
mod shm_links;
mod tls;
mod tracker_liveness;

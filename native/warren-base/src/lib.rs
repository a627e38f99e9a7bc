//! # Warren's base layer
//!
//! What every other Warren crate shares: the error type, cancellation, the time a process
//! did not run itself, and the worker settings.
//!
//! - [`error`]: [`Error`], the single error type of every Warren crate, and the declarations of
//!   collective calls its mismatch errors describe.
//! - [`cancel`]: [`CancelHandle`], which cancels a communicator's calls from another thread
//!   (wakes its waits, shuts its tracker socket).
//! - [`pause`]: the time a process did not run itself, which every liveness watch (worker,
//!   tracker, master, parameter server) discounts.
//! - [`config`]: worker settings from the environment or given explicitly, and TLS settings;
//!   [`mock`]: the failure-injection points they can name.
#![deny(missing_docs)]

pub mod cancel;
pub mod config;
pub mod error;
pub mod pause;

pub use cancel::CancelHandle;
pub use config::{Config, mock};
pub use error::{CallArgs, CallMismatch, Declaration, Error, Result};

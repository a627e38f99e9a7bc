//! What every Warren service connection shares: the preamble, length-prefixed frames, the
//! HMAC challenge-response proof of the job secret, deadline-bound blocking reads and
//! writes, and the authenticated accept of tokio services.

mod accept;
pub mod auth;
mod deadline;
mod frame;
mod preamble;

pub use accept::accept_authenticated;
pub use deadline::{read_exact_by, write_all_by};
pub use frame::{MAX_FRAME, decode_frame, encode_frame};
pub use preamble::{MAGIC, PREAMBLE_LEN, VERSION, check_preamble, preamble};

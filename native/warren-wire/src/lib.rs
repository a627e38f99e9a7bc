//! What every Warren service connection shares (the tracker, the data master, and the
//! parameter server to come): the preamble, length-prefixed frames, the HMAC
//! challenge-response proof of the job secret, deadline-bound blocking reads and writes, and
//! the authenticated accept of tokio services.
//!
//! A connection opens with the [`handshake`]: both ends send the 8-byte [`preamble`]
//! (magic and version), the server a nonce, the client an HMAC of it keyed by the job secret
//! and labelled with a [`Purpose`](auth::Purpose) (so that a proof for one service opens no
//! other), and the server a verdict byte. Then both ends exchange frames: a `u32` little-endian length and
//! that many bytes of JSON ([`encode_frame`], [`decode_frame`], at most [`MAX_FRAME`]).
//! Decoding reports "incomplete" instead of blocking, so the pure parts are tested on byte
//! slices; the I/O around them lives here once, for every service.
//!
//! # A new service in a few lines
//!
//! Give it a [`Purpose`](auth::Purpose) of its own (a variant with its own label in
//! [`auth`]) and a message type for each direction, in the service's own `proto.rs` like
//! the data master's `proto.rs`.
//! The server (`Purpose::Master` stands for the new service's purpose):
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use warren_wire::{self as wire, FrameReader, auth::Purpose};
//! # use tokio::io::AsyncWriteExt;
//! # fn main() -> warren_base::Result<()> {
//! # let secret = Arc::new(b"job secret".to_vec());
//! let bound = wire::bind("my-service", 1, "127.0.0.1", 0)?; // its runtime, any free port
//! let service = wire::serve(bound.listener, secret, None, Purpose::Master, "my-service", |stream| async move {
//!     let (rd, mut wr) = stream.into_split();
//!     let mut requests = FrameReader::new(rd, "a client");
//!     while let Ok(Some(request)) = requests.next::<String>().await {
//!         let reply = format!("echo {request}");
//!         if wr.write_all(&wire::encode_frame(&reply)).await.is_err() {
//!             break;
//!         }
//!     }
//! });
//! bound.runtime.spawn(service);
//! # Ok(())
//! # }
//! ```
//!
//! The client, blocking, every wait bound by `deadline`:
//!
//! ```no_run
//! # use std::time::{Duration, Instant};
//! # use warren_wire::{self as wire, Backoff, Connection, auth::Purpose};
//! # fn main() -> warren_base::Result<()> {
//! # let (secret, deadline) = (b"job secret", Instant::now() + Duration::from_secs(10));
//! let addr = wire::resolve("127.0.0.1:7000", "my-service")?;
//! let backoff = Backoff { first: Duration::from_millis(10), max: Duration::from_secs(1) };
//! let stream = wire::connect_by(addr, deadline, "my-service", backoff, None, &mut |_| Ok(false))?;
//! let mut conn = Connection::handshake(stream, secret, Purpose::Master, None, deadline, "my-service")?;
//! conn.send(&"hello", deadline)?;
//! let reply: Option<String> = conn.recv(deadline)?; // None: the service closed the connection
//! # Ok(())
//! # }
//! ```
//!
//! `None` above is plain TCP; a [`Tls`] context (from [`TlsSettings`]) puts both on TLS,
//! keyed from the job secret or from user certificates (see [`tls`]).
//!
//! Peer links between workers use the same handshake (with
//! [`Purpose::Peer`](auth::Purpose::Peer)) but no frames: see the collective runtime's `transport`.
#![deny(missing_docs)]

mod accept;
pub mod auth;
mod channel;
mod client;
mod deadline;
mod frame;
mod frame_reader;
pub mod handshake;
mod inbox;
#[cfg(test)]
mod loopback_tests;
pub mod pool;
mod preamble;
pub mod tls;

pub use accept::{Bound, HANDSHAKE_TIMEOUT, accept_authenticated, bind, serve};
pub use channel::{Channel, ServiceStream};
pub use client::{Backoff, Connection, connect_by, resolve};
pub use deadline::Timed;
pub use deadline::{read_exact_by, write_all_by};
pub use frame::{MAX_FRAME, decode_frame, decode_frame_within, encode_frame, frame_len_within};
pub use frame_reader::FrameReader;
pub use handshake::HandshakeFailure;
pub use preamble::{
    MAGIC, PREAMBLE_LEN, TLS_FLAG, VERSION, check_mode, check_preamble, is_warren, preamble, preamble_with,
};
pub use tls::{Tls, TlsSettings};

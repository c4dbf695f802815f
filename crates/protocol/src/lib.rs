//! RESP2/RESP3 codec for durakv.
//!
//! This crate is the lowest layer: it knows how bytes on the wire become a
//! request (a list of arguments) and how a reply [`Frame`] becomes bytes in
//! the protocol version a client negotiated with `HELLO`. It knows nothing
//! about commands, keys or storage.
//!
//! - [`request`]: incremental request parser (multibulk and inline), with the
//!   limits Redis enforces and Redis's exact protocol-error strings.
//! - [`frame`]: reply frames and their RESP2/RESP3 encodings.
//! - [`reply`]: a client-side reply parser, used by the benchmark and tests.

pub mod frame;
pub mod reply;
pub mod request;

pub use frame::{Frame, Protocol};
pub use reply::{parse_reply, ReplyError};
pub use request::{ParseError, RequestLimits, RequestParser};

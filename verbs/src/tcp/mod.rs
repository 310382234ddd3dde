//! Verbs as two-sided RPCs over TCP: the data path of the `redt-tcp` baseline (RedT §6.5).
//!
//! Every node runs a [`TcpVerbsServer`] over its own region; a [`TcpVerbs`] client sends
//! each verb (or each doorbell batch) to the target node's server as one request frame and
//! waits for one reply frame. The server's CPU executes the work requests, which is what
//! makes the access two-sided. Verbs to the client's own node skip the network and go
//! straight to its region.
//!
//! # Connection
//! 1. The server sends a status message in the clear: admitted, or refused with a reason
//!    (over a connection cap).
//! 2. TLS 1.3 with the cluster CA, ALPN `redt-verbs/1` ([`super::VerbsTls`]): both sides
//!    present node certificates; each accepts only a node of its own DC.
//! 3. Over TLS, the server sends a second status message: admitted, or refused with a reason
//!    (the client's certificate is not a node certificate of this DC).
//! 4. Request and reply frames, over TLS.
//!
//! A status message is a `u8` version ([`WIRE_VERSION`]), then `u8` 0 (admitted) or `u8` 1
//! (refused) followed by a `u16` length and up to 1,024 bytes of UTF-8 reason.
//!
//! # Wire format
//! Every frame is a little-endian `u32` body length followed by the body; a body longer
//! than [`MAX_FRAME_BYTES`] is refused. Integers are little-endian.
//!
//! Request body: `u8` version ([`WIRE_VERSION`]), `u16` node, `u32` request count, then per
//! work request a `u8` op, the `u64` offset and the op's operands:
//! READ `u32 len`; WRITE `u32 len` + bytes; CAS `u64 expected, u64 new`; FAA `u64 add`;
//! masked CAS `u64 compare, compare_mask, swap, swap_mask`; masked FAA `u64 add, boundary`.
//!
//! Reply body: `u8` version, `u32` completion count, the completions of the requests that
//! ran, in order (`u8` tag: READ `u32 len` + bytes, WRITE nothing, atomic `u64` old
//! value), then a `u8` status: 0 for success, or 1 followed by an error (`u8` kind:
//! out-of-bounds `u16 node, u64 offset, u64 len, u64 size`; unaligned `u16 node, u64
//! offset`; unknown node `u16 node`; refused `u32 len` + UTF-8 reason). As with
//! [`super::LocalVerbs`], a batch stops at its first failing request; the completions of
//! the requests before it are still returned.

// The wire format and framing (wire.rs), the server that executes requests on its node's
// region (server.rs) and the client that sends them (client.rs).
mod client;
mod server;
mod wire;

pub use client::{TcpVerbs, DEFAULT_IO_TIMEOUT, POOL_IDLE_FOR};
pub use server::{ServerCounts, ServerCountsHandle, ServerLimits, TcpVerbsServer};
pub use wire::{decode_reply_body, decode_request_body, encode_request_body, MAX_FRAME_BYTES, WIRE_VERSION};

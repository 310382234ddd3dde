//! The wire format of the TCP verbs (see the `tcp` module docs): length-prefixed frames, the
//! request and reply bodies, and their encoding and bounds-checked decoding.

use crate::error::Error;
use crate::{Completion, WorkRequest};
use redt_proto::{NodeId, Offset};
use std::io::{self, Read};

/// Largest frame body either side sends or accepts, in bytes (16 MiB).
pub const MAX_FRAME_BYTES: usize = 16 << 20;

/// Version byte at the start of every status message, request and reply body (2: TLS and
/// the status messages; 1, plain TCP, is refused).
pub const WIRE_VERSION: u8 = 2;

/// Most bytes of the reason a refusal status carries (a longer one is cut).
pub(super) const MAX_REASON_BYTES: usize = 1024;

const ADMITTED: u8 = 0;
const REFUSED: u8 = 1;

const OP_READ: u8 = 1;
const OP_WRITE: u8 = 2;
const OP_CAS: u8 = 3;
const OP_FAA: u8 = 4;
const OP_MASKED_CAS: u8 = 5;
const OP_MASKED_FAA: u8 = 6;
const OP_PERSIST: u8 = 7;

const DONE_READ: u8 = 1;
const DONE_WRITTEN: u8 = 2;
const DONE_ATOMIC: u8 = 3;

const STATUS_OK: u8 = 0;
const STATUS_ERR: u8 = 1;

const ERR_OUT_OF_BOUNDS: u8 = 1;
const ERR_UNALIGNED: u8 = 2;
const ERR_UNKNOWN_NODE: u8 = 3;
const ERR_REFUSED: u8 = 4;

/// Bytes of a frame's length prefix.
pub(super) const PREFIX_BYTES: usize = 4;
/// Reply bytes besides the completions: version, count, status.
const REPLY_FIXED_BYTES: usize = 1 + 4 + 1;
/// Reply bytes of a READ completion besides its data: tag and length.
const READ_DONE_FIXED_BYTES: usize = 1 + 4;
/// The smallest encoded work request (READ, or WRITE of nothing: op, offset, length).
const MIN_REQUEST_BYTES: usize = 1 + 8 + 4;

/// A frame body that does not decode.
#[derive(Debug)]
pub(super) struct Malformed(pub(super) String);

/// Reads little-endian fields off a frame body.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], Malformed> {
        if self.buf.len() < n {
            return Err(Malformed(format!("truncated at {what} ({} of {n} bytes left)", self.buf.len())));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> std::result::Result<u8, Malformed> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> std::result::Result<u16, Malformed> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> std::result::Result<u32, Malformed> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> std::result::Result<u64, Malformed> {
        let b = self.take(8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
    fn remaining(&self) -> usize {
        self.buf.len()
    }
    fn finish(&self) -> std::result::Result<(), Malformed> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Malformed(format!("{} trailing bytes", self.buf.len())))
        }
    }
}

/// Starts a frame: a placeholder length prefix, patched by [`seal`].
fn frame() -> Vec<u8> {
    vec![0; PREFIX_BYTES]
}

/// Writes the body length into the prefix of `f`.
fn seal(f: &mut [u8]) {
    let body = (f.len() - PREFIX_BYTES) as u32;
    f[..PREFIX_BYTES].copy_from_slice(&body.to_le_bytes());
}

fn put_u16(f: &mut Vec<u8>, v: u16) {
    f.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(f: &mut Vec<u8>, v: u32) {
    f.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(f: &mut Vec<u8>, v: u64) {
    f.extend_from_slice(&v.to_le_bytes());
}

/// Encodes a request frame (prefix included) for `requests` to `node`.
pub(super) fn encode_request(node: NodeId, requests: &[WorkRequest]) -> Vec<u8> {
    let mut f = frame();
    f.push(WIRE_VERSION);
    put_u16(&mut f, node.0);
    put_u32(&mut f, requests.len() as u32);
    for wr in requests {
        match wr {
            WorkRequest::Read { offset, len } => {
                f.push(OP_READ);
                put_u64(&mut f, offset.0);
                put_u32(&mut f, *len);
            }
            WorkRequest::Write { offset, data } => {
                f.push(OP_WRITE);
                put_u64(&mut f, offset.0);
                put_u32(&mut f, data.len() as u32);
                f.extend_from_slice(data);
            }
            WorkRequest::CompareAndSwap { offset, expected, new } => {
                f.push(OP_CAS);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *expected);
                put_u64(&mut f, *new);
            }
            WorkRequest::FetchAndAdd { offset, add } => {
                f.push(OP_FAA);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *add);
            }
            WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask } => {
                f.push(OP_MASKED_CAS);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *compare);
                put_u64(&mut f, *compare_mask);
                put_u64(&mut f, *swap);
                put_u64(&mut f, *swap_mask);
            }
            WorkRequest::MaskedFetchAndAdd { offset, add, boundary } => {
                f.push(OP_MASKED_FAA);
                put_u64(&mut f, offset.0);
                put_u64(&mut f, *add);
                put_u64(&mut f, *boundary);
            }
            WorkRequest::Persist => {
                // Offset and length are zero: the shape every request starts with.
                f.push(OP_PERSIST);
                put_u64(&mut f, 0);
                put_u32(&mut f, 0);
            }
        }
    }
    seal(&mut f);
    f
}

/// Encodes the request body of `requests` to `node` (see the `tcp` module docs): what a
/// [`super::TcpVerbs`] client sends, the 4-byte length prefix excluded (fuzz seeds, tests).
pub fn encode_request_body(node: NodeId, requests: &[WorkRequest]) -> Vec<u8> {
    encode_request(node, requests).split_off(PREFIX_BYTES)
}

/// Decodes a request body as a [`super::TcpVerbsServer`] does (fuzzing, tests).
///
/// # Errors
/// Why the body is malformed.
pub fn decode_request_body(body: &[u8]) -> std::result::Result<(NodeId, Vec<WorkRequest>), String> {
    decode_request(body).map_err(|m| m.0)
}

/// Decodes a reply body as a [`super::TcpVerbs`] client does and returns its completion
/// count and whether it carries an error (fuzzing, tests).
///
/// # Errors
/// Why the body is malformed.
pub fn decode_reply_body(body: &[u8]) -> std::result::Result<(usize, bool), String> {
    decode_reply(body).map(|(c, e)| (c.len(), e.is_some())).map_err(|m| m.0)
}

/// Decodes a request body into its target node and work requests.
pub(super) fn decode_request(body: &[u8]) -> std::result::Result<(NodeId, Vec<WorkRequest>), Malformed> {
    let mut c = Cursor { buf: body };
    let version = c.u8("version")?;
    if version != WIRE_VERSION {
        return Err(Malformed(format!("wire version {version}, expected {WIRE_VERSION}")));
    }
    let node = NodeId(c.u16("node")?);
    let count = c.u32("request count")? as usize;
    if count > c.remaining() / MIN_REQUEST_BYTES {
        return Err(Malformed(format!("{count} requests cannot fit in {} bytes", c.remaining())));
    }
    let mut requests = Vec::with_capacity(count);
    for _ in 0..count {
        let op = c.u8("op")?;
        let offset = Offset(c.u64("offset")?);
        requests.push(match op {
            OP_READ => WorkRequest::Read { offset, len: c.u32("read length")? },
            OP_WRITE => {
                let len = c.u32("write length")? as usize;
                WorkRequest::Write { offset, data: c.take(len, "write data")?.to_vec() }
            }
            OP_CAS => WorkRequest::CompareAndSwap { offset, expected: c.u64("expected")?, new: c.u64("new")? },
            OP_FAA => WorkRequest::FetchAndAdd { offset, add: c.u64("add")? },
            OP_MASKED_CAS => WorkRequest::MaskedCompareAndSwap {
                offset,
                compare: c.u64("compare")?,
                compare_mask: c.u64("compare mask")?,
                swap: c.u64("swap")?,
                swap_mask: c.u64("swap mask")?,
            },
            OP_MASKED_FAA => {
                WorkRequest::MaskedFetchAndAdd { offset, add: c.u64("add")?, boundary: c.u64("boundary")? }
            }
            OP_PERSIST => {
                c.u32("persist length")?;
                WorkRequest::Persist
            }
            other => return Err(Malformed(format!("unknown op {other}"))),
        });
    }
    c.finish()?;
    Ok((node, requests))
}

/// Encodes a reply frame (prefix included): the completions of the requests that ran and
/// the error that stopped the batch, if any.
pub(super) fn encode_reply(completions: &[Completion], error: Option<&Error>) -> Vec<u8> {
    let mut f = frame();
    f.push(WIRE_VERSION);
    put_u32(&mut f, completions.len() as u32);
    for c in completions {
        match c {
            Completion::Read(bytes) => {
                f.push(DONE_READ);
                put_u32(&mut f, bytes.len() as u32);
                f.extend_from_slice(bytes);
            }
            Completion::Written => f.push(DONE_WRITTEN),
            Completion::Atomic(v) => {
                f.push(DONE_ATOMIC);
                put_u64(&mut f, *v);
            }
            Completion::Pending => unreachable!("only completed requests are encoded"),
        }
    }
    match error {
        None => f.push(STATUS_OK),
        Some(e) => {
            f.push(STATUS_ERR);
            match *e {
                Error::OutOfBounds { node, offset, len, size } => {
                    f.push(ERR_OUT_OF_BOUNDS);
                    put_u16(&mut f, node.0);
                    put_u64(&mut f, offset.0);
                    put_u64(&mut f, len);
                    put_u64(&mut f, size);
                }
                Error::Unaligned { node, offset } => {
                    f.push(ERR_UNALIGNED);
                    put_u16(&mut f, node.0);
                    put_u64(&mut f, offset.0);
                }
                Error::UnknownNode(node) => {
                    f.push(ERR_UNKNOWN_NODE);
                    put_u16(&mut f, node.0);
                }
                ref other => {
                    let why = match other {
                        Error::Backend(why) => why.clone(),
                        other => other.to_string(),
                    };
                    f.push(ERR_REFUSED);
                    put_u32(&mut f, why.len() as u32);
                    f.extend_from_slice(why.as_bytes());
                }
            }
        }
    }
    seal(&mut f);
    f
}

/// An error reply decoded by the client.
pub(super) enum RemoteError {
    /// A verbs error the server's backend returned (out of bounds, unaligned, unknown node).
    Verb(Error),
    /// The server refused the request (malformed, too large, backend failure).
    Refused(String),
}

/// Decodes a reply body into completions and an optional error.
pub(super) fn decode_reply(body: &[u8]) -> std::result::Result<(Vec<Completion>, Option<RemoteError>), Malformed> {
    let mut c = Cursor { buf: body };
    let version = c.u8("version")?;
    if version != WIRE_VERSION {
        return Err(Malformed(format!("wire version {version}, expected {WIRE_VERSION}")));
    }
    let count = c.u32("completion count")? as usize;
    if count > c.remaining() {
        return Err(Malformed(format!("{count} completions cannot fit in {} bytes", c.remaining())));
    }
    let mut completions = Vec::with_capacity(count);
    for _ in 0..count {
        completions.push(match c.u8("completion tag")? {
            DONE_READ => {
                let len = c.u32("read length")? as usize;
                Completion::Read(c.take(len, "read data")?.to_vec())
            }
            DONE_WRITTEN => Completion::Written,
            DONE_ATOMIC => Completion::Atomic(c.u64("old value")?),
            other => return Err(Malformed(format!("unknown completion tag {other}"))),
        });
    }
    let error = match c.u8("status")? {
        STATUS_OK => None,
        STATUS_ERR => Some(match c.u8("error kind")? {
            ERR_OUT_OF_BOUNDS => RemoteError::Verb(Error::OutOfBounds {
                node: NodeId(c.u16("node")?),
                offset: Offset(c.u64("offset")?),
                len: c.u64("length")?,
                size: c.u64("size")?,
            }),
            ERR_UNALIGNED => {
                RemoteError::Verb(Error::Unaligned { node: NodeId(c.u16("node")?), offset: Offset(c.u64("offset")?) })
            }
            ERR_UNKNOWN_NODE => RemoteError::Verb(Error::UnknownNode(NodeId(c.u16("node")?))),
            ERR_REFUSED => {
                let len = c.u32("reason length")? as usize;
                RemoteError::Refused(String::from_utf8_lossy(c.take(len, "reason")?).into_owned())
            }
            other => return Err(Malformed(format!("unknown error kind {other}"))),
        }),
        other => return Err(Malformed(format!("unknown status {other}"))),
    };
    c.finish()?;
    Ok((completions, error))
}

/// Bytes of the reply to `requests` if every one of them completes.
pub(super) fn reply_bytes(requests: &[WorkRequest]) -> usize {
    requests.iter().fold(REPLY_FIXED_BYTES, |acc, wr| {
        acc + match wr {
            WorkRequest::Read { len, .. } => READ_DONE_FIXED_BYTES + *len as usize,
            WorkRequest::Write { .. } => 1,
            _ => 1 + 8,
        }
    })
}

/// Encodes a status message (no length prefix): the server's greeting before the TLS
/// handshake and its admission after it. `u8` version, then `u8` 0 (admitted) or `u8` 1
/// (refused) followed by a `u16` length and that many bytes of UTF-8 reason (at most
/// [`MAX_REASON_BYTES`]; a longer reason is cut at a character boundary).
pub(super) fn encode_status(refused: Option<&str>) -> Vec<u8> {
    match refused {
        None => vec![WIRE_VERSION, ADMITTED],
        Some(why) => {
            let mut end = why.len().min(MAX_REASON_BYTES);
            while !why.is_char_boundary(end) {
                end -= 1;
            }
            let mut f = vec![WIRE_VERSION, REFUSED];
            put_u16(&mut f, end as u16);
            f.extend_from_slice(&why.as_bytes()[..end]);
            f
        }
    }
}

/// Reads a status message written by [`encode_status`]: `None` when admitted, the reason
/// when refused.
///
/// # Errors
/// The reader's error; `InvalidData` for another wire version, an unknown status or a
/// reason longer than [`MAX_REASON_BYTES`].
pub(super) fn read_status(r: &mut impl Read) -> io::Result<Option<String>> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let mut head = [0u8; 2];
    r.read_exact(&mut head)?;
    if head[0] != WIRE_VERSION {
        return Err(invalid(format!(
            "the server speaks verbs wire version {}, this build speaks {WIRE_VERSION}",
            head[0]
        )));
    }
    match head[1] {
        ADMITTED => Ok(None),
        REFUSED => {
            let mut len = [0u8; 2];
            r.read_exact(&mut len)?;
            let len = usize::from(u16::from_le_bytes(len));
            if len > MAX_REASON_BYTES {
                return Err(invalid(format!("a refusal reason of {len} bytes (at most {MAX_REASON_BYTES})")));
            }
            let mut why = vec![0u8; len];
            r.read_exact(&mut why)?;
            Ok(Some(String::from_utf8_lossy(&why).into_owned()))
        }
        other => Err(invalid(format!("unknown status {other}"))),
    }
}

/// What reading one frame gave.
pub(super) enum Frame {
    /// A body within the limit.
    Body(Vec<u8>),
    /// The peer closed the connection cleanly between frames.
    Closed,
    /// The length prefix announced a body above [`MAX_FRAME_BYTES`].
    TooLarge(u64),
}

/// Reads one frame from `s`.
pub(super) fn read_frame(s: &mut impl Read) -> io::Result<Frame> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut got = 0;
    while got < PREFIX_BYTES {
        match s.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(Frame::Closed),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-prefix")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME_BYTES {
        return Ok(Frame::TooLarge(len as u64));
    }
    // `take` + `read_to_end` grows the buffer as bytes arrive instead of trusting the
    // prefix with an allocation up front.
    let mut body = Vec::new();
    s.take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("connection closed after {} of {len} body bytes", body.len()),
        ));
    }
    Ok(Frame::Body(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn status_messages_round_trip() {
        assert_eq!(read_status(&mut &encode_status(None)[..]).unwrap(), None);
        let why = "too many connections from 10.0.0.7 (verbs.max_connections_per_peer = 64)";
        assert_eq!(read_status(&mut &encode_status(Some(why))[..]).unwrap().as_deref(), Some(why));
        // A long reason is cut at a character boundary.
        let long = "é".repeat(MAX_REASON_BYTES);
        let cut = read_status(&mut &encode_status(Some(&long))[..]).unwrap().unwrap();
        assert!(cut.len() <= MAX_REASON_BYTES && cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn bad_status_messages_are_errors() {
        let e = read_status(&mut &[1u8, 0][..]).unwrap_err();
        assert!(e.to_string().contains("wire version 1"), "{e}");
        assert!(read_status(&mut &[WIRE_VERSION, 7][..]).is_err());
        assert!(read_status(&mut &[WIRE_VERSION, 1, 0xff, 0xff][..]).is_err());
        assert!(read_status(&mut &[WIRE_VERSION, 1, 5, 0, b'a'][..]).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_status_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = read_status(&mut &bytes[..]);
        }

        #[test]
        fn arbitrary_bodies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode_request(&bytes);
            let _ = decode_reply(&bytes);
        }
    }
}

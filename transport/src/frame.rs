//! Length-prefixed prost frames on QUIC streams (docs/design.md §4).
//!
//! A frame is a `u32` little-endian body length followed by the body, one prost-encoded
//! [`Envelope`]. The pure functions ([`encode_frame`], [`check_prefix`], [`decode_body`])
//! hold every rule; the transport's stream functions (`read_frame`, `write_frame`) only
//! move bytes. A reader never allocates the announced length: it checks the prefix against
//! the limit first and then grows its buffer only as bytes arrive.

use bytes::{Bytes, BytesMut};
use prost::Message;
use quinn::{ReadExactError, RecvStream, SendStream, VarInt};
use redt_proto::wire::Envelope;

/// Bytes of the length prefix.
pub const PREFIX_BYTES: usize = 4;

/// Default limit on a frame body: 16 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: u32 = 16 << 20;

/// Largest chunk asked of the stream at once while reading a body, in bytes.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Why a frame was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The body length (announced by a prefix, or of a message to send) is over the limit.
    #[error("frame body of {len} bytes is over the limit of {max} bytes")]
    Oversized {
        /// Body length in bytes.
        len: u64,
        /// The limit in bytes.
        max: u32,
    },
    /// The stream ended before the whole frame arrived.
    #[error("stream ended after {got} of {want} frame bytes")]
    Truncated {
        /// Frame bytes received, prefix included.
        got: u64,
        /// Frame bytes announced, prefix included (4 while the prefix itself is incomplete).
        want: u64,
    },
    /// The body is not a valid `Envelope`.
    #[error("frame body does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// Application error codes with which the transport stops (`STOP_SENDING`) or resets
/// (`RESET_STREAM`) an RPC stream. Code 0 is never used for an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum StreamCode {
    /// The frame was truncated or did not decode.
    Malformed = 1,
    /// The frame's length prefix was over the limit.
    Oversized = 2,
    /// The request frame did not arrive within the server's deadline.
    RequestTimeout = 3,
    /// The caller gave up (deadline or cancellation) before the call completed.
    Cancelled = 4,
    /// The handler's response could not be framed (over the size limit).
    ResponseTooLarge = 5,
    /// The response was not written within the server's `write_timeout` (the caller stopped
    /// reading): that stream alone is reset.
    WriteTimeout = 6,
}

impl StreamCode {
    /// The code as a QUIC variable-length integer.
    pub fn var_int(self) -> VarInt {
        VarInt::from_u32(self as u32)
    }

    /// The code for a received frame refused with `err`.
    pub fn for_frame_error(err: &FrameError) -> StreamCode {
        match err {
            FrameError::Oversized { .. } => StreamCode::Oversized,
            FrameError::Truncated { .. } | FrameError::Decode(_) => StreamCode::Malformed,
        }
    }

    /// The `StreamCode` with numeric value `code`, if any.
    pub fn from_code(code: u64) -> Option<StreamCode> {
        Some(match code {
            1 => StreamCode::Malformed,
            2 => StreamCode::Oversized,
            3 => StreamCode::RequestTimeout,
            4 => StreamCode::Cancelled,
            5 => StreamCode::ResponseTooLarge,
            6 => StreamCode::WriteTimeout,
            _ => return None,
        })
    }
}

/// Returns `msg` as one frame (prefix and body), `4 + encoded_len` bytes.
///
/// # Errors
///
/// [`FrameError::Oversized`] if the encoded body is over `max_frame_bytes`.
pub fn encode_frame(msg: &Envelope, max_frame_bytes: u32) -> Result<Bytes, FrameError> {
    let len = msg.encoded_len();
    let len32 = u32::try_from(len)
        .ok()
        .filter(|&l| l <= max_frame_bytes)
        .ok_or(FrameError::Oversized { len: len as u64, max: max_frame_bytes })?;
    // Into a `Vec` rather than a `BytesMut`: prost writes varints byte by byte, and a
    // `Vec`'s `put_slice` is inlined where a `BytesMut`'s is a call per byte.
    let mut buf = Vec::with_capacity(PREFIX_BYTES + len);
    buf.extend_from_slice(&len32.to_le_bytes());
    msg.encode(&mut buf).expect("a Vec grows to fit any message");
    Ok(Bytes::from(buf))
}

/// Returns the body length announced by `prefix`, in bytes.
///
/// # Errors
///
/// [`FrameError::Oversized`] if it is over `max_frame_bytes`.
pub fn check_prefix(prefix: [u8; PREFIX_BYTES], max_frame_bytes: u32) -> Result<usize, FrameError> {
    let len = u32::from_le_bytes(prefix);
    if len > max_frame_bytes {
        return Err(FrameError::Oversized { len: u64::from(len), max: max_frame_bytes });
    }
    // A u32 always fits a usize on the 32- and 64-bit targets redt supports.
    Ok(len as usize)
}

/// Decodes a frame body.
///
/// # Errors
///
/// [`FrameError::Decode`] if `body` is not a valid `Envelope`.
pub fn decode_body(body: &[u8]) -> Result<Envelope, FrameError> {
    Ok(Envelope::decode(body)?)
}

/// Why [`read_frame`] returned no frame.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// The bytes received are not an acceptable frame; the stream should be stopped.
    Frame(FrameError),
    /// The stream or its connection failed.
    Stream(quinn::ReadError),
}

/// Reads one frame from `recv`; returns the envelope and the frame's size in bytes (prefix
/// included).
///
/// Memory held is at most twice the bytes actually received, never the announced length.
///
/// # Cancel safety
///
/// Not cancel safe: a dropped read leaves the stream mid-frame.
pub(crate) async fn read_frame(recv: &mut RecvStream, max_frame_bytes: u32) -> Result<(Envelope, usize), ReadFailure> {
    let mut prefix = [0u8; PREFIX_BYTES];
    match recv.read_exact(&mut prefix).await {
        Ok(()) => {}
        Err(ReadExactError::FinishedEarly(got)) => {
            return Err(ReadFailure::Frame(FrameError::Truncated { got: got as u64, want: PREFIX_BYTES as u64 }))
        }
        Err(ReadExactError::ReadError(e)) => return Err(ReadFailure::Stream(e)),
    }
    let len = check_prefix(prefix, max_frame_bytes).map_err(ReadFailure::Frame)?;
    let mut body = BytesMut::with_capacity(len.min(READ_CHUNK_BYTES));
    while body.len() < len {
        let want = (len - body.len()).min(READ_CHUNK_BYTES);
        match recv.read_chunk(want, true).await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk.bytes),
            Ok(None) => {
                return Err(ReadFailure::Frame(FrameError::Truncated {
                    got: (PREFIX_BYTES + body.len()) as u64,
                    want: (PREFIX_BYTES + len) as u64,
                }))
            }
            Err(e) => return Err(ReadFailure::Stream(e)),
        }
    }
    let msg = decode_body(&body).map_err(ReadFailure::Frame)?;
    Ok((msg, PREFIX_BYTES + len))
}

/// Writes one encoded frame (from [`encode_frame`]) to `send`.
///
/// # Cancel safety
///
/// Not cancel safe: a dropped write leaves a partial frame on the stream.
pub(crate) async fn write_frame(send: &mut SendStream, frame: &Bytes) -> Result<(), quinn::WriteError> {
    send.write_all(frame).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::wire::{AckReply, Body};

    fn sample() -> Envelope {
        Envelope { epoch: 7, from: 3, body: Some(Body::Ack(AckReply::default())) }
    }

    #[test]
    fn encode_then_decode_round_trips() {
        let msg = sample();
        let frame = encode_frame(&msg, DEFAULT_MAX_FRAME_BYTES).unwrap();
        let prefix: [u8; 4] = frame[..4].try_into().unwrap();
        let len = check_prefix(prefix, DEFAULT_MAX_FRAME_BYTES).unwrap();
        assert_eq!(len, frame.len() - PREFIX_BYTES);
        assert_eq!(decode_body(&frame[4..]).unwrap(), msg);
    }

    #[test]
    fn prefix_is_little_endian() {
        let frame = encode_frame(&sample(), DEFAULT_MAX_FRAME_BYTES).unwrap();
        let len = (frame.len() - PREFIX_BYTES) as u32;
        assert_eq!(&frame[..4], &len.to_le_bytes());
    }

    #[test]
    fn prefix_over_limit_is_oversized() {
        assert_eq!(
            check_prefix(u32::MAX.to_le_bytes(), DEFAULT_MAX_FRAME_BYTES),
            Err(FrameError::Oversized { len: u64::from(u32::MAX), max: DEFAULT_MAX_FRAME_BYTES })
        );
        assert_eq!(check_prefix(16u32.to_le_bytes(), 16), Ok(16));
        assert_eq!(check_prefix(17u32.to_le_bytes(), 16), Err(FrameError::Oversized { len: 17, max: 16 }));
    }

    #[test]
    fn message_over_limit_is_not_encoded() {
        let len = sample().encoded_len() as u32;
        assert!(encode_frame(&sample(), len).is_ok());
        assert_eq!(encode_frame(&sample(), len - 1), Err(FrameError::Oversized { len: u64::from(len), max: len - 1 }));
    }

    #[test]
    fn garbage_body_does_not_decode() {
        assert!(matches!(decode_body(&[0xff; 8]), Err(FrameError::Decode(_))));
        // An empty body is the all-defaults envelope.
        assert_eq!(decode_body(&[]).unwrap(), Envelope::default());
    }

    #[test]
    fn stream_codes_round_trip() {
        for code in [
            StreamCode::Malformed,
            StreamCode::Oversized,
            StreamCode::RequestTimeout,
            StreamCode::Cancelled,
            StreamCode::ResponseTooLarge,
        ] {
            assert_eq!(StreamCode::from_code(code.var_int().into_inner()), Some(code));
        }
        assert_eq!(StreamCode::from_code(0), None);
    }
}

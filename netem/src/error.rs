//! The crate's error type.

use redt_proto::DcId;
use std::io;

/// Everything that can go wrong in `redt-netem`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A DC id outside the model's `0..dc_count` was given to a setter.
    #[error("unknown DC {dc}: the WAN model has {dc_count} DCs")]
    UnknownDc {
        /// The offending id.
        dc: DcId,
        /// Number of DCs the model knows (valid ids are `0..dc_count`).
        dc_count: usize,
    },
    /// A socket operation failed (bind, wrap, endpoint creation).
    #[error("socket I/O: {0}")]
    Io(#[from] io::Error),
    /// Generating the self-signed certificate of a measurement failed.
    #[error("certificate generation: {0}")]
    Certificate(#[from] rcgen::Error),
    /// The TLS configuration of a measurement was refused.
    #[error("TLS configuration: {0}")]
    Tls(#[from] quinn::rustls::Error),
    /// The TLS server-certificate verifier of a measurement could not be built.
    #[error("TLS verifier: {0}")]
    Verifier(#[from] quinn::rustls::client::VerifierBuilderError),
    /// A measurement could not start connecting.
    #[error("QUIC connect: {0}")]
    Connect(#[from] quinn::ConnectError),
    /// A measurement's QUIC connection failed.
    #[error("QUIC connection: {0}")]
    Connection(#[from] quinn::ConnectionError),
    /// Writing a measurement's ping failed.
    #[error("QUIC stream write: {0}")]
    Write(#[from] quinn::WriteError),
    /// Reading a measurement's pong failed.
    #[error("QUIC stream read: {0}")]
    Read(#[from] quinn::ReadExactError),
    /// A measurement was asked for zero samples.
    #[error("a measurement needs at least one sample")]
    NoSamples,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

//! Errors of loading and checking a topology file.

use std::path::PathBuf;

/// Why a topology file could not be turned into a [`crate::Topology`].
///
/// Every variant names the file it is about (the path for [`ConfigError::Io`], the label
/// given to [`crate::Topology::from_yaml`] otherwise), so the message stands on its own.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read. The I/O error is part of the message and not also a
    /// `source`, so a report that prints the chain does not print it twice.
    #[error("{}: cannot read: {error}", path.display())]
    Io {
        /// The path that was opened.
        path: PathBuf,
        /// The underlying I/O error.
        error: std::io::Error,
    },
    /// The text is not valid YAML, or does not have the file's shape (a missing or
    /// unknown key, a wrong type). `message` is the YAML parser's text and includes the
    /// line and column.
    #[error("{file}: {message}")]
    Parse {
        /// File label (path or caller-chosen name).
        file: String,
        /// Parser message, with the position in the text.
        message: String,
    },
    /// The file is larger than [`crate::MAX_TOPOLOGY_BYTES`] (1 MiB): refused before it is
    /// parsed (and, from disk, before more than that is read).
    #[error("{file}: {bytes} bytes or more, over the {max} bytes a topology file may have")]
    TooLarge {
        /// File label (path or caller-chosen name).
        file: String,
        /// Its size in bytes, or (a file that is not a regular one) the bytes read before
        /// giving up, one more than `max`.
        bytes: u64,
        /// The most a topology file may have ([`crate::MAX_TOPOLOGY_BYTES`]).
        max: usize,
    },
    /// A value of the file is nested deeper than [`crate::MAX_TOPOLOGY_DEPTH`] (64) levels
    /// (indentation levels, `- ` entries, `[` and `{`): refused before it is parsed.
    #[error("{file}: line {line}: nested {depth} levels deep, over the {max} a topology file may have")]
    TooDeep {
        /// File label (path or caller-chosen name).
        file: String,
        /// The line (from 1) where it first nests too deep.
        line: usize,
        /// How deep it nests there.
        depth: usize,
        /// The most a topology file may have ([`crate::MAX_TOPOLOGY_DEPTH`]).
        max: usize,
    },
    /// The file parses but breaks a rule, e.g.
    /// `configs/x.yaml: partitions[3].replicas: two replicas in dc2`.
    #[error("{file}: {field}: {problem}")]
    Invalid {
        /// File label (path or caller-chosen name).
        file: String,
        /// Path of the offending value, in YAML names with indices, e.g.
        /// `dcs[1].nodes[0].name`, `links.overrides[0].rtt`, `memstore.size`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// Result of loading or checking a topology.
pub type Result<T> = std::result::Result<T, ConfigError>;

/// Why a set of link conditions is refused (the topology file's `links:` rules, which
/// `redt netem set` follows too). [`LinkError::key`] names the offending key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LinkError {
    /// The RTT is above [`crate::LinkConditions::MAX_RTT`]: datagrams queued behind such a
    /// delay would hold the link long after it is set back.
    #[error("rtt {} is more than {}, the largest allowed", humantime::format_duration(*rtt), humantime::format_duration(*max))]
    RttTooLarge {
        /// The RTT asked for.
        rtt: std::time::Duration,
        /// The largest allowed.
        max: std::time::Duration,
    },
    /// The jitter is above half the RTT (a one-way delay could not stay positive).
    #[error("jitter {} exceeds half the rtt ({} / 2)", humantime::format_duration(*jitter), humantime::format_duration(*rtt))]
    JitterOverHalfRtt {
        /// The jitter asked for.
        jitter: std::time::Duration,
        /// The link's RTT.
        rtt: std::time::Duration,
    },
    /// The loss is not a fraction from 0 to 1 (0% to 100%).
    #[error("loss {}% is outside 0% to 100%", loss * 100.0)]
    LossOutOfRange {
        /// The loss asked for, as a fraction.
        loss: f64,
    },
    /// A rate limit of 0 bit/s (unlimited is `None`).
    #[error("rate must be at least 1bit (or `unlimited`)")]
    ZeroRate,
}

impl LinkError {
    /// The key of a link the error is about: `rtt`, `jitter`, `loss` or `rate`.
    pub fn key(&self) -> &'static str {
        match self {
            LinkError::RttTooLarge { .. } => "rtt",
            LinkError::JitterOverHalfRtt { .. } => "jitter",
            LinkError::LossOutOfRange { .. } => "loss",
            LinkError::ZeroRate => "rate",
        }
    }
}

//! Counters of one transport (monotonic, relaxed atomics).

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one [`super::Transport`], client and server side together. Read them
/// with [`TransportCounters::snapshot`].
#[derive(Debug, Default)]
pub struct TransportCounters {
    pub(crate) rpcs_sent: AtomicU64,
    pub(crate) rpcs_served: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) malformed_frames: AtomicU64,
    pub(crate) oversized_frames: AtomicU64,
    pub(crate) refused_handshakes: AtomicU64,
}

/// A copy of [`TransportCounters`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// Request frames written by calls.
    pub rpcs_sent: u64,
    /// Response frames written by the server.
    pub rpcs_served: u64,
    /// Frame bytes written, 4-byte prefixes included (requests and responses).
    pub bytes_sent: u64,
    /// Frame bytes read, 4-byte prefixes included (requests and responses).
    pub bytes_received: u64,
    /// Frames received that were truncated or did not decode.
    pub malformed_frames: u64,
    /// Frames received whose length prefix was over the size limit.
    pub oversized_frames: u64,
    /// Incoming connections whose handshake failed (e.g. a certificate not from the cluster
    /// CA) or that presented no usable client certificate.
    pub refused_handshakes: u64,
}

impl TransportCounters {
    /// Returns the current values (each read on its own; not one atomic cut).
    pub fn snapshot(&self) -> CountersSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CountersSnapshot {
            rpcs_sent: get(&self.rpcs_sent),
            rpcs_served: get(&self.rpcs_served),
            bytes_sent: get(&self.bytes_sent),
            bytes_received: get(&self.bytes_received),
            malformed_frames: get(&self.malformed_frames),
            oversized_frames: get(&self.oversized_frames),
            refused_handshakes: get(&self.refused_handshakes),
        }
    }

    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

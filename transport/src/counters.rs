//! Counters of one transport (monotonic, relaxed atomics).

use redt_proto::NodeId;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one [`super::Transport`], client and server side together. Read them
/// with [`TransportCounters::snapshot`] and, per peer node, [`TransportCounters::peers`].
#[derive(Debug, Default)]
pub struct TransportCounters {
    /// Frames to and from each node of the topology, by `NodeId` (empty for a client-only
    /// transport; frames of a caller that is no node are not in it).
    pub(crate) per_peer: Box<[PeerCounters]>,
    pub(crate) rpcs_sent: AtomicU64,
    pub(crate) rpcs_served: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) malformed_frames: AtomicU64,
    pub(crate) oversized_frames: AtomicU64,
    pub(crate) refused_handshakes: AtomicU64,
    pub(crate) refused_connections_total: AtomicU64,
    pub(crate) refused_connections_per_peer: AtomicU64,
    pub(crate) retries_sent: AtomicU64,
    pub(crate) handler_timeouts: AtomicU64,
    pub(crate) write_timeouts: AtomicU64,
    pub(crate) call_slot_timeouts: AtomicU64,
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
    /// Incoming connections refused because `transport.max_connections` were open.
    pub refused_connections_total: u64,
    /// Incoming connections refused because `transport.max_connections_per_peer` were open
    /// from the same IP address.
    pub refused_connections_per_peer: u64,
    /// QUIC Retry packets sent to incoming connections whose address was not yet validated,
    /// over half of a connection cap ([`crate::TransportConfig`]).
    pub retries_sent: u64,
    /// Requests whose handler did not finish within `transport.handler_timeout` (cancelled,
    /// answered with a timeout error).
    pub handler_timeouts: u64,
    /// Responses not written within `transport.write_timeout` (their stream reset).
    pub write_timeouts: u64,
    /// Outgoing calls that got no in-flight slot within `transport.call_slot_timeout`
    /// (`transport.max_calls_in_flight` calls in flight).
    pub call_slot_timeouts: u64,
}

/// Frames to and from one peer node (live, relaxed atomics).
#[derive(Debug, Default)]
pub(crate) struct PeerCounters {
    messages_sent: AtomicU64,
    bytes_sent: AtomicU64,
    messages_received: AtomicU64,
    bytes_received: AtomicU64,
}

/// A copy of one peer node's traffic at one moment: frames (requests and responses, either
/// side of the RPC) and heartbeat datagrams, and their bytes, 4-byte prefixes included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerTraffic {
    /// Frames written to the peer (requests this node called it with, responses it served)
    /// and heartbeat datagrams sent to it.
    pub messages_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Frames read from the peer (its responses, its requests) and its heartbeat datagrams.
    pub messages_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
}

impl TransportCounters {
    /// Counters with a per-peer slot for each of `nodes` nodes.
    pub(crate) fn with_peers(nodes: usize) -> TransportCounters {
        TransportCounters { per_peer: (0..nodes).map(|_| PeerCounters::default()).collect(), ..Default::default() }
    }

    /// Counts one frame of `bytes` written to `peer` (nothing for a peer out of range).
    pub(crate) fn sent_to(&self, peer: NodeId, bytes: usize) {
        if let Some(p) = self.per_peer.get(usize::from(peer.0)) {
            p.messages_sent.fetch_add(1, Ordering::Relaxed);
            p.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// Counts one frame of `bytes` read from `peer` (nothing for a peer out of range).
    pub(crate) fn received_from(&self, peer: NodeId, bytes: usize) {
        if let Some(p) = self.per_peer.get(usize::from(peer.0)) {
            p.messages_received.fetch_add(1, Ordering::Relaxed);
            p.bytes_received.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// Each peer node's traffic so far, by `NodeId` (empty for a client-only transport).
    pub fn peers(&self) -> Vec<PeerTraffic> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        self.per_peer
            .iter()
            .map(|p| PeerTraffic {
                messages_sent: get(&p.messages_sent),
                bytes_sent: get(&p.bytes_sent),
                messages_received: get(&p.messages_received),
                bytes_received: get(&p.bytes_received),
            })
            .collect()
    }

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
            refused_connections_total: get(&self.refused_connections_total),
            refused_connections_per_peer: get(&self.refused_connections_per_peer),
            retries_sent: get(&self.retries_sent),
            handler_timeouts: get(&self.handler_timeouts),
            write_timeouts: get(&self.write_timeouts),
            call_slot_timeouts: get(&self.call_slot_timeouts),
        }
    }

    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

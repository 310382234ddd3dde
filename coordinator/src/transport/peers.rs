//! The peer directory: where each node listens, under which name, and which node a verified
//! client certificate belongs to.

use super::error::{Result, TransportError};
use super::tls::certificate_name;
use super::Caller;
use redt_proto::{NodeId, Topology};
use rustls_pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::RwLock;

/// One node as the transport sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Peer {
    name: String,
    addr: SocketAddr,
}

/// Nodes by `NodeId` (index), replaceable while running.
#[derive(Debug, Default)]
pub(crate) struct PeerDirectory {
    peers: RwLock<Vec<Peer>>,
}

impl PeerDirectory {
    /// Returns a directory of `topology`'s nodes.
    pub(crate) fn new(topology: Option<&Topology>) -> PeerDirectory {
        let dir = PeerDirectory::default();
        if let Some(t) = topology {
            dir.replace(t);
        }
        dir
    }

    /// Replaces every entry with `topology`'s nodes.
    pub(crate) fn replace(&self, topology: &Topology) {
        let peers = topology.nodes.iter().map(|n| Peer { name: n.name.clone(), addr: n.addr }).collect();
        *self.peers.write().unwrap_or_else(|e| e.into_inner()) = peers;
    }

    /// Returns node `id`'s address and name.
    ///
    /// # Errors
    ///
    /// [`TransportError::UnknownPeer`] if `id` is not in the directory.
    pub(crate) fn lookup(&self, id: NodeId) -> Result<(SocketAddr, String)> {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        peers.get(usize::from(id.0)).map(|p| (p.addr, p.name.clone())).ok_or(TransportError::UnknownPeer(id))
    }

    /// The node listening at `addr` under `name`, if the directory has one.
    pub(crate) fn id_at(&self, addr: SocketAddr, name: &str) -> Option<NodeId> {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        // The directory is indexed by NodeId, which is a u16.
        peers.iter().position(|p| p.addr == addr && p.name == name).map(|i| NodeId(i as u16))
    }

    /// Sets node `id`'s address.
    ///
    /// # Errors
    ///
    /// [`TransportError::UnknownPeer`] if `id` is not in the directory.
    pub(crate) fn set_addr(&self, id: NodeId, addr: SocketAddr) -> Result<()> {
        let mut peers = self.peers.write().unwrap_or_else(|e| e.into_inner());
        let peer = peers.get_mut(usize::from(id.0)).ok_or(TransportError::UnknownPeer(id))?;
        peer.addr = addr;
        Ok(())
    }

    /// Returns who presented `cert` (already verified against the cluster CA): the node
    /// whose name it is valid for, else [`Caller::Client`].
    pub(crate) fn identify(&self, cert: &CertificateDer<'_>) -> Caller {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        let name = certificate_name(cert, peers.iter().map(|p| p.name.as_str()));
        match name.and_then(|n| peers.iter().position(|p| p.name == n)) {
            // The directory is indexed by NodeId, which is a u16.
            Some(i) => Caller::Node(NodeId(i as u16)),
            None => Caller::Client,
        }
    }
}

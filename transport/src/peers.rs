//! The peer directory: where each node listens, under which name, and which node a verified
//! client certificate belongs to.

use super::error::{Result, TransportError};
use super::tls::certificate_name;
use super::{Caller, Principal};
use redt_proto::{CertIdentity, HostPort, NodeId, Topology};
use redt_verbs::cert_identity;
use rustls_pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::RwLock;

/// One node as the transport sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Peer {
    name: String,
    dc: String,
    /// Where it is called: its `advertise` address.
    addr: HostPort,
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
        let dc = |n: &redt_proto::NodeEntry| {
            topology.dcs.get(usize::from(n.dc.0)).map(|d| d.name.clone()).unwrap_or_default()
        };
        let peers = topology
            .nodes
            .iter()
            .map(|n| Peer { name: n.name.clone(), dc: dc(n), addr: n.advertise.clone() })
            .collect();
        *self.peers.write().unwrap_or_else(|e| e.into_inner()) = peers;
    }

    /// Returns node `id`'s address (as advertised: maybe a host name) and name.
    ///
    /// # Errors
    ///
    /// [`TransportError::UnknownPeer`] if `id` is not in the directory.
    pub(crate) fn lookup(&self, id: NodeId) -> Result<(HostPort, String)> {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        peers.get(usize::from(id.0)).map(|p| (p.addr.clone(), p.name.clone())).ok_or(TransportError::UnknownPeer(id))
    }

    /// The node reached at `addr` under `name`, if the directory has one.
    pub(crate) fn id_at(&self, addr: &HostPort, name: &str) -> Option<NodeId> {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        // The directory is indexed by NodeId, which is a u16.
        peers.iter().position(|p| &p.addr == addr && p.name == name).map(|i| NodeId(i as u16))
    }

    /// Sets node `id`'s address.
    ///
    /// # Errors
    ///
    /// [`TransportError::UnknownPeer`] if `id` is not in the directory.
    pub(crate) fn set_addr(&self, id: NodeId, addr: SocketAddr) -> Result<()> {
        let mut peers = self.peers.write().unwrap_or_else(|e| e.into_inner());
        let peer = peers.get_mut(usize::from(id.0)).ok_or(TransportError::UnknownPeer(id))?;
        peer.addr = addr.into();
        Ok(())
    }

    /// Returns who presented `cert` (already verified against the cluster CA), by the
    /// identity URI it carries: a node identity naming a node of the directory (name and DC)
    /// is that node, an operator identity [`Caller::Operator`], a client identity
    /// [`Caller::Client`], each client and operator with the [`Principal`] of its URI. A
    /// certificate without an identity (an older one) is the node whose DNS name it is valid
    /// for, else a client whose principal is the certificate itself; a node identity
    /// naming no node of the directory is a client.
    pub(crate) fn identify(&self, cert: &CertificateDer<'_>) -> Caller {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        // The directory is indexed by NodeId, which is a u16.
        let node = |i: usize| Caller::Node(NodeId(i as u16));
        let identity = cert_identity(cert);
        let principal = match &identity {
            Some(id) => Principal::of_identity(&id.to_uri()),
            None => Principal::of_certificate(cert.as_ref()),
        };
        match identity {
            Some(CertIdentity::Node { dc, name }) => {
                peers.iter().position(|p| p.name == name && p.dc == dc).map_or(Caller::Client(principal), node)
            }
            Some(CertIdentity::Operator { .. }) => Caller::Operator(principal),
            Some(CertIdentity::Client { .. }) => Caller::Client(principal),
            None => {
                let name = certificate_name(cert, peers.iter().map(|p| p.name.as_str()));
                name.and_then(|n| peers.iter().position(|p| p.name == n)).map_or(Caller::Client(principal), node)
            }
        }
    }

    /// How logs name `caller`: a node by its name in the directory (`node#N` if it has none),
    /// else its role (`client`, `operator`).
    pub(crate) fn describe(&self, caller: Caller) -> String {
        match caller {
            Caller::Node(id) => self.lookup(id).map_or_else(|_| id.to_string(), |(_, name)| name),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names, not internal ids: the server's log lines name a node caller as the
    /// topology file does, and other callers by their role.
    #[test]
    fn a_caller_is_described_by_its_name() {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        let t = Topology::load(std::path::Path::new(&path)).expect("config loads");
        let dir = PeerDirectory::new(Some(&t));
        assert_eq!(dir.describe(Caller::Node(NodeId(1))), "dc2-n1");
        assert_eq!(dir.describe(Caller::Node(NodeId(40))), "node#40", "outside the topology: its id");
        let alice = Principal::of_identity("redt://client/alice");
        assert_eq!(dir.describe(Caller::Client(alice)), "client");
        assert_eq!(dir.describe(Caller::Operator(alice)), "operator");
    }
}

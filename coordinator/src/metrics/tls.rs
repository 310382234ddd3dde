//! The metrics endpoint's TLS (`metrics.tls: true`): HTTPS with the node's own certificate
//! of the cluster PKI, the one its QUIC transport presents, so a scraper that trusts the
//! cluster CA (`ca.pem`) knows it talks to that node. No client certificate is asked for: a
//! Prometheus scraper typically has none, and the endpoint only reads.

use crate::error::{Error, Result};
use redt_transport::{NodeIdentity, TransportError};
use rustls::ServerConfig;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use tokio_rustls::TlsAcceptor;

/// The ALPN protocol the endpoint offers: HTTP/1.1 (hyper serves nothing else here).
const HTTP1_ALPN: &[u8] = b"http/1.1";

/// A metrics endpoint's TLS configuration: TLS 1.3 (the `ring` provider, as everywhere in
/// redt), ALPN `http/1.1`, the node's certificate chain and key, no client authentication.
/// Cloning is cheap, and clones share it: [`MetricsTls::rotate`] on one changes what every
/// clone (the [`super::MetricsServer`] given one) uses for its next connection.
#[derive(Clone)]
pub struct MetricsTls {
    config: Arc<RwLock<Arc<ServerConfig>>>,
}

impl fmt::Debug for MetricsTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsTls").finish_non_exhaustive()
    }
}

impl MetricsTls {
    /// The TLS of an endpoint presenting `identity`'s certificate chain (its node
    /// certificate first) with its key.
    ///
    /// # Errors
    /// [`Error::Transport`] ([`TransportError::TlsConfig`]) when rustls refuses the chain or
    /// the key (an empty chain, a key that is not the certificate's).
    pub fn new(identity: &NodeIdentity) -> Result<MetricsTls> {
        Ok(MetricsTls { config: Arc::new(RwLock::new(Arc::new(server_config(identity)?))) })
    }

    /// Presents `identity` on every connection accepted from now on (a certificate rotated
    /// without a restart); connections already open keep the one they had.
    ///
    /// # Errors
    /// As [`MetricsTls::new`]; the current certificate stays then.
    pub fn rotate(&self, identity: &NodeIdentity) -> Result<()> {
        let new = Arc::new(server_config(identity)?);
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = new;
        Ok(())
    }

    /// The acceptor of the next connection, with the configuration in use now.
    pub(super) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.read().unwrap_or_else(PoisonError::into_inner).clone())
    }
}

/// The rustls configuration of an endpoint presenting `identity`.
fn server_config(identity: &NodeIdentity) -> Result<ServerConfig> {
    let bad = |e: rustls::Error| Error::Transport(TransportError::TlsConfig(format!("metrics endpoint: {e}")));
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(bad)?
        .with_no_client_auth()
        .with_single_cert(identity.cert_chain.clone(), identity.key.clone_key())
        .map_err(bad)?;
    config.alpn_protocols = vec![HTTP1_ALPN.to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_transport::ClusterCa;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn builds_for_a_node_identity_and_refuses_a_key_of_another() {
        let ca = ClusterCa::generate("t").unwrap();
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let a = ca.issue_node("dc1-n1", "dc1", ip).unwrap();
        let b = ca.issue_node("dc1-n2", "dc1", ip).unwrap();
        let tls = MetricsTls::new(&a).unwrap();
        assert_eq!(tls.acceptor().config().alpn_protocols, vec![b"http/1.1".to_vec()]);
        let mismatched = NodeIdentity { key: b.key.clone_key(), ..a.clone() };
        let e = MetricsTls::new(&mismatched).unwrap_err().to_string();
        assert!(e.contains("metrics endpoint"), "{e}");
        assert!(tls.rotate(&mismatched).is_err(), "refused: the current one stays");
        tls.rotate(&b).unwrap();
    }
}

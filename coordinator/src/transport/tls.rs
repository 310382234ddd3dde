//! Cluster PKI and TLS configurations (DESIGN.md §4: TLS 1.3, mutual certificates from a
//! cluster CA, one crypto provider).
//!
//! One CA per cluster ([`ClusterCa`]) issues one certificate per node, valid for the node's
//! name (DNS SAN, also its common name) and the IP of its listen address, and carrying its
//! identity `redt://node/<dc>/<node>` as a URI SAN ([`redt_proto::CertIdentity`]; client
//! certificates carry `redt://client/<name>`). The in-DC verbs transports accept only node
//! certificates of their own DC by that identity ([`verbs_tls`]). A node's
//! certificate serves both ways: as server certificate when it accepts, as client
//! certificate when it calls. Every TLS configuration here is built with the `ring` provider
//! explicitly (never the process default), allows TLS 1.3 only and negotiates ALPN
//! [`ALPN`]. Servers require a client certificate chaining to the cluster CA; clients check
//! the server against the CA with the server name set to the peer node's name.
//!
//! On disk ([`init_cluster_certs`], [`load_identity`]) a directory holds `ca.pem`, `ca.key`
//! and `<name>.pem`, `<name>.key` per node plus one for [`CLIENT_IDENTITY_NAME`]; all PEM,
//! keys in PKCS#8.

use super::error::{Result, TransportError};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use redt_dc_executor::VerbsTls;
use redt_proto::{CertIdentity, NodeId, Topology};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use std::fmt;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The ALPN protocol id every redt connection negotiates.
pub const ALPN: &[u8] = b"redt/1";

/// Name of the identity [`init_cluster_certs`] and [`ClusterCerts::generate`] issue for
/// non-node clients (the `redt client` CLI); files `redt-client.pem`, `redt-client.key`.
pub const CLIENT_IDENTITY_NAME: &str = "redt-client";

/// File name of the CA certificate in a certificate directory.
const CA_CERT_FILE: &str = "ca.pem";
/// File name of the CA private key in a certificate directory.
const CA_KEY_FILE: &str = "ca.key";

/// A cluster certificate authority: a self-signed CA certificate and its key, able to
/// issue node certificates. Keys are ECDSA P-256.
pub struct ClusterCa {
    cluster: String,
    cert: rcgen::Certificate,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterCa").field("cluster", &self.cluster).finish_non_exhaustive()
    }
}

/// What one node (or client) presents and trusts: its certificate chain and key, and the
/// cluster CA certificate it verifies peers against. All DER.
pub struct NodeIdentity {
    /// The name the certificate is valid for (a node name, or [`CLIENT_IDENTITY_NAME`]).
    pub name: String,
    /// The end-entity certificate first, then any intermediates (none from [`ClusterCa`]).
    pub cert_chain: Vec<CertificateDer<'static>>,
    /// The private key of `cert_chain[0]`.
    pub key: PrivateKeyDer<'static>,
    /// The cluster CA certificate: the one trust anchor for peers.
    pub ca_cert: CertificateDer<'static>,
}

impl Clone for NodeIdentity {
    fn clone(&self) -> Self {
        NodeIdentity {
            name: self.name.clone(),
            cert_chain: self.cert_chain.clone(),
            key: self.key.clone_key(),
            ca_cert: self.ca_cert.clone(),
        }
    }
}

impl fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeIdentity")
            .field("name", &self.name)
            .field("cert_chain", &format_args!("{} certificate(s)", self.cert_chain.len()))
            .finish_non_exhaustive()
    }
}

/// An issued certificate with its key, in both PEM (for files) and DER.
struct Issued {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn gen_err(e: rcgen::Error) -> TransportError {
    TransportError::CertGen(e.to_string())
}

impl ClusterCa {
    /// Generates a new CA for the cluster `cluster_name` (the CA's common name is
    /// `"<cluster_name> redt CA"`).
    ///
    /// # Errors
    ///
    /// [`TransportError::CertGen`] if key generation or signing fails.
    pub fn generate(cluster_name: &str) -> Result<ClusterCa> {
        let key = KeyPair::generate().map_err(gen_err)?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, format!("{cluster_name} redt CA"));
        params.distinguished_name.push(DnType::OrganizationName, "redt");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).map_err(gen_err)?;
        Ok(ClusterCa { cluster: cluster_name.to_string(), cert, issuer: Issuer::new(params, key) })
    }

    /// The cluster name given to [`ClusterCa::generate`].
    pub fn cluster_name(&self) -> &str {
        &self.cluster
    }

    /// The CA certificate, DER.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// Issues a certificate for node `node_name` of DC `dc_name` listening on `ip`: SANs =
    /// DNS `node_name`, IP `ip` and URI `redt://node/<dc_name>/<node_name>`, usable as
    /// server and client certificate.
    ///
    /// # Errors
    ///
    /// [`TransportError::CertGen`] if `node_name` is not a valid DNS name (it must be one,
    /// since peers check it as the TLS server name) or generation fails.
    pub fn issue_node(&self, node_name: &str, dc_name: &str, ip: IpAddr) -> Result<NodeIdentity> {
        let id = CertIdentity::Node { dc: dc_name.to_string(), name: node_name.to_string() };
        Ok(self.identity(node_name, self.issue(node_name, Some(ip), &id)?))
    }

    /// Issues a certificate for a non-node client named `name` (SANs = DNS `name` and URI
    /// `redt://client/<name>`). Servers see its calls as from [`super::Caller::Client`]
    /// unless `name` is a node name; the in-DC verbs transports refuse it.
    ///
    /// # Errors
    ///
    /// As [`ClusterCa::issue_node`].
    pub fn issue_client(&self, name: &str) -> Result<NodeIdentity> {
        let id = CertIdentity::Client { name: name.to_string() };
        Ok(self.identity(name, self.issue(name, None, &id)?))
    }

    fn identity(&self, name: &str, issued: Issued) -> NodeIdentity {
        NodeIdentity {
            name: name.to_string(),
            cert_chain: vec![issued.cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(issued.key.serialize_der()).into(),
            ca_cert: self.cert_der(),
        }
    }

    fn issue(&self, name: &str, ip: Option<IpAddr>, identity: &CertIdentity) -> Result<Issued> {
        let dns = checked_dns_name(name)?;
        let uri = rcgen::string::Ia5String::try_from(identity.to_uri())
            .map_err(|e| TransportError::CertGen(format!("identity of {name:?}: {e}")))?;
        let key = KeyPair::generate().map_err(gen_err)?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.distinguished_name.push(DnType::OrganizationName, format!("redt {}", self.cluster));
        params.subject_alt_names.push(SanType::DnsName(dns));
        if let Some(ip) = ip {
            params.subject_alt_names.push(SanType::IpAddress(ip));
        }
        params.subject_alt_names.push(SanType::URI(uri));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).map_err(gen_err)?;
        Ok(Issued { cert, key })
    }

    /// Writes `ca.pem`, `ca.key`, and for every node of `topology` `<node>.pem` and
    /// `<node>.key` (freshly issued), plus `redt-client.pem`/`.key`
    /// ([`CLIENT_IDENTITY_NAME`]), into `dir` (created if missing; existing files are
    /// replaced). Key files are written with mode 0600 on Unix.
    ///
    /// # Errors
    ///
    /// [`TransportError::CertFile`] naming the file that could not be written;
    /// [`TransportError::CertGen`] for a node name that is not a valid DNS name or equals
    /// `ca` or [`CLIENT_IDENTITY_NAME`].
    pub fn write_dir(&self, dir: &Path, topology: &Topology) -> Result<()> {
        for node in &topology.nodes {
            if node.name == CLIENT_IDENTITY_NAME || node.name == "ca" {
                return Err(TransportError::CertGen(format!(
                    "node name {:?} is reserved for certificate files",
                    node.name
                )));
            }
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| TransportError::CertFile { path: dir.to_path_buf(), why: e.to_string() })?;
        write_file(&dir.join(CA_CERT_FILE), &self.cert.pem(), false)?;
        write_file(&dir.join(CA_KEY_FILE), &self.issuer.key().serialize_pem(), true)?;
        let client = CertIdentity::Client { name: CLIENT_IDENTITY_NAME.to_string() };
        let names = topology
            .nodes
            .iter()
            .map(|n| {
                let dc = topology.dcs[usize::from(n.dc.0)].name.clone();
                (n.name.as_str(), Some(n.addr.ip()), CertIdentity::Node { dc, name: n.name.clone() })
            })
            .chain(std::iter::once((CLIENT_IDENTITY_NAME, None, client)));
        for (name, ip, identity) in names {
            let issued = self.issue(name, ip, &identity)?;
            write_file(&dir.join(format!("{name}.pem")), &issued.cert.pem(), false)?;
            write_file(&dir.join(format!("{name}.key")), &issued.key.serialize_pem(), true)?;
        }
        Ok(())
    }
}

/// Every identity of one cluster, in memory (the embedded cluster needs no files).
#[derive(Debug)]
pub struct ClusterCerts {
    /// The CA that issued them.
    pub ca: ClusterCa,
    /// One identity per node, indexed by `NodeId`.
    pub nodes: Vec<NodeIdentity>,
    /// The identity for non-node clients ([`CLIENT_IDENTITY_NAME`]).
    pub client: NodeIdentity,
}

impl ClusterCerts {
    /// Generates a CA named after `topology.name` and an identity for every node (SANs = its
    /// name, the IP of its listen address and its `redt://node/<dc>/<node>` identity) and for
    /// [`CLIENT_IDENTITY_NAME`].
    ///
    /// # Errors
    ///
    /// [`TransportError::CertGen`] as [`ClusterCa::issue_node`].
    pub fn generate(topology: &Topology) -> Result<ClusterCerts> {
        let ca = ClusterCa::generate(&topology.name)?;
        let nodes = topology
            .nodes
            .iter()
            .map(|n| ca.issue_node(&n.name, &topology.dcs[usize::from(n.dc.0)].name, n.addr.ip()))
            .collect::<Result<Vec<_>>>()?;
        let client = ca.issue_client(CLIENT_IDENTITY_NAME)?;
        Ok(ClusterCerts { ca, nodes, client })
    }

    /// The identity of node `id`, if it is in the topology.
    pub fn node(&self, id: NodeId) -> Option<&NodeIdentity> {
        self.nodes.get(usize::from(id.0))
    }
}

/// Generates a new cluster CA and writes it and every node's certificate into `out` (see
/// [`ClusterCa::write_dir`]); backs `redt certs init --config F --out DIR`.
///
/// # Errors
///
/// As [`ClusterCa::generate`] and [`ClusterCa::write_dir`].
pub fn init_cluster_certs(topology: &Topology, out: &Path) -> Result<()> {
    ClusterCa::generate(&topology.name)?.write_dir(out, topology)
}

/// Loads the identity `node_name` from a directory written by [`init_cluster_certs`]:
/// `<node_name>.pem` (certificate chain), `<node_name>.key` (private key) and `ca.pem`.
///
/// # Errors
///
/// [`TransportError::MissingCertFile`] naming the first missing file;
/// [`TransportError::CertFile`] naming a file that cannot be read or holds no usable PEM.
pub fn load_identity(dir: &Path, node_name: &str) -> Result<NodeIdentity> {
    let cert_path = dir.join(format!("{node_name}.pem"));
    let key_path = dir.join(format!("{node_name}.key"));
    let ca_path = dir.join(CA_CERT_FILE);
    let cert_pem = read_file(&cert_path)?;
    let key_pem = read_file(&key_path)?;
    let ca_pem = read_file(&ca_path)?;
    let cert_chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| pem_err(&cert_path, e))?;
    if cert_chain.is_empty() {
        return Err(TransportError::CertFile { path: cert_path, why: "no CERTIFICATE block".into() });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| pem_err(&key_path, e))?;
    let ca_cert = CertificateDer::from_pem_slice(&ca_pem).map_err(|e| pem_err(&ca_path, e))?;
    Ok(NodeIdentity { name: node_name.to_string(), cert_chain, key, ca_cert })
}

fn pem_err(path: &Path, e: rustls_pki_types::pem::Error) -> TransportError {
    TransportError::CertFile { path: path.to_path_buf(), why: format!("bad PEM: {e}") }
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => TransportError::MissingCertFile { path: path.to_path_buf() },
        _ => TransportError::CertFile { path: path.to_path_buf(), why: e.to_string() },
    })
}

fn write_file(path: &Path, text: &str, secret: bool) -> Result<()> {
    let err = |e: std::io::Error| TransportError::CertFile { path: PathBuf::from(path), why: e.to_string() };
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = opts.open(path).map_err(err)?;
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)
}

/// Returns `name` as an IA5 DNS name after checking that rustls accepts it as a server name.
fn checked_dns_name(name: &str) -> Result<rcgen::string::Ia5String> {
    match ServerName::try_from(name) {
        Ok(ServerName::DnsName(_)) => {}
        _ => return Err(TransportError::CertGen(format!("{name:?} is not a valid DNS name"))),
    }
    rcgen::string::Ia5String::try_from(name).map_err(|e| TransportError::CertGen(format!("{name:?}: {e}")))
}

/// The crypto provider of every redt TLS configuration: `ring`, built explicitly.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(identity: &NodeIdentity) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add(identity.ca_cert.clone()).map_err(|e| TransportError::TlsConfig(format!("cluster CA: {e}")))?;
    Ok(roots)
}

fn config_err(e: impl fmt::Display) -> TransportError {
    TransportError::TlsConfig(e.to_string())
}

/// Returns the rustls server configuration of `identity`: TLS 1.3 only, ring, ALPN
/// [`ALPN`], client certificate required and verified against `identity.ca_cert`.
///
/// # Errors
///
/// [`TransportError::TlsConfig`] if the CA certificate, chain or key is unusable.
pub fn rustls_server_config(identity: &NodeIdentity) -> Result<rustls::ServerConfig> {
    let provider = provider();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots(identity)?), provider.clone())
        .build()
        .map_err(config_err)?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_err)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.cert_chain.clone(), identity.key.clone_key())
        .map_err(config_err)?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    Ok(cfg)
}

/// Returns the rustls client configuration of `identity`: TLS 1.3 only, ring, ALPN
/// [`ALPN`], servers verified against `identity.ca_cert` (the server name is given per
/// connection), `identity` presented as client certificate.
///
/// # Errors
///
/// [`TransportError::TlsConfig`] if the CA certificate, chain or key is unusable.
pub fn rustls_client_config(identity: &NodeIdentity) -> Result<rustls::ClientConfig> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_err)?
        .with_root_certificates(roots(identity)?)
        .with_client_auth_cert(identity.cert_chain.clone(), identity.key.clone_key())
        .map_err(config_err)?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    Ok(cfg)
}

/// Returns [`rustls_server_config`] as a quinn server configuration (default quinn
/// transport parameters; the [`super::Transport`] sets its own).
///
/// # Errors
///
/// As [`rustls_server_config`].
pub fn quic_server_config(identity: &NodeIdentity) -> Result<quinn::ServerConfig> {
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(rustls_server_config(identity)?).map_err(config_err)?;
    Ok(quinn::ServerConfig::with_crypto(Arc::new(crypto)))
}

/// Returns [`rustls_client_config`] as a quinn client configuration (default quinn
/// transport parameters; the [`super::Transport`] sets its own).
///
/// # Errors
///
/// As [`rustls_client_config`].
pub fn quic_client_config(identity: &NodeIdentity) -> Result<quinn::ClientConfig> {
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(rustls_client_config(identity)?).map_err(config_err)?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// Returns the TLS of node `node` of `topology` for the in-DC verbs transports (the TCP verbs
/// of `redt-tcp`, the RDMA bootstrap), built from its `identity`: TLS 1.3 with the cluster
/// CA, accepting only node certificates of the node's own DC ([`VerbsTls`]).
///
/// # Errors
///
/// [`TransportError::TlsConfig`] when `node` is not in `topology` or its certificate does not
/// carry its node identity (certificates written before the verbs transports used TLS carry
/// none: run `redt certs init` again), or rustls refuses the material.
pub fn verbs_tls(identity: &NodeIdentity, topology: &Topology, node: NodeId) -> Result<VerbsTls> {
    VerbsTls::for_node(identity.cert_chain.clone(), identity.key.clone_key(), identity.ca_cert.clone(), topology, node)
        .map_err(|e| TransportError::TlsConfig(format!("{}: {e}", identity.name)))
}

/// Returns the name among `names` that `cert` is valid for, if any (the first match).
pub(crate) fn certificate_name<'n>(
    cert: &CertificateDer<'_>,
    names: impl IntoIterator<Item = &'n str>,
) -> Option<&'n str> {
    let parsed = rustls::server::ParsedCertificate::try_from(cert).ok()?;
    names.into_iter().find(|name| {
        ServerName::try_from(*name).is_ok_and(|sn| rustls::client::verify_server_name(&parsed, &sn).is_ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn node_certificate_names_its_node_only() {
        let ca = ClusterCa::generate("t").unwrap();
        let id = ca.issue_node("dc1-n1", "dc1", LOOPBACK).unwrap();
        assert_eq!(certificate_name(&id.cert_chain[0], ["dc2-n1", "dc1-n1"]), Some("dc1-n1"));
        assert_eq!(certificate_name(&id.cert_chain[0], ["dc2-n1"]), None);
        assert_eq!(id.ca_cert, ca.cert_der());
    }

    #[test]
    fn invalid_dns_name_is_refused() {
        let ca = ClusterCa::generate("t").unwrap();
        assert!(matches!(ca.issue_node("not a name", "dc1", LOOPBACK), Err(TransportError::CertGen(_))));
        assert!(matches!(ca.issue_node("127.0.0.1", "dc1", LOOPBACK), Err(TransportError::CertGen(_))));
    }

    #[test]
    fn configs_build_for_an_issued_identity() {
        let ca = ClusterCa::generate("t").unwrap();
        let id = ca.issue_node("dc1-n1", "dc1", LOOPBACK).unwrap();
        let server = rustls_server_config(&id).unwrap();
        assert_eq!(server.alpn_protocols, vec![ALPN.to_vec()]);
        quic_server_config(&id).unwrap();
        quic_client_config(&id).unwrap();
    }

    #[test]
    fn certificates_carry_their_identity() {
        let ca = ClusterCa::generate("t").unwrap();
        let node = ca.issue_node("dc1-n1", "eu west", LOOPBACK).unwrap();
        assert_eq!(
            redt_dc_executor::verbs::cert_identity(&node.cert_chain[0]),
            Some(CertIdentity::Node { dc: "eu west".into(), name: "dc1-n1".into() })
        );
        let client = ca.issue_client(CLIENT_IDENTITY_NAME).unwrap();
        assert_eq!(
            redt_dc_executor::verbs::cert_identity(&client.cert_chain[0]),
            Some(CertIdentity::Client { name: CLIENT_IDENTITY_NAME.into() })
        );
    }

    #[test]
    fn garbage_pem_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["x.pem", "x.key", "ca.pem"] {
            std::fs::write(dir.path().join(f), b"not pem").unwrap();
        }
        let err = load_identity(dir.path(), "x").unwrap_err();
        assert!(matches!(&err, TransportError::CertFile { path, .. } if path.ends_with("x.pem")), "{err}");
    }
}

//! Cluster PKI and TLS configurations (docs/design.md §4: TLS 1.3, mutual certificates from a
//! cluster CA, one crypto provider).
//!
//! One CA per cluster ([`ClusterCa`]) issues one certificate per node, valid for the node's
//! name (DNS SAN, also its common name) and the IP of its listen address, and carrying its
//! identity `redt://node/<dc>/<node>` as a URI SAN ([`redt_proto::CertIdentity`]). It also
//! issues client certificates (`redt://client/<name>`: transactions and status) and operator
//! certificates (`redt://operator/<name>`: also the admin requests, `redt netem set` and what
//! a drill sends). The in-DC verbs transports accept only node certificates of their own DC
//! by that identity ([`verbs_tls`]). A node's certificate serves both ways: as server
//! certificate when it accepts, as client certificate when it calls; client and operator
//! certificates are client certificates only (extended key usage `clientAuth`), so none can
//! pose as a node's server. Every certificate has a validity period ([`Validity`]; defaults
//! [`DEFAULT_NODE_VALIDITY`], [`DEFAULT_CLIENT_VALIDITY`], [`DEFAULT_OPERATOR_VALIDITY`]).
//! Every TLS configuration here is built with the `ring` provider explicitly (never the
//! process default), allows TLS 1.3 only and negotiates ALPN [`ALPN`]. Servers require a
//! client certificate chaining to the cluster CA; clients check the server against the CA
//! with the server name set to the peer node's name.
//!
//! On disk ([`init_cluster_certs`], [`load_identity`]) a certificate directory holds `ca.pem`
//! and `<name>.pem`, `<name>.key` per node plus one for [`CLIENT_IDENTITY_NAME`] and one for
//! [`OPERATOR_IDENTITY_NAME`]; all PEM, keys in PKCS#8. The CA's private key is not in it:
//! it goes to [`default_ca_key_path`] (`<dir>-ca/ca.key` beside the directory)
//! unless a path is given, so the directory can be copied to the nodes without it.
use super::error::{Result, TransportError};
use super::x509::{self, CertSummary};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use redt_proto::{CertIdentity, NodeId, Topology};
use redt_verbs::VerbsTls;
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
use std::time::{Duration, SystemTime};

/// The ALPN protocol id every redt connection negotiates.
pub const ALPN: &[u8] = b"redt/1";

/// Name of the identity [`init_cluster_certs`] and [`ClusterCerts::generate`] issue for
/// non-node clients (the `redt client` CLI); files `redt-client.pem`, `redt-client.key`.
pub const CLIENT_IDENTITY_NAME: &str = "redt-client";

/// Name of the operator identity [`init_cluster_certs`] and [`ClusterCerts::generate`] issue
/// (the one `redt netem set`, `redt drill` and `redt bench … --drill` present by default);
/// files `redt-operator.pem`, `redt-operator.key`.
pub const OPERATOR_IDENTITY_NAME: &str = "redt-operator";

/// Validity of a node certificate unless told otherwise: 365 days.
pub const DEFAULT_NODE_VALIDITY: Duration = Duration::from_secs(365 * 86_400);
/// Validity of a client certificate unless told otherwise: 365 days.
pub const DEFAULT_CLIENT_VALIDITY: Duration = Duration::from_secs(365 * 86_400);
/// Validity of an operator certificate unless told otherwise: 90 days (it may change the
/// cluster, so it should not outlive its holder's need).
pub const DEFAULT_OPERATOR_VALIDITY: Duration = Duration::from_secs(90 * 86_400);
/// Validity of the cluster CA certificate: 10 years.
pub const CA_VALIDITY: Duration = Duration::from_secs(3_650 * 86_400);
/// How far before the moment of issue a certificate's validity starts, so that a peer whose
/// clock is behind (within any sane NTP skew) accepts it at once: 5 minutes.
pub const BACKDATE: Duration = Duration::from_secs(300);

/// File name of the CA certificate in a certificate directory.
const CA_CERT_FILE: &str = "ca.pem";
/// File name of the CA private key (in [`default_ca_key_path`]'s directory, or, in a
/// directory written by an older `redt certs init`, in the certificate directory itself).
const CA_KEY_FILE: &str = "ca.key";

/// The role of a certificate `ClusterCa::issue_client` or `issue_operator` issues, as `redt certs issue --role`
/// names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A node of the topology (`redt://node/<dc>/<node>`).
    Node,
    /// A client: transactions and status (`redt://client/<name>`).
    Client,
    /// An operator: a client that may also send admin requests (`redt://operator/<name>`).
    Operator,
}

impl Role {
    /// Its validity unless told otherwise ([`DEFAULT_NODE_VALIDITY`] and so on).
    pub fn default_validity(self) -> Duration {
        match self {
            Role::Node => DEFAULT_NODE_VALIDITY,
            Role::Client => DEFAULT_CLIENT_VALIDITY,
            Role::Operator => DEFAULT_OPERATOR_VALIDITY,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Node => "node",
            Role::Client => "client",
            Role::Operator => "operator",
        })
    }
}

/// The validity period written into a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// First moment the certificate is valid.
    pub not_before: SystemTime,
    /// Last moment the certificate is valid.
    pub not_after: SystemTime,
}

impl Validity {
    /// Valid from [`BACKDATE`] before `now` until `now + valid_for`.
    pub fn from(now: SystemTime, valid_for: Duration) -> Validity {
        Validity { not_before: now.checked_sub(BACKDATE).unwrap_or(now), not_after: now + valid_for }
    }

    /// [`Validity::from`] the current time.
    pub fn starting_now(valid_for: Duration) -> Validity {
        Validity::from(SystemTime::now(), valid_for)
    }
}

/// Returns where the CA key of the certificate directory `certs_dir` goes by default: the
/// file `ca.key` in the directory `<certs_dir>-ca` beside it (e.g. `run/certs-ca/ca.key` for
/// `run/certs`), so the directory the nodes read holds no CA key.
pub fn default_ca_key_path(certs_dir: &Path) -> PathBuf {
    // `.` or `..` name no directory: go by the absolute path then.
    let dir = match certs_dir.file_name() {
        Some(_) => certs_dir.to_path_buf(),
        None => std::path::absolute(certs_dir).unwrap_or_else(|_| certs_dir.to_path_buf()),
    };
    match dir.file_name() {
        Some(name) => {
            let mut sibling = name.to_os_string();
            sibling.push("-ca");
            dir.with_file_name(sibling).join(CA_KEY_FILE)
        }
        // `/`: no sibling to name.
        None => dir.join("ca-private").join(CA_KEY_FILE),
    }
}

/// Returns the CA key of `certs_dir`: `ca_key` when given, else [`default_ca_key_path`], else
/// (a directory written by an older `redt certs init`) `<certs_dir>/ca.key` if it exists there.
pub fn find_ca_key(certs_dir: &Path, ca_key: Option<&Path>) -> PathBuf {
    if let Some(p) = ca_key {
        return p.to_path_buf();
    }
    let default = default_ca_key_path(certs_dir);
    let legacy = certs_dir.join(CA_KEY_FILE);
    if !default.exists() && legacy.exists() {
        legacy
    } else {
        default
    }
}

/// A cluster certificate authority: a self-signed CA certificate and its key, able to
/// issue node certificates. Keys are ECDSA P-256.
pub struct ClusterCa {
    cluster: String,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
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
    /// The name the certificate is valid for (a node name, [`CLIENT_IDENTITY_NAME`],
    /// [`OPERATOR_IDENTITY_NAME`] or another client's or operator's name).
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

/// What [`ClusterCa::write_identity`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenCert {
    /// The certificate file.
    pub cert_path: PathBuf,
    /// The key file (mode 0600 on Unix).
    pub key_path: PathBuf,
    /// The identity URI it carries.
    pub identity: CertIdentity,
    /// Its validity period.
    pub validity: Validity,
}

fn gen_err(e: rcgen::Error) -> TransportError {
    TransportError::CertGen(e.to_string())
}

impl ClusterCa {
    /// Generates a new CA for the cluster `cluster_name` (the CA's common name is
    /// `"<cluster_name> redt CA"`), valid for [`CA_VALIDITY`].
    ///
    /// # Errors
    ///
    /// [`TransportError::CertGen`] if key generation or signing fails.
    pub fn generate(cluster_name: &str) -> Result<ClusterCa> {
        let key = KeyPair::generate().map_err(gen_err)?;
        let mut params = ClusterCa::params(cluster_name);
        let validity = Validity::starting_now(CA_VALIDITY);
        params.not_before = validity.not_before.into();
        params.not_after = validity.not_after.into();
        let cert = params.self_signed(&key).map_err(gen_err)?;
        Ok(ClusterCa {
            cluster: cluster_name.to_string(),
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate's parameters: its name (from `cluster_name`) and CA constraints;
    /// what the certificates it issues name as their issuer.
    fn params(cluster_name: &str) -> CertificateParams {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, format!("{cluster_name} redt CA"));
        params.distinguished_name.push(DnType::OrganizationName, "redt");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        params
    }

    /// Loads the CA of the cluster `cluster_name` (the topology's name) from its certificate
    /// `certs_dir/ca.pem` and its key `ca_key` (see [`find_ca_key`]), to issue more
    /// certificates with it ([`ClusterCa::write_identity`]).
    ///
    /// # Errors
    ///
    /// [`TransportError::MissingCertFile`] / [`TransportError::CertFile`] for a file that is
    /// missing, unreadable or not PEM; [`TransportError::CertGen`] when the key does not
    /// belong to the certificate or the certificate is not of the cluster `cluster_name` (a
    /// test certificate issued with them does not chain to `ca.pem`).
    pub fn load(cluster_name: &str, certs_dir: &Path, ca_key: &Path) -> Result<ClusterCa> {
        let ca_path = certs_dir.join(CA_CERT_FILE);
        let cert_pem = String::from_utf8_lossy(&read_file(&ca_path)?).into_owned();
        let cert_der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| pem_err(&ca_path, e))?;
        let key_pem = String::from_utf8_lossy(&read_file(ca_key)?).into_owned();
        let key = KeyPair::from_pem(&key_pem)
            .map_err(|e| TransportError::CertFile { path: ca_key.to_path_buf(), why: e.to_string() })?;
        let ca = ClusterCa {
            cluster: cluster_name.to_string(),
            cert_der,
            cert_pem,
            issuer: Issuer::new(ClusterCa::params(cluster_name), key),
        };
        // The issuer is rebuilt from the cluster name and the key: a wrong name or a key of
        // another CA would issue certificates nobody accepts. Find out now.
        let probe = ca.issue_client("probe")?;
        check_identity(&probe, SystemTime::now()).map_err(|e| {
            TransportError::CertGen(format!(
                "the CA key {} and {} do not issue certificates that chain (another cluster's, or \
                 the topology is not named {cluster_name:?}?): {e}",
                ca_key.display(),
                ca_path.display()
            ))
        })?;
        Ok(ca)
    }

    /// The cluster name given to [`ClusterCa::generate`].
    pub fn cluster_name(&self) -> &str {
        &self.cluster
    }

    /// The CA certificate, DER.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert_der.clone()
    }

    /// Issues a certificate for node `node_name` of DC `dc_name` listening on `ip`: SANs =
    /// DNS `node_name`, IP `ip` and URI `redt://node/<dc_name>/<node_name>`, usable as
    /// server and client certificate, valid for [`DEFAULT_NODE_VALIDITY`].
    ///
    /// # Errors
    ///
    /// [`TransportError::CertGen`] if `node_name` is not a valid DNS name (it must be one,
    /// since peers check it as the TLS server name) or generation fails.
    pub fn issue_node(&self, node_name: &str, dc_name: &str, ip: IpAddr) -> Result<NodeIdentity> {
        let id = CertIdentity::Node { dc: dc_name.to_string(), name: node_name.to_string() };
        self.issue_identity(&id, Some(ip), Validity::starting_now(DEFAULT_NODE_VALIDITY))
    }

    /// Issues a certificate for a non-node client named `name` (SANs = DNS `name` and URI
    /// `redt://client/<name>`; client authentication only), valid for
    /// [`DEFAULT_CLIENT_VALIDITY`]. Servers see its calls as from [`super::Caller::Client`];
    /// the in-DC verbs transports refuse it.
    ///
    /// # Errors
    ///
    /// As [`ClusterCa::issue_node`].
    pub fn issue_client(&self, name: &str) -> Result<NodeIdentity> {
        let id = CertIdentity::Client { name: name.to_string() };
        self.issue_identity(&id, None, Validity::starting_now(DEFAULT_CLIENT_VALIDITY))
    }

    /// Issues a certificate for an operator named `name` (SANs = DNS `name` and URI
    /// `redt://operator/<name>`; client authentication only), valid for
    /// [`DEFAULT_OPERATOR_VALIDITY`]. Servers see its calls as from
    /// [`super::Caller::Operator`].
    ///
    /// # Errors
    ///
    /// As [`ClusterCa::issue_node`].
    pub fn issue_operator(&self, name: &str) -> Result<NodeIdentity> {
        let id = CertIdentity::Operator { name: name.to_string() };
        self.issue_identity(&id, None, Validity::starting_now(DEFAULT_OPERATOR_VALIDITY))
    }

    /// Issues a certificate carrying `identity` (its name is also the DNS SAN and common
    /// name; `ip` an IP SAN), valid over `validity`. Node certificates serve as server and
    /// client certificates, the others as client certificates only.
    ///
    /// # Errors
    ///
    /// As [`ClusterCa::issue_node`]; also when `validity` ends before it starts.
    pub fn issue_identity(
        &self,
        identity: &CertIdentity,
        ip: Option<IpAddr>,
        validity: Validity,
    ) -> Result<NodeIdentity> {
        let name = identity_name(identity);
        Ok(self.identity(name, self.issue(name, ip, identity, validity)?))
    }

    fn identity(&self, name: &str, issued: Issued) -> NodeIdentity {
        NodeIdentity {
            name: name.to_string(),
            cert_chain: vec![issued.cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(issued.key.serialize_der()).into(),
            ca_cert: self.cert_der(),
        }
    }

    fn issue(&self, name: &str, ip: Option<IpAddr>, identity: &CertIdentity, validity: Validity) -> Result<Issued> {
        if validity.not_after <= validity.not_before {
            return Err(TransportError::CertGen(format!("the validity of {name:?} ends before it starts")));
        }
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
        params.extended_key_usages = match identity {
            CertIdentity::Node { .. } => vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth],
            CertIdentity::Client { .. } | CertIdentity::Operator { .. } => vec![ExtendedKeyUsagePurpose::ClientAuth],
        };
        params.not_before = validity.not_before.into();
        params.not_after = validity.not_after.into();
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).map_err(gen_err)?;
        Ok(Issued { cert, key })
    }

    /// Issues a certificate carrying `identity` (as [`ClusterCa::issue_identity`]) and writes
    /// it to `dir/<name>.pem` and its key to `dir/<name>.key` (mode 0600 on Unix), replacing
    /// what was there: a running node picks the new ones up for its next connections
    /// (`redt node` watches its files). Each file is written to a new file beside it and
    /// renamed into place, so a reader sees the old file or the new one, never part of one,
    /// and the key is never readable by others, even when the file it replaces was.
    ///
    /// # Errors
    ///
    /// As [`ClusterCa::issue_identity`]; [`TransportError::CertFile`] naming a file that could
    /// not be written; [`TransportError::CertGen`] for the names `ca` (the CA's file).
    pub fn write_identity(
        &self,
        dir: &Path,
        identity: &CertIdentity,
        ip: Option<IpAddr>,
        validity: Validity,
    ) -> Result<WrittenCert> {
        let name = identity_name(identity);
        if name == "ca" {
            return Err(TransportError::CertGen("the name \"ca\" is reserved for the CA's files".into()));
        }
        let issued = self.issue(name, ip, identity, validity)?;
        std::fs::create_dir_all(dir)
            .map_err(|e| TransportError::CertFile { path: dir.to_path_buf(), why: e.to_string() })?;
        let cert_path = dir.join(format!("{name}.pem"));
        let key_path = dir.join(format!("{name}.key"));
        // The key first: a watcher that sees the new certificate must find its key.
        write_file(&key_path, &issued.key.serialize_pem(), true)?;
        write_file(&cert_path, &issued.cert.pem(), false)?;
        Ok(WrittenCert { cert_path, key_path, identity: identity.clone(), validity })
    }

    /// Writes the CA certificate to `dir/ca.pem` and its key to `ca_key` (mode 0600 on Unix;
    /// its directory is created), each through a new file renamed into place as
    /// [`ClusterCa::write_identity`] does.
    ///
    /// # Errors
    ///
    /// [`TransportError::CertFile`] naming the file that could not be written.
    pub fn write_ca(&self, dir: &Path, ca_key: &Path) -> Result<()> {
        for d in [Some(dir), ca_key.parent()].into_iter().flatten().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)
                .map_err(|e| TransportError::CertFile { path: d.to_path_buf(), why: e.to_string() })?;
        }
        write_file(ca_key, &self.issuer.key().serialize_pem(), true)?;
        write_file(&dir.join(CA_CERT_FILE), &self.cert_pem, false)
    }

    /// Issues every certificate of `topology` into `dir` ([`ClusterCa::write_identity`]):
    /// `<node>.pem`/`.key` per node, `redt-client` ([`CLIENT_IDENTITY_NAME`]) and
    /// `redt-operator` ([`OPERATOR_IDENTITY_NAME`]), each valid for `valid_for` or its role's
    /// default. Returns what it wrote, nodes first.
    ///
    /// # Errors
    ///
    /// As [`ClusterCa::write_identity`]; [`TransportError::CertGen`] for a node name that is
    /// not a valid DNS name or equals `ca`, [`CLIENT_IDENTITY_NAME`] or
    /// [`OPERATOR_IDENTITY_NAME`].
    pub fn write_all(&self, dir: &Path, topology: &Topology, valid_for: Option<Duration>) -> Result<Vec<WrittenCert>> {
        for node in &topology.nodes {
            if [CLIENT_IDENTITY_NAME, OPERATOR_IDENTITY_NAME, "ca"].contains(&node.name.as_str()) {
                return Err(TransportError::CertGen(format!(
                    "node name {:?} is reserved for certificate files",
                    node.name
                )));
            }
        }
        let mut written = Vec::new();
        for n in &topology.nodes {
            let id = node_identity(topology, n);
            let validity = Validity::starting_now(valid_for.unwrap_or(DEFAULT_NODE_VALIDITY));
            written.push(self.write_identity(dir, &id, node_ip(n), validity)?);
        }
        let client = CertIdentity::Client { name: CLIENT_IDENTITY_NAME.to_string() };
        let validity = Validity::starting_now(valid_for.unwrap_or(DEFAULT_CLIENT_VALIDITY));
        written.push(self.write_identity(dir, &client, None, validity)?);
        let operator = CertIdentity::Operator { name: OPERATOR_IDENTITY_NAME.to_string() };
        let validity = Validity::starting_now(valid_for.unwrap_or(DEFAULT_OPERATOR_VALIDITY));
        written.push(self.write_identity(dir, &operator, None, validity)?);
        Ok(written)
    }
}

/// The IP SAN of node `n`'s certificate: its `advertise` IP, else its `listen` IP when that
/// is a specific one; `None` when it advertises a host name and listens on every address.
/// (Peers check the node's name and identity URI, not this.)
pub fn node_ip(n: &redt_proto::NodeEntry) -> Option<IpAddr> {
    n.advertise.ip().or_else(|| Some(n.listen.ip()).filter(|ip| !ip.is_unspecified()))
}

/// The identity of node `n` of `topology`: `redt://node/<dc>/<node>`.
fn node_identity(topology: &Topology, n: &redt_proto::NodeEntry) -> CertIdentity {
    CertIdentity::Node { dc: topology.dc_name(n.dc), name: n.name.clone() }
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
    /// The operator identity ([`OPERATOR_IDENTITY_NAME`]).
    pub operator: NodeIdentity,
}

impl ClusterCerts {
    /// Generates a CA named after `topology.name` and an identity for every node (SANs = its
    /// name, its IP ([`node_ip`]) and its `redt://node/<dc>/<node>` identity), for
    /// [`CLIENT_IDENTITY_NAME`] and for [`OPERATOR_IDENTITY_NAME`].
    ///
    /// # Errors
    ///
    /// [`TransportError::CertGen`] as [`ClusterCa::issue_node`].
    pub fn generate(topology: &Topology) -> Result<ClusterCerts> {
        let ca = ClusterCa::generate(&topology.name)?;
        let nodes = topology
            .nodes
            .iter()
            .map(|n| {
                ca.issue_identity(
                    &node_identity(topology, n),
                    node_ip(n),
                    Validity::starting_now(DEFAULT_NODE_VALIDITY),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let client = ca.issue_client(CLIENT_IDENTITY_NAME)?;
        let operator = ca.issue_operator(OPERATOR_IDENTITY_NAME)?;
        Ok(ClusterCerts { ca, nodes, client, operator })
    }

    /// The identity of node `id`, if it is in the topology.
    pub fn node(&self, id: NodeId) -> Option<&NodeIdentity> {
        self.nodes.get(usize::from(id.0))
    }
}

/// Generates a new cluster CA, writes its certificate to `out/ca.pem` and its key to
/// `ca_key` (default [`default_ca_key_path`]`(out)`), and every certificate of `topology`
/// into `out` ([`ClusterCa::write_all`], each valid for `valid_for` or its role's default);
/// backs `redt certs init`. Returns what it wrote.
///
/// # Errors
///
/// As [`ClusterCa::generate`], [`ClusterCa::write_ca`] and [`ClusterCa::write_all`].
pub fn init_cluster_certs_with(
    topology: &Topology,
    out: &Path,
    ca_key: Option<&Path>,
    valid_for: Option<Duration>,
) -> Result<Vec<WrittenCert>> {
    let ca = ClusterCa::generate(&topology.name)?;
    let written = ca.write_all(out, topology, valid_for)?;
    ca.write_ca(out, &ca_key.map_or_else(|| default_ca_key_path(out), Path::to_path_buf))?;
    Ok(written)
}

/// [`init_cluster_certs_with`] with the CA key at [`default_ca_key_path`] and the default
/// validity periods.
///
/// # Errors
///
/// As [`init_cluster_certs_with`].
pub fn init_cluster_certs(topology: &Topology, out: &Path) -> Result<()> {
    init_cluster_certs_with(topology, out, None, None).map(|_| ())
}

/// The name a certificate carrying `identity` is issued under (its DNS SAN and file name).
fn identity_name(identity: &CertIdentity) -> &str {
    match identity {
        CertIdentity::Node { name, .. } | CertIdentity::Client { name } | CertIdentity::Operator { name } => name,
    }
}

/// Checks that `identity` is usable at `now`: its certificate chains to its CA certificate and
/// is within its validity period, and its key belongs to it. Returns the certificate's serial
/// and validity.
///
/// # Errors
///
/// [`TransportError::TlsConfig`] saying what is wrong: an empty chain, a certificate that
/// expired (with its end) or is not valid yet, one the CA did not sign, a key that does not
/// match.
pub fn check_identity(identity: &NodeIdentity, now: SystemTime) -> Result<CertSummary> {
    let who = &identity.name;
    let cert = identity
        .cert_chain
        .first()
        .ok_or_else(|| TransportError::TlsConfig(format!("{who}: empty certificate chain")))?;
    let summary = x509::summary(cert)
        .ok_or_else(|| TransportError::TlsConfig(format!("{who}: the certificate does not parse")))?;
    let provider = provider();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots(identity)?), provider.clone())
        .build()
        .map_err(config_err)?;
    let at =
        rustls_pki_types::UnixTime::since_unix_epoch(now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default());
    verifier.verify_client_cert(cert, &identity.cert_chain[1..], at).map_err(|e| {
        let until = humantime::format_rfc3339_seconds(summary.not_after);
        let from = humantime::format_rfc3339_seconds(summary.not_before);
        TransportError::TlsConfig(format!("{who}: certificate (valid {from} to {until}) refused: {e}"))
    })?;
    rustls::sign::CertifiedKey::from_der(identity.cert_chain.clone(), identity.key.clone_key(), &provider)
        .map_err(|e| TransportError::TlsConfig(format!("{who}: the key does not fit the certificate: {e}")))?;
    Ok(summary)
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

/// Writes `text` to `path` whole or not at all, and a key (`secret`) readable by its owner
/// only at every moment: into a new file in the same directory, created exclusively with mode
/// 0600 (`secret`) or 0644 (less the umask either way), synced, then renamed over `path` and
/// the directory synced. Whatever was at `path` (a file of wider mode, a symbolic link) is
/// replaced, never written through; a failure leaves it as it was and removes the new file.
fn write_file(path: &Path, text: &str, secret: bool) -> Result<()> {
    let err = |e: std::io::Error| TransportError::CertFile { path: PathBuf::from(path), why: e.to_string() };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| err(std::io::Error::other("not a file name")))?;
    let (tmp, mut file) = create_temp(dir, &name.to_string_lossy(), secret).map_err(err)?;
    let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    sync_dir(dir).map_err(err)
}

/// Creates a new file `.<name>.<pid>.<n>.tmp` in `dir` (never an existing one, nor through a
/// symbolic link), mode 0600 when `secret` and 0644 otherwise (less the umask).
fn create_temp(dir: &Path, name: &str, secret: bool) -> std::io::Result<(PathBuf, std::fs::File)> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut last = None;
    for _ in 0..16 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(if secret { 0o600 } else { 0o644 });
        }
        #[cfg(not(unix))]
        let _ = secret;
        match opts.open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary file name left")))
}

/// Syncs directory `dir`, so a rename in it survives a crash (a no-op off Unix).
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
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
            redt_verbs::cert_identity(&node.cert_chain[0]),
            Some(CertIdentity::Node { dc: "eu west".into(), name: "dc1-n1".into() })
        );
        let client = ca.issue_client(CLIENT_IDENTITY_NAME).unwrap();
        assert_eq!(
            redt_verbs::cert_identity(&client.cert_chain[0]),
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

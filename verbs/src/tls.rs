//! TLS of the in-DC verbs transports: the TCP verbs of `redt-tcp`
//! ([`super::TcpVerbsServer`], [`super::TcpVerbs`]) and the RDMA bootstrap speak TLS 1.3
//! with the cluster CA, and each side accepts only a node certificate of its own DC.
//!
//! [`VerbsTls`] holds one node's TLS configurations (built here from its certificate, key and
//! the cluster CA certificate, the material `redt certs init` writes and
//! `redt_transport::load_identity` loads) and the DC's node names. A peer is
//! authenticated in two steps: the handshake proves it holds a certificate the cluster CA
//! signed (the server requires one; the client checks the server's against the peer node's
//! name); then its certificate's identity URI (`redt_proto::CertIdentity`, a URI SAN) must
//! name a node of this DC. A client certificate, a node of another DC or a certificate
//! without an identity is refused.
//!
//! [`TlsStream`] is a blocking TLS connection over a std `TcpStream` whose reads can carry a
//! deadline; [`handshake_step`] advances a handshake on a non-blocking socket (the TCP verbs
//! server runs every handshake in its accept loop with it).

use crate::error::{Error, Result};
use redt_proto::{CertIdentity, NodeId, Topology};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::Instant;

/// The ALPN protocol id every verbs TLS connection negotiates (distinct from the QUIC
/// transport's `redt/1`, so a certificate's session on one cannot be replayed on the other).
pub const VERBS_ALPN: &[u8] = b"redt-verbs/1";

/// One node's TLS for the in-DC verbs transports: its configurations and who it accepts.
///
/// Both configurations allow TLS 1.3 only, use the `ring` provider, negotiate
/// [`VERBS_ALPN`] and trust the cluster CA alone; the server requires a client certificate;
/// neither side resumes sessions. Cloning is cheap, and clones share the configurations:
/// [`VerbsTls::rotate`] on one changes what every clone uses for its next connection.
#[derive(Clone)]
pub struct VerbsTls {
    configs: Arc<std::sync::RwLock<Configs>>,
    dc: String,
    name: String,
    names: HashMap<NodeId, String>,
    ids: HashMap<String, NodeId>,
}

/// The rustls configurations of a [`VerbsTls`], replaced whole by a rotation.
struct Configs {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl fmt::Debug for VerbsTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut nodes: Vec<_> = self.names.iter().collect();
        nodes.sort();
        f.debug_struct("VerbsTls")
            .field("dc", &self.dc)
            .field("name", &self.name)
            .field("nodes", &nodes)
            .finish_non_exhaustive()
    }
}

fn tls_err(what: &str) -> impl FnOnce(rustls::Error) -> Error + '_ {
    move |e| Error::TlsConfig(format!("{what}: {e}"))
}

/// Returns the identity `cert`'s URI SANs carry: the one `redt://` URI that parses, `None`
/// when there is none, more than one, or the certificate does not parse.
pub fn cert_identity(cert: &CertificateDer<'_>) -> Option<CertIdentity> {
    let parsed = webpki::EndEntityCert::try_from(cert).ok()?;
    let mut found = parsed.valid_uri_names().filter_map(CertIdentity::from_uri);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

impl VerbsTls {
    /// Builds the TLS of the node holding `cert_chain` (its certificate first) and `key`,
    /// trusting `ca_cert` (the cluster CA), in DC `dc` whose nodes are `nodes` (id and name
    /// as in the topology; the own node among them). Peers are reached under their names
    /// (each must be a DNS name, as `redt certs init` requires).
    ///
    /// # Errors
    /// [`Error::TlsConfig`] when the chain is empty, the own certificate does not carry the
    /// identity of a node of `nodes` in `dc` (certificates of an older `redt certs init`
    /// carry none: issue new ones with `redt certs init`), a node name is not a DNS name, or rustls
    /// refuses the certificate, key or CA certificate.
    pub fn new(
        cert_chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        ca_cert: CertificateDer<'static>,
        dc: &str,
        nodes: impl IntoIterator<Item = (NodeId, String)>,
    ) -> Result<VerbsTls> {
        let names: HashMap<NodeId, String> = nodes.into_iter().collect();
        for name in names.values() {
            if !matches!(ServerName::try_from(name.as_str()), Ok(ServerName::DnsName(_))) {
                return Err(Error::TlsConfig(format!("node name {name:?} is not a DNS name")));
            }
        }
        let ids: HashMap<String, NodeId> = names.iter().map(|(&id, name)| (name.clone(), id)).collect();
        let own = cert_chain.first().ok_or_else(|| Error::TlsConfig("the certificate chain is empty".into()))?;
        let name = match cert_identity(own) {
            Some(CertIdentity::Node { dc: d, name }) if d == dc && ids.contains_key(&name) => name,
            Some(other) => {
                return Err(Error::TlsConfig(format!("this node's certificate is for {other}, not a node of DC {dc}")))
            }
            None => {
                return Err(Error::TlsConfig(
                    "this node's certificate carries no redt identity (URI SAN redt://node/<dc>/<node>); \
                     certificates from before verbs TLS have none: issue new ones with `redt certs init`"
                        .into(),
                ))
            }
        };
        let provider: Arc<CryptoProvider> = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(ca_cert).map_err(tls_err("the cluster CA certificate"))?;
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| Error::TlsConfig(format!("client verifier: {e}")))?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(tls_err("server protocol versions"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(cert_chain.clone(), key.clone_key())
            .map_err(tls_err("the node certificate and key"))?;
        server.alpn_protocols = vec![VERBS_ALPN.to_vec()];
        server.send_tls13_tickets = 0;
        server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(tls_err("client protocol versions"))?
            .with_root_certificates(roots)
            .with_client_auth_cert(cert_chain, key)
            .map_err(tls_err("the node certificate and key"))?;
        client.alpn_protocols = vec![VERBS_ALPN.to_vec()];
        client.resumption = rustls::client::Resumption::disabled();
        let configs = Configs { server: Arc::new(server), client: Arc::new(client) };
        Ok(VerbsTls { configs: Arc::new(std::sync::RwLock::new(configs)), dc: dc.to_string(), name, names, ids })
    }

    /// Takes `new`'s certificate, key and CA for every connection this TLS (and each of its
    /// clones: the verbs server, the client, the RDMA bootstrap) makes from now on;
    /// connections already open go on with what they have (certificate rotation without a
    /// restart).
    ///
    /// # Errors
    /// [`Error::TlsConfig`] when `new` is for another node or DC: nothing changes.
    pub fn rotate(&self, new: &VerbsTls) -> Result<()> {
        if new.dc != self.dc || new.name != self.name || new.names != self.names {
            return Err(Error::TlsConfig(format!(
                "a rotation keeps the node: this TLS is {} of DC {}, the new one {} of DC {}",
                self.name, self.dc, new.name, new.dc
            )));
        }
        let (server, client) = new.current();
        let mut configs = self.configs.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *configs = Configs { server, client };
        Ok(())
    }

    /// The configurations in use now.
    fn current(&self) -> (Arc<ServerConfig>, Arc<ClientConfig>) {
        let c = self.configs.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        (c.server.clone(), c.client.clone())
    }

    /// [`VerbsTls::new`] for node `node` of `topology`: its DC's name and nodes from the
    /// topology.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] when `node` is not in `topology`; otherwise as
    /// [`VerbsTls::new`].
    pub fn for_node(
        cert_chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        ca_cert: CertificateDer<'static>,
        topology: &Topology,
        node: NodeId,
    ) -> Result<VerbsTls> {
        let me = topology.nodes.get(usize::from(node.0)).ok_or(Error::UnknownNode(node))?;
        let dc = &topology.dcs[usize::from(me.dc.0)];
        let nodes = dc.nodes.iter().map(|&n| (n, topology.nodes[usize::from(n.0)].name.clone()));
        VerbsTls::new(cert_chain, key, ca_cert, &dc.name, nodes)
    }

    /// The DC whose nodes this TLS accepts.
    pub fn dc(&self) -> &str {
        &self.dc
    }

    /// The own node's name (from its certificate).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of `node`, if it is a node of the DC.
    pub fn node_name(&self, node: NodeId) -> Option<&str> {
        self.names.get(&node).map(String::as_str)
    }

    /// How errors and logs name `node`: its name if it is a node of the DC, else its id
    /// (`node#N`).
    pub fn label(&self, node: NodeId) -> String {
        self.node_name(node).map_or_else(|| node.to_string(), str::to_string)
    }

    /// A server side connection for one accepted peer.
    pub(crate) fn server_connection(&self) -> Result<ServerConnection> {
        ServerConnection::new(self.current().0).map_err(tls_err("server connection"))
    }

    /// A client side connection to `peer`, checking its certificate against its node name.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] when `peer` is not a node of the DC.
    pub(crate) fn client_connection(&self, peer: NodeId) -> Result<ClientConnection> {
        let name = self.node_name(peer).ok_or(Error::UnknownNode(peer))?;
        let server_name =
            ServerName::try_from(name.to_string()).map_err(|e| Error::TlsConfig(format!("node name {name:?}: {e}")))?;
        ClientConnection::new(self.current().1, server_name).map_err(tls_err("client connection"))
    }

    /// Returns the node of this DC whose certificate the peer of `conn` (handshake done)
    /// presented, or why it is refused.
    pub(crate) fn authenticate(&self, conn: &Connection) -> std::result::Result<NodeId, String> {
        let cert =
            conn.peer_certificates().and_then(|c| c.first()).ok_or_else(|| "no certificate presented".to_string())?;
        match cert_identity(cert) {
            Some(CertIdentity::Node { dc, name }) if dc == self.dc => self
                .ids
                .get(&name)
                .copied()
                .ok_or_else(|| format!("node {name} is not a node of DC {dc} in this topology")),
            Some(id @ CertIdentity::Node { .. }) => Err(format!("{id} is not a node of DC {}", self.dc)),
            Some(id) => Err(format!("{id}: only nodes of DC {} may connect", self.dc)),
            None => Err("the certificate carries no redt node identity".to_string()),
        }
    }

    /// Checks that the server of `conn` (handshake done) is node `peer` of this DC.
    pub(crate) fn authenticate_server(&self, conn: &Connection, peer: NodeId) -> std::result::Result<(), String> {
        let got = self.authenticate(conn)?;
        if got != peer {
            let name = |n: NodeId| self.node_name(n).unwrap_or("?").to_string();
            return Err(format!("the server is {}, not {}", name(got), name(peer)));
        }
        Ok(())
    }
}

/// Where a handshake on a non-blocking socket stands after [`handshake_step`].
#[derive(Debug)]
pub(crate) enum HandshakeStep {
    /// Waiting for the peer (to send or to receive).
    Pending,
    /// The handshake is complete and every byte of it sent.
    Done,
    /// The handshake failed (closed, I/O error, TLS error); the text says why.
    Failed(String),
}

/// Sends what `conn` has to send on `sock` until the socket would block.
pub(crate) fn send_nonblocking(conn: &mut Connection, sock: &mut TcpStream) -> io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Advances the handshake of `conn` on the non-blocking socket `sock` as far as the bytes
/// available allow: sends what is pending, reads what has arrived, processes it.
pub(crate) fn handshake_step(conn: &mut Connection, sock: &mut TcpStream) -> HandshakeStep {
    if let Err(e) = send_nonblocking(conn, sock) {
        return HandshakeStep::Failed(format!("sending: {e}"));
    }
    while conn.is_handshaking() {
        match conn.read_tls(sock) {
            Ok(0) => return HandshakeStep::Failed("the peer closed the connection during the handshake".into()),
            Ok(_) => {
                if let Err(e) = conn.process_new_packets() {
                    // Best effort: tell the peer why (the alert is queued by rustls).
                    let _ = send_nonblocking(conn, sock);
                    return HandshakeStep::Failed(format!("TLS: {e}"));
                }
                if let Err(e) = send_nonblocking(conn, sock) {
                    return HandshakeStep::Failed(format!("sending: {e}"));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return HandshakeStep::Failed(format!("receiving: {e}")),
        }
    }
    if conn.is_handshaking() || conn.wants_write() {
        HandshakeStep::Pending
    } else {
        HandshakeStep::Done
    }
}

/// The remaining time to `deadline`, or a `TimedOut` error naming `what` once it passed.
fn left(deadline: Instant, what: &str) -> io::Result<std::time::Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{what}: deadline passed")));
    }
    Ok(left)
}

/// Maps a socket read timeout (`WouldBlock` on Unix) to `TimedOut`.
fn timed_out(e: io::Error, what: &str) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        io::Error::new(io::ErrorKind::TimedOut, format!("{what}: deadline passed"))
    } else {
        e
    }
}

/// A blocking TLS connection over a std `TcpStream`: plaintext in, TLS records out.
///
/// A read waits at most until the deadline set with [`TlsStream::set_deadline`] (no
/// deadline: the socket's own read timeout per read); writes use the socket's write
/// timeout. A read past the deadline fails with `TimedOut`.
pub(crate) struct TlsStream {
    conn: Connection,
    sock: TcpStream,
    deadline: Option<Instant>,
}

impl fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream")
            .field("peer", &self.sock.peer_addr().ok())
            .field("handshaking", &self.conn.is_handshaking())
            .finish_non_exhaustive()
    }
}

impl TlsStream {
    /// Completes the handshake of `conn` on the blocking socket `sock` by `deadline`.
    ///
    /// # Errors
    /// `TimedOut` past the deadline, `UnexpectedEof` when the peer closes, `InvalidData`
    /// for a TLS error (the alert is sent first, best effort), or the socket's error.
    pub(crate) fn handshake(conn: impl Into<Connection>, mut sock: TcpStream, deadline: Instant) -> io::Result<Self> {
        let mut conn = conn.into();
        let what = "TLS handshake";
        loop {
            while conn.wants_write() {
                sock.set_write_timeout(Some(left(deadline, what)?))?;
                conn.write_tls(&mut sock).map_err(|e| timed_out(e, what))?;
            }
            if !conn.is_handshaking() {
                break;
            }
            sock.set_read_timeout(Some(left(deadline, what)?))?;
            if conn.read_tls(&mut sock).map_err(|e| timed_out(e, what))? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake",
                ));
            }
            if let Err(e) = conn.process_new_packets() {
                let _ = conn.write_tls(&mut sock);
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")));
            }
        }
        Ok(TlsStream { conn, sock, deadline: None })
    }

    /// Wraps a connection whose handshake is complete (see [`handshake_step`]); `sock` is
    /// put back into blocking mode.
    pub(crate) fn handshaken(conn: Connection, sock: TcpStream) -> io::Result<Self> {
        sock.set_nonblocking(false)?;
        Ok(TlsStream { conn, sock, deadline: None })
    }

    /// The TLS connection (peer certificates, ALPN).
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The socket under the connection.
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Sets the deadline of later reads (`None`: the socket's read timeout per read).
    pub(crate) fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// Sends a close_notify (best effort) and shuts the socket down.
    pub(crate) fn close(&mut self) {
        self.conn.send_close_notify();
        let _ = self.write_pending();
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    fn write_pending(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            if let Some(deadline) = self.deadline {
                self.sock.set_read_timeout(Some(left(deadline, "waiting for a frame")?))?;
            }
            let n = self.conn.read_tls(&mut self.sock).map_err(|e| timed_out(e, "waiting for a frame"))?;
            if let Err(e) = self.conn.process_new_packets() {
                let _ = self.write_pending();
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")));
            }
            self.write_pending()?;
            if n == 0 {
                // The socket is at its end: the reader now returns 0 (close_notify seen) or
                // UnexpectedEof.
                return match self.conn.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection"))
                    }
                    other => other,
                };
            }
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.write_pending()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.conn.writer().flush()?;
        self.write_pending()?;
        self.sock.flush()
    }
}

#[cfg(test)]
#[path = "../tests/pki/mod.rs"]
pub(crate) mod test_pki;

#[cfg(test)]
pub(crate) mod tests {
    use super::test_pki::{Material, TestCa};
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    /// DC `dc1` of two nodes, 0 (`a1`) and 1 (`a2`).
    pub(crate) fn dc1() -> Vec<(NodeId, String)> {
        vec![(NodeId(0), "a1".to_string()), (NodeId(1), "a2".to_string())]
    }

    /// The TLS of a holder of `m` in DC `dc1`.
    pub(crate) fn tls(m: Material) -> Result<VerbsTls> {
        VerbsTls::new(m.chain, m.key, m.ca, "dc1", dc1())
    }

    #[test]
    fn own_certificate_must_be_a_node_of_the_dc() {
        let ca = TestCa::new("t");
        let ok = tls(ca.node("dc1", "a1")).expect("a node certificate of dc1");
        assert_eq!((ok.dc(), ok.name(), ok.node_name(NodeId(1))), ("dc1", "a1", Some("a2")));
        for (m, want) in [
            (ca.node("dc2", "a1"), "not a node of DC dc1"),
            (ca.node("dc1", "b9"), "not a node of DC dc1"),
            (ca.client("a1"), "client a1"),
            (ca.issue("a1", None), "redt certs init"),
        ] {
            let e = tls(m).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let m = ca.node("dc1", "a1");
        let e = VerbsTls::new(m.chain, m.key, m.ca, "dc1", [(NodeId(0), "not a name".to_string())]).unwrap_err();
        assert!(e.to_string().contains("DNS name"), "{e}");
    }

    /// Runs a handshake between a server with `server` and a client with `client` dialing
    /// node 0; returns what each side's authentication said.
    fn handshake(server: VerbsTls, client: VerbsTls) -> (std::result::Result<NodeId, String>, io::Result<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let dialer = std::thread::spawn(move || {
            let s = TcpStream::connect(addr)?;
            let conn = client.client_connection(NodeId(0)).expect("a client connection");
            let t = TlsStream::handshake(conn, s, Instant::now() + Duration::from_secs(5))?;
            client.authenticate_server(t.connection(), NodeId(0)).map_err(io::Error::other)
        });
        let (s, _) = listener.accept().unwrap();
        let conn = server.server_connection().unwrap();
        let served = TlsStream::handshake(conn, s, Instant::now() + Duration::from_secs(5))
            .map_err(|e| e.to_string())
            .and_then(|t| server.authenticate(t.connection()));
        (served, dialer.join().unwrap())
    }

    #[test]
    fn only_nodes_of_the_same_dc_authenticate() {
        let ca = TestCa::new("t");
        let server = || tls(ca.node("dc1", "a1")).unwrap();
        let (s, c) = handshake(server(), tls(ca.node("dc1", "a2")).unwrap());
        assert_eq!(s, Ok(NodeId(1)));
        c.expect("the client accepts the server");

        // A node of another DC with the same names: the handshake completes, the server
        // refuses it, and so does the client (the server is not of its DC).
        let m = ca.node("dc2", "a2");
        let other = VerbsTls::new(m.chain, m.key, m.ca, "dc2", dc1()).unwrap();
        let (s, c) = handshake(server(), other);
        assert!(s.unwrap_err().contains("not a node of DC dc1"));
        assert!(c.unwrap_err().to_string().contains("not a node of DC dc2"));

        // A node certificate of a foreign CA: the handshake fails on both sides.
        let foreign = TestCa::new("foreign");
        let m = foreign.node("dc1", "a2");
        let (s, c) = handshake(server(), VerbsTls::new(m.chain, m.key, m.ca, "dc1", dc1()).unwrap());
        assert!(s.is_err() && c.is_err(), "{s:?} {c:?}");
    }

    #[test]
    fn identities_are_read_from_the_uri_san() {
        let ca = TestCa::new("t");
        let id = |m: Material| cert_identity(&m.chain[0]);
        assert_eq!(id(ca.node("dc1", "a1")), Some(CertIdentity::Node { dc: "dc1".into(), name: "a1".into() }));
        assert_eq!(id(ca.client("c")), Some(CertIdentity::Client { name: "c".into() }));
        assert_eq!(id(ca.issue("a1", None)), None);
        assert_eq!(cert_identity(&CertificateDer::from(vec![1u8, 2, 3])), None);
    }
}

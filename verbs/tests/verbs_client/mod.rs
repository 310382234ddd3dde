//! A hand-driven client of a `TcpVerbsServer` (rustls directly, no `TcpVerbs`): reads the
//! greeting, does the TLS handshake with whatever certificate a test gives it (or none),
//! reads the admission, then lets the test write raw frames.

#![allow(dead_code)] // each test file uses part of it

use crate::pki::Material;
use redt_verbs::{VERBS_ALPN, WIRE_VERSION};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::{CertificateDer, ServerName};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A TLS connection to a verbs server.
pub type Stream = StreamOwned<ClientConnection, TcpStream>;

/// A client configuration trusting `ca`, presenting `me` (none: no client certificate).
pub fn config(ca: &CertificateDer<'static>, me: Option<Material>) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).expect("a CA certificate");
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots);
    let mut cfg = match me {
        Some(m) => builder.with_client_auth_cert(m.chain, m.key).expect("a client certificate"),
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![VERBS_ALPN.to_vec()];
    Arc::new(cfg)
}

/// Reads a status message: `Ok(())` when admitted, an error carrying the reason when
/// refused (`refused: …`).
pub fn read_status(r: &mut impl Read) -> io::Result<()> {
    let mut head = [0u8; 2];
    r.read_exact(&mut head)?;
    assert_eq!(head[0], WIRE_VERSION, "a status of this wire version");
    match head[1] {
        0 => Ok(()),
        1 => {
            let mut len = [0u8; 2];
            r.read_exact(&mut len)?;
            let mut why = vec![0u8; u16::from_le_bytes(len) as usize];
            r.read_exact(&mut why)?;
            Err(io::Error::other(format!("refused: {}", String::from_utf8_lossy(&why))))
        }
        other => panic!("unknown status {other}"),
    }
}

/// A plain TCP connection to `addr` with a 10 s read timeout, its greeting not read yet.
pub fn tcp(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the server");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("set a read timeout");
    s
}

/// Connects to the server at `addr` as `cfg` says, expecting it to be node `server_name`:
/// greeting, handshake, admission. Any refusal or failure is the error.
pub fn connect(addr: SocketAddr, cfg: Arc<ClientConfig>, server_name: &str) -> io::Result<Stream> {
    let mut s = tcp(addr);
    read_status(&mut s)?;
    let name = ServerName::try_from(server_name.to_string()).expect("a DNS name");
    let conn = ClientConnection::new(cfg, name).map_err(io::Error::other)?;
    let mut stream = StreamOwned::new(conn, s);
    read_status(&mut stream)?;
    Ok(stream)
}

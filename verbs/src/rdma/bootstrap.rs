//! The TCP bootstrap of the RDMA backend: a fixed-size little-endian hello per queue pair
//! (QP number, LID, GID, PSN, region address, length and rkey), exchanged over TLS on std
//! TCP; the node with the smaller id dials, the other accepts.
//!
//! The hello hands out the region's address and rkey, which let its holder READ and WRITE
//! the region with one-sided verbs, so it goes only to an authenticated node of the own DC
//! over TLS: both sides present their node certificates (TLS 1.3, cluster CA,
//! [`VerbsTls`]), each checks that the other is a node of its DC, and the acceptor takes a
//! hello only from the node the certificate names. An accepted connection must finish its
//! handshake within [`RdmaConfig::handshake_timeout`](super::RdmaConfig::handshake_timeout)
//! (a silent one cannot hold the bootstrap for longer).

use super::backend;
use crate::error::{Error, Result};
use crate::tls::{TlsStream, VerbsTls};
use redt_proto::NodeId;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const HELLO_MAGIC: [u8; 4] = *b"RDTQ";
const HELLO_VERSION: u16 = 1;
const HELLO_LEN: usize = 64;

/// What one node tells another about the QP it created for it and about its region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hello {
    pub(super) from: NodeId,
    pub(super) to: NodeId,
    pub(super) lid: u16,
    pub(super) qpn: u32,
    pub(super) psn: u32,
    pub(super) rkey: u32,
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) gid: [u8; 16],
    pub(super) mtu: u8,
}

impl Hello {
    /// Layout: magic[4] version:u16 from:u16 to:u16 lid:u16 qpn:u32 psn:u32 rkey:u32
    /// addr:u64 len:u64 gid[16] mtu:u8, zero-padded to 64 bytes; little-endian.
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC);
        b[4..6].copy_from_slice(&HELLO_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.from.0.to_le_bytes());
        b[8..10].copy_from_slice(&self.to.0.to_le_bytes());
        b[10..12].copy_from_slice(&self.lid.to_le_bytes());
        b[12..16].copy_from_slice(&self.qpn.to_le_bytes());
        b[16..20].copy_from_slice(&self.psn.to_le_bytes());
        b[20..24].copy_from_slice(&self.rkey.to_le_bytes());
        b[24..32].copy_from_slice(&self.addr.to_le_bytes());
        b[32..40].copy_from_slice(&self.len.to_le_bytes());
        b[40..56].copy_from_slice(&self.gid);
        b[56] = self.mtu;
        b
    }

    fn decode(b: &[u8; HELLO_LEN]) -> std::result::Result<Hello, String> {
        if b[0..4] != HELLO_MAGIC {
            return Err(format!("not a redt RDMA hello (magic {:02x?})", &b[0..4]));
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let version = u16_at(4);
        if version != HELLO_VERSION {
            return Err(format!("hello version {version}, this build speaks {HELLO_VERSION}"));
        }
        Ok(Hello {
            from: NodeId(u16_at(6)),
            to: NodeId(u16_at(8)),
            lid: u16_at(10),
            qpn: u32_at(12),
            psn: u32_at(16),
            rkey: u32_at(20),
            addr: u64_at(24),
            len: u64_at(32),
            gid: b[40..56].try_into().expect("16 bytes"),
            mtu: b[56],
        })
    }
}

fn read_hello(s: &mut TlsStream) -> std::result::Result<Hello, String> {
    let mut b = [0u8; HELLO_LEN];
    s.read_exact(&mut b).map_err(|e| format!("reading hello: {e}"))?;
    Hello::decode(&b)
}

pub(super) fn io_err(what: String) -> impl FnOnce(io::Error) -> Error {
    move |e| backend(format!("{what}: {e}"))
}

/// How long an exchange waits for the peers and how long one accepted connection may take
/// for its TLS handshake.
#[derive(Clone, Copy, Debug)]
pub(super) struct Deadlines {
    /// The whole exchange.
    pub(super) total: Duration,
    /// One accepted connection's handshake.
    pub(super) handshake: Duration,
}

/// Exchanges hellos with every peer over TLS: the node with the smaller id dials, the other
/// accepts. Returns, per peer, its hello and the open stream (kept for the ready barrier).
pub(super) fn exchange(
    local: NodeId,
    peers: &[(NodeId, SocketAddr)],
    listen: SocketAddr,
    mine: &HashMap<NodeId, Hello>,
    deadlines: Deadlines,
    tls: &VerbsTls,
) -> Result<Vec<(NodeId, Hello, TlsStream)>> {
    if peers.is_empty() {
        return Ok(Vec::new()); // a one-node DC: nothing to exchange, no port to bind
    }
    let deadline = Instant::now() + deadlines.total;
    let listener = TcpListener::bind(listen).map_err(io_err(format!("RDMA bootstrap: binding {listen}")))?;
    listener.set_nonblocking(true).map_err(io_err("RDMA bootstrap: listener".into()))?;
    let lower: HashSet<NodeId> = peers.iter().map(|p| p.0).filter(|&n| n < local).collect();
    let accept_mine = mine.clone();
    let accept_tls = tls.clone();
    let handshake = deadlines.handshake;
    let acceptor = std::thread::Builder::new()
        .name(format!("rdma-bootstrap-{}", local.0))
        .spawn(move || accept_peers(local, listener, lower, &accept_mine, deadline, handshake, &accept_tls))
        .map_err(io_err("RDMA bootstrap: spawning the acceptor".into()))?;

    let mut out = Vec::new();
    let mut dial_err = None;
    for &(peer, addr) in peers.iter().filter(|p| p.0 > local) {
        match dial_peer(local, peer, addr, &mine[&peer], deadline, tls) {
            Ok((hello, s)) => out.push((peer, hello, s)),
            Err(e) => {
                dial_err = Some(e);
                break;
            }
        }
    }
    let accepted = acceptor.join().map_err(|_| backend("RDMA bootstrap: acceptor thread panicked"))?;
    if let Some(e) = dial_err {
        return Err(e);
    }
    out.extend(accepted?);
    Ok(out)
}

fn accept_peers(
    local: NodeId,
    listener: TcpListener,
    mut expected: HashSet<NodeId>,
    mine: &HashMap<NodeId, Hello>,
    deadline: Instant,
    handshake: Duration,
    tls: &VerbsTls,
) -> Result<Vec<(NodeId, Hello, TlsStream)>> {
    let mut out = Vec::new();
    while !expected.is_empty() {
        match listener.accept() {
            Ok((s, from_addr)) => match accept_one(local, s, &expected, deadline, handshake, tls) {
                Ok((from, hello, mut s)) => {
                    let from_name = tls.label(from);
                    s.write_all(&mine[&from].encode())
                        .and_then(|()| s.flush())
                        .map_err(io_err(format!("RDMA bootstrap: answering {from_name}")))?;
                    expected.remove(&from);
                    out.push((from, hello, s));
                }
                Err(why) => tracing::warn!(%from_addr, "RDMA bootstrap: refused a connection: {why}"),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let mut missing: Vec<_> = expected.iter().map(|&n| tls.label(n)).collect();
                    missing.sort();
                    return Err(backend(format!(
                        "RDMA bootstrap: {} did not connect in time ({})",
                        missing.join(", "),
                        tls.label(local)
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(backend(format!("RDMA bootstrap: accept: {e}"))),
        }
    }
    Ok(out)
}

/// Authenticates one accepted connection (handshake within `handshake`, a node of this DC
/// still expected) and reads its hello, which must come from that node to `local`.
fn accept_one(
    local: NodeId,
    s: TcpStream,
    expected: &HashSet<NodeId>,
    deadline: Instant,
    handshake: Duration,
    tls: &VerbsTls,
) -> std::result::Result<(NodeId, Hello, TlsStream), String> {
    s.set_nonblocking(false).and_then(|_| s.set_nodelay(true)).map_err(|e| e.to_string())?;
    let conn = tls.server_connection().map_err(|e| e.to_string())?;
    let handshake_by = (Instant::now() + handshake).min(deadline.max(Instant::now() + Duration::from_millis(100)));
    let mut s = TlsStream::handshake(conn, s, handshake_by).map_err(|e| format!("TLS handshake: {e}"))?;
    let from = tls.authenticate(s.connection())?;
    let (from_name, local_name) = (tls.label(from), tls.label(local));
    if !expected.contains(&from) {
        return Err(format!("{from_name} is not a peer still expected to dial {local_name}"));
    }
    s.set_deadline(Some(deadline.max(Instant::now() + Duration::from_millis(100))));
    let hello = read_hello(&mut s)?;
    if hello.from != from || hello.to != local {
        return Err(format!("{from_name} sent a hello from {} to {}", tls.label(hello.from), tls.label(hello.to)));
    }
    Ok((from, hello, s))
}

fn dial_peer(
    local: NodeId,
    peer: NodeId,
    addr: SocketAddr,
    mine: &Hello,
    deadline: Instant,
    tls: &VerbsTls,
) -> Result<(Hello, TlsStream)> {
    let (peer_name, local_name) = (tls.label(peer), tls.label(local));
    let mut backoff = Duration::from_millis(50);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(backend(format!("RDMA bootstrap: {peer_name} at {addr} did not answer {local_name} in time")));
        }
        match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(1))) {
            Ok(s) => {
                let by = deadline.max(Instant::now() + Duration::from_millis(100));
                s.set_nodelay(true).map_err(io_err(format!("RDMA bootstrap: connecting to {peer_name} at {addr}")))?;
                let conn = tls.client_connection(peer)?;
                let mut s = TlsStream::handshake(conn, s, by)
                    .map_err(io_err(format!("RDMA bootstrap: TLS handshake with {peer_name} at {addr}")))?;
                tls.authenticate_server(s.connection(), peer)
                    .map_err(|why| backend(format!("RDMA bootstrap: {addr} is not {peer_name}: {why}")))?;
                s.set_deadline(Some(by));
                s.write_all(&mine.encode())
                    .and_then(|()| s.flush())
                    .map_err(io_err(format!("RDMA bootstrap: sending hello to {peer_name} at {addr}")))?;
                let hello =
                    read_hello(&mut s).map_err(|e| backend(format!("RDMA bootstrap: {peer_name} at {addr}: {e}")))?;
                if hello.from != peer || hello.to != local {
                    return Err(backend(format!(
                        "RDMA bootstrap: {addr} answered as {} (to {}), expected {peer_name} (to {local_name}): check the peer list",
                        tls.label(hello.from),
                        tls.label(hello.to)
                    )));
                }
                return Ok((hello, s));
            }
            Err(_) => {
                std::thread::sleep(backoff.min(left));
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::test_pki::TestCa;
    use crate::tls::tests::{dc1, tls};
    use ibverbs_sys as ffi;

    fn hello(from: u16, to: u16) -> Hello {
        Hello {
            from: NodeId(from),
            to: NodeId(to),
            lid: 1,
            qpn: 2,
            psn: 3,
            rkey: 0xdead_beef,
            addr: 0x7f00_0000_1000,
            len: 4096,
            gid: [0; 16],
            mtu: 5,
        }
    }

    fn free_port() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
    }

    /// A node of another DC dials node 1 first and claims to be node 0: it gets no hello
    /// (no rkey, no address), and node 1 still completes its exchange with the real node 0.
    #[test]
    fn hellos_go_only_to_authenticated_nodes_of_the_dc() {
        let ca = TestCa::new("t");
        let (tls0, tls1) = (tls(ca.node("dc1", "a1")).unwrap(), tls(ca.node("dc1", "a2")).unwrap());
        let (addr0, addr1) = (free_port(), free_port());
        let deadlines = Deadlines { total: Duration::from_secs(20), handshake: Duration::from_secs(2) };
        let acceptor = std::thread::spawn(move || {
            let mine = HashMap::from([(NodeId(0), hello(1, 0))]);
            exchange(NodeId(1), &[(NodeId(0), addr0)], addr1, &mine, deadlines, &tls1)
        });

        let m = ca.node("dc2", "x");
        let mut nodes = dc1();
        nodes.push((NodeId(9), "x".to_string()));
        let intruder = VerbsTls::new(m.chain, m.key, m.ca, "dc2", nodes).unwrap();
        let sock = loop {
            if let Ok(s) = TcpStream::connect(addr1) {
                break s;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let conn = intruder.client_connection(NodeId(1)).unwrap();
        let mut s = TlsStream::handshake(conn, sock, Instant::now() + Duration::from_secs(5)).unwrap();
        s.set_deadline(Some(Instant::now() + Duration::from_secs(5)));
        s.write_all(&hello(0, 1).encode()).and_then(|()| s.flush()).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert!(got.is_empty(), "the intruder got {} bytes", got.len());

        let mine = HashMap::from([(NodeId(1), hello(0, 1))]);
        let dialed = exchange(NodeId(0), &[(NodeId(1), addr1)], addr0, &mine, deadlines, &tls0).unwrap();
        let accepted = acceptor.join().unwrap().unwrap();
        assert_eq!(dialed.iter().map(|(n, h, _)| (*n, *h)).collect::<Vec<_>>(), vec![(NodeId(1), hello(1, 0))]);
        assert_eq!(accepted.iter().map(|(n, h, _)| (*n, *h)).collect::<Vec<_>>(), vec![(NodeId(0), hello(0, 1))]);
    }

    /// A dialing node refuses an acceptor that is not the peer node it dialed (here node 0's
    /// own certificate answering at node 1's address), before sending its hello.
    #[test]
    fn a_dialer_refuses_the_wrong_acceptor() {
        let ca = TestCa::new("t");
        let tls0 = tls(ca.node("dc1", "a1")).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let impostor_tls = tls0.clone();
        let impostor = std::thread::spawn(move || {
            let (sock, _) = listener.accept().unwrap();
            let conn = impostor_tls.server_connection().unwrap();
            let mut got = Vec::new();
            if let Ok(mut s) = TlsStream::handshake(conn, sock, Instant::now() + Duration::from_secs(5)) {
                s.set_deadline(Some(Instant::now() + Duration::from_secs(5)));
                let _ = s.read_to_end(&mut got);
            }
            got
        });
        let deadlines = Deadlines { total: Duration::from_secs(5), handshake: Duration::from_secs(1) };
        let mine = HashMap::from([(NodeId(1), hello(0, 1))]);
        let err = exchange(NodeId(0), &[(NodeId(1), addr)], free_port(), &mine, deadlines, &tls0).unwrap_err();
        assert!(err.to_string().contains("TLS handshake with node#1"), "{err}");
        assert!(impostor.join().unwrap().is_empty(), "the impostor got the hello");
    }

    /// A TLS client configuration for the bootstrap trusting `ca`, presenting `me` (none: no
    /// certificate); unlike a [`VerbsTls`] it can hold any certificate, a client's too.
    fn raw_client(
        ca: &rustls_pki_types::CertificateDer<'static>,
        me: Option<crate::tls::test_pki::Material>,
    ) -> std::sync::Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.clone()).unwrap();
        let builder =
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_root_certificates(roots);
        let mut cfg = match me {
            Some(m) => builder.with_client_auth_cert(m.chain, m.key).unwrap(),
            None => builder.with_no_client_auth(),
        };
        cfg.alpn_protocols = vec![crate::VERBS_ALPN.to_vec()];
        std::sync::Arc::new(cfg)
    }

    /// Outsiders dial node 1 before node 0 does, each sending node 0's hello (the
    /// attacks of `tests/attacks.rs` on the bootstrap, which a real node runs only with an
    /// RDMA device): a plaintext client, TLS without a certificate, a foreign CA's certificate
    /// of node 0 and the cluster's client certificate. None gets a hello (no address, no rkey),
    /// and node 1 then completes its exchange with the real node 0.
    #[test]
    fn outsiders_get_no_hello_and_the_dc_still_exchanges() {
        let ca = TestCa::new("t");
        let (tls0, tls1) = (tls(ca.node("dc1", "a1")).unwrap(), tls(ca.node("dc1", "a2")).unwrap());
        let (addr0, addr1) = (free_port(), free_port());
        let deadlines = Deadlines { total: Duration::from_secs(20), handshake: Duration::from_secs(2) };
        let acceptor = std::thread::spawn(move || {
            let mine = HashMap::from([(NodeId(0), hello(1, 0))]);
            exchange(NodeId(1), &[(NodeId(0), addr0)], addr1, &mine, deadlines, &tls1)
        });
        let dial = || loop {
            if let Ok(s) = TcpStream::connect(addr1) {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                break s;
            }
            std::thread::sleep(Duration::from_millis(10));
        };

        // Plaintext: the hello is taken for a TLS ClientHello; at most an alert comes back.
        let mut s = dial();
        s.write_all(&hello(0, 1).encode()).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert!(!got.windows(4).any(|w| w == HELLO_MAGIC), "a plaintext client got a hello: {got:?}");

        let real_ca = ca.node("dc1", "a1").ca;
        let mut foreign = TestCa::new("t").node("dc1", "a1");
        foreign.ca = real_ca.clone();
        for (who, cfg) in [
            ("no certificate", raw_client(&real_ca, None)),
            ("a foreign CA's certificate of node 0", raw_client(&real_ca, Some(foreign))),
            ("a client certificate", raw_client(&real_ca, Some(ca.client("redt-client")))),
        ] {
            let conn = rustls::ClientConnection::new(cfg, "a2".try_into().unwrap()).unwrap();
            let mut got = Vec::new();
            if let Ok(mut s) = TlsStream::handshake(conn, dial(), Instant::now() + Duration::from_secs(5)) {
                s.set_deadline(Some(Instant::now() + Duration::from_secs(5)));
                let _ = s.write_all(&hello(0, 1).encode()).and_then(|()| s.flush());
                let _ = s.read_to_end(&mut got);
            }
            assert!(got.is_empty(), "{who}: got {} bytes", got.len());
        }

        let mine = HashMap::from([(NodeId(1), hello(0, 1))]);
        let dialed = exchange(NodeId(0), &[(NodeId(1), addr1)], addr0, &mine, deadlines, &tls0).unwrap();
        let accepted = acceptor.join().unwrap().unwrap();
        assert_eq!(dialed.iter().map(|(n, h, _)| (*n, *h)).collect::<Vec<_>>(), vec![(NodeId(1), hello(1, 0))]);
        assert_eq!(accepted.iter().map(|(n, h, _)| (*n, *h)).collect::<Vec<_>>(), vec![(NodeId(0), hello(0, 1))]);
    }

    #[test]
    fn hello_round_trips_and_rejects_garbage() {
        let h = Hello {
            from: NodeId(3),
            to: NodeId(7),
            lid: 0x1234,
            qpn: 0x00ab_cdef,
            psn: 0x0012_3456,
            rkey: 0xdead_beef,
            addr: 0x7f00_1234_5678_9000,
            len: 1 << 30,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            mtu: ffi::IBV_MTU_4096 as u8,
        };
        let b = h.encode();
        assert_eq!(&b[0..4], b"RDTQ");
        assert_eq!(Hello::decode(&b), Ok(h));
        let mut bad = b;
        bad[0] = b'X';
        assert!(Hello::decode(&bad).is_err());
        let mut newer = b;
        newer[4] = 9;
        assert!(Hello::decode(&newer).unwrap_err().contains("version"));
    }
}

//! Who may use a node's TCP verbs server: only a node certificate of the same DC
//! from the cluster CA. Everyone else — no certificate, a foreign CA, another DC's node, a
//! client certificate, a plaintext client — is refused and reads and writes nothing, while
//! the DC's own nodes keep being served. Connections over the caps are refused with a reason
//! and counted; silent connections are closed at their deadlines.

mod pki;
mod verbs_client;

use pki::{Material, TestCa};
use redt_proto::{NodeId, Offset};
use redt_verbs::WIRE_VERSION;
use redt_verbs::{Error, LocalVerbs, ServerCounts, ServerLimits, TcpVerbs, TcpVerbsServer, Verbs, VerbsTls};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);
/// Where B's region holds its secret.
const SECRET_AT: Offset = Offset(64);
const SECRET: &[u8; 8] = b"s3cr3t!!";

fn ca() -> &'static TestCa {
    static CA: OnceLock<TestCa> = OnceLock::new();
    CA.get_or_init(|| TestCa::new("cluster"))
}

fn names() -> Vec<(NodeId, String)> {
    vec![(A, "a".to_string()), (B, "b".to_string())]
}

fn tls_of(m: Material, dc: &str, nodes: Vec<(NodeId, String)>) -> VerbsTls {
    VerbsTls::new(m.chain, m.key, m.ca, dc, nodes).expect("a node certificate of its DC")
}

/// The TLS of node A or B of `dc1`.
fn tls(n: NodeId) -> VerbsTls {
    tls_of(ca().node("dc1", if n == A { "a" } else { "b" }), "dc1", names())
}

/// Node B's server over a DC whose B region holds [`SECRET`], with `limits`.
struct Served {
    local: Arc<LocalVerbs>,
    server: TcpVerbsServer,
}

impl Served {
    fn new(limits: ServerLimits) -> Served {
        let local = Arc::new(LocalVerbs::in_process([A, B], 4096));
        local.write(B, SECRET_AT, SECRET).unwrap();
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = TcpVerbsServer::spawn_with_limits(addr, B, local.clone(), tls(B), limits).expect("server binds");
        Served { local, server }
    }

    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Node A's verbs, reaching B through the server.
    fn node_a(&self) -> TcpVerbs {
        TcpVerbs::new(A, self.local.clone(), HashMap::from([(B, self.addr())]), tls(A))
            .with_io_timeout(Duration::from_secs(5))
    }

    /// B's region is as it was: the secret in place, nothing else written.
    fn untouched(&self) -> bool {
        let r = self.local.region(B).unwrap();
        let mut all = vec![0u8; r.len() as usize];
        r.read(0, &mut all);
        let mut want = vec![0u8; all.len()];
        want[SECRET_AT.0 as usize..][..8].copy_from_slice(SECRET);
        all == want
    }

    fn counts(&self) -> ServerCounts {
        self.server.counts()
    }
}

/// A request frame (prefix included) of this wire version to B: one READ of the secret
/// and one WRITE over it.
fn steal_and_scribble() -> Vec<u8> {
    let mut b = vec![WIRE_VERSION];
    b.extend_from_slice(&B.0.to_le_bytes());
    b.extend_from_slice(&2u32.to_le_bytes());
    b.push(1); // READ
    b.extend_from_slice(&SECRET_AT.0.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.push(2); // WRITE
    b.extend_from_slice(&SECRET_AT.0.to_le_bytes());
    b.extend_from_slice(&5u32.to_le_bytes());
    b.extend_from_slice(b"owned");
    let mut f = (b.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(&b);
    f
}

/// Everything a connection gives back until it closes (or 10 s pass).
fn drain(s: &mut impl Read) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------

/// A node of the same DC reads and writes; its connection is authenticated once and reused.
#[test]
fn a_node_of_the_same_dc_reads_and_writes() {
    let s = Served::new(ServerLimits::default());
    let a = s.node_a();
    let mut buf = [0u8; 8];
    a.read(B, SECRET_AT, &mut buf).expect("node A reads B");
    assert_eq!(&buf, SECRET);
    a.write(B, Offset(128), b"from a").expect("node A writes B");
    assert_eq!(a.fetch_and_add(B, Offset(256), 3).unwrap(), 0);
    let mut back = [0u8; 6];
    s.local.read(B, Offset(128), &mut back).unwrap();
    assert_eq!(&back, b"from a");
    let c = s.counts();
    assert_eq!((c.accepted, c.authenticated), (1, 1), "{c:?}");
    assert_eq!(c.handshake_failed + c.refused_identity + c.refused_peer_cap + c.refused_total_cap, 0, "{c:?}");
}

/// A client without a certificate fails its handshake: it reads nothing, writes nothing.
#[test]
fn a_client_without_a_certificate_is_refused() {
    let s = Served::new(ServerLimits::default());
    let cfg = verbs_client::config(&ca().node("dc1", "a").ca, None);
    let mut conn = match verbs_client::connect(s.addr(), cfg, "b") {
        Err(e) => {
            assert!(!e.to_string().contains("refused: "), "refused by the handshake, not after: {e}");
            None
        }
        Ok(conn) => Some(conn),
    };
    // Whatever the client library let through, a request gets nothing back.
    if let Some(c) = conn.as_mut() {
        let _ = c.write_all(&steal_and_scribble());
        assert!(!contains(&drain(c), SECRET));
    }
    eventually("the failed handshake is counted", || s.counts().handshake_failed == 1);
    assert_eq!(s.counts().authenticated, 0);
    assert!(s.untouched());
}

/// A node certificate of another cluster's CA fails the handshake.
#[test]
fn a_certificate_of_a_foreign_ca_is_refused() {
    let s = Served::new(ServerLimits::default());
    let foreign = TestCa::new("foreign").node("dc1", "a");
    // Trusting the real CA (so the client accepts B), presenting the foreign certificate.
    let cfg = verbs_client::config(&ca().node("dc1", "a").ca, Some(foreign));
    assert!(verbs_client::connect(s.addr(), cfg, "b").is_err());
    eventually("the failed handshake is counted", || s.counts().handshake_failed == 1);
    assert_eq!(s.counts().authenticated, 0);
    assert!(s.untouched());
}

/// A node of another DC (same CA, valid certificate) completes the handshake and is then
/// refused with the reason; the same through `TcpVerbs`, which also refuses the server.
#[test]
fn a_node_of_another_dc_is_refused() {
    let s = Served::new(ServerLimits::default());
    let other = ca().node("dc2", "x");
    let cfg = verbs_client::config(&other.ca.clone(), Some(other));
    let e = verbs_client::connect(s.addr(), cfg, "b").expect_err("refused after the handshake");
    assert!(e.to_string().contains("node x of DC dc2 is not a node of DC dc1"), "{e}");
    assert_eq!(s.counts().refused_identity, 1);

    // Node x of dc2 pointing its verbs at B: refused (here by its own check of the server).
    let mut nodes = names();
    nodes.push((NodeId(2), "x".to_string()));
    let x = TcpVerbs::new(
        NodeId(2),
        s.local.clone(),
        HashMap::from([(B, s.addr())]),
        tls_of(ca().node("dc2", "x"), "dc2", nodes),
    );
    let mut buf = [0u8; 8];
    match x.read(B, SECRET_AT, &mut buf) {
        Err(Error::Backend(m)) => assert!(m.contains("not a node of DC dc2"), "{m}"),
        other => panic!("refused with a backend error, not {other:?}"),
    }
    assert_eq!(buf, [0u8; 8]);
    assert_eq!(s.counts().authenticated, 0);
    assert!(s.untouched());
}

/// A client-role certificate and a certificate with no identity, both from the cluster CA,
/// are refused after the handshake; a request sent anyway is never answered.
#[test]
fn a_client_certificate_is_refused() {
    let s = Served::new(ServerLimits::default());
    for (m, why) in [
        (ca().client("redt-client"), "client redt-client: only nodes of DC dc1 may connect"),
        (ca().issue("a", None), "no redt node identity"),
    ] {
        let ca_cert = m.ca.clone();
        let e = verbs_client::connect(s.addr(), verbs_client::config(&ca_cert, Some(m)), "b").unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
    }
    // Ignoring the refusal: a request on the refused connection gets nothing.
    let m = ca().client("redt-client");
    let ca_cert = m.ca.clone();
    let mut raw = verbs_client::tcp(s.addr());
    verbs_client::read_status(&mut raw).unwrap();
    let conn = rustls::ClientConnection::new(
        verbs_client::config(&ca_cert, Some(m)),
        rustls_pki_types::ServerName::try_from("b").unwrap(),
    )
    .unwrap();
    let mut tls = rustls::StreamOwned::new(conn, raw);
    let _ = tls.write_all(&steal_and_scribble());
    let got = drain(&mut tls);
    assert!(!contains(&got, SECRET), "the secret was sent to a client certificate");
    assert_eq!(s.counts().refused_identity, 3);
    assert_eq!(s.counts().authenticated, 0);
    assert!(s.untouched());
}

/// A client of the old plaintext protocol (or anyone without TLS) gets no answer to its
/// request: the server takes the bytes for a TLS ClientHello and closes.
#[test]
fn a_plaintext_request_is_refused() {
    let s = Served::new(ServerLimits::default());
    let mut raw = verbs_client::tcp(s.addr());
    verbs_client::read_status(&mut raw).unwrap();
    raw.write_all(&steal_and_scribble()).unwrap();
    assert!(!contains(&drain(&mut raw), SECRET));
    eventually("the failed handshake is counted", || s.counts().handshake_failed == 1);
    assert!(s.untouched());
}

// ---------------------------------------------------------------------------------------
// Caps and deadlines
// ---------------------------------------------------------------------------------------

/// Polls `done` every 10 ms for up to 10 s.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < Duration::from_secs(10), "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Long deadlines, so silent connections stay open for the cap tests.
fn patient(max_connections: usize, max_connections_per_peer: usize) -> ServerLimits {
    ServerLimits {
        max_connections,
        max_connections_per_peer,
        handshake_timeout: Duration::from_secs(60),
        first_frame_timeout: Duration::from_secs(60),
        ..ServerLimits::default()
    }
}

/// Over the per-peer cap, a connection is refused before its handshake with a reason naming
/// the config key, and counted; node A's open connection keeps working throughout, and a
/// freed slot is usable again.
#[test]
fn connections_over_the_per_peer_cap_are_refused_while_a_peer_keeps_working() {
    let s = Served::new(patient(100, 3));
    let a = s.node_a();
    assert_eq!(a.fetch_and_add(B, Offset(256), 1).unwrap(), 0); // A's pooled connection: 1 of 3
    let silent: Vec<_> = (0..2).map(|_| verbs_client::tcp(s.addr())).collect(); // 3 of 3
    eventually("three connections open", || s.server.open_connections() == 3);
    for _ in 0..2 {
        let e = verbs_client::read_status(&mut verbs_client::tcp(s.addr())).unwrap_err();
        assert!(e.to_string().contains("verbs.max_connections_per_peer"), "{e}");
    }
    assert_eq!(s.counts().refused_peer_cap, 2);
    // The existing peer keeps being served on its connection.
    for i in 1..=3 {
        assert_eq!(a.fetch_and_add(B, Offset(256), 1).unwrap(), i);
    }
    drop(silent);
    eventually("the silent connections' slots are free", || s.server.open_connections() == 1);
    let fresh = s.node_a();
    assert_eq!(fresh.fetch_and_add(B, Offset(256), 1).unwrap(), 4);
}

/// The per-peer cap is per IP address: silent connections filling it from one address do not
/// keep a node that connects from its own address out.
#[test]
fn a_full_peer_cap_does_not_lock_out_another_address() {
    let s = Served::new(patient(100, 2));
    let silent: Vec<_> = (0..2).map(|_| verbs_client::tcp(s.addr())).collect(); // 127.0.0.1: 2 of 2
    eventually("two connections open", || s.server.open_connections() == 2);
    let e = verbs_client::read_status(&mut verbs_client::tcp(s.addr())).unwrap_err();
    assert!(e.to_string().contains("from 127.0.0.1"), "{e}");
    let a = s.node_a().with_source_ip("127.0.0.2".parse().unwrap());
    assert_eq!(a.fetch_and_add(B, Offset(256), 1).unwrap(), 0, "node A, from 127.0.0.2, is served");
    assert_eq!(s.counts().refused_peer_cap, 1);
    drop(silent);
}

/// Over the total cap, a connection is refused the same way; `TcpVerbs` reports the
/// server's reason.
#[test]
fn connections_over_the_total_cap_are_refused_with_the_reason() {
    let s = Served::new(patient(2, 100));
    let a = s.node_a();
    assert_eq!(a.fetch_and_add(B, Offset(256), 1).unwrap(), 0); // 1 of 2
    let silent = verbs_client::tcp(s.addr()); // 2 of 2
    eventually("two connections open", || s.server.open_connections() == 2);
    let late = s.node_a();
    match late.fetch_and_add(B, Offset(256), 1) {
        Err(Error::Backend(m)) => {
            assert!(m.contains("refused the connection") && m.contains("verbs.max_connections"), "{m}")
        }
        other => panic!("a backend error naming the cap, not {other:?}"),
    }
    assert_eq!(s.counts().refused_total_cap, 1);
    assert_eq!(a.fetch_and_add(B, Offset(256), 1).unwrap(), 1, "the open connection still works");
    drop(silent);
    eventually("a freed slot serves the late client", || late.fetch_and_add(B, Offset(256), 1).is_ok());
}

/// A connection that sends nothing is closed at its handshake deadline; an authenticated
/// one that sends no request is closed at its first-frame deadline. Both are counted, and
/// both leave the region untouched.
#[test]
fn a_connection_that_sends_nothing_is_closed_at_its_deadline() {
    let limits = ServerLimits {
        handshake_timeout: Duration::from_millis(200),
        first_frame_timeout: Duration::from_millis(200),
        ..ServerLimits::default()
    };
    let s = Served::new(limits);

    let mut silent = verbs_client::tcp(s.addr());
    verbs_client::read_status(&mut silent).unwrap();
    let t0 = Instant::now();
    assert!(drain(&mut silent).is_empty(), "nothing but the greeting is sent");
    assert!(t0.elapsed() < Duration::from_secs(5), "closed by the server, not by the test's timeout");
    assert_eq!(s.counts().handshake_timed_out, 1);

    let m = ca().node("dc1", "a");
    let ca_cert = m.ca.clone();
    let mut quiet = verbs_client::connect(s.addr(), verbs_client::config(&ca_cert, Some(m)), "b").unwrap();
    let t0 = Instant::now();
    assert!(drain(&mut quiet).is_empty());
    assert!(t0.elapsed() < Duration::from_secs(5), "closed by the server, not by the test's timeout");
    eventually("the first-frame timeout is counted", || s.counts().first_frame_timed_out == 1);
    eventually("both slots are free", || s.server.open_connections() == 0);
    assert!(s.untouched());
    // Node A is still served.
    assert_eq!(s.node_a().fetch_and_add(B, Offset(256), 1).unwrap(), 0);
}

/// Many silent connections do not hold up the handshake of a real node: handshakes run side
/// by side in the accept loop.
#[test]
fn silent_connections_do_not_delay_a_node() {
    let s = Served::new(patient(100, 100));
    let silent: Vec<_> = (0..20).map(|_| verbs_client::tcp(s.addr())).collect();
    eventually("twenty silent connections open", || s.server.open_connections() == 20);
    let a = s.node_a().with_io_timeout(Duration::from_secs(2));
    assert_eq!(a.fetch_and_add(B, Offset(256), 1).unwrap(), 0);
    drop(silent);
}

// ---------------------------------------------------------------------------------------
// Rotation
// ---------------------------------------------------------------------------------------

/// Certificates rotate without a restart: B's server and A's client each take a
/// new certificate and CA with `VerbsTls::rotate`, and the next connection uses them. Here
/// the cluster moves to a new CA: before B's rotation, A (already on the new CA) is refused
/// by the handshake; after it, A reads B. A rotation to another node's TLS is refused.
#[test]
fn a_rotated_certificate_serves_the_next_connection() {
    let s = Served::new(ServerLimits::default());
    let new_ca = TestCa::new("rotated");
    let mut buf = [0u8; 8];
    // The server holds a clone of this TLS: rotating B's own handle rotates the server.
    let b_tls = tls(B);
    let server = TcpVerbsServer::spawn_with_limits(
        "127.0.0.1:0".parse().unwrap(),
        B,
        s.local.clone(),
        b_tls.clone(),
        ServerLimits::default(),
    )
    .expect("server binds");
    let a_new = TcpVerbs::new(
        A,
        s.local.clone(),
        HashMap::from([(B, server.local_addr())]),
        tls_of(new_ca.node("dc1", "a"), "dc1", names()),
    )
    .with_io_timeout(Duration::from_secs(5));
    assert!(a_new.read(B, SECRET_AT, &mut buf).is_err(), "B still presents and trusts the old CA");
    b_tls.rotate(&tls_of(new_ca.node("dc1", "b"), "dc1", names())).expect("B rotates to its new certificate");
    a_new.read(B, SECRET_AT, &mut buf).expect("after the rotation, the next connection is served");
    assert_eq!(&buf, SECRET);

    let wrong = b_tls.rotate(&tls(A)).expect_err("a rotation to node A's TLS");
    assert!(wrong.to_string().contains("a rotation keeps the node"), "{wrong}");
}

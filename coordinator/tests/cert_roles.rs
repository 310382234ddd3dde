//! Certificates: roles (admin requests need an operator certificate, what nodes
//! send each other a node's, and a node's Raft messages speak for that node only), validity
//! periods, and rotation without a restart. Real QUIC on loopback.

mod common;
use common::local_fast;
use redt_coordinator::{error_code, CoordinatorOptions, EmbeddedCluster};
use redt_proto::wire::{AckReply, Body, Envelope, ErrorReply, NetemSetRequest, RaftMsg};
use redt_proto::{CertIdentity, DcId, NodeId};
use redt_transport::tls::quic_client_config;
use redt_transport::x509::summary;
use redt_transport::{
    check_identity, handler_fn, init_cluster_certs_with, load_identity, Caller, ClusterCa, IdentityWatch, SocketSpec,
    Transport, TransportConfig, TransportError, Validity, CLIENT_IDENTITY_NAME,
};
use rustls_pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

fn rtt_request(rtt_ms: i64) -> NetemSetRequest {
    NetemSetRequest {
        from: "dc1".into(),
        to: "dc2".into(),
        symmetric: true,
        rtt_us: rtt_ms * 1_000,
        jitter_us: -1,
        loss_ppm: -1,
        rate_bits_per_s: -1,
        partitioned: None,
    }
}

/// A probe with the client certificate cannot change the WAN (it could partition
/// it); the refusal names the role, is counted, and the operator certificate's request is
/// served. Status stays open to clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netem_set_needs_the_operator_role() {
    let cluster =
        EmbeddedCluster::start(local_fast("roles-netem", 7970), CoordinatorOptions::default()).await.expect("starts");
    let rtt = |c: &EmbeddedCluster| c.wan.lock().unwrap().link(DcId(0), DcId(1)).unwrap().rtt;
    let before = rtt(&cluster);
    let client = cluster.client(Duration::from_secs(5)).expect("client");
    let failed = client.netem_set(rtt_request(900)).await;
    assert_eq!(failed.len(), cluster.topology.nodes.len(), "every node refuses: {failed:?}");
    for (node, why) in &failed {
        assert!(why.contains("needs the operator role") && why.contains("client role"), "{node}: {why}");
    }
    assert_eq!(rtt(&cluster), before, "nothing changed");
    for n in &cluster.topology.nodes {
        let s = client.status(n.id, false).await.expect("a client may ask for status");
        assert_eq!(s.refused_role, 1, "{} counted its refusal", n.name);
    }

    let operator = cluster.operator(Duration::from_secs(5)).expect("operator");
    assert_eq!(operator.netem_set(rtt_request(30)).await, Vec::<(String, String)>::new());
    assert_eq!(rtt(&cluster), Duration::from_millis(30));
    cluster.shutdown();
}

/// A status that counts locks scans a node's whole index on its executor thread: a client
/// certificate's is refused naming the operator role, and counted; its plain status is
/// served, and so is the operator's count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counting_locks_needs_the_operator_role() {
    let cluster =
        EmbeddedCluster::start(local_fast("roles-locks", 7990), CoordinatorOptions::default()).await.expect("starts");
    let client = cluster.client(Duration::from_secs(5)).expect("client");
    let operator = cluster.operator(Duration::from_secs(5)).expect("operator");
    for n in &cluster.topology.nodes {
        let refused = client.status(n.id, true).await.expect_err("a client may not count locks");
        let why = refused.to_string();
        assert!(why.contains("needs the operator role") && why.contains("client role"), "{}: {why}", n.name);
        let plain = client.status(n.id, false).await.expect("a client may ask for plain status");
        assert_eq!((plain.locks_held, plain.refused_role), (None, 1), "{}: counted, nothing scanned", n.name);
        let counted = operator.status(n.id, true).await.expect("an operator may count locks");
        assert_eq!(counted.locks_held, Some(0), "{}", n.name);
    }
    cluster.shutdown();
}

/// A node identity naming no node of the topology, or a client certificate under a node's
/// name, is no node: the role comes from the identity URI, not the DNS name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_comes_from_the_identity_uri() {
    let topo = Arc::new(local_fast("roles-uri", 7975));
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    init_cluster_certs_with(&topo, &certs, None, None).unwrap();
    let ca = ClusterCa::load(&topo.name, &certs, &dir.path().join("certs-ca/ca.key")).unwrap();
    let (node, addr) = serve_caller(&topo, &certs).await;
    let valid = Validity::starting_now(Duration::from_secs(3600));
    let n1 = &topo.nodes[1];
    let cases = [
        (CertIdentity::Client { name: n1.name.clone() }, "client"),
        (CertIdentity::Node { dc: "dc9".into(), name: n1.name.clone() }, "client"),
        (CertIdentity::Operator { name: "alice".into() }, "operator"),
        (CertIdentity::Node { dc: "dc2".into(), name: n1.name.clone() }, "node#1"),
    ];
    for (id, expected) in cases {
        let ip = matches!(id, CertIdentity::Node { .. }).then(|| n1.listen.ip());
        let identity = ca.issue_identity(&id, ip, valid).unwrap();
        let t = Transport::client(TransportConfig::default(), &identity, SocketSpec::Bind(any())).unwrap();
        let reply = t.call_addr(addr, &topo.nodes[0].name, ping()).await.unwrap();
        assert_eq!(message(&reply), expected, "{id}");
    }
    node.close();
}

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn ping() -> Envelope {
    Envelope { epoch: 1, from: 0, body: Some(Body::Ack(AckReply {})) }
}

fn message(reply: &Envelope) -> String {
    match &reply.body {
        Some(Body::Error(e)) => e.message.clone(),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Binds node 0 of `topo` with its identity from `certs` on a free port and serves an echo
/// of the caller (`Caller`'s Display). Returns it and its address.
async fn serve_caller(topo: &Arc<redt_proto::Topology>, certs: &std::path::Path) -> (Transport, SocketAddr) {
    let id = load_identity(certs, &topo.nodes[0].name).unwrap();
    let node = Transport::bind(TransportConfig::default(), topo, &id, SocketSpec::Bind(any())).unwrap();
    node.serve(Arc::new(handler_fn(|from: Caller, _msg: Envelope| async move {
        Envelope {
            epoch: 1,
            from: 0,
            body: Some(Body::Error(ErrorReply { code: 0, message: from.to_string(), current_epoch: 0 })),
        }
    })))
    .unwrap();
    let addr = node.local_addr().unwrap();
    (node, addr)
}

/// The certificate a fresh QUIC connection to `addr` (server name `name`) is shown.
async fn served_certificate(
    client: &redt_transport::NodeIdentity,
    addr: SocketAddr,
    name: &str,
) -> CertificateDer<'static> {
    let mut endpoint = quinn::Endpoint::client(any()).unwrap();
    endpoint.set_default_client_config(quic_client_config(client).unwrap());
    let conn = endpoint.connect(addr, name).unwrap().await.expect("the handshake succeeds");
    let chain = conn.peer_identity().unwrap().downcast::<Vec<CertificateDer<'static>>>().unwrap();
    conn.close(0u32.into(), b"done");
    chain[0].clone()
}

/// Rotation without a restart: after `redt certs rotate`'s work (a new node certificate in the
/// files) the node's watch reloads it; a new connection is shown the new certificate (another
/// serial, the new validity) and succeeds, and a connection set up before goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_serves_new_connections_and_old_ones_go_on() {
    let topo = Arc::new(local_fast("roles-rotate", 7980));
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    init_cluster_certs_with(&topo, &certs, None, None).unwrap();
    let n0 = &topo.nodes[0];
    let (node, addr) = serve_caller(&topo, &certs).await;
    let mut watch = IdentityWatch::new(&certs, &n0.name);
    let client = load_identity(&certs, CLIENT_IDENTITY_NAME).unwrap();
    let old = summary(&served_certificate(&client, addr, &n0.name).await).unwrap();
    assert_eq!(old.serial, summary(&load_identity(&certs, &n0.name).unwrap().cert_chain[0]).unwrap().serial);
    // A connection set up before the rotation.
    let before = Transport::client(TransportConfig::default(), &client, SocketSpec::Bind(any())).unwrap();
    assert_eq!(message(&before.call_addr(addr, &n0.name, ping()).await.unwrap()), "client");
    assert!(watch.poll(&node, SystemTime::now()).is_none(), "nothing changed yet");

    let ca = ClusterCa::load(&topo.name, &certs, &dir.path().join("certs-ca/ca.key")).unwrap();
    let dc = topo.dcs[0].name.clone();
    let id = CertIdentity::Node { dc, name: n0.name.clone() };
    let week = Validity::starting_now(Duration::from_secs(7 * 86_400));
    ca.write_identity(&certs, &id, Some(n0.listen.ip()), week).unwrap();
    let reloaded = watch.poll(&node, SystemTime::now()).expect("the files changed").expect("reloads");
    assert_ne!(reloaded.serial, old.serial);

    let new = summary(&served_certificate(&client, addr, &n0.name).await).unwrap();
    assert_eq!(new, reloaded, "a new connection is shown the new certificate");
    assert!(new.not_after < old.not_after, "with the new validity ({:?} vs {:?})", new.not_after, old.not_after);
    let within = |a: SystemTime, b: SystemTime| a.duration_since(b).or_else(|e| Ok::<_, ()>(e.duration())).unwrap();
    assert!(within(new.not_after, week.not_after) <= Duration::from_secs(1));
    assert_eq!(
        message(&before.call_addr(addr, &n0.name, ping()).await.unwrap()),
        "client",
        "the old connection goes on"
    );
    let after = Transport::client(TransportConfig::default(), &client, SocketSpec::Bind(any())).unwrap();
    assert_eq!(message(&after.call_addr(addr, &n0.name, ping()).await.unwrap()), "client");
    node.close();
}

/// An expired certificate is refused with a clear error: by the check a node and the CLI run
/// on their own certificate, by a node's watch (which keeps the current one), and by a node a
/// client presents it to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_is_refused_with_a_clear_error() {
    let topo = Arc::new(local_fast("roles-expired", 7985));
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    init_cluster_certs_with(&topo, &certs, None, None).unwrap();
    let ca = ClusterCa::load(&topo.name, &certs, &dir.path().join("certs-ca/ca.key")).unwrap();
    let n0 = &topo.nodes[0];
    let (node, addr) = serve_caller(&topo, &certs).await;
    let day = Duration::from_secs(86_400);
    let past = Validity { not_before: SystemTime::now() - 3 * day, not_after: SystemTime::now() - day };

    let expired = ca.issue_identity(&CertIdentity::Client { name: "late".into() }, None, past).unwrap();
    let err = check_identity(&expired, SystemTime::now()).unwrap_err().to_string();
    assert!(err.contains("late") && err.contains("expired"), "{err}");

    let t = Transport::client(TransportConfig::default(), &expired, SocketSpec::Bind(any())).unwrap();
    let err = t.call_addr(addr, &n0.name, ping()).await.unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "{err}");
    assert!(err.to_string().contains("certificate expired"), "{err}");

    let mut watch = IdentityWatch::new(&certs, &n0.name);
    let kept = summary(&load_identity(&certs, &n0.name).unwrap().cert_chain[0]).unwrap();
    let id = CertIdentity::Node { dc: topo.dcs[0].name.clone(), name: n0.name.clone() };
    ca.write_identity(&certs, &id, Some(n0.listen.ip()), past).unwrap();
    let err = watch.poll(&node, SystemTime::now()).expect("the files changed").unwrap_err().to_string();
    assert!(err.contains("expired"), "{err}");
    let client = load_identity(&certs, CLIENT_IDENTITY_NAME).unwrap();
    let shown = summary(&served_certificate(&client, addr, &n0.name).await).unwrap();
    assert_eq!(shown, kept, "the node kept its valid certificate");
    assert!(watch.poll(&node, SystemTime::now()).is_none(), "the same files are not tried again");
    node.close();
}

/// The WARN lines logged in this test process, from its first call on (a global subscriber:
/// a node logs from the runtime's worker threads).
fn warn_lines() -> Arc<Mutex<Vec<u8>>> {
    #[derive(Clone)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    static LINES: std::sync::OnceLock<Arc<Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    LINES
        .get_or_init(|| {
            let lines = Arc::new(Mutex::new(Vec::new()));
            let sink = Sink(lines.clone());
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_ansi(false)
                .with_writer(move || sink.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
            lines
        })
        .clone()
}

/// A request of every kind only nodes send each other.
fn node_only_bodies() -> Vec<(&'static str, Body)> {
    vec![
        ("execute", Body::Execute(Default::default())),
        ("record", Body::Record(Default::default())),
        ("decide", Body::Decide(Default::default())),
        ("accept", Body::Accept(Default::default())),
        ("prepare", Body::Prepare(Default::default())),
        ("log-decision", Body::LogDecision(Default::default())),
        ("recovery-prepare", Body::RecoveryPrepare(Default::default())),
        ("reservations", Body::Reservations(Default::default())),
        ("snapshot-read", Body::SnapshotRead(Default::default())),
        ("txn-lookup", Body::TxnLookup(Default::default())),
        ("heartbeat", Body::Heartbeat(Default::default())),
        ("raft", Body::Raft(RaftMsg { data: raft_message(NodeId(1), NodeId(0)) })),
    ]
}

/// An encoded Raft heartbeat response from `from` to `to` at term 0 (which a follower
/// ignores and a leader takes as a sign of life).
fn raft_message(from: NodeId, to: NodeId) -> Vec<u8> {
    // Field 1, `msg_type`: 9, MsgHeartbeatResponse.
    let mut m = redt_membership::decode_message(&[0x08, 9]).expect("a Raft message");
    m.from = redt_membership::raft_id(from);
    m.to = redt_membership::raft_id(to);
    redt_membership::encode_message(&m)
}

fn error_of(reply: &Envelope) -> (u32, String) {
    match &reply.body {
        Some(Body::Error(e)) => (e.code, e.message.clone()),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Every kind of request only nodes send each other, from a client's or an operator's
/// certificate, is answered `FORBIDDEN` naming the node role and the caller's, and counted;
/// a flood of them logs at most one WARN line a second, each saying how many it held back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_only_requests_from_a_client_or_operator_are_forbidden_counted_and_logged_sparingly() {
    let lines = warn_lines();
    let cluster = EmbeddedCluster::start(local_fast("roles-node-only", 7995), CoordinatorOptions::default())
        .await
        .expect("starts");
    let target = cluster.topology.nodes[0].clone();
    let status = cluster.client(Duration::from_secs(5)).expect("client");
    let certs = cluster.certs();
    let callers = [(&certs.client, "client"), (&certs.operator, "operator")];
    let began = Instant::now();
    let mut sent = 0;
    for (identity, role) in callers {
        let t = Transport::client(TransportConfig::default(), identity, SocketSpec::Bind(any())).unwrap();
        for (kind, body) in node_only_bodies() {
            let msg = Envelope { epoch: 1, from: 1, body: Some(body) };
            let (code, why) = error_of(&t.call_addr(target.listen, &target.name, msg).await.unwrap());
            assert_eq!(code, error_code::FORBIDDEN, "{role} {kind}: {why}");
            assert!(why.contains(&format!("`{kind}` is accepted from nodes only")), "{role} {kind}: {why}");
            assert!(why.contains(&format!("has the {role} role")), "{role} {kind}: {why}");
            sent += 1;
        }
    }
    let s = status.status(target.id, false).await.expect("status");
    assert_eq!((s.refused_role, s.raft_wrong_sender), (sent, 0), "each refusal counted");

    // A flood: counted one by one, logged at most once per second.
    let t = Transport::client(TransportConfig::default(), &certs.client, SocketSpec::Bind(any())).unwrap();
    let flood = 200;
    for _ in 0..flood {
        let msg = Envelope { epoch: 1, from: 1, body: Some(Body::Heartbeat(Default::default())) };
        let (code, _) = error_of(&t.call_addr(target.listen, &target.name, msg).await.unwrap());
        assert_eq!(code, error_code::FORBIDDEN);
    }
    let took = began.elapsed();
    let s = status.status(target.id, false).await.expect("status");
    assert_eq!(s.refused_role, sent + flood);
    let logged = String::from_utf8_lossy(&lines.lock().unwrap_or_else(PoisonError::into_inner)).into_owned();
    let ours: Vec<&str> =
        logged.lines().filter(|l| l.contains("WARN") && l.contains("it needs the node role")).collect();
    // The first refusal is logged; then at most one line a second.
    let bound = took.as_secs() as usize + 2;
    assert!(
        !ours.is_empty() && ours.len() <= bound,
        "{} lines in {took:?} (at most {bound}):\n{}",
        ours.len(),
        ours.join("\n")
    );
    assert!(ours[0].contains("refused `execute`") && ours[0].contains("unlogged=0"), "{}", ours[0]);
    assert!(ours.iter().all(|l| l.contains("unlogged=")), "{}", ours.join("\n"));
    cluster.shutdown();
}

/// A Raft message whose own sender is not the node whose certificate sent it is dropped,
/// answered `FORBIDDEN` and counted (Raft would believe its `from`); one naming its real
/// sender is delivered, and an undecodable one is malformed, not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raft_message_naming_another_sender_is_dropped_and_counted() {
    let options = CoordinatorOptions { failover: true, ..Default::default() };
    let cluster = EmbeddedCluster::start(local_fast("roles-raft", 7960), options).await.expect("starts");
    let topo = cluster.topology.clone();
    let target = &topo.nodes[0];
    let as_n1 =
        Transport::client(TransportConfig::default(), &cluster.certs().nodes[1], SocketSpec::Bind(any())).unwrap();
    let raft = |data: Vec<u8>| Envelope { epoch: 1, from: 1, body: Some(Body::Raft(RaftMsg { data })) };
    let mut forged = 0;
    for claimed in [NodeId(2), NodeId(0), NodeId(40)] {
        let reply = as_n1.call_addr(target.listen, &target.name, raft(raft_message(claimed, NodeId(0)))).await.unwrap();
        let (code, why) = error_of(&reply);
        assert_eq!(code, error_code::FORBIDDEN, "{why}");
        assert!(why.contains(&format!("a Raft message from {} names", topo.nodes[1].name)), "{why}");
        forged += 1;
    }
    let mut no_sender = redt_membership::decode_message(&[0x08, 9]).unwrap();
    no_sender.to = redt_membership::raft_id(NodeId(0));
    let reply =
        as_n1.call_addr(target.listen, &target.name, raft(redt_membership::encode_message(&no_sender))).await.unwrap();
    let (code, why) = error_of(&reply);
    assert_eq!(code, error_code::FORBIDDEN, "raft id 0 is no node: {why}");
    assert!(why.contains("names raft id 0 as its sender"), "{why}");
    forged += 1;

    let reply = as_n1.call_addr(target.listen, &target.name, raft(vec![0xff, 0xff, 0xff])).await.unwrap();
    assert_eq!(error_of(&reply).0, error_code::MALFORMED, "undecodable");
    let reply = as_n1.call_addr(target.listen, &target.name, raft(raft_message(NodeId(1), NodeId(0)))).await.unwrap();
    assert!(matches!(reply.body, Some(Body::Ack(_))), "its own message is delivered: {:?}", reply.body);

    let client = cluster.client(Duration::from_secs(5)).expect("client");
    let s = client.status(target.id, false).await.expect("status");
    assert_eq!((s.raft_wrong_sender, s.refused_role), (forged, 0));
    for n in &topo.nodes[1..] {
        assert_eq!(client.status(n.id, false).await.expect("status").raft_wrong_sender, 0, "{}", n.name);
    }
    cluster.shutdown();
}

//! Issue 14, certificates: roles (admin requests need an operator certificate), validity
//! periods, and rotation without a restart. Real QUIC on loopback.

mod common;
use common::local_fast;
use redt_coordinator::transport::tls::quic_client_config;
use redt_coordinator::transport::x509::summary;
use redt_coordinator::transport::{
    check_identity, handler_fn, init_cluster_certs_with, load_identity, Caller, ClusterCa, IdentityWatch, SocketSpec,
    Transport, TransportConfig, TransportError, Validity, CLIENT_IDENTITY_NAME,
};
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster};
use redt_proto::wire::{AckReply, Body, Envelope, ErrorReply, NetemSetRequest};
use redt_proto::{CertIdentity, DcId};
use rustls_pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

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

/// A probe with the client certificate cannot change the WAN (issue 14: it could partition
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
    client: &redt_coordinator::transport::NodeIdentity,
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

//! QUIC transport between nodes (docs/design.md §4): mutual TLS from a cluster CA, length-prefixed
//! prost frames, malformed frames refused per stream, per-call deadlines. Real QUIC on
//! loopback (127.0.0.1, port 0).

mod common;

use redt_proto::wire::{AckReply, Body, Envelope, ErrorReply};
use redt_proto::{NodeId, Topology};
use redt_transport::frame::encode_frame;
use redt_transport::tls::quic_client_config;
use redt_transport::{
    handler_fn, init_cluster_certs, load_identity, Caller, ClusterCerts, FrameError, Handler, NodeIdentity, SocketSpec,
    StreamCode, Transport, TransportConfig, TransportError, CLIENT_IDENTITY_NAME, DEFAULT_MAX_FRAME_BYTES,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const LOOPBACK_ANY_PORT: &str = "127.0.0.1:0";

fn topology(n: u16) -> Arc<Topology> {
    common::one_node_per_dc("transport-test", n)
}

fn bind_addr() -> SocketSpec {
    SocketSpec::Bind(LOOPBACK_ANY_PORT.parse().unwrap())
}

/// Binds one transport per node with `identities[i]`, then tells every transport every
/// node's real address.
fn bind_all(topology: &Arc<Topology>, identities: &[NodeIdentity], cfg: &TransportConfig) -> Vec<Transport> {
    let nodes: Vec<Transport> = topology
        .nodes
        .iter()
        .map(|n| {
            let id = identities[usize::from(n.id.0)].clone();
            Transport::bind(cfg.clone(), topology, &id, bind_addr()).unwrap()
        })
        .collect();
    for t in &nodes {
        for (i, peer) in nodes.iter().enumerate() {
            t.set_peer_addr(NodeId(i as u16), peer.local_addr().unwrap()).unwrap();
        }
    }
    nodes
}

/// Answers every request with the request's epoch, `from = me`, and the caller in an
/// `ErrorReply` message (`node#<id>` or `client`).
fn echo(me: NodeId) -> Arc<dyn Handler> {
    Arc::new(handler_fn(move |from: Caller, msg: Envelope| async move {
        Envelope {
            epoch: msg.epoch,
            from: u32::from(me.0),
            body: Some(Body::Error(ErrorReply { code: 0, message: from.to_string(), current_epoch: 0 })),
        }
    }))
}

fn ping(from: u16, epoch: u32) -> Envelope {
    Envelope { epoch, from: u32::from(from), body: Some(Body::Ack(AckReply {})) }
}

fn caller_of(reply: &Envelope) -> &str {
    match &reply.body {
        Some(Body::Error(e)) => &e.message,
        other => panic!("unexpected reply body {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_of_one_cluster_exchange_rpcs() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let nodes = bind_all(&topo, &certs.nodes, &TransportConfig::default());
    nodes[0].serve(echo(NodeId(0))).unwrap();
    nodes[1].serve(echo(NodeId(1))).unwrap();

    let reply = nodes[1].call(NodeId(0), ping(1, 7)).await.unwrap();
    assert_eq!((reply.epoch, reply.from), (7, 0));
    assert_eq!(caller_of(&reply), "node#1", "the server identifies the caller by its certificate");

    let reply = nodes[0].call(NodeId(1), ping(0, 8)).await.unwrap();
    assert_eq!((reply.epoch, reply.from, caller_of(&reply)), (8, 1, "node#0"));

    // A server counts an RPC once its response is written, which may be just after the
    // caller has read it.
    common::eventually("both servers counted their RPC and its bytes", || {
        let (c0, c1) = (nodes[0].counters().snapshot(), nodes[1].counters().snapshot());
        c0.rpcs_served == 1
            && c1.rpcs_served == 1
            && c1.bytes_sent == c0.bytes_received
            && c0.bytes_sent == c1.bytes_received
    })
    .await;
    let (c0, c1) = (nodes[0].counters().snapshot(), nodes[1].counters().snapshot());
    assert_eq!((c0.rpcs_sent, c0.rpcs_served, c1.rpcs_sent, c1.rpcs_served), (1, 1, 1, 1));
    assert_eq!(c1.bytes_sent, c0.bytes_received);
    assert_eq!(c0.bytes_sent, c1.bytes_received);
    assert_eq!((c0.malformed_frames, c0.oversized_frames, c0.refused_handshakes), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_rpcs_are_all_answered() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let nodes = bind_all(&topo, &certs.nodes, &TransportConfig::default());
    nodes[0].serve(echo(NodeId(0))).unwrap();

    let mut calls = tokio::task::JoinSet::new();
    for i in 0..200u32 {
        let client = nodes[1].clone();
        calls.spawn(async move { (i, client.call(NodeId(0), ping(1, i)).await) });
    }
    let mut answered = [false; 200];
    while let Some(done) = calls.join_next().await {
        let (i, reply) = done.unwrap();
        let reply = reply.unwrap_or_else(|e| panic!("call {i} failed: {e}"));
        assert_eq!(reply.epoch, i, "each call gets its own answer");
        answered[i as usize] = true;
    }
    assert!(answered.iter().all(|&a| a));
    common::eventually("the server counted its RPCs", || nodes[0].counters().snapshot().rpcs_served >= 200).await;
    assert_eq!(nodes[0].counters().snapshot().rpcs_served, 200);
    assert_eq!(nodes[1].counters().snapshot().rpcs_sent, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_stay_within_the_limit_on_a_custom_socket() {
    use quinn::Runtime;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let server = Transport::bind(TransportConfig::default(), &topo, &certs.nodes[0], bind_addr()).unwrap();
    // The caller runs on a socket handed in as `SocketSpec::Custom` (as the netem wrapper is).
    let socket = quinn::TokioRuntime.wrap_udp_socket(std::net::UdpSocket::bind(LOOPBACK_ANY_PORT).unwrap()).unwrap();
    let cfg = TransportConfig { max_in_flight: 4, ..TransportConfig::default() };
    let caller = Transport::bind(cfg, &topo, &certs.nodes[1], SocketSpec::Custom(socket)).unwrap();
    caller.set_peer_addr(NodeId(0), server.local_addr().unwrap()).unwrap();

    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (n, p) = (now.clone(), peak.clone());
    server
        .serve(Arc::new(handler_fn(move |_: Caller, msg: Envelope| {
            let (n, p) = (n.clone(), p.clone());
            async move {
                p.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(2)).await;
                n.fetch_sub(1, Ordering::SeqCst);
                msg
            }
        })))
        .unwrap();

    let mut calls = tokio::task::JoinSet::new();
    for i in 0..50u32 {
        let caller = caller.clone();
        calls.spawn(async move { caller.call(NodeId(0), ping(1, i)).await.map(|r| r.epoch == i) });
    }
    while let Some(done) = calls.join_next().await {
        assert!(done.unwrap().unwrap(), "each call gets its own answer");
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=4).contains(&peak), "at most max_in_flight = 4 requests in the handler at once, saw {peak}");
    common::eventually("the server counted its RPCs", || server.counters().snapshot().rpcs_served >= 50).await;
    assert_eq!(server.counters().snapshot().rpcs_served, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_from_a_foreign_ca_are_refused() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let nodes = bind_all(&topo, &certs.nodes, &TransportConfig::default());
    nodes[0].serve(echo(NodeId(0))).unwrap();
    let addr0 = nodes[0].local_addr().unwrap();
    let foreign = ClusterCerts::generate(&topo).unwrap();

    // A peer of another cluster: it does not trust node 0, node 0 does not trust it.
    let stranger = Transport::client(TransportConfig::default(), &foreign.nodes[1], bind_addr()).unwrap();
    let err = stranger.call_addr(addr0, "dc1-n1", ping(1, 1)).await.unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "stranger: {err}");

    // An impostor: a foreign certificate for node 1's name that trusts our CA. The server
    // refuses its certificate.
    let impostor_id = NodeIdentity { ca_cert: certs.ca.cert_der(), ..foreign.nodes[1].clone() };
    let impostor = Transport::client(TransportConfig::default(), &impostor_id, bind_addr()).unwrap();
    let err = impostor.call_addr(addr0, "dc1-n1", ping(1, 2)).await.unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "impostor: {err}");

    let counters = nodes[0].counters();
    common::eventually("both handshakes counted as refused", || counters.snapshot().refused_handshakes >= 2).await;
    assert_eq!(counters.snapshot().rpcs_served, 0, "no request of theirs reached the handler");

    // The legit peer is still served.
    let reply = nodes[1].call(NodeId(0), ping(1, 3)).await.unwrap();
    assert_eq!((reply.epoch, caller_of(&reply)), (3, "node#1"));
}

/// Writes `bytes` on a new stream of `conn`, finishes, and returns what the server did.
async fn raw_request(conn: &quinn::Connection, bytes: &[u8]) -> Result<Vec<u8>, quinn::ReadToEndError> {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    // The server may stop the stream before everything is written; the read reports it.
    let _ = send.write_all(bytes).await;
    let _ = send.finish();
    recv.read_to_end(1 << 20).await
}

fn reset_code(result: Result<Vec<u8>, quinn::ReadToEndError>) -> Option<StreamCode> {
    match result {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => StreamCode::from_code(code.into_inner()),
        other => panic!("expected a stream reset, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_are_refused_and_the_node_keeps_serving() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let nodes = bind_all(&topo, &certs.nodes, &TransportConfig::default());
    nodes[0].serve(echo(NodeId(0))).unwrap();
    let addr0 = nodes[0].local_addr().unwrap();

    // A raw QUIC connection with a legit certificate.
    let endpoint = quinn::Endpoint::client(LOOPBACK_ANY_PORT.parse().unwrap()).unwrap();
    let conn = endpoint.connect_with(quic_client_config(&certs.client).unwrap(), addr0, "dc1-n1").unwrap();
    let conn = conn.await.unwrap();

    // A body that does not decode (field 31 with the invalid wire type 7).
    let mut undecodable = 8u32.to_le_bytes().to_vec();
    undecodable.extend_from_slice(&[0xff; 8]);
    assert_eq!(reset_code(raw_request(&conn, &undecodable).await), Some(StreamCode::Malformed));

    // A length prefix far over the limit.
    let mut huge = u32::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(b"tiny");
    assert_eq!(reset_code(raw_request(&conn, &huge).await), Some(StreamCode::Oversized));

    // Plain garbage: its first 4 bytes read as a length of 542 MB.
    assert_eq!(reset_code(raw_request(&conn, b"GET / HTTP/1.1\r\n\r\n").await), Some(StreamCode::Oversized));

    // A truncated frame: 100 bytes announced, 10 sent, then the stream ends.
    let mut truncated = 100u32.to_le_bytes().to_vec();
    truncated.extend_from_slice(&[0; 10]);
    assert_eq!(reset_code(raw_request(&conn, &truncated).await), Some(StreamCode::Malformed));

    let counters = nodes[0].counters().snapshot();
    assert_eq!((counters.malformed_frames, counters.oversized_frames), (2, 2));
    assert_eq!(counters.rpcs_served, 0);

    // The same connection still serves a well-formed frame...
    let frame = encode_frame(&ping(9, 42), DEFAULT_MAX_FRAME_BYTES).unwrap();
    let reply = raw_request(&conn, &frame).await.unwrap();
    assert_eq!(u32::from_le_bytes(reply[..4].try_into().unwrap()) as usize, reply.len() - 4);
    let reply = <Envelope as prost::Message>::decode(&reply[4..]).unwrap();
    assert_eq!((reply.epoch, caller_of(&reply)), (42, "client"));

    // ...and the node still serves other peers.
    let reply = nodes[1].call(NodeId(0), ping(1, 5)).await.unwrap();
    assert_eq!(reply.epoch, 5);
    common::eventually("the server counted its RPCs", || nodes[0].counters().snapshot().rpcs_served >= 2).await;
    assert_eq!(nodes[0].counters().snapshot().rpcs_served, 2);
    endpoint.close(0u32.into(), b"done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_size_limit_is_not_sent() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let cfg = TransportConfig { max_frame_bytes: 64, ..TransportConfig::default() };
    let nodes = bind_all(&topo, &certs.nodes, &cfg);
    nodes[0].serve(echo(NodeId(0))).unwrap();
    let big = Envelope {
        epoch: 1,
        from: 1,
        body: Some(Body::Error(ErrorReply { code: 0, message: "x".repeat(100), current_epoch: 0 })),
    };
    let err = nodes[1].call(NodeId(0), big).await.unwrap_err();
    assert!(matches!(err, TransportError::Frame(FrameError::Oversized { max: 64, .. })), "{err}");
    assert_eq!(nodes[1].counters().snapshot().rpcs_sent, 0);
    nodes[1].call(NodeId(0), ping(1, 2)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_written_to_a_directory_load_back_and_work() {
    let topo = topology(2);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    init_cluster_certs(&topo, &dir).unwrap();
    for f in ["ca.pem", "dc1-n1.pem", "dc1-n1.key", "dc2-n1.pem", "dc2-n1.key", "redt-client.pem", "redt-operator.pem"]
    {
        assert!(dir.join(f).is_file(), "{f} written");
    }
    // The CA key is beside the directory the nodes read, not in it.
    assert!(!dir.join("ca.key").exists(), "no CA key among the node keys");
    assert!(tmp.path().join("certs-ca/ca.key").is_file(), "the CA key is in certs-ca/");
    let dir = dir.as_path();
    let ids: Vec<NodeIdentity> = topo.nodes.iter().map(|n| load_identity(dir, &n.name).unwrap()).collect();
    let nodes = bind_all(&topo, &ids, &TransportConfig::default());
    nodes[0].serve(echo(NodeId(0))).unwrap();
    let reply = nodes[1].call(NodeId(0), ping(1, 11)).await.unwrap();
    assert_eq!((reply.epoch, caller_of(&reply)), (11, "node#1"));

    // The non-node client identity reaches a node by address and name.
    let client_id = load_identity(dir, CLIENT_IDENTITY_NAME).unwrap();
    let client = Transport::client(TransportConfig::default(), &client_id, bind_addr()).unwrap();
    let reply = client.call_addr(nodes[0].local_addr().unwrap(), "dc1-n1", ping(0, 12)).await.unwrap();
    assert_eq!((reply.epoch, caller_of(&reply)), (12, "client"));
    // Without a topology it knows no node ids.
    let err = client.call(NodeId(0), ping(0, 13)).await.unwrap_err();
    assert!(matches!(err, TransportError::UnknownPeer(NodeId(0))), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_certificate_file_is_named() {
    let topo = topology(2);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    init_cluster_certs(&topo, &dir).unwrap();
    let dir = dir.as_path();
    std::fs::remove_file(dir.join("dc2-n1.key")).unwrap();

    let err = load_identity(dir, "dc2-n1").unwrap_err();
    assert!(matches!(&err, TransportError::MissingCertFile { path } if path.ends_with("dc2-n1.key")), "{err}");
    assert!(err.to_string().contains("dc2-n1.key"), "the message names the file: {err}");

    let err = load_identity(dir, "dc9-n1").unwrap_err();
    assert!(err.to_string().contains("dc9-n1.pem"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("dc1-n1.pem"), empty.path().join("dc1-n1.pem")).unwrap();
    std::fs::copy(dir.join("dc1-n1.key"), empty.path().join("dc1-n1.key")).unwrap();
    let err = load_identity(empty.path(), "dc1-n1").unwrap_err();
    assert!(matches!(&err, TransportError::MissingCertFile { path } if path == &empty.path().join("ca.pem")));
    assert_file_named(&err, &empty.path().join("ca.pem"));
}

fn assert_file_named(err: &TransportError, path: &Path) {
    assert!(err.to_string().contains(&path.display().to_string()), "{err} names {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_the_deadline_times_out() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let cfg = TransportConfig { call_timeout: Duration::from_millis(300), ..TransportConfig::default() };
    let nodes = bind_all(&topo, &certs.nodes, &cfg);
    // A handler that never answers.
    nodes[0].serve(Arc::new(handler_fn(|_: Caller, _: Envelope| std::future::pending::<Envelope>()))).unwrap();

    let err = nodes[1].call(NodeId(0), ping(1, 1)).await.unwrap_err();
    assert!(matches!(err, TransportError::Timeout { after } if after == Duration::from_millis(300)), "{err}");
    let err = nodes[1].call_with_timeout(NodeId(0), ping(1, 2), Duration::from_millis(50)).await.unwrap_err();
    assert!(matches!(err, TransportError::Timeout { after } if after == Duration::from_millis(50)), "{err}");
    // An abandoned call is not a malformed frame.
    assert_eq!(nodes[0].counters().snapshot().malformed_frames, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_an_identity_of_no_node_and_serves_once() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let err = Transport::bind(TransportConfig::default(), &topo, &certs.client, bind_addr()).unwrap_err();
    assert!(matches!(err, TransportError::TlsConfig(_)), "{err}");

    let node = Transport::bind(TransportConfig::default(), &topo, &certs.nodes[0], bind_addr()).unwrap();
    node.serve(echo(NodeId(0))).unwrap();
    assert!(matches!(node.serve(echo(NodeId(0))), Err(TransportError::Serve(_))));
    let client = Transport::client(TransportConfig::default(), &certs.client, bind_addr()).unwrap();
    assert!(matches!(client.serve(echo(NodeId(0))), Err(TransportError::Serve(_))));
    let bad = TransportConfig { max_in_flight: 0, ..TransportConfig::default() };
    let err = Transport::client(bad, &certs.client, bind_addr()).unwrap_err();
    assert!(matches!(err, TransportError::InvalidConfig(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_transport_refuses_calls_and_its_peers_reconnect_after_a_restart() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let mut nodes = bind_all(&topo, &certs.nodes, &TransportConfig::default());
    nodes[0].serve(echo(NodeId(0))).unwrap();
    nodes[1].call(NodeId(0), ping(1, 1)).await.unwrap();

    let old = nodes.remove(0);
    let addr0 = old.local_addr().unwrap();
    old.close();
    let err = old.call(NodeId(1), ping(0, 1)).await.unwrap_err();
    assert!(matches!(err, TransportError::Closed), "{err}");
    old.wait_idle().await;
    drop(old);

    // Node 0 restarts on the same address (once the old socket is released).
    let mut restarted = None;
    for _ in 0..200 {
        let cfg = TransportConfig::default();
        match Transport::bind(cfg, &topo, &certs.nodes[0], SocketSpec::Bind(addr0)) {
            Ok(t) => {
                restarted = Some(t);
                break;
            }
            Err(TransportError::Io(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("restart: {e}"),
        }
    }
    let restarted = restarted.expect("the old socket is released within 10 s");
    restarted.serve(echo(NodeId(0))).unwrap();

    // Node 1's cached connection died with the old endpoint; the next call reconnects.
    let reply = nodes[0].call(NodeId(0), ping(1, 2)).await.unwrap();
    assert_eq!((reply.epoch, caller_of(&reply)), (2, "node#1"));
}

/// A caller whose deadline passes during the handshake stops waiting, but the handshake goes on
/// for the callers after it and none is aborted. (When each caller ran its own handshake, the
/// callers queued behind a restarted peer 200 ms of RTT away each reached the handshake with less
/// time left than it takes, gave up and aborted it: the peer was never reached again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_gives_up_leaves_the_handshake_to_the_next() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let nodes = bind_all(&topo, &certs.nodes, &TransportConfig::default());
    // Node 0 does not serve yet, so no handshake with it can finish: every call gives up.
    for i in 0..5 {
        let r = nodes[1].call_with_timeout(NodeId(0), ping(1, i), Duration::from_millis(20)).await;
        assert!(matches!(r, Err(TransportError::Timeout { .. })), "a call that gives up times out: {r:?}");
    }
    nodes[0].serve(echo(NodeId(0))).unwrap();
    let reply = nodes[1].call(NodeId(0), ping(1, 99)).await.unwrap();
    assert_eq!(reply.epoch, 99);
    assert_eq!(nodes[0].counters().snapshot().refused_handshakes, 0, "no handshake was aborted");
}

/// A node advertised by host name is called at what the name resolves to when the
/// connection is made (`localhost`); a name that does not resolve fails the call with a
/// connect error naming the peer and the lookup, and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_is_resolved_when_connecting() {
    let topo = topology(1);
    let certs = ClusterCerts::generate(&topo).unwrap();
    let server = Transport::bind(TransportConfig::default(), &topo, &certs.nodes[0], bind_addr()).unwrap();
    server.serve(echo(NodeId(0))).unwrap();
    let client = Transport::client(TransportConfig::default(), &certs.client, bind_addr()).unwrap();
    let named: redt_proto::HostPort = format!("localhost:{}", server.local_addr().unwrap().port()).parse().unwrap();
    let reply = client.call_at(&named, "dc1-n1", ping(7, 3)).await.unwrap();
    assert_eq!(caller_of(&reply), "client");

    // `.invalid` never resolves (RFC 2606).
    let nowhere: redt_proto::HostPort = "nowhere.invalid:7100".parse().unwrap();
    match client.call_at(&nowhere, "dc1-n1", ping(7, 3)).await {
        Err(e @ TransportError::Connect { .. }) => {
            let m = e.to_string();
            assert!(
                m.starts_with("cannot connect to dc1-n1@nowhere.invalid:7100: cannot resolve `nowhere.invalid`: "),
                "{m}"
            );
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
    assert_eq!(client.counters().snapshot().rpcs_sent, 1, "nothing was sent to the name that does not resolve");
}

//! The QUIC transport's limits ("no client can wedge a node"): the connection caps,
//! the handler deadline, and a WAN link set to a huge delay and back. Real QUIC endpoints on
//! loopback; the last test runs over the netem sockets (real datagrams, emulated delay).

mod common;

use redt_coordinator::netem_admin;
use redt_netem::{NetemSocket, WanModel};
use redt_proto::wire::{AckReply, Body, Envelope, NetemSetRequest};
use redt_proto::{DcId, LinkConditions, NodeId, Topology};
use redt_transport::{
    handler_fn, Caller, ClusterCerts, Handler, SocketSpec, Transport, TransportConfig, TransportError,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn topology(n: u16) -> Arc<Topology> {
    common::one_node_per_dc("transport-limits-test", n)
}

fn bind_at(ip: &str) -> SocketSpec {
    SocketSpec::Bind(format!("{ip}:0").parse().expect("an address"))
}

fn ping(epoch: u32) -> Envelope {
    Envelope { epoch, from: 0, body: Some(Body::Ack(AckReply {})) }
}

/// Answers every request with itself.
fn echo() -> Arc<dyn Handler> {
    Arc::new(handler_fn(|_: Caller, msg: Envelope| async move { msg }))
}

/// A client-only transport of `certs`' client identity, bound at `ip`.
fn client_at(certs: &ClusterCerts, ip: &str) -> Transport {
    Transport::client(TransportConfig::default(), &certs.client, bind_at(ip)).expect("a client transport")
}

/// A connection over `transport.max_connections_per_peer` is refused with a reason naming
/// the cap, and counted; peers already connected (from that address and others) go on
/// being answered, and a place freed is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_peer_cap_are_refused_naming_it_and_others_are_served() {
    let topo = topology(1);
    let certs = ClusterCerts::generate(&topo).expect("certificates");
    let cfg = TransportConfig { max_connections_per_peer: 2, ..TransportConfig::default() };
    let server = Transport::bind(cfg, &topo, &certs.nodes[0], bind_at("127.0.0.1")).expect("server");
    server.serve(echo()).expect("serving");
    let addr = server.local_addr().expect("bound");
    let name = topo.nodes[0].name.clone();

    // Another address, connected first.
    let other = client_at(&certs, "127.0.0.2");
    assert_eq!(other.call_addr(addr, &name, ping(1)).await.expect("answered").epoch, 1);
    // Two from 127.0.0.1 fill its cap.
    let (a, b) = (client_at(&certs, "127.0.0.1"), client_at(&certs, "127.0.0.1"));
    a.call_addr(addr, &name, ping(2)).await.expect("first from 127.0.0.1");
    b.call_addr(addr, &name, ping(3)).await.expect("second from 127.0.0.1");

    let third = client_at(&certs, "127.0.0.1");
    let err = third.call_addr(addr, &name, ping(4)).await.expect_err("over the per-peer cap");
    let text = err.to_string();
    assert!(matches!(err, TransportError::PeerOverLimit { .. }), "{text}");
    assert!(text.contains("transport.max_connections_per_peer") && text.contains("127.0.0.1"), "{text}");
    common::eventually("the refusal is counted", || server.counters().snapshot().refused_connections_per_peer >= 1)
        .await;
    assert_eq!(server.counters().snapshot().refused_connections_total, 0);

    // Everyone admitted is still served.
    assert_eq!(other.call_addr(addr, &name, ping(5)).await.expect("answered").epoch, 5);
    assert_eq!(a.call_addr(addr, &name, ping(6)).await.expect("answered").epoch, 6);
    assert_eq!(b.call_addr(addr, &name, ping(7)).await.expect("answered").epoch, 7);

    // A connection closed frees its place.
    a.close();
    a.wait_idle().await;
    let mut served = None;
    for _ in 0..100 {
        match third.call_addr(addr, &name, ping(8)).await {
            Ok(reply) => {
                served = Some(reply.epoch);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert_eq!(served, Some(8), "the third client gets the place the first left");
}

/// A handler that never finishes is cancelled after `transport.handler_timeout` and its
/// caller is answered with a timeout error naming the limit; the server goes on answering
/// other requests on the same connection, and counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_never_finishes_is_answered_with_a_timeout_error_and_others_are_served() {
    let topo = topology(1);
    let certs = ClusterCerts::generate(&topo).expect("certificates");
    let cfg = TransportConfig { handler_timeout: Duration::from_millis(200), ..TransportConfig::default() };
    let server = Transport::bind(cfg, &topo, &certs.nodes[0], bind_at("127.0.0.1")).expect("server");
    // Epoch 0 never finishes; every other request is echoed.
    let handler = handler_fn(|_: Caller, msg: Envelope| async move {
        if msg.epoch == 0 {
            std::future::pending::<()>().await;
        }
        msg
    });
    server.serve(Arc::new(handler)).expect("serving");
    let addr = server.local_addr().expect("bound");
    let name = topo.nodes[0].name.clone();
    let client = client_at(&certs, "127.0.0.1");

    let stuck = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.call_addr(addr, &name, ping(0)).await })
    };
    assert_eq!(client.call_addr(addr, &name, ping(1)).await.expect("answered meanwhile").epoch, 1);
    let reply = stuck.await.expect("the call's task").expect("answered, not a transport error");
    match reply.body {
        Some(Body::Error(e)) => {
            assert_eq!(e.code, redt_coordinator::error_code::TIMEOUT);
            assert!(e.message.contains("transport.handler_timeout"), "{}", e.message);
        }
        other => panic!("expected a timeout error, got {other:?}"),
    }
    assert_eq!(server.counters().snapshot().handler_timeouts, 1);
    assert_eq!(client.call_addr(addr, &name, ping(2)).await.expect("still answered").epoch, 2);
}

/// A WAN link set to a huge delay and back: `redt netem set --rtt 1000000h` is refused (it
/// would cut dc1 ↔ dc2 for good), the largest delay allowed (60 s) cuts the link while it
/// lasts, and once set back calls succeed again within a bounded reconnect (asserted within
/// a generous 10 s), not after the last datagram held under the old delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_set_to_a_huge_delay_and_back_carries_calls_again() {
    let topo = topology(2);
    let certs = ClusterCerts::generate(&topo).expect("certificates");
    let wan = Arc::new(Mutex::new(WanModel::new(2)));
    let socket = |dc: u16| {
        NetemSocket::bind("127.0.0.1:0".parse().expect("an address"), DcId(dc), wan.clone()).expect("a netem socket")
    };
    let (s0, s1) = (socket(0), socket(1));
    {
        let mut w = wan.lock().expect("not poisoned");
        let addr = |s: &Arc<NetemSocket>| quinn::AsyncUdpSocket::local_addr(&**s).expect("bound");
        w.register_addr(addr(&s0), DcId(0));
        w.register_addr(addr(&s1), DcId(1));
    }
    let cfg = TransportConfig { call_timeout: Duration::from_millis(500), ..TransportConfig::default() };
    let node0 = Transport::bind(cfg.clone(), &topo, &certs.nodes[0], SocketSpec::Custom(s0)).expect("node 0");
    let node1 = Transport::bind(cfg, &topo, &certs.nodes[1], SocketSpec::Custom(s1)).expect("node 1");
    for t in [&node0, &node1] {
        t.set_peer_addr(NodeId(0), node0.local_addr().expect("bound")).expect("a peer");
        t.set_peer_addr(NodeId(1), node1.local_addr().expect("bound")).expect("a peer");
    }
    node0.serve(echo()).expect("serving");
    let set = |rtt: Duration| {
        let req = NetemSetRequest {
            from: "dc1".into(),
            to: "dc2".into(),
            symmetric: true,
            rtt_us: i64::try_from(rtt.as_micros()).unwrap_or(i64::MAX),
            jitter_us: -1,
            loss_ppm: -1,
            rate_bits_per_s: -1,
            partitioned: None,
        };
        netem_admin::apply(&topo, &mut wan.lock().expect("not poisoned"), &req)
    };
    set(Duration::from_millis(2)).expect("2 ms");
    assert_eq!(node1.call(NodeId(0), ping(1)).await.expect("answered at 2 ms").epoch, 1);

    let refused = set(Duration::from_secs(3_600_000_000)).expect_err("1000000h is refused");
    assert!(refused.contains("the largest allowed"), "{refused}");
    set(LinkConditions::MAX_RTT).expect("60 s is allowed");
    assert!(node1.call(NodeId(0), ping(2)).await.is_err(), "no answer within 500 ms at 60 s RTT");
    // Long enough for datagrams to queue behind the delay and for QUIC to back off.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = node1.call(NodeId(0), ping(3)).await;

    set(Duration::from_millis(2)).expect("back to 2 ms");
    let restored = Instant::now();
    let mut answered = false;
    while restored.elapsed() < Duration::from_secs(10) {
        if let Ok(reply) = node1.call(NodeId(0), ping(4)).await {
            assert_eq!(reply.epoch, 4);
            answered = true;
            break;
        }
    }
    assert!(answered, "no call succeeded within 10 s of setting the link back to 2 ms");
}

/// Once half of a connection cap is taken, an incoming connection whose address is not yet
/// validated is sent a QUIC Retry before it counts against the cap: a real client answers it
/// (quinn does, unseen by the caller) and is served; a spoofed address could not, and would
/// take no place. Counted in `retries_sent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_half_a_cap_new_addresses_prove_themselves_with_a_retry_and_are_served() {
    let topo = topology(1);
    let certs = ClusterCerts::generate(&topo).expect("certificates");
    let cfg = TransportConfig { max_connections_per_peer: 4, ..TransportConfig::default() };
    let server = Transport::bind(cfg, &topo, &certs.nodes[0], bind_at("127.0.0.1")).expect("server");
    server.serve(echo()).expect("serving");
    let addr = server.local_addr().expect("bound");
    let name = topo.nodes[0].name.clone();
    let clients: Vec<Transport> = (0..4).map(|_| client_at(&certs, "127.0.0.1")).collect();
    for (i, c) in clients.iter().enumerate() {
        let epoch = 10 + i as u32;
        assert_eq!(c.call_addr(addr, &name, ping(epoch)).await.expect("served").epoch, epoch);
        let retries = server.counters().snapshot().retries_sent;
        // The first two connections take the address to half its cap of 4 without a Retry.
        let want = i.saturating_sub(1) as u64;
        assert_eq!(retries, want, "after connection {}: {retries} retries", i + 1);
    }
    // Over the cap, the Retry is answered and the refusal still names the cap.
    let fifth = client_at(&certs, "127.0.0.1");
    let err = fifth.call_addr(addr, &name, ping(20)).await.expect_err("over the per-peer cap");
    assert!(err.to_string().contains("transport.max_connections_per_peer"), "{err}");
    assert_eq!(server.counters().snapshot().retries_sent, 3, "one more for the fifth");
}

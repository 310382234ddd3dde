//! The embedded cluster's metrics endpoints: with the topology's `metrics:`
//! section every node serves `GET /metrics` at its own IP, counting the answers of its own
//! coordinators, and its endpoint follows it across a kill (503) and a restart. Status
//! requests and scrapes share one executor round per second. No client keeps the scrapers
//! out: a cap per client address, idle connections closed, and a client that stops reading
//! cut off after the write timeout. With `metrics.tls`, HTTPS with the node's certificate.

mod common;
use common::local_fast;
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::{NodeId, TableId};
use redt_protocol::call::kv_call;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Table `kv` of local-fast.yaml.
const KV: TableId = TableId(2);

/// `GET /metrics` at `addr`: the status code and the body.
async fn scrape(addr: SocketAddr) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to the metrics endpoint");
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).await.expect("read the response");
    let (head, body) = response.split_once("\r\n\r\n").expect("headers end");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    (status, body.to_string())
}

/// The sum of every sample of `name` in `body` (one value per line after the labels).
fn sum(body: &str, name: &str) -> u64 {
    body.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).expect("an integer value"))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_embedded_node_serves_its_own_counts_across_a_restart() {
    let mut topology = local_fast("metrics-test-embedded", 7950);
    topology.metrics.port = Some(7952);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let addrs = cluster.metrics_addrs();
    let expected: Vec<SocketAddr> = (1..=4).map(|dc| format!("127.0.{dc}.1:7952").parse().unwrap()).collect();
    assert_eq!(addrs, expected);
    let client = cluster.client(Duration::from_secs(10)).expect("client");
    let mut ok = [0u64; 2];
    for k in 0..10u64 {
        let node = (k % 2) as usize;
        let out = client.submit(NodeId(node as u16), kv_call(KV, &[KvOp::Write(k, vec![1; 8])])).await;
        if out.status == TxnStatus::Committed {
            ok[node] += 1;
        }
    }
    assert!(ok.iter().all(|&n| n > 0), "commits through both coordinators: {ok:?}");
    // Each node counts its own coordinators' answers (the cluster's TxnStats is shared).
    for (node, &n) in ok.iter().enumerate() {
        let (status, body) = scrape(addrs[node]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(sum(&body, "redt_txn_committed_total"), n, "{body}");
        assert_eq!(sum(&body, "redt_epoch"), 1);
    }
    let (_, body) = scrape(addrs[2]).await;
    assert_eq!(sum(&body, "redt_txn_committed_total"), 0, "dc3-n1 coordinated nothing");

    // A killed node's endpoint stays, answering 503; its next life is served from scratch.
    cluster.kill(NodeId(1)).expect("kill");
    let (status, body) = scrape(addrs[1]).await;
    assert_eq!(status, 503, "{body}");
    cluster.restart(NodeId(1)).expect("restart");
    let (status, body) = scrape(addrs[1]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sum(&body, "redt_txn_committed_total"), 0, "a new life counts from zero");
    cluster.shutdown();
}

/// A flood of status requests and scrapes costs the node's executor thread (which every one
/// of its transactions waits for) at most one round per second: they share one sample of
/// what only that thread reads. The sample's figures stay put within the second (the time
/// it was read, `ring_read_unix_ms`, included) and move after it; the counters read at the
/// request (uptime, CPU time) do not wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_requests_and_scrapes_share_one_executor_round_per_second() {
    let mut topology = local_fast("metrics-test-sample", 7530);
    topology.metrics.port = Some(7532);
    // The 16 scrapes come from one address at once.
    topology.metrics.max_connections_per_peer = 16;
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let addr = cluster.metrics_addrs()[0];
    let client = Arc::new(cluster.client(Duration::from_secs(10)).expect("client"));
    let node = cluster.node(NodeId(0));

    let before = node.status_rounds();
    let t0 = Instant::now();
    let mut asks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let client = client.clone();
        asks.spawn(async move { client.status(NodeId(0), false).await.map_err(|e| e.to_string()) });
    }
    let mut scrapes = tokio::task::JoinSet::new();
    for _ in 0..16 {
        scrapes.spawn(scrape(addr));
    }
    while let Some(r) = asks.join_next().await {
        let s = r.expect("a status task").expect("a status answer");
        assert!(s.ring_read_unix_ms.is_some(), "{s:?}");
    }
    while let Some(r) = scrapes.join_next().await {
        let (status, body) = r.expect("a scrape task");
        assert_eq!(status, 200, "{body}");
    }
    let elapsed = t0.elapsed();
    let rounds = node.status_rounds() - before;
    println!("64 status requests and 16 scrapes in {elapsed:?}: {rounds} executor rounds");
    assert!(rounds <= 1 + elapsed.as_secs(), "{rounds} executor rounds in {elapsed:?}: at most one per second");

    // Past the sample's age, one request takes a fresh sample; the next, within the second,
    // reads the same one, while its uptime moves on.
    tokio::time::sleep(redt_coordinator::SAMPLE_MAX_AGE).await;
    let t1 = Instant::now();
    let before = node.status_rounds();
    let first = client.status(NodeId(0), false).await.expect("status");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = client.status(NodeId(0), false).await.expect("status");
    if t1.elapsed() < Duration::from_millis(900) {
        assert_eq!(node.status_rounds() - before, 1, "one round for both");
        assert_eq!(first.ring_read_unix_ms, second.ring_read_unix_ms, "the same sample");
    }
    assert!(second.uptime_ms > first.uptime_ms, "the uptime is read at the request");
    tokio::time::sleep(redt_coordinator::SAMPLE_MAX_AGE + Duration::from_millis(100)).await;
    let before = node.status_rounds();
    let third = client.status(NodeId(0), false).await.expect("status");
    assert_eq!(node.status_rounds() - before, 1, "a second later, a fresh sample");
    let (read, then) = (third.ring_read_unix_ms.unwrap(), second.ring_read_unix_ms.unwrap());
    assert!(read >= then + 1_000, "read at {read}, the one before at {then}");
    // A status that counts locks reads everything now, in a round of its own.
    let operator = cluster.operator(Duration::from_secs(10)).expect("operator");
    let before = node.status_rounds();
    let locks = operator.status(NodeId(0), true).await.expect("status --locks");
    assert_eq!(locks.locks_held, Some(0));
    assert_eq!(node.status_rounds() - before, 1);
    assert!(locks.ring_read_unix_ms > third.ring_read_unix_ms);
    cluster.shutdown();
}

/// A connection to `addr` from the loopback address `from` (any 127.x.y.z is this host's).
async fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).expect("bind a loopback address");
    socket.connect(addr).await.expect("connect to the metrics endpoint")
}

/// `GET /metrics` on the keep-alive connection `s`: the status code, the connection left
/// open after the response (read to its `content-length`).
async fn get_keep_alive(s: &mut TcpStream) -> u16 {
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(s.read(&mut byte).await.expect("read the response head"), 1, "closed mid-head");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).expect("an ASCII head");
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap()))
        .expect("a content-length");
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).await.expect("read the body");
    head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code")
}

/// What `s` says until it is closed (an error if it is reset), within `limit`; `None` if it
/// is still open then.
async fn until_closed(s: &mut TcpStream, limit: Duration) -> Option<std::io::Result<Vec<u8>>> {
    let mut got = Vec::new();
    tokio::time::timeout(limit, s.read_to_end(&mut got)).await.ok().map(|r| r.map(|_| got))
}

/// One client address cannot take every slot of the endpoint: past
/// `metrics.max_connections_per_peer` its connections are answered 503 and closed at once,
/// while a scraper from another address is served, and a slot is given back when one of its
/// connections closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_connection_cap_is_refused_while_scrapes_go_on() {
    let mut topology = local_fast("metrics-test-peer-cap", 7540);
    topology.metrics.port = Some(7542);
    topology.metrics.max_connections_per_peer = 2;
    topology.metrics.idle_timeout = Duration::from_secs(30);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let addr = cluster.metrics_addrs()[0];

    // Two keep-alive connections from 127.0.0.7, each served once and then left idle.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = connect_from("127.0.0.7", addr).await;
        assert_eq!(get_keep_alive(&mut s).await, 200);
        held.push(s);
    }
    // More from that address are refused at once.
    for _ in 0..3 {
        let mut s = connect_from("127.0.0.7", addr).await;
        match until_closed(&mut s, Duration::from_secs(5)).await {
            Some(Ok(text)) => {
                let text = String::from_utf8_lossy(&text);
                assert!(text.is_empty() || text.starts_with("HTTP/1.1 503 "), "{text}");
            }
            Some(Err(e)) => println!("a refused connection was reset: {e}"),
            None => panic!("a connection over the cap was kept open"),
        }
    }
    // A scraper from another address is served, on a new connection and on several.
    for _ in 0..3 {
        let mut s = connect_from("127.0.0.8", addr).await;
        assert_eq!(get_keep_alive(&mut s).await, 200);
    }
    // The held connections are still served.
    for s in &mut held {
        assert_eq!(get_keep_alive(s).await, 200);
    }
    // Closing one gives its slot back.
    drop(held.pop());
    let t0 = Instant::now();
    loop {
        let mut s = connect_from("127.0.0.7", addr).await;
        let served = tokio::time::timeout(Duration::from_secs(2), async {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.ok()?;
            let mut text = Vec::new();
            s.read_to_end(&mut text).await.ok()?;
            Some(String::from_utf8_lossy(&text).starts_with("HTTP/1.1 200 "))
        })
        .await;
        if served == Ok(Some(true)) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "no slot given back 5 s after a connection closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.shutdown();
}

/// A connection waiting for a request is closed after `metrics.idle_timeout`: a keep-alive
/// one after its response, one that never sends anything, and one that sends half its
/// headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed_after_the_idle_timeout() {
    let mut topology = local_fast("metrics-test-idle", 7550);
    topology.metrics.port = Some(7552);
    let idle = Duration::from_millis(300);
    topology.metrics.idle_timeout = idle;
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let addr = cluster.metrics_addrs()[0];

    let mut keep_alive = TcpStream::connect(addr).await.unwrap();
    assert_eq!(get_keep_alive(&mut keep_alive).await, 200);
    let t0 = Instant::now();
    let closed = until_closed(&mut keep_alive, Duration::from_secs(5)).await;
    let waited = t0.elapsed();
    assert!(matches!(&closed, Some(Ok(rest)) if rest.is_empty()), "{closed:?}");
    assert!(waited >= idle - Duration::from_millis(50), "closed after {waited:?}, before the idle timeout");
    println!("an idle keep-alive connection was closed after {waited:?} (idle_timeout {idle:?})");

    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert!(until_closed(&mut silent, Duration::from_secs(5)).await.is_some(), "a silent connection is closed");

    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: te").await.unwrap();
    assert!(until_closed(&mut slow, Duration::from_secs(5)).await.is_some(), "a slow request is closed");

    // The endpoint still serves.
    assert_eq!(scrape(addr).await.0, 200);
    cluster.shutdown();
}

/// A client that sends requests and never reads their responses loses its connection once
/// the server's writes have stalled for `metrics.write_timeout`, long before the
/// connection's lifetime ends: its slot under the per-address cap is given back, and a new
/// connection from its address is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_loses_its_connection_after_the_write_timeout() {
    let mut topology = local_fast("metrics-test-write", 7560);
    topology.metrics.port = Some(7562);
    topology.metrics.max_connections_per_peer = 1;
    // Only the write timeout may close the stalled connection here.
    topology.metrics.idle_timeout = Duration::from_secs(60);
    topology.metrics.write_timeout = Duration::from_secs(2);
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let addr = cluster.metrics_addrs()[0];
    let (status, body) = scrape(addr).await;
    assert_eq!(status, 200, "{body}");

    // From 127.0.0.9: a receive buffer as small as the kernel allows, and enough requests
    // pipelined on one keep-alive connection that their responses (16 MiB in all) fill it
    // and the server's send buffer many times over. Nothing is read.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(1024).expect("SO_RCVBUF");
    socket.bind("127.0.0.9:0".parse().unwrap()).expect("bind a loopback address");
    let mut stalled = socket.connect(addr).await.expect("connect to the metrics endpoint");
    let request: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";
    let count = (16 << 20) / body.len().max(1) + 1;
    let pipeline = request.repeat(count);
    // The server stops reading requests once its writes stall: the rest may never be taken.
    let sent = tokio::time::timeout(Duration::from_secs(3), stalled.write_all(&pipeline)).await;
    println!("{count} requests pipelined ({} bytes each response), all sent: {}", body.len(), sent.is_ok());

    // The stalled connection holds the address's one slot...
    let mut over = connect_from("127.0.0.9", addr).await;
    match until_closed(&mut over, Duration::from_secs(5)).await {
        Some(Ok(text)) => {
            let text = String::from_utf8_lossy(&text);
            assert!(text.is_empty() || text.starts_with("HTTP/1.1 503 "), "{text}");
        }
        Some(Err(e)) => println!("a refused connection was reset: {e}"),
        None => panic!("a connection over the cap was kept open"),
    }
    // ...until the write timeout closes it: a new connection from the address is served, well
    // within the connection lifetime (120 s).
    let t0 = Instant::now();
    loop {
        let mut s = connect_from("127.0.0.9", addr).await;
        let served = tokio::time::timeout(Duration::from_secs(2), async {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.ok()?;
            let mut text = Vec::new();
            s.read_to_end(&mut text).await.ok()?;
            Some(String::from_utf8_lossy(&text).starts_with("HTTP/1.1 200 "))
        })
        .await;
        if served == Ok(Some(true)) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "the stalled connection still holds its slot after 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("the address's slot was given back {:?} after the stall began", t0.elapsed());
    // The stalled client finds its connection closed (or reset) once it reads.
    let closed = until_closed(&mut stalled, Duration::from_secs(30)).await;
    match &closed {
        Some(Ok(got)) => println!("the stalled connection ended after {} bytes", got.len()),
        Some(Err(e)) => println!("the stalled connection was reset: {e}"),
        None => panic!("the stalled connection is still open"),
    }
    cluster.shutdown();
}

/// A TLS client configuration trusting `ca` alone, without a client certificate, offering
/// HTTP/1.1 (as a Prometheus scraper given the cluster's `ca.pem`).
fn scraper_tls(ca: &rustls_pki_types::CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).expect("a CA certificate");
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// `GET /metrics` over HTTPS at `addr`, the server checked as `name` with `cfg`: the status
/// code and the body, or the TLS error.
async fn scrape_tls(addr: SocketAddr, name: &str, cfg: Arc<rustls::ClientConfig>) -> std::io::Result<(u16, String)> {
    let name = rustls_pki_types::ServerName::try_from(name.to_string()).expect("a server name");
    let tcp = TcpStream::connect(addr).await?;
    let mut s = tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await?;
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut response = Vec::new();
    // The server may close without a close_notify: what came before it counts.
    if let Err(e) = s.read_to_end(&mut response).await {
        if e.kind() != std::io::ErrorKind::UnexpectedEof || response.is_empty() {
            return Err(e);
        }
    }
    let response = String::from_utf8(response).expect("a text response");
    let (head, body) = response.split_once("\r\n\r\n").expect("headers end");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    Ok((status, body.to_string()))
}

/// With `metrics.tls` the endpoint speaks HTTPS only, with the node's own certificate: a
/// plain HTTP request gets no HTTP answer, a scraper trusting the cluster CA (and presenting
/// no certificate) reads the metrics, checking the node by its IP address or its name, and
/// one trusting another CA is refused by its own handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_the_endpoint_serves_https_with_the_node_certificate() {
    let mut topology = local_fast("metrics-test-tls", 7570);
    topology.metrics.port = Some(7572);
    topology.metrics.tls = true;
    let cluster = EmbeddedCluster::start(topology, CoordinatorOptions::default()).await.expect("starts");
    let addr = cluster.metrics_addrs()[0];
    assert_eq!(addr, "127.0.1.1:7572".parse().unwrap());

    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.unwrap();
    match until_closed(&mut plain, Duration::from_secs(10)).await {
        Some(Ok(got)) => assert!(!got.starts_with(b"HTTP/"), "plain HTTP answered: {}", String::from_utf8_lossy(&got)),
        Some(Err(e)) => println!("a plain HTTP request was reset: {e}"),
        None => panic!("a plain HTTP request was kept open"),
    }

    let cfg = scraper_tls(&cluster.certs().ca.cert_der());
    for name in ["127.0.1.1", "dc1-n1"] {
        let (status, body) = scrape_tls(addr, name, cfg.clone()).await.expect("an HTTPS scrape");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("redt_txn_committed_total"), "{body}");
        assert!(body.contains("node=\"dc1-n1\""), "{body}");
    }
    // Another node's name is not this certificate's.
    let e = scrape_tls(addr, "dc2-n1", cfg).await.expect_err("dc2-n1 is not the node at this address");
    println!("checked as dc2-n1: {e}");
    let foreign = redt_transport::ClusterCa::generate("another").expect("a CA");
    let e = scrape_tls(addr, "127.0.1.1", scraper_tls(&foreign.cert_der())).await.expect_err("another cluster's CA");
    println!("trusting another CA: {e}");
    // The endpoint still serves after the failed handshakes.
    let cfg = scraper_tls(&cluster.certs().ca.cert_der());
    assert_eq!(scrape_tls(addr, "127.0.1.1", cfg).await.expect("an HTTPS scrape").0, 200);
    cluster.shutdown();
}

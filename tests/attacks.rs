//! Attacks on a running cluster, each of which fails while another client commits (docs/security.md
//! "Attacks that fail", docs/design.md "Attacks on a running cluster").
//!
//! `redt cluster up` starts four node processes: two DCs of two nodes each, both DCs on
//! `backend: tcp`, so every node serves its MemStore on a TCP verbs listener as well as its
//! QUIC endpoint. A legitimate client (the library `Client` with the cluster's `redt-client`
//! certificate) commits transactions without pause, alternately through dc1-a and dc1-b; each
//! writes key 0 (partition p0: dc1-a, dc2-b) and key 1 (p1: dc1-b, dc2-a). A transaction
//! through dc1-a uses dc1-a's QUIC listener; one through dc1-b makes dc1-b the executor of
//! dc1, which reads and writes key 0's record in dc1-a's MemStore over dc1-a's TCP verbs
//! listener.
//!
//! Every attack is on dc1-a. Each runs again and again until the legitimate client has
//! committed a transaction through dc1-a and one through dc1-b, each submitted after the
//! attack's first attempt began and answered before its last one ended. Every attempt must
//! be refused, with the reason where the attacker can see one, and the node's own count of
//! the refusal (metrics, `redt status`) must grow where the node keeps one. No assertion is
//! on time: [`PATIENCE`] only ends an attack during which nothing commits (the node stopped
//! serving others), which fails the test.
//!
//! | attack | listener | refused by |
//! |---|---|---|
//! | no client certificate | QUIC | the handshake (counted: `transport_handshakes_refused`) |
//! | a foreign CA's client and node certificates | QUIC | the handshake (same count) |
//! | garbage, undecodable, truncated and oversized frames, valid client certificate | QUIC | a reset of that stream (`Malformed`, `Oversized`; `transport_frames_refused`); the same connection is served next |
//! | a client certificate sending `netem set --partition on` | QUIC | `FORBIDDEN`, naming the operator role (`refused_role`) |
//! | a `redt client --jsonl` line over `limits.max_ops_per_txn`, one over `limits.max_jsonl_line_bytes` | QUIC, the CLI | the coordinator (`refused_over_limit`) and the CLI, naming the limit |
//! | QUIC connections from one address over `transport.max_connections_per_peer` | QUIC | the admission, closing each with the reason naming the cap |
//! | a plaintext READ and WRITE | TCP verbs | the TLS handshake: nothing read, nothing written (`verbs_server_connections{outcome="handshake_failed"}`) |
//! | TLS without a client certificate, with a foreign CA's node certificate | TCP verbs | the TLS handshake (same count) |
//! | TLS with the cluster's client certificate, with a node certificate of dc2 | TCP verbs | the admission after the handshake, naming why (`refused_identity`) |
//! | idle connections over `verbs.max_connections_per_peer` | TCP verbs | a status naming the cap (`refused_max_connections_per_peer`) |
//! | inserts that abort after phase 1 created their records; deletes of missing keys | QUIC | nothing is refused: the record heap's use (`redt_record_heap_used_bytes`) stays where it was |
//! | inserts of keys nobody had, then their deletes, all committed | QUIC | nothing is refused: the deleted records are freed once their grace passes (`redt_deleted_records_freed`), and the B+-tree nodes the keys emptied are merged away |
//! | a status counting locks (a scan of the whole index) with the client certificate | QUIC | `FORBIDDEN`, naming the operator role (`refused_role`) |
//! | 16 outcome queries at once on one connection for ids nobody reserved, each asking to wait 10 s | QUIC | 4 answered after one lookup round (not waited for: the caller reserved none), 12 `OVER_LIMIT` naming the per-connection cap (`refused_over_limit`) |
//! | 8 read-only calls of `limits.max_ops_per_txn` reads at once, again and again | QUIC | nothing is refused: each is answered, and the legitimate client commits meanwhile (its phase 1s go before queued bulk work on the executor threads) |
//!
//! Each attack is checked on its own ([`check`]): the test ends by naming every attack that
//! was not refused as it should be.
//!
//! Not here: a node with `backend: rdma` needs an RDMA device and a build with `--features
//! rdma`. The bootstrap's exchange needs no device: its unit tests in
//! `verbs/src/rdma/bootstrap.rs` make these attacks on it
//! (`outsiders_get_no_hello_and_the_dc_still_exchanges`).
//! Raft (membership changes) travels over the QUIC listener attacked here.

mod common;

use common::{cluster_up, path_str, redt, text, ClusterGuard, REDT};
use redt_coordinator::{Client, TxnStatus};
use redt_dc_executor::verbs::{encode_request_body, shared_file, WorkRequest, VERBS_ALPN, WIRE_VERSION};
use redt_dc_executor::{KvOp, MAGIC};
use redt_proto::wire::{Body, Envelope, OutcomeQueryRequest, StatusRequest};
use redt_proto::{NodeId, Offset, TableId, Topology};
use redt_protocol::call::kv_call;
use redt_transport::frame::encode_frame;
use redt_transport::tls::{quic_client_config, rustls_client_config};
use redt_transport::{
    load_identity, node_ip, ClusterCa, NodeIdentity, SocketSpec, StreamCode, Transport, TransportConfig, ALPN,
    CLIENT_IDENTITY_NAME, DEFAULT_MAX_FRAME_BYTES,
};
use rustls_pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Port of every node of this test's cluster (QUIC on UDP, TCP verbs on TCP); metrics on
/// the next one. The other process tests use 7640–7960.
const PORT: u16 = 8300;
/// Table `kv`.
const KV: TableId = TableId(2);
/// The attacked node, dc1-a, and the other node of its DC, dc1-b.
const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);
/// `verbs.max_connections_per_peer` of the topology (the default, 64, works too; a small cap
/// keeps the test short).
const VERBS_PEER_CAP: usize = 8;
/// `transport.max_connections_per_peer` of the topology (default 64).
const QUIC_PEER_CAP: usize = 8;
/// How long one attack may run without the legitimate client committing through both
/// dc1-a and dc1-b before the test fails (the node stopped serving others). Not a bound on
/// speed: commits take milliseconds.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long after its delete a node frees a deleted record in this cluster: twice its
/// `catch_up_give_up` plus the clock-skew bound (250 ms).
const DELETED_GRACE: Duration = Duration::from_millis(2_250);
/// Where the verbs attacks try to write, near the end of dc1-a's 8 MiB MemStore (the record
/// heap's far end, never reached here), and what.
const SCRIBBLE_AT: u64 = (8 << 20) - 64;
const SCRIBBLE: &[u8; 8] = b"0wn3d!!!";

/// Two DCs × two nodes on the `tcp` verbs backend. `verbs.handshake_timeout` is raised from
/// 2 s so that the idle connections of the cap attack stay open while it runs. A catch-up gives
/// up after 1 s (no partition has four replicas, so none is shipped), so a deleted record is
/// freed 2.25 s after its delete ([`DELETED_GRACE`]) rather than a minute.
fn topology_yaml(name: &str) -> String {
    format!(
        r#"name: {name}
epoch: 1
memstore: {{ size: 8MiB, index: 256KiB, ring: 256KiB }}
dcs:
  - name: dc1
    backend: tcp
    nodes:
      - {{ name: dc1-a, addr: "127.0.1.1:{PORT}" }}
      - {{ name: dc1-b, addr: "127.0.1.2:{PORT}" }}
  - name: dc2
    backend: tcp
    nodes:
      - {{ name: dc2-a, addr: "127.0.2.1:{PORT}" }}
      - {{ name: dc2-b, addr: "127.0.2.2:{PORT}" }}
links:
  default: {{ rtt: 2ms }}
tables:
  - name: kv
    id: 2
    cells: [ {{ name: value, bytes: 256 }} ]
partitions:
  - {{ replicas: [dc1-a, dc2-b] }}
  - {{ replicas: [dc1-b, dc2-a] }}
timeouts: {{ phase1_timeout: 2s, recovery: {{ catch_up_give_up: 1s }} }}
limits: {{ max_ops_per_txn: 64, max_jsonl_line_bytes: 64KiB, free_deleted_records: true }}
verbs: {{ max_connections_per_peer: {VERBS_PEER_CAP}, handshake_timeout: 60s }}
transport: {{ max_connections_per_peer: {QUIC_PEER_CAP} }}
"#
    )
}

// ---------------------------------------------------------------------------------------
// The legitimate client and the attack window
// ---------------------------------------------------------------------------------------

/// What the legitimate client saw: each commit as (coordinator, submitted, answered), and
/// the count and last reason of the rest.
#[derive(Default)]
struct Ledger {
    commits: Mutex<Vec<(NodeId, Instant, Instant)>>,
    other: AtomicU64,
    last_other: Mutex<String>,
}

impl Ledger {
    /// Commits through `node` submitted at or after `from` and answered at or before `to`.
    fn committed_within(&self, node: NodeId, from: Instant, to: Instant) -> usize {
        let commits = self.commits.lock().expect("the ledger's lock is never poisoned");
        commits.iter().filter(|&&(n, sub, ans)| n == node && sub >= from && ans <= to).count()
    }
}

/// Commits `keys 0 += 1, 1 += 1` again and again, alternately through dc1-a and dc1-b, until
/// `stop`; records every outcome in `ledger`.
async fn legitimate_client(client: Arc<Client>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let node = if i % 2 == 0 { A } else { B };
        i += 1;
        let submitted = Instant::now();
        let call = kv_call(KV, &[KvOp::Add(0, 1), KvOp::Add(1, 1)]);
        let out = tokio::time::timeout(Duration::from_secs(10), client.submit(node, call)).await;
        match out.map(|o| o.status) {
            Ok(TxnStatus::Committed) => {
                ledger.commits.lock().expect("not poisoned").push((node, submitted, Instant::now()))
            }
            other => {
                ledger.other.fetch_add(1, Ordering::Relaxed);
                *ledger.last_other.lock().expect("not poisoned") =
                    format!("through {}: {other:?}", if node == A { "dc1-a" } else { "dc1-b" });
            }
        }
    }
}

/// Runs `attack(attempt)` until the legitimate client has committed a transaction through
/// dc1-a and one through dc1-b within the attack (see the module docs); `attack` asserts its
/// own refusal. Returns the number of attempts.
///
/// # Panics
/// When that has not happened after [`PATIENCE`], or when `attack` panics.
fn during(ledger: &Ledger, what: &str, mut attack: impl FnMut(u32)) -> u32 {
    let start = Instant::now();
    let mut attempts = 0;
    loop {
        attack(attempts);
        attempts += 1;
        let now = Instant::now();
        if ledger.committed_within(A, start, now) >= 1 && ledger.committed_within(B, start, now) >= 1 {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{what}: the legitimate client committed nothing through both dc1-a and dc1-b during {attempts} \
             attempts of the attack ({PATIENCE:?}); its last failure: {}",
            ledger.last_other.lock().unwrap()
        );
    }
    let end = Instant::now();
    println!(
        "{what}: {attempts} attempt(s); meanwhile the legitimate client committed {} through \
         dc1-a and {} through dc1-b",
        ledger.committed_within(A, start, end),
        ledger.committed_within(B, start, end)
    );
    attempts
}

// ---------------------------------------------------------------------------------------
// What the node counts
// ---------------------------------------------------------------------------------------

/// The sum of the samples of metric `name` (labels containing `label`, if given) on the
/// metrics endpoint at `addr`.
fn metric(addr: SocketAddr, name: &str, label: Option<&str>) -> f64 {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).expect("read the metrics");
    let mut found = false;
    let sum = response
        .lines()
        .filter(|l| l.starts_with(name) && matches!(l.as_bytes().get(name.len()), Some(b'{' | b' ')))
        .filter(|l| label.is_none_or(|want| l.contains(want)))
        .map(|l| {
            found = true;
            l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("a sample: {l}"))
        })
        .sum();
    assert!(found, "no sample of {name} {label:?} at {addr}:\n{response}");
    sum
}

// ---------------------------------------------------------------------------------------
// QUIC attackers
// ---------------------------------------------------------------------------------------

/// A QUIC client configuration that trusts `ca` and presents no certificate.
fn quic_without_certificate(ca: &CertificateDer<'static>) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).expect("the cluster CA certificate");
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(cfg).expect("a QUIC TLS configuration");
    quinn::ClientConfig::new(Arc::new(crypto))
}

/// Connects to `addr` (expected to be node `name`) as `cfg` says, writes `request` on one
/// stream and returns what came back, or why nothing did.
async fn quic_request(
    endpoint: &quinn::Endpoint,
    cfg: quinn::ClientConfig,
    addr: SocketAddr,
    name: &str,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    let conn = endpoint.connect_with(cfg, addr, name).map_err(|e| e.to_string())?.await.map_err(|e| e.to_string())?;
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    let _ = send.write_all(request).await;
    let _ = send.finish();
    // A refused handshake shows as a lost connection; the reason is the connection's.
    let got = recv.read_to_end(1 << 20).await.map_err(|e| match conn.close_reason() {
        Some(why) => format!("{e}: {why}"),
        None => e.to_string(),
    });
    conn.close(0u32.into(), b"done");
    got
}

/// Writes `bytes` on a new stream of `conn` and returns the code the node reset it with.
async fn reset_code(conn: &quinn::Connection, bytes: &[u8]) -> Option<StreamCode> {
    let (mut send, mut recv) = conn.open_bi().await.expect("open a stream");
    let _ = send.write_all(bytes).await;
    let _ = send.finish();
    match recv.read_to_end(1 << 20).await {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => StreamCode::from_code(code.into_inner()),
        other => panic!("expected a stream reset, got {other:?}"),
    }
}

/// A status request of a client as a frame.
fn status_frame(topo: &Topology) -> Vec<u8> {
    let msg = Envelope {
        epoch: topo.epoch.0,
        from: u32::MAX,
        body: Some(Body::Status(StatusRequest { count_locks: false })),
    };
    encode_frame(&msg, DEFAULT_MAX_FRAME_BYTES).expect("a small frame").to_vec()
}

/// An outcome query of a client for `txn`, which nobody reserved, asking the node to wait
/// 10 s for it, as a frame.
fn outcome_query_frame(topo: &Topology, txn: u64) -> Vec<u8> {
    let msg = Envelope {
        epoch: topo.epoch.0,
        from: u32::MAX,
        body: Some(Body::OutcomeQuery(OutcomeQueryRequest {
            txn,
            start_after: None,
            valid_for_ms: 0,
            wait_ms: 10_000,
            token: 0,
        })),
    };
    encode_frame(&msg, DEFAULT_MAX_FRAME_BYTES).expect("a small frame").to_vec()
}

/// The envelope of a reply frame.
fn decode_reply(frame: &[u8]) -> Envelope {
    assert!(frame.len() >= 4, "a reply frame: {frame:?}");
    <Envelope as prost::Message>::decode(&frame[4..]).expect("a reply envelope")
}

// ---------------------------------------------------------------------------------------
// TCP verbs attackers
// ---------------------------------------------------------------------------------------

/// A request frame to dc1-a's verbs: READ the superblock (64 bytes at 0), WRITE
/// [`SCRIBBLE`] at [`SCRIBBLE_AT`].
fn steal_and_scribble() -> Vec<u8> {
    let body = encode_request_body(
        A,
        &[
            WorkRequest::Read { offset: Offset(0), len: 64 },
            WorkRequest::Write { offset: Offset(SCRIBBLE_AT), data: SCRIBBLE.to_vec() },
        ],
    );
    let mut frame = u32::try_from(body.len()).expect("a small body").to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// A plain TCP connection to `addr`, 10 s read timeout.
fn tcp(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the TCP verbs listener");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads a verbs status message: `Ok(Ok(()))` admitted, `Ok(Err(reason))` refused.
fn read_status(r: &mut impl Read) -> std::io::Result<Result<(), String>> {
    let mut head = [0u8; 2];
    r.read_exact(&mut head)?;
    assert_eq!(head[0], WIRE_VERSION, "a status message of this wire version");
    match head[1] {
        0 => Ok(Ok(())),
        1 => {
            let mut len = [0u8; 2];
            r.read_exact(&mut len)?;
            let mut why = vec![0u8; usize::from(u16::from_le_bytes(len))];
            r.read_exact(&mut why)?;
            Ok(Err(String::from_utf8_lossy(&why).into_owned()))
        }
        other => panic!("unknown status {other}"),
    }
}

/// Everything a connection gives back until it ends (or its read timeout passes).
fn drain(s: &mut impl Read) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A TLS client configuration for the verbs: trusting `trust`, presenting `me` (none: no
/// client certificate), ALPN `redt-verbs/1`.
fn verbs_client_config(trust: &CertificateDer<'static>, me: Option<&NodeIdentity>) -> Arc<rustls::ClientConfig> {
    let mut cfg = match me {
        Some(id) => {
            let id = NodeIdentity { ca_cert: trust.clone(), ..id.clone() };
            rustls_client_config(&id).expect("a TLS client configuration")
        }
        None => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(trust.clone()).expect("a CA certificate");
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .expect("TLS 1.3")
                .with_root_certificates(roots)
                .with_no_client_auth()
        }
    };
    cfg.alpn_protocols = vec![VERBS_ALPN.to_vec()];
    Arc::new(cfg)
}

/// One TLS attempt on dc1-a's verbs at `addr` as `cfg` says: the clear status (must admit),
/// the handshake and the status over TLS (`Err` with the TLS error or the refusal), then
/// [`steal_and_scribble`] sent anyway and everything that came back.
fn verbs_tls_attempt(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> (Result<(), String>, Vec<u8>) {
    let mut raw = tcp(addr);
    assert_eq!(read_status(&mut raw).expect("the clear status"), Ok(()), "admitted to the handshake");
    let conn = rustls::ClientConnection::new(cfg, ServerName::try_from("dc1-a").unwrap()).expect("a TLS client");
    let mut tls = rustls::StreamOwned::new(conn, raw);
    let admitted = match read_status(&mut tls) {
        Ok(r) => r,
        Err(e) => Err(format!("TLS: {e}")),
    };
    let _ = tls.write_all(&steal_and_scribble());
    let _ = tls.flush();
    (admitted, drain(&mut tls))
}

// ---------------------------------------------------------------------------------------
// The suite
// ---------------------------------------------------------------------------------------

/// The cluster's files.
struct Files {
    config: PathBuf,
    certs: PathBuf,
    /// dc1-a's MemStore file.
    memstore_a: PathBuf,
}

/// What dc1-a's MemStore holds at `offset`.
fn memstore_bytes(f: &Files, offset: u64, len: usize) -> Vec<u8> {
    let all = std::fs::read(&f.memstore_a).expect("read dc1-a's MemStore file");
    all[offset as usize..][..len].to_vec()
}

/// Runs `redt client --jsonl` over `input`; its answers.
fn jsonl(f: &Files, input: &[u8]) -> Vec<serde_json::Value> {
    let mut child = Command::new(REDT)
        .args(["client", "--jsonl", "--cluster", path_str(&f.config), "--certs", path_str(&f.certs)])
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redt client");
    let mut stdin = child.stdin.take().unwrap();
    // The client may stop reading an over-long line early; a broken pipe is its business.
    let _ = stdin.write_all(input);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redt client --jsonl: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON answer")).collect()
}

/// Runs `attack` and returns whether it passed; a failed one is added to `failed` (its
/// message went to standard error with the panic), so that one run names every attack that
/// succeeded where it should have failed.
fn check(failed: &mut Vec<&'static str>, name: &'static str, attack: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(attack)).is_err() {
        eprintln!("ATTACK NOT REFUSED AS IT SHOULD BE: {name}");
        failed.push(name);
    }
}

/// Every listener of a running node refuses outsiders and every oversized or malformed
/// input is refused naming why, while a legitimate client commits through the attacked node
/// during each attack (see the module docs for the list).
#[test]
fn attacks_fail_while_a_legitimate_client_commits() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = if Path::new("/dev/shm").is_dir() { tempfile::tempdir_in("/dev/shm") } else { tempfile::tempdir() }
        .expect("a temporary MemStore directory");
    let name = format!("attacks-{}", std::process::id());
    let config = work.path().join("attacks.yaml");
    std::fs::write(&config, topology_yaml(&name)).unwrap();
    let topo = Arc::new(Topology::load(&config).expect("the test topology loads"));
    let run_dir = work.path().join("run");
    let certs = run_dir.join("certs");
    let mut guard = ClusterGuard::new(run_dir.clone());
    let out = cluster_up(&config, &run_dir, 0, shm.path(), &["--no-failover"]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));
    let prefix = format!("redt-{}-e{}", topo.name, topo.epoch.0);
    let files = Files { config: config.clone(), certs: certs.clone(), memstore_a: shared_file(shm.path(), &prefix, A) };
    let a = &topo.nodes[A.0 as usize];
    let addr_a = a.listen;
    let metrics_a = SocketAddr::new(addr_a.ip(), PORT + 1);
    let client_id = load_identity(&certs, CLIENT_IDENTITY_NAME).expect("the client certificate");
    let ca = client_id.ca_cert.clone();
    let superblock = memstore_bytes(&files, 0, 64);
    assert_eq!(&superblock[..8], &MAGIC.to_le_bytes(), "dc1-a's MemStore file starts with its superblock");
    let foreign = ClusterCa::generate(&topo.name).expect("a foreign CA of the same cluster name");
    let ip_b = node_ip(&topo.nodes[B.0 as usize]).expect("dc1-b's IP");

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = {
        let _in_runtime = rt.enter();
        Arc::new(Client::connect(topo.clone(), &certs, Duration::from_secs(10)).expect("the legitimate client"))
    };
    let ledger = Arc::new(Ledger::default());
    let stop = Arc::new(AtomicBool::new(false));
    let legit = rt.spawn(legitimate_client(client.clone(), ledger.clone(), stop.clone()));
    // Warm up: connections open, first commits through both nodes.
    during(&ledger, "no attack (warm-up)", |_| std::thread::sleep(Duration::from_millis(20)));
    let endpoint = {
        let _in_runtime = rt.enter();
        quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("a QUIC endpoint for the attacker")
    };
    let status = status_frame(&topo);
    let handshakes_refused = || metric(metrics_a, "redt_transport_handshakes_refused_total", None);
    // The refused handshakes since `before`, once at least `n` (the node counts a refusal just
    // after the attacker sees it fail), or as many as it counted within 5 s.
    let refused_since = |before: f64, n: u32| {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let refused = handshakes_refused() - before;
            if refused >= f64::from(n) || Instant::now() >= deadline {
                return refused;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let verbs_server = |outcome: &str| {
        metric(metrics_a, "redt_verbs_server_connections_total", Some(&format!("outcome=\"{outcome}\"")))
    };
    let first = |i: u32, what: &str, why: &str| {
        if i == 0 {
            println!("  {what}: {why}");
        }
    };
    let mut failed = Vec::new();

    check(&mut failed, "QUIC without a client certificate", || {
        // Refused at the handshake; the request on it is never answered.
        let before = handshakes_refused();
        let n = during(&ledger, "QUIC without a client certificate", |i| {
            let got = rt.block_on(quic_request(&endpoint, quic_without_certificate(&ca), addr_a, &a.name, &status));
            let e = got.expect_err("a QUIC connection without a certificate was answered");
            first(i, "the attacker reads", &e);
            assert!(e.contains("peer sent no certificates"), "refused for want of a certificate: {e}");
        });
        let refused = refused_since(before, n);
        assert!(refused >= f64::from(n), "dc1-a counted {refused} refused handshakes for {n} attempts");
    });

    check(&mut failed, "QUIC with a foreign CA's certificates", || {
        // A client's and a node's (dc1-b's name and identity) of a CA with the same cluster
        // name, the attacker trusting the real CA so that only the node can refuse.
        let ids = [
            foreign.issue_client(CLIENT_IDENTITY_NAME).expect("a foreign client certificate"),
            foreign.issue_node("dc1-b", "dc1", ip_b).expect("a foreign node certificate"),
        ];
        let before = handshakes_refused();
        let n = during(&ledger, "QUIC with a foreign CA's certificate", |i| {
            let id = NodeIdentity { ca_cert: ca.clone(), ..ids[i as usize % 2].clone() };
            let got = rt.block_on(quic_request(&endpoint, quic_client_config(&id).unwrap(), addr_a, &a.name, &status));
            let e = got.expect_err("a QUIC connection with a foreign certificate was answered");
            first(i, "the attacker reads", &e);
            assert!(e.contains("invalid peer certificate"), "refused at the handshake: {e}");
        });
        let refused = refused_since(before, n);
        assert!(refused >= f64::from(n), "dc1-a counted {refused} refused handshakes for {n} attempts");
    });

    check(&mut failed, "QUIC malformed and oversized frames", || {
        // With the cluster's client certificate: each stream is reset with its reason, and the
        // same connection is served a well-formed request next.
        let frames = |reason: &str| metric(metrics_a, "redt_transport_frames_refused_total", Some(reason));
        let (malformed_before, oversized_before) = (frames("malformed"), frames("oversized"));
        let n = during(&ledger, "QUIC garbage, undecodable, truncated and oversized frames", |_| {
            rt.block_on(async {
                let conn = endpoint
                    .connect_with(quic_client_config(&client_id).unwrap(), addr_a, &a.name)
                    .unwrap()
                    .await
                    .expect("a client certificate connects");
                let mut undecodable = 8u32.to_le_bytes().to_vec();
                undecodable.extend_from_slice(&[0xff; 8]);
                assert_eq!(reset_code(&conn, &undecodable).await, Some(StreamCode::Malformed));
                let mut truncated = 100u32.to_le_bytes().to_vec();
                truncated.extend_from_slice(&[0; 10]);
                assert_eq!(reset_code(&conn, &truncated).await, Some(StreamCode::Malformed));
                let mut huge = u32::MAX.to_le_bytes().to_vec();
                huge.extend_from_slice(b"tiny");
                assert_eq!(reset_code(&conn, &huge).await, Some(StreamCode::Oversized));
                // Its first 4 bytes read as a length of 542 MB.
                assert_eq!(reset_code(&conn, b"GET / HTTP/1.1\r\n\r\n").await, Some(StreamCode::Oversized));
                let (mut send, mut recv) = conn.open_bi().await.unwrap();
                send.write_all(&status).await.unwrap();
                send.finish().unwrap();
                let reply = decode_reply(&recv.read_to_end(1 << 20).await.expect("a well-formed request is answered"));
                assert!(matches!(reply.body, Some(Body::NodeStatus(_))), "a status reply: {reply:?}");
                conn.close(0u32.into(), b"done");
            })
        });
        let (malformed, oversized) = (frames("malformed") - malformed_before, frames("oversized") - oversized_before);
        let want = 2.0 * f64::from(n);
        assert!(
            malformed >= want && oversized >= want,
            "dc1-a counted {malformed} malformed and {oversized} oversized frames for {n} attempts of 2 each"
        );
    });

    check(&mut failed, "JSON lines over the limits", || {
        // `redt client --jsonl`: a line over `limits.max_ops_per_txn` (refused by the
        // coordinator before it takes a transaction id) and one over
        // `limits.max_jsonl_line_bytes` (refused by the client without holding it), each
        // naming its limit; the next line of the same client commits. The CLI submits through
        // a node of its choice: the coordinators' counts are summed.
        let over_limit = || -> u64 {
            (0..topo.nodes.len() as u16)
                .map(|k| rt.block_on(client.status(NodeId(k), false)).expect("a node's status").refused_over_limit)
                .sum()
        };
        let before = over_limit();
        let mut input = String::from("{\"value\":[");
        input += &(0..65).map(|k| format!("[\"r\",{},null]", 1000 + k)).collect::<Vec<_>>().join(",");
        input += "]}\n";
        input += &format!("{}\n", "x".repeat(100 << 10));
        let n = during(&ledger, "JSON lines over the operations and line-length limits", |i| {
            let line = format!("{input}{{\"value\":[[\"append\",{},1]]}}\n", 2000 + i);
            let answers = jsonl(&files, line.as_bytes());
            assert_eq!(answers.len(), 3, "one answer per line: {answers:?}");
            first(i, "the attacker reads", &answers[0].to_string());
            first(i, "the attacker reads", &answers[1].to_string());
            assert_eq!(
                answers[0],
                serde_json::json!({"type": "fail",
                    "error": "transaction has 65 operations; the limit is 64 (limits.max_ops_per_txn)"})
            );
            assert_eq!(
                answers[1],
                serde_json::json!({"type": "fail",
                    "error": "input line has 102400 bytes; the limit is 65536 (limits.max_jsonl_line_bytes)"})
            );
            assert_eq!(answers[2]["type"], "ok", "the next line is served: {answers:?}");
        });
        let over = over_limit() - before;
        assert!(over >= u64::from(n), "the nodes counted {over} requests over a limit for {n} attempts");
    });

    check(&mut failed, "QUIC connections over transport.max_connections_per_peer", || {
        // Connections with the cluster's client certificate from one address, each held open
        // by a status call, until one is refused naming the cap; then every further one is.
        // The legitimate client's connection (from the same address) goes on.
        let mut held = Vec::new();
        let new_transport = || {
            let _in_runtime = rt.enter();
            Transport::client(TransportConfig::default(), &client_id, SocketSpec::Bind("127.0.0.1:0".parse().unwrap()))
                .expect("a client transport")
        };
        let status_msg = || Envelope {
            epoch: topo.epoch.0,
            from: u32::MAX,
            body: Some(Body::Status(StatusRequest { count_locks: false })),
        };
        let why = loop {
            let t = new_transport();
            match rt.block_on(t.call_addr(addr_a, &a.name, status_msg())) {
                Ok(_) => held.push(t),
                Err(e) => break e.to_string(),
            }
            assert!(
                held.len() <= QUIC_PEER_CAP,
                "{} QUIC connections admitted, the cap is {QUIC_PEER_CAP}",
                held.len()
            );
        };
        println!("  the attacker reads: {why}");
        let cap = format!("at most {QUIC_PEER_CAP} (transport.max_connections_per_peer)");
        assert!(why.contains(&cap), "refused naming the cap: {why}");
        during(&ledger, &format!("{} QUIC connections held, then more", held.len()), |_| {
            let t = new_transport();
            let e = rt.block_on(t.call_addr(addr_a, &a.name, status_msg())).expect_err("a connection over the cap");
            assert!(e.to_string().contains("refused the connection"), "refused over the cap: {e}");
        });
        // The held connections are still served.
        for t in &held {
            rt.block_on(t.call_addr(addr_a, &a.name, status_msg())).expect("a held connection is still served");
        }
        for t in held {
            t.close();
        }
    });

    let attack = steal_and_scribble();
    check(&mut failed, "TCP verbs in plaintext", || {
        // A well-formed READ of the superblock and a WRITE, sent without TLS after the clear
        // status: the server takes them for a TLS ClientHello and closes. Not a byte of the
        // MemStore comes back.
        let before = verbs_server("handshake_failed");
        let n = during(&ledger, "TCP verbs in plaintext", |i| {
            let mut raw = tcp(addr_a);
            assert_eq!(read_status(&mut raw).expect("the clear status"), Ok(()));
            raw.write_all(&attack).expect("send the request");
            let got = drain(&mut raw);
            first(i, "the attacker reads", &format!("{} bytes, then the end of the connection: {got:?}", got.len()));
            assert!(!contains(&got, &MAGIC.to_le_bytes()) && !contains(&got, &superblock), "the superblock leaked");
            // At most a TLS alert record (content type 21): the server's TLS refusing it.
            assert!(got.is_empty() || (got[0] == 21 && got.len() == 7), "a plaintext request was answered: {got:?}");
        });
        let counted = verbs_server("handshake_failed") - before;
        assert!(counted >= f64::from(n), "dc1-a's verbs server counted {counted} failed handshakes for {n} attempts");
    });

    let foreign_b = foreign.issue_node("dc1-b", "dc1", ip_b).expect("a foreign node certificate");
    for (what, cfg) in [
        ("TCP verbs over TLS without a client certificate", verbs_client_config(&ca, None)),
        ("TCP verbs over TLS with a foreign CA's node certificate", verbs_client_config(&ca, Some(&foreign_b))),
    ] {
        check(&mut failed, what, || {
            // The handshake fails; the request sent anyway gets nothing.
            let before = verbs_server("handshake_failed");
            let n = during(&ledger, what, |i| {
                let (admitted, got) = verbs_tls_attempt(addr_a, cfg.clone());
                let e = admitted.expect_err("admitted");
                first(i, "the attacker reads", &e);
                assert!(e.starts_with("TLS: ") && e.contains("alert"), "refused by the handshake: {e}");
                assert!(!contains(&got, &MAGIC.to_le_bytes()), "the superblock leaked");
            });
            let counted = verbs_server("handshake_failed") - before;
            assert!(
                counted >= f64::from(n),
                "dc1-a's verbs server counted {counted} failed handshakes for {n} attempts"
            );
        });
    }

    for (what, who, why) in [
        (
            "TCP verbs over TLS with the cluster's client certificate",
            CLIENT_IDENTITY_NAME,
            "client redt-client: only nodes of DC dc1 may connect",
        ),
        ("TCP verbs over TLS with dc2-a's node certificate", "dc2-a", "node dc2-a of DC dc2 is not a node of DC dc1"),
    ] {
        check(&mut failed, what, || {
            // Certificates of the cluster CA that are not dc1's nodes: refused after the
            // handshake, naming why; the request sent anyway gets nothing.
            let cfg = verbs_client_config(&ca, Some(&load_identity(&certs, who).unwrap()));
            let before = verbs_server("refused_identity");
            let n = during(&ledger, what, |i| {
                let (admitted, got) = verbs_tls_attempt(addr_a, cfg.clone());
                let e = admitted.expect_err("admitted");
                first(i, "the attacker reads", &e);
                assert!(e.contains(why), "refused naming why ({why}): {e}");
                assert!(!contains(&got, &MAGIC.to_le_bytes()), "the superblock leaked");
            });
            let refused = verbs_server("refused_identity") - before;
            assert!(
                refused >= f64::from(n),
                "dc1-a's verbs server counted {refused} refused identities for {n} attempts"
            );
        });
    }
    check(&mut failed, "TCP verbs: nothing written", || {
        assert_ne!(&memstore_bytes(&files, SCRIBBLE_AT, 8), SCRIBBLE, "an attacker wrote into dc1-a's MemStore");
    });

    check(&mut failed, "idle TCP verbs connections over verbs.max_connections_per_peer", || {
        // From one address: the cap's worth wait in their handshake (and stay open), every
        // further one is refused in the clear naming the cap, and dc1-b's verbs to dc1-a (its
        // own address) go on.
        let mut held = Vec::new();
        let first_refusal = loop {
            let mut s = tcp(addr_a);
            assert_ne!(s.local_addr().unwrap().ip(), ip_b, "the attacker is not dc1-b");
            match read_status(&mut s).expect("a status") {
                Ok(()) => held.push(s),
                Err(why) => break why,
            }
            assert!(
                held.len() <= VERBS_PEER_CAP,
                "{} idle connections admitted, the cap is {VERBS_PEER_CAP}",
                held.len()
            );
        };
        println!("  the attacker reads: {first_refusal}");
        let cap = format!("at most {VERBS_PEER_CAP} (verbs.max_connections_per_peer)");
        assert!(first_refusal.contains(&cap), "refused naming the cap: {first_refusal}");
        let before = verbs_server("refused_max_connections_per_peer");
        let n = during(&ledger, &format!("{} idle TCP verbs connections held, then more", held.len()), |_| {
            let mut s = tcp(addr_a);
            let why = read_status(&mut s).expect("a status").expect_err("admitted over the cap");
            assert!(why.contains("too many connections from") && why.contains(&cap), "{why}");
        });
        let refused = verbs_server("refused_max_connections_per_peer") - before;
        assert!(refused >= f64::from(n), "dc1-a's verbs server counted {refused} refusals at the cap for {n} attempts");
        // Still open: the node did not shed them to serve the others.
        for s in &mut held {
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            assert!(
                matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
                "an idle connection was closed while the others were served"
            );
        }
    });

    check(&mut failed, "inserts that abort and deletes of missing keys", || {
        // Transactions within every limit that would each have left records behind: 60 writes
        // of keys nobody has, then an append to key 0, which holds the legitimate client's
        // counter, not a list — the append aborts it in every DC after phase 1 created the 60
        // records; and 63 deletes of keys nobody has. dc1-a's record heap stays where it was:
        // the aborted inserts' records go back to the free lists, the deletes create nothing.
        let heap = || {
            // A fresh status sample (a node shares one for up to a second).
            std::thread::sleep(Duration::from_millis(1100));
            rt.block_on(client.status(A, false)).expect("dc1-a's status").record_heap.expect("dc1-a's record heap")
        };
        let before = heap();
        let mut key = 1_000_000u64;
        let mut next = || {
            key += 1;
            key
        };
        // Each attempt: ten of each, one after the other (without reclamation, ~40 KB of
        // dc1-a's heap per attempt).
        let n = during(&ledger, "inserts that abort and deletes of missing keys", |i| {
            for j in 0..20 {
                let inserts = j % 2 == 0;
                let ops: Vec<KvOp> = if inserts {
                    (0..60).map(|_| KvOp::Write(next(), vec![1; 8])).chain([KvOp::Append(0, 7)]).collect()
                } else {
                    (0..63).map(|_| KvOp::Delete(next())).collect()
                };
                let out = rt.block_on(client.submit(A, kv_call(KV, &ops)));
                if j < 2 {
                    first(i, "the attacker reads", &format!("{:?}", out.status));
                }
                if inserts {
                    assert!(matches!(out.status, TxnStatus::Aborted(_)), "the append aborts: {:?}", out.status);
                }
            }
        });
        let after = heap();
        println!(
            "  dc1-a's record heap: {} bytes used before {n} attempts, {} after ({} free)",
            before.used_bytes, after.used_bytes, after.free_bytes
        );
        // The free lists' directory (576 bytes) is made on the first retirement.
        assert!(
            after.used_bytes <= before.used_bytes + 1024,
            "dc1-a's record heap grew from {} to {} bytes over {n} attempts",
            before.used_bytes,
            after.used_bytes
        );
    });

    check(&mut failed, "inserts and deletes of fresh keys that commit", || {
        // Each attempt commits the insert of 64 keys nobody had, then their delete: every
        // attempt leaves records that hold no row. Once their grace has passed, the next
        // request a node serves frees them (the legitimate client sends plenty), and the next
        // inserts take them back; the B+-tree nodes the deletes emptied are merged away and the
        // next splits take them back. So dc1-a's record heap does not grow by ~32 records of
        // 384 bytes per attempt.
        let heap = || {
            std::thread::sleep(Duration::from_millis(1100));
            rt.block_on(client.status(A, false)).expect("dc1-a's status")
        };
        let before = heap();
        let mut key = 5_000_000u64;
        let mut attempts = 0u64;
        let n = during(&ledger, "inserts and deletes of fresh keys that commit", |i| {
            for _ in 0..4 {
                let keys: Vec<u64> = (0..64).map(|k| key + k).collect();
                key += 64;
                attempts += 1;
                for ops in [
                    keys.iter().map(|&k| KvOp::Write(k, vec![3; 8])).collect::<Vec<_>>(),
                    keys.iter().map(|&k| KvOp::Delete(k)).collect(),
                ] {
                    // A conflict (No-Wait) with the legitimate client or a freeing is retried.
                    let mut tries = 0;
                    let status = loop {
                        let out = rt.block_on(client.submit(A, kv_call(KV, &ops)));
                        tries += 1;
                        if matches!(out.status, TxnStatus::Committed) || tries == 20 {
                            break out.status;
                        }
                        first(i, "the attacker retries after", &format!("{:?}", out.status));
                    };
                    if i == 0 {
                        first(i, "the attacker reads", &format!("{status:?}"));
                    }
                    assert!(matches!(status, TxnStatus::Committed), "the attacker commits: {status:?}");
                }
            }
        });
        // The last attempt's records are due a grace after its delete.
        std::thread::sleep(DELETED_GRACE + Duration::from_millis(500));
        let after = heap();
        let (b, a) = (before.record_heap.expect("a heap"), after.record_heap.expect("a heap"));
        let record_bytes = 384u64;
        let kept_for_good = attempts * 32 * record_bytes;
        println!(
            "  dc1-a: {attempts} rounds of 64 fresh keys inserted and deleted; record heap {} bytes used before, {} after \
             ({} free); {} deleted records freed, {} waiting; without freeing ~{kept_for_good} bytes would stay",
            b.used_bytes, a.used_bytes, a.free_bytes, after.deleted_records_freed, after.deleted_records_waiting
        );
        assert!(n > 0 && after.deleted_records_freed > before.deleted_records_freed, "dc1-a freed deleted records");
        assert!(
            a.used_bytes < b.used_bytes + kept_for_good / 4,
            "dc1-a's record heap grew from {} to {} bytes over {attempts} rounds",
            b.used_bytes,
            a.used_bytes
        );
    });

    check(&mut failed, "a status counting locks with the client certificate", || {
        // A scan of the whole index on the node's executor thread: for operators only.
        let refused_role = || rt.block_on(client.status(A, false)).expect("dc1-a's status").refused_role;
        let before = refused_role();
        let n = during(&ledger, "a status counting locks with the client certificate", |i| {
            let e = rt.block_on(client.status(A, true)).expect_err("a client's status counting locks was answered");
            first(i, "the attacker reads", &e.to_string());
            assert!(e.to_string().contains("needs the operator role"), "refused naming the role: {e}");
        });
        let role = refused_role() - before;
        assert!(role >= u64::from(n), "dc1-a counted {role} refusals by role for {n} attempts");
    });

    check(&mut failed, "outcome queries for ids nobody reserved", || {
        // Sixteen at once on one connection, each asking dc1-a to wait 10 s for a made-up id:
        // four are answered after one lookup round (the caller reserved none of them), the
        // other twelve refused over the per-connection cap.
        let over = || rt.block_on(client.status(A, false)).expect("dc1-a's status").refused_over_limit;
        let before = over();
        let mut refused = 0u64;
        let n = during(&ledger, "outcome queries for ids nobody reserved", |i| {
            let (answered, over_cap) = rt.block_on(async {
                let conn = endpoint
                    .connect_with(quic_client_config(&client_id).unwrap(), addr_a, &a.name)
                    .expect("connect")
                    .await
                    .expect("a client's connection is admitted");
                let mut asks = tokio::task::JoinSet::new();
                for k in 0..16u64 {
                    let conn = conn.clone();
                    let frame = outcome_query_frame(&topo, (u64::from(i) << 32) | (0xdead_0000 + k));
                    asks.spawn(async move {
                        let (mut send, mut recv) = conn.open_bi().await.expect("a stream");
                        send.write_all(&frame).await.expect("the query is written");
                        let _ = send.finish();
                        decode_reply(&recv.read_to_end(1 << 20).await.expect("an answer"))
                    });
                }
                let (mut answered, mut over_cap) = (0, 0);
                while let Some(reply) = asks.join_next().await {
                    match reply.expect("the ask ran").body {
                        Some(Body::TxnOutcome(o)) => {
                            assert_ne!(o.state, 0, "a made-up id cannot be committed: {o:?}");
                            answered += 1;
                        }
                        Some(Body::Error(e)) if e.code == redt_coordinator::error_code::OVER_LIMIT => {
                            if over_cap == 0 && i == 0 {
                                println!("  the attacker reads: {}", e.message);
                            }
                            over_cap += 1;
                        }
                        other => panic!("an outcome query answered {other:?}"),
                    }
                }
                conn.close(0u32.into(), b"done");
                (answered, over_cap)
            });
            assert_eq!(answered + over_cap, 16);
            assert!(answered <= 4 && over_cap >= 12, "{answered} answered, {over_cap} over the cap");
            refused += over_cap;
        });
        let counted = over() - before;
        assert!(counted >= refused, "dc1-a counted {counted} refusals over a limit for {refused} in {n} attempts");
    });

    check(&mut failed, "phase 1s of the most operations the limits admit", || {
        // Eight read-only calls of `limits.max_ops_per_txn` reads at once through dc1-a, again
        // and again: each is answered, and the legitimate client commits meanwhile.
        // Each call reads its own keys: readers of one absent key share a bounded lock.
        let ops = |c: u64| -> Vec<KvOp> { (0..64).map(|k| KvOp::Read(2_000_000 + 64 * c + k)).collect() };
        during(&ledger, "phase 1s of the most operations the limits admit", |i| {
            let outs = rt.block_on(async {
                let mut calls = tokio::task::JoinSet::new();
                for c in 0..8 {
                    let (client, call) = (client.clone(), kv_call(KV, &ops(c)));
                    calls.spawn(async move { client.submit(A, call).await.status });
                }
                calls.join_all().await
            });
            if i == 0 {
                println!("  the attacker reads: {:?}", outs[0]);
            }
            // Answered, each of them: committed, or aborted where two calls' absent keys share
            // a lock group whose readers are counted (never left unknown).
            assert!(outs.iter().all(|s| matches!(s, TxnStatus::Committed | TxnStatus::Aborted(_))), "{outs:?}");
            assert!(outs.contains(&TxnStatus::Committed), "{outs:?}");
        });
    });

    // Last: were it obeyed, it would cut dc1 from dc2 and every later commit with it.
    check(&mut failed, "netem set with the client certificate", || {
        // An admin request with a client certificate (`netem set --partition on` would cut dc1
        // from dc2, stopping every commit): refused by every node, naming the operator role;
        // the commits go on.
        let refused_role = || rt.block_on(client.status(A, false)).expect("dc1-a's status").refused_role;
        let before = refused_role();
        let n = during(&ledger, "netem set with the client certificate", |i| {
            let out = redt(&[
                "netem",
                "set",
                "--from",
                "dc1",
                "--to",
                "dc2",
                "--partition",
                "on",
                "--cluster",
                path_str(&config),
                "--certs",
                path_str(&certs),
                "--identity",
                CLIENT_IDENTITY_NAME,
            ]);
            let err = String::from_utf8_lossy(&out.stderr);
            first(i, "the attacker reads", err.lines().next().unwrap_or_default());
            assert!(!out.status.success(), "netem set with a client certificate: {}", text(&out));
            assert!(
                err.contains("needs the operator role") && err.contains("4 of 4 nodes did not apply"),
                "refused by every node naming the role: {}",
                text(&out)
            );
        });
        let role = refused_role() - before;
        assert!(role >= u64::from(n), "dc1-a counted {role} refusals by role for {n} attempts");
    });

    stop.store(true, Ordering::Relaxed);
    rt.block_on(legit).expect("the legitimate client's task");
    println!(
        "the legitimate client: {} committed, {} not (the last: {})",
        ledger.commits.lock().unwrap().len(),
        ledger.other.load(Ordering::Relaxed),
        ledger.last_other.lock().unwrap()
    );
    drop(client);
    drop(rt);
    let out = guard.down();
    assert!(out.status.success(), "redt cluster down: {}", text(&out));
    assert!(failed.is_empty(), "attacks not refused as they should be: {failed:?}");
}

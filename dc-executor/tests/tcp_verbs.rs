//! The TCP verbs backend of the `redt-tcp` baseline (RedT §6.5): the same results, memory
//! and verb counts as the in-process backend, exact atomics under concurrency, and a server
//! that refuses bad frames without falling over. (Who may connect: `tcp_verbs_tls.rs`.)

#[path = "../../verbs/tests/pki/mod.rs"]
mod pki;
#[path = "../../verbs/tests/verbs_client/mod.rs"]
mod verbs_client;

use pki::TestCa;
use proptest::prelude::*;
use redt_dc_executor::verbs::{Error, MAX_FRAME_BYTES, WIRE_VERSION};
use redt_dc_executor::{
    BTree, BTreeConfig, Completion, DoorbellBatch, Layout, LocalVerbs, ServerLimits, TcpVerbs, TcpVerbsServer, Verbs,
    VerbsTls, WorkRequest,
};
use redt_proto::{MemStoreConfig, NodeId, Offset};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().expect("a valid socket address")
}

/// One CA for the whole test binary (key generation is the slow part).
fn ca() -> &'static TestCa {
    static CA: OnceLock<TestCa> = OnceLock::new();
    CA.get_or_init(|| TestCa::new("tcp-verbs"))
}

/// The node names of the test DC `dc1`: A is `a`, B is `b`.
fn names() -> Vec<(NodeId, String)> {
    vec![(A, "a".to_string()), (B, "b".to_string())]
}

/// The verbs TLS of node `n` of `dc1`.
fn tls(n: NodeId) -> VerbsTls {
    let name = if n == A { "a" } else { "b" };
    let m = ca().node("dc1", name);
    VerbsTls::new(m.chain, m.key, m.ca, "dc1", names()).expect("a node certificate of dc1")
}

/// A two-node DC of `size_bytes` heap regions, a server for each node, and one TCP client
/// per node (each reaching the other through its server).
struct Dc {
    local: Arc<LocalVerbs>,
    servers: Vec<TcpVerbsServer>,
    clients: Vec<Arc<TcpVerbs>>,
}

fn dc(size_bytes: u64) -> Dc {
    let local = Arc::new(LocalVerbs::in_process([A, B], size_bytes));
    let servers: Vec<TcpVerbsServer> = [A, B]
        .iter()
        .map(|&n| TcpVerbsServer::spawn(any_port(), n, local.clone(), tls(n)).expect("server binds"))
        .collect();
    let addrs: HashMap<NodeId, SocketAddr> = servers.iter().map(|s| (s.node(), s.local_addr())).collect();
    let clients = [A, B]
        .iter()
        .map(|&own| Arc::new(TcpVerbs::new(own, local.clone(), addrs.clone(), tls(own))))
        .collect::<Vec<_>>();
    Dc { local, servers, clients }
}

// ---------------------------------------------------------------------------------------
// (a) Equivalence with LocalVerbs
// ---------------------------------------------------------------------------------------

const SIZE: u64 = 512;

/// One step of a run: a lone verb or a doorbell batch, to one node.
#[derive(Clone, Debug)]
enum Step {
    Single(NodeId, WorkRequest),
    Batch(NodeId, Vec<WorkRequest>),
}

/// Mostly aligned words inside the region, sometimes unaligned or past the end.
fn atomic_offset() -> impl Strategy<Value = Offset> {
    prop_oneof![
        12 => (0..SIZE / 8).prop_map(|w| Offset(w * 8)),
        1 => (0..SIZE + 16).prop_map(Offset),
        1 => (SIZE / 8..SIZE / 8 + 4).prop_map(|w| Offset(w * 8)),
    ]
}

/// Small values so compare-and-swaps hit as well as miss.
fn small() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0..4u64, 1 => any::<u64>()]
}

fn work_request() -> impl Strategy<Value = WorkRequest> {
    prop_oneof![
        (0..SIZE + 8, 0..48u32).prop_map(|(o, len)| WorkRequest::Read { offset: Offset(o), len }),
        (0..SIZE + 8, proptest::collection::vec(any::<u8>(), 0..48))
            .prop_map(|(o, data)| WorkRequest::Write { offset: Offset(o), data }),
        (atomic_offset(), small(), small()).prop_map(|(offset, expected, new)| WorkRequest::CompareAndSwap {
            offset,
            expected,
            new
        }),
        (atomic_offset(), small()).prop_map(|(offset, add)| WorkRequest::FetchAndAdd { offset, add }),
        (atomic_offset(), small(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(offset, compare, compare_mask, swap, swap_mask)| WorkRequest::MaskedCompareAndSwap {
                offset,
                compare,
                compare_mask,
                swap,
                swap_mask
            }
        ),
        (atomic_offset(), any::<u64>(), any::<u64>())
            .prop_map(|(offset, add, boundary)| WorkRequest::MaskedFetchAndAdd { offset, add, boundary }),
    ]
}

fn node() -> impl Strategy<Value = NodeId> {
    prop_oneof![Just(A), Just(B)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (node(), work_request()).prop_map(|(n, wr)| Step::Single(n, wr)),
        (node(), proptest::collection::vec(work_request(), 0..12)).prop_map(|(n, wrs)| Step::Batch(n, wrs)),
    ]
}

/// What a step gave: the completions (one per request, `Pending` if it did not run) and
/// the error, as text.
type Outcome = (Vec<Completion>, Option<String>);

fn run(v: &dyn Verbs, step: &Step) -> Outcome {
    let err = |e: Error| Some(e.to_string());
    match step {
        Step::Single(n, wr) => {
            let r = match *wr {
                WorkRequest::Read { offset, len } => {
                    let mut buf = vec![0u8; len as usize];
                    v.read(*n, offset, &mut buf).map(|()| Completion::Read(buf))
                }
                WorkRequest::Write { offset, ref data } => v.write(*n, offset, data).map(|()| Completion::Written),
                WorkRequest::CompareAndSwap { offset, expected, new } => {
                    v.compare_and_swap(*n, offset, expected, new).map(Completion::Atomic)
                }
                WorkRequest::FetchAndAdd { offset, add } => v.fetch_and_add(*n, offset, add).map(Completion::Atomic),
                WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask } => v
                    .masked_compare_and_swap(*n, offset, compare, compare_mask, swap, swap_mask)
                    .map(Completion::Atomic),
                WorkRequest::MaskedFetchAndAdd { offset, add, boundary } => {
                    v.masked_fetch_and_add(*n, offset, add, boundary).map(Completion::Atomic)
                }
                WorkRequest::Persist => v.persist(*n).map(|()| Completion::Written),
            };
            match r {
                Ok(c) => (vec![c], None),
                Err(e) => (vec![Completion::Pending], err(e)),
            }
        }
        Step::Batch(n, wrs) => {
            let mut batch = DoorbellBatch::new();
            for wr in wrs {
                batch.push(wr.clone());
            }
            let r = v.post_batch(*n, &mut batch);
            ((0..batch.len()).map(|i| batch.completion(i).clone()).collect(), r.err().and_then(err))
        }
    }
}

fn memory(v: &LocalVerbs, n: NodeId) -> Vec<u8> {
    let r = v.region(n).expect("region of a DC node");
    let mut buf = vec![0u8; r.len() as usize];
    r.read(0, &mut buf);
    buf
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random steps through TcpVerbs (own node A: local for A, TCP for B) and through
    /// LocalVerbs on a twin DC give the same completions, errors, final memory and counts.
    #[test]
    fn tcp_verbs_match_local_verbs(steps in proptest::collection::vec(step(), 1..40)) {
        let twin = LocalVerbs::in_process([A, B], SIZE);
        let d = dc(SIZE);
        let tcp = &d.clients[0];
        for (i, s) in steps.iter().enumerate() {
            let want = run(&twin, s);
            let got = run(tcp.as_ref(), s);
            prop_assert_eq!(&got, &want, "step {} ({:?})", i, s);
        }
        for n in [A, B] {
            prop_assert!(memory(&d.local, n) == memory(&twin, n), "memory of {} differs", n);
        }
        prop_assert_eq!(tcp.counters().snapshot(), twin.counters().snapshot());
    }
}

/// A batch posted twice reports the second posting's completions only, and a batch stops
/// at its first failing request with the completions before it, over TCP as locally.
#[test]
fn reposted_batch_reports_fresh_completions() {
    let d = dc(SIZE);
    let tcp = &d.clients[0];
    let mut batch = DoorbellBatch::new();
    batch.fetch_and_add(Offset(0), 1);
    batch.fetch_and_add(Offset(3), 1); // unaligned: stops the batch
    for n in [A, B] {
        assert!(matches!(tcp.post_batch(n, &mut batch), Err(Error::Unaligned { node, .. }) if node == n));
        assert_eq!(batch.completion(0), &Completion::Atomic(0));
        assert_eq!(batch.completion(1), &Completion::Pending);
    }
    let mut ok = DoorbellBatch::new();
    ok.fetch_and_add(Offset(0), 1);
    tcp.post_batch(B, &mut ok).expect("a valid batch");
    assert_eq!(ok.completion(0), &Completion::Atomic(1));
    assert!(matches!(tcp.post_batch(NodeId(7), &mut ok), Err(Error::UnknownNode(_))));
    assert_eq!(ok.completion(0), &Completion::Pending);
}

// ---------------------------------------------------------------------------------------
// (b) Concurrent atomics
// ---------------------------------------------------------------------------------------

/// Threads on both nodes fetch-and-add one word of node B (A's over TCP, B's locally) and
/// one word of node A (the other way round): the totals are exact and every old value is
/// seen exactly once.
#[test]
fn concurrent_fetch_and_add_from_two_nodes_is_exact() {
    const THREADS_PER_NODE: usize = 3;
    const ROUNDS: u64 = 1500;
    let d = dc(4096);
    let words = [(B, Offset(64)), (A, Offset(128))];
    let mut handles = Vec::new();
    for client in &d.clients {
        for _ in 0..THREADS_PER_NODE {
            let client = client.clone();
            handles.push(std::thread::spawn(move || {
                let mut seen = [Vec::new(), Vec::new()];
                for r in 0..ROUNDS {
                    let w = (r % 2) as usize;
                    let (n, off) = words[w];
                    seen[w].push(client.fetch_and_add(n, off, 1).expect("FAA over TCP"));
                }
                seen
            }));
        }
    }
    let mut seen = [Vec::new(), Vec::new()];
    for h in handles {
        let [a, b] = h.join().expect("a client thread finishes");
        seen[0].extend(a);
        seen[1].extend(b);
    }
    let total = 2 * THREADS_PER_NODE as u64 * ROUNDS / 2;
    for (w, (n, off)) in words.iter().enumerate() {
        let mut buf = [0u8; 8];
        d.local.read(*n, *off, &mut buf).expect("read back");
        assert_eq!(u64::from_le_bytes(buf), total, "word of {n}");
        seen[w].sort_unstable();
        assert_eq!(seen[w], (0..total).collect::<Vec<_>>(), "old values of {n}'s word");
    }
    let faa: u64 = d.clients.iter().map(|c| c.counters().snapshot().faa).sum();
    assert_eq!(faa, 2 * total);
}

/// The B+-tree (`btree`) in node B's MemStore, built and read from node A through B's
/// server: two writer threads (one handle with a cache, one without) insert disjoint keys
/// while a third scans; every scan is sorted and in range, and the in-process view of B's
/// region ends with exactly the keys written.
#[test]
fn a_btree_in_another_nodes_memstore_over_tcp_verbs() {
    let cfg = MemStoreConfig { size_bytes: 4 << 20, index_bytes: 4096, ring_bytes: 4096 };
    let layout = Layout::from_config(&cfg);
    let d = dc(layout.size);
    layout.format(d.local.region(B).expect("node B's region"));
    let config = BTreeConfig { node_bytes: 256, cache_nodes: 64 };
    let tree = BTree::create(d.clients[0].as_ref(), B, &layout, config).expect("a tree in B over TCP");
    let writing = std::sync::atomic::AtomicU64::new(2);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (client, layout, writing, anchor) = (d.clients[0].clone(), &layout, &writing, tree.anchor());
            s.spawn(move || {
                let t = BTree::open(client.as_ref(), B, layout, anchor, if w == 0 { 64 } else { 0 }).unwrap();
                for k in (0..1500u64).filter(|k| k % 2 == w) {
                    t.insert(client.as_ref(), k * 7 % 1500, k).unwrap();
                }
                writing.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            });
        }
        let (client, layout, writing, anchor) = (d.clients[0].clone(), &layout, &writing, tree.anchor());
        s.spawn(move || {
            let t = BTree::open(client.as_ref(), B, layout, anchor, 64).unwrap();
            for from in (0..).map(|i| i * 37 % 1500) {
                let last = writing.load(std::sync::atomic::Ordering::Acquire) == 0;
                let got = t.scan(client.as_ref(), from, from + 100, 50).unwrap();
                assert!(
                    got.windows(2).all(|w| w[0].0 < w[1].0) && got.iter().all(|e| (from..=from + 100).contains(&e.0))
                );
                if last {
                    break;
                }
            }
        });
    });
    let local = BTree::open(d.local.as_ref(), B, &layout, tree.anchor(), 0).unwrap();
    let all = local.scan(d.local.as_ref(), 0, u64::MAX, usize::MAX).unwrap();
    assert_eq!(
        all,
        (0..1500u64)
            .map(|k| (k * 7 % 1500, k))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(local.check(d.local.as_ref()).unwrap().entries, 1500);
}

// ---------------------------------------------------------------------------------------
// (c) Bad frames
// ---------------------------------------------------------------------------------------

/// Reads one reply frame; `None` if the server closed the connection instead.
fn read_reply(s: &mut impl Read) -> Option<Vec<u8>> {
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).ok()?;
    let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// Whether `body` is a refusal: this wire version, no completion, error status, kind
/// "refused".
fn is_refusal(body: &[u8]) -> bool {
    body.len() >= 7 && body[0] == WIRE_VERSION && body[1..5] == [0, 0, 0, 0] && body[5] == 1 && body[6] == 4
}

/// An authenticated connection to `server` as node A, driven by hand.
fn raw(server: &TcpVerbsServer) -> verbs_client::Stream {
    let m = ca().node("dc1", "a");
    let ca_cert = m.ca.clone();
    let name = if server.node() == A { "a" } else { "b" };
    verbs_client::connect(server.local_addr(), verbs_client::config(&ca_cert, Some(m)), name)
        .expect("node A is admitted")
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// A request body of this wire version for node `n` (the version byte, then `rest`).
fn body(n: NodeId, rest: &[u8]) -> Vec<u8> {
    let mut b = vec![WIRE_VERSION];
    b.extend_from_slice(&n.0.to_le_bytes());
    b.extend_from_slice(rest);
    b
}

#[test]
fn bad_frames_are_refused_and_the_server_keeps_serving() {
    let d = dc(4096);
    let server = &d.servers[1]; // node B's

    // Garbage body: a refusal, and the connection keeps serving.
    let mut s = raw(server);
    s.write_all(&frame(&[9, 9, 9])).unwrap();
    assert!(is_refusal(&read_reply(&mut s).expect("a reply to garbage")));
    // Unknown op, on the same connection.
    let mut unknown = body(B, &[1, 0, 0, 0, 77]);
    unknown.extend_from_slice(&0u64.to_le_bytes());
    s.write_all(&frame(&unknown)).unwrap();
    assert!(is_refusal(&read_reply(&mut s).expect("a reply to an unknown op")));
    // A count that promises more requests than the body holds.
    s.write_all(&frame(&body(B, &[0xff, 0xff, 0xff, 0xff]))).unwrap();
    assert!(is_refusal(&read_reply(&mut s).expect("a reply to a lying count")));
    // A READ whose reply would exceed the frame limit.
    let mut huge = body(B, &[1, 0, 0, 0, 1]);
    huge.extend_from_slice(&0u64.to_le_bytes());
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    s.write_all(&frame(&huge)).unwrap();
    assert!(is_refusal(&read_reply(&mut s).expect("a reply to a huge READ")));
    // A request of wire version 1 (plain TCP, without TLS).
    s.write_all(&frame(&[1, 1, 0, 0, 0, 0, 0])).unwrap();
    assert!(is_refusal(&read_reply(&mut s).expect("a reply to an old version")));

    // Oversized length prefix: a refusal or a closed connection, then nothing more.
    let mut s = raw(server);
    s.write_all(&((MAX_FRAME_BYTES as u32) + 1).to_le_bytes()).unwrap();
    if let Some(body) = read_reply(&mut s) {
        assert!(is_refusal(&body));
    }
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "the connection is closed after an oversized prefix");

    // A frame cut short by the peer closing.
    let mut s = raw(server);
    s.write_all(&100u32.to_le_bytes()).unwrap();
    s.write_all(&[WIRE_VERSION, 1, 0]).unwrap();
    s.flush().unwrap();
    drop(s);

    // A good client is still served, remotely and in a batch.
    let tcp = &d.clients[0];
    tcp.write(B, Offset(8), b"still here").expect("write over TCP");
    let mut buf = [0u8; 10];
    tcp.read(B, Offset(8), &mut buf).expect("read over TCP");
    assert_eq!(&buf, b"still here");
    let mut batch = DoorbellBatch::new();
    let i = batch.fetch_and_add(Offset(64), 5);
    let j = batch.read(Offset(8), 5);
    tcp.post_batch(B, &mut batch).expect("batch over TCP");
    assert_eq!((batch.atomic_result(i), batch.read_result(j)), (0, &b"still"[..]));
}

/// A server only serves its own node: a client whose peer list sends B's verbs to A's server
/// refuses that server (its certificate is A's), and a request for B that reaches A's server
/// anyway gets `UnknownNode` on a connection that stays usable.
#[test]
fn a_server_serves_only_its_own_node() {
    let d = dc(4096);
    let a_addr = d.servers[0].local_addr();
    let wrong = TcpVerbs::new(A, d.local.clone(), HashMap::from([(B, a_addr)]), tls(A));
    assert!(is_backend(wrong.fetch_and_add(B, Offset(0), 1), a_addr));
    assert!(matches!(wrong.read(NodeId(7), Offset(0), &mut [0u8; 8]), Err(Error::UnknownNode(n)) if n == NodeId(7)));

    let mut s = raw(&d.servers[0]);
    let mut faa = body(B, &[1, 0, 0, 0, 4]);
    faa.extend_from_slice(&0u64.to_le_bytes());
    faa.extend_from_slice(&1u64.to_le_bytes());
    for _ in 0..2 {
        s.write_all(&frame(&faa)).unwrap();
        let reply = read_reply(&mut s).expect("a reply");
        // No completion, error status, kind "unknown node", node B.
        assert_eq!(&reply[1..], &[0, 0, 0, 0, 1, 3, 1, 0]);
    }
    assert_eq!(d.local.region(A).unwrap().fetch_and_add(0, 0), 0);
    assert_eq!(d.local.region(B).unwrap().fetch_and_add(0, 0), 0);
}

// ---------------------------------------------------------------------------------------
// (d) Unreachable and stopped peers
// ---------------------------------------------------------------------------------------

fn is_backend(r: Result<impl std::fmt::Debug, Error>, addr: SocketAddr) -> bool {
    matches!(r, Err(Error::Backend(ref m)) if m.contains(&addr.to_string()))
}

#[test]
fn an_unreachable_peer_is_a_backend_error() {
    let closed = TcpListener::bind(any_port()).unwrap().local_addr().unwrap(); // dropped: nobody listens
    let local = Arc::new(LocalVerbs::in_process([A], 4096));
    let tcp = TcpVerbs::new(A, local, HashMap::from([(B, closed)]), tls(A)).with_io_timeout(Duration::from_secs(2));
    assert!(is_backend(tcp.fetch_and_add(B, Offset(0), 1), closed));
    assert!(is_backend(tcp.read(B, Offset(0), &mut [0u8; 8]), closed));
    let mut batch = DoorbellBatch::new();
    batch.fetch_and_add(Offset(0), 1);
    assert!(is_backend(tcp.post_batch(B, &mut batch), closed));
    assert_eq!(batch.completion(0), &Completion::Pending);
    // The own node is still reachable.
    assert_eq!(tcp.fetch_and_add(A, Offset(0), 1).unwrap(), 0);
}

/// A peer given by host name (`advertise: NAME:PORT`) is resolved when a connection
/// is opened: `localhost` reaches the server; a name that does not resolve fails the verb
/// naming the peer by its name (`b`, not `node#1`), its address and the lookup.
#[test]
fn a_peer_host_name_is_resolved_when_connecting() {
    let local = Arc::new(LocalVerbs::in_process([A, B], 4096));
    let server = TcpVerbsServer::spawn(any_port(), B, local.clone(), tls(B)).expect("server binds");
    let named: redt_proto::HostPort = format!("localhost:{}", server.local_addr().port()).parse().unwrap();
    let tcp = TcpVerbs::new(A, local.clone(), [(B, named)], tls(A));
    assert_eq!(tcp.fetch_and_add(B, Offset(0), 5).unwrap(), 0);
    assert_eq!(tcp.fetch_and_add(B, Offset(0), 0).unwrap(), 5);

    // `.invalid` never resolves (RFC 2606).
    let nowhere: redt_proto::HostPort = "nowhere.invalid:7100".parse().unwrap();
    let tcp = TcpVerbs::new(A, local, [(B, nowhere)], tls(A)).with_io_timeout(Duration::from_secs(2));
    match tcp.fetch_and_add(B, Offset(0), 1) {
        Err(Error::Backend(m)) => {
            assert!(m.starts_with("b at nowhere.invalid:7100: cannot resolve `nowhere.invalid`: "), "{m}");
        }
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[test]
fn a_stopped_server_gives_backend_errors() {
    let d = dc(4096);
    let tcp = &d.clients[0];
    let addr = d.servers[1].local_addr();
    assert_eq!(tcp.fetch_and_add(B, Offset(0), 1).unwrap(), 0); // leaves a pooled connection
    d.servers[1].shutdown();
    assert!(is_backend(tcp.fetch_and_add(B, Offset(0), 1), addr)); // the pooled one is closed
    assert!(is_backend(tcp.fetch_and_add(B, Offset(0), 1), addr)); // nobody listens any more
    assert_eq!(tcp.fetch_and_add(A, Offset(0), 1).unwrap(), 0);
    d.servers[1].shutdown(); // idempotent
}

// ---------------------------------------------------------------------------------------
// (e) Idle connections
// ---------------------------------------------------------------------------------------

/// Polls `done` every 10 ms for up to 10 s.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !done() {
        assert!(t0.elapsed() < Duration::from_secs(10), "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A served connection with no request for `idle_timeout` after its first is closed by the
/// server, and its slot counts no more against the cap.
#[test]
fn an_idle_connection_is_closed() {
    let local = Arc::new(LocalVerbs::in_process([A, B], 4096));
    let limits =
        ServerLimits { max_connections: 1, idle_timeout: Duration::from_millis(200), ..ServerLimits::default() };
    let server = TcpVerbsServer::spawn_with_limits(any_port(), B, local.clone(), tls(B), limits).expect("server binds");
    let mut quiet = raw(&server);
    let mut faa = body(B, &[1, 0, 0, 0, 4]);
    faa.extend_from_slice(&0u64.to_le_bytes());
    faa.extend_from_slice(&1u64.to_le_bytes());
    quiet.write_all(&frame(&faa)).unwrap();
    assert!(!is_refusal(&read_reply(&mut quiet).expect("the first request is served")));
    let t0 = std::time::Instant::now();
    assert!(read_reply(&mut quiet).is_none(), "nothing more is sent on an idle connection");
    assert!(t0.elapsed() < Duration::from_secs(5), "the server closed the idle connection");
    let tcp = TcpVerbs::new(A, local.clone(), HashMap::from([(B, server.local_addr())]), tls(A));
    eventually("the idle connection's slot is free again", || tcp.fetch_and_add(B, Offset(0), 1).is_ok());
}

//! The `redt` binary end to end (RedT §4.2; docs/design.md §2, §4): `redt cluster up` starts one
//! `redt node` process per node of a copy of `configs/local-fast.yaml` (cross-process
//! `/dev/shm`-style MemStore files, QUIC between the processes), then the library `Client`,
//! `redt client --jsonl` and `redt netem set` drive it, and `redt cluster down --wipe`
//! stops it — also when an assertion fails (see [`ClusterGuard`]).

mod common;
use common::{cluster_up, local_fast_yaml, path_str, redt, text, ClusterGuard, REDT};
use redt_coordinator::{Client, TxnAnswer, TxnIds, TxnStatus};
use redt_dc_executor::{DcHandle, KvOp, Layout, LocalVerbs, Verbs};
use redt_proto::{DcId, NodeId, TableId, Topology};
use redt_protocol::call::kv_call;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Table `kv` of local-fast.yaml: one 2048-byte cell per record.
const KV: TableId = TableId(2);
/// Listen port of this test's cluster (the embedded-cluster tests use 7610–7630).
const PORT: u16 = 7640;

/// Whether process `pid` runs (exists and is not a zombie waiting to be reaped).
fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn balance(value: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    let n = value.len().min(8);
    b[..n].copy_from_slice(&value[..n]);
    i64::from_le_bytes(b)
}

/// Submits `ops` to `node` until it commits (a No-Wait lock conflict, or a lock still held
/// until a late phase 2 arrives, aborts it), for at most `limit`.
async fn commit_eventually(client: &Client, node: NodeId, ops: &[KvOp], limit: Duration) -> TxnAnswer {
    let t0 = Instant::now();
    loop {
        let out = client.submit(node, kv_call(KV, ops)).await;
        if out.status == TxnStatus::Committed {
            return out;
        }
        if t0.elapsed() > limit {
            panic!("{ops:?} on {node} did not commit within {limit:?}; last status {:?}", out.status);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The balances of `keys` read in one read-only transaction through `node`.
async fn read_all(client: &Client, node: NodeId, keys: &[u64]) -> Vec<i64> {
    let reads: Vec<KvOp> = keys.iter().map(|&k| KvOp::Read(k)).collect();
    let out = commit_eventually(client, node, &reads, Duration::from_secs(10)).await;
    assert_eq!(out.reads.len(), keys.len());
    out.reads.iter().map(|r| balance(r.as_deref().expect("a read returns the value"))).collect()
}

/// Spawns `tasks` closed-loop bank transfer tasks on `set`: task `t` submits, through node
/// `t % 4`, transfers of 1–100 between random accounts of `first..first + accounts` until
/// `deadline`, and counts each outcome in `counts` (committed, aborted, unknown; a call not
/// answered within 5 s — its node was killed — counts as unknown).
fn spawn_transfers(
    set: &mut tokio::task::JoinSet<()>,
    client: &Arc<Client>,
    (first, accounts): (u64, u64),
    tasks: u64,
    deadline: Instant,
    counts: &Arc<[AtomicU64; 3]>,
) {
    for t in 0..tasks {
        let (client, counts) = (client.clone(), counts.clone());
        set.spawn(async move {
            // xorshift64*, seeded per task.
            let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
            let mut next = move |n: u64| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                s.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
            };
            let node = NodeId((t % 4) as u16);
            while Instant::now() < deadline {
                let a = first + next(accounts);
                let b = first + (a - first + 1 + next(accounts - 1)) % accounts;
                let x = 1 + next(100) as i64;
                let call = kv_call(KV, &[KvOp::Add(a, -x), KvOp::Add(b, x)]);
                let out = tokio::time::timeout(Duration::from_secs(5), client.submit(node, call)).await;
                let i = match out.map(|o| o.status) {
                    Ok(TxnStatus::Committed) => 0,
                    Ok(TxnStatus::Aborted(_)) => 1,
                    Ok(TxnStatus::Unknown(_)) | Err(_) => 2,
                };
                counts[i].fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// Every replica's view of `keys`, read straight from the node processes' shared MemStore
/// files: per key, per replica node, (lock word, balance); a record never created reads as
/// unlocked zero.
fn replicas_from_files(topo: &Topology, shm_dir: &Path, keys: &[u64]) -> BTreeMap<u64, Vec<(NodeId, u64, i64)>> {
    let prefix = format!("redt-{}-e{}", topo.name, topo.epoch.0);
    let layout = Layout::from_config(&topo.memstore);
    let dcs: Vec<DcHandle> = topo
        .dcs
        .iter()
        .map(|dc| {
            for &n in &dc.nodes {
                let f = redt_dc_executor::verbs::shared_file(shm_dir, &prefix, n);
                assert!(f.is_file(), "{} exists (opening it must not create it)", f.display());
            }
            let verbs = LocalVerbs::open_shared(shm_dir, &prefix, dc.nodes.iter().copied(), layout.size)
                .expect("map the DC's MemStore files");
            let verbs: Arc<dyn Verbs> = Arc::new(verbs);
            DcHandle::new(topo, verbs)
        })
        .collect();
    let schema = topo.table(KV).expect("table kv");
    keys.iter()
        .map(|&key| {
            let p = topo.partition_of(schema, key);
            let reps = topo.partitions[p.0 as usize]
                .replicas
                .iter()
                .map(|&node| {
                    let dc = topo.nodes[node.0 as usize].dc;
                    let image = dcs[dc.0 as usize].read_record(node, KV, key).expect("read_record");
                    let (lock, v) = image.map(|r| (r.lock, balance(&r.values[0]))).unwrap_or((0, 0));
                    (node, lock, v)
                })
                .collect();
            (key, reps)
        })
        .collect()
}

/// Polls the MemStore files until every replica of `keys` is unlocked and they agree;
/// returns the values.
fn wait_replicas_settled(topo: &Topology, shm_dir: &Path, keys: &[u64], limit: Duration) -> BTreeMap<u64, i64> {
    let t0 = Instant::now();
    loop {
        let reps = replicas_from_files(topo, shm_dir, keys);
        let settled = reps.values().all(|r| r.iter().all(|&(_, lock, v)| lock == 0 && v == r[0].2));
        if settled {
            return reps.into_iter().map(|(k, r)| (k, r[0].2)).collect();
        }
        if t0.elapsed() > limit {
            let bad: Vec<_> = reps.iter().filter(|(_, r)| r.iter().any(|&(_, l, v)| l != 0 || v != r[0].2)).collect();
            panic!("replicas not settled after {limit:?}: {bad:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn netem_partition(config: &Path, certs: &Path, from: &str, to: &str, on: bool) {
    let out = redt(&[
        "netem",
        "set",
        "--from",
        from,
        "--to",
        to,
        "--partition",
        if on { "on" } else { "off" },
        "--cluster",
        path_str(config),
        "--certs",
        path_str(certs),
    ]);
    assert!(out.status.success(), "redt netem set --from {from} --to {to}: {}", text(&out));
}

/// `redt cluster up` runs the local-fast topology as 4 node processes; `redt client --jsonl`
/// answers Jepsen list-append lines (and a `fail` for a malformed one); concurrent bank
/// transfers through the library client keep the total on every replica (RedT §4.2); with
/// dc4 cut off by `redt netem set --partition on`, a transaction on p0 (no replica in dc4)
/// commits and those on p1–p3 abort (docs/design.md §2); after healing every partition commits;
/// `redt cluster down --wipe` stops every process and removes the MemStore files.
#[test]
fn cluster_up_processes() {
    let work = tempfile::tempdir().expect("a temporary directory");
    // MemStore files in tmpfs when there is one, in a directory of our own either way.
    let shm = if Path::new("/dev/shm").is_dir() { tempfile::tempdir_in("/dev/shm") } else { tempfile::tempdir() }
        .expect("a temporary MemStore directory");
    let name = format!("cluster-processes-{}", std::process::id());
    let config = work.path().join("local-fast-test.yaml");
    // A 2 s phase-1 timeout (local-fast's own is 500 ms): the first transaction runs over
    // fresh connections while the nodes' heartbeats open theirs and other process tests load
    // both cores; at 500 ms it once timed out waiting for votes.
    let yaml = format!("{}\ntimeouts: {{ phase1_timeout: 2s }}\n", local_fast_yaml(&name, PORT));
    std::fs::write(&config, yaml).unwrap();
    let run_dir = work.path().join("run");
    let certs = run_dir.join("certs");
    let topo = Arc::new(Topology::load(&config).expect("the edited topology loads"));

    let mut guard = ClusterGuard::new(run_dir.clone());
    let t0 = Instant::now();
    // A node killed and a DC cut off here come back to the same placement (recovery);
    // failover would remove them for good (coordinator/tests/failover.rs).
    let out = cluster_up(&config, &run_dir, 64, shm.path(), &["--no-failover"]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));
    println!("cluster up in {:?}: {}", t0.elapsed(), String::from_utf8_lossy(&out.stdout).trim());
    let pids: Vec<u32> = topo
        .nodes
        .iter()
        .map(|n| {
            let f = run_dir.join("pids").join(format!("{}.pid", n.name));
            std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display())).trim().parse().unwrap()
        })
        .collect();
    assert!(pids.iter().all(|&p| pid_alive(p)), "every node process runs: {pids:?}");
    let prefix = format!("redt-{}-e{}", topo.name, topo.epoch.0);
    let files: Vec<PathBuf> =
        topo.nodes.iter().map(|n| redt_dc_executor::verbs::shared_file(shm.path(), &prefix, n.id)).collect();
    assert!(files.iter().all(|f| f.is_file()), "every node maps its MemStore file under --shm-dir: {files:?}");

    // `redt client --jsonl`: one answer per line, in order.
    let mut child = Command::new(REDT)
        .args(["client", "--jsonl", "--cluster", path_str(&config), "--certs", path_str(&certs)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redt client");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            b"{\"value\":[[\"append\",1,5],[\"r\",1,null]]}\n{\"value\":[[\"append\",1\n{\"value\":[[\"r\",1,null]]}\n{\"value\":[[\"r\",1,null]]}\n{\"value\":[[\"r\",1,null]]}\n",
        )
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redt client --jsonl: {}", text(&out));
    let answers: Vec<serde_json::Value> = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("answer {l:?} is not JSON: {e}")))
        .collect();
    assert_eq!(answers.len(), 5, "one answer per line: {}", text(&out));
    assert_eq!(answers[0], serde_json::json!({"type": "ok", "value": [["append", 1, 5], ["r", 1, [5]]]}));
    assert_eq!(answers[1]["type"], "fail", "a malformed line fails: {}", answers[1]);
    assert!(answers[1]["error"].as_str().is_some_and(|e| !e.is_empty()), "and says why: {}", answers[1]);
    // With early ack, a read sent right after the append can meet the append's locks at a
    // DC its phase 2 has not reached yet: No-Wait aborts it ("fail", certainly not
    // committed). Every later read either sees the append or fails that way, and one of
    // the three sees it.
    let ok = serde_json::json!({"type": "ok", "value": [["r", 1, [5]]]});
    for a in &answers[2..] {
        assert!(
            *a == ok || (a["type"] == "fail" && a["error"].as_str().is_some_and(|e| e.contains("lock conflict"))),
            "the append stays: {a}"
        );
    }
    assert!(answers[2..].contains(&ok), "a later read sees the append: {answers:?}");

    // The audit's line of 20,000 reads of new keys is refused by the coordinator,
    // naming the limit; a line longer than `limits.max_jsonl_line_bytes` is refused by the
    // client without being read into memory; the next line is served.
    let mut input = String::from("{\"value\":[");
    for k in 0..20_000 {
        input += &format!("[\"r\",{},null],", 100_000 + k);
    }
    input.pop();
    input += "]}\n";
    input += &format!("{}\n", "x".repeat(2 << 20));
    input += "{\"value\":[[\"append\",2,9],[\"r\",2,null]]}\n";
    let mut child = Command::new(REDT)
        .args(["client", "--jsonl", "--cluster", path_str(&config), "--certs", path_str(&certs)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redt client");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redt client --jsonl: {}", text(&out));
    let answers: Vec<serde_json::Value> =
        String::from_utf8(out.stdout.clone()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), 3, "one answer per line: {}", text(&out));
    assert_eq!(
        answers[0],
        serde_json::json!({"type": "fail",
            "error": "transaction has 20000 operations; the limit is 1024 (limits.max_ops_per_txn)"})
    );
    assert_eq!(
        answers[1],
        serde_json::json!({"type": "fail",
            "error": "input line has 2097152 bytes; the limit is 1048576 (limits.max_jsonl_line_bytes)"})
    );
    assert_eq!(answers[2], serde_json::json!({"type": "ok", "value": [["append", 2, 9], ["r", 2, [9]]]}));

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = {
        let _in_runtime = rt.enter();
        Arc::new(Client::connect(topo.clone(), &certs, Duration::from_secs(30)).expect("the library client connects"))
    };

    // The bank (RedT §4.2): concurrent transfers between 32 accounts keep the total.
    const ACCOUNTS: u64 = 32;
    const FIRST: u64 = 100;
    const FUNDS: i64 = 1000;
    const TASKS: u64 = 4;
    const RUN: Duration = Duration::from_secs(3);
    let accounts: Vec<u64> = (FIRST..FIRST + ACCOUNTS).collect();
    let (c, a, u) = rt.block_on(async {
        let funding: Vec<KvOp> = accounts.iter().map(|&k| KvOp::Add(k, FUNDS)).collect();
        commit_eventually(&client, NodeId(1), &funding, Duration::from_secs(10)).await;
        let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
        let deadline = Instant::now() + RUN;
        let mut tasks = tokio::task::JoinSet::new();
        spawn_transfers(&mut tasks, &client, (FIRST, ACCOUNTS), TASKS, deadline, &counts);
        while let Some(r) = tasks.join_next().await {
            r.expect("a transfer task panicked");
        }
        (counts[0].load(Ordering::Relaxed), counts[1].load(Ordering::Relaxed), counts[2].load(Ordering::Relaxed))
    });
    println!("bank over processes: {c} committed, {a} aborted, {u} unknown in {RUN:?} ({TASKS} tasks)");
    assert!(c > 0, "some transfers commit");
    std::thread::sleep(Duration::from_secs(1));
    let replicas = wait_replicas_settled(&topo, shm.path(), &accounts, Duration::from_secs(15));
    assert_eq!(replicas.values().sum::<i64>(), ACCOUNTS as i64 * FUNDS, "every replica keeps the total: {replicas:?}");
    rt.block_on(async {
        for n in 0..4 {
            let seen = read_all(&client, NodeId(n), &accounts).await;
            assert_eq!(seen.iter().sum::<i64>(), ACCOUNTS as i64 * FUNDS, "node {n} reads the total: {seen:?}");
            assert_eq!(seen, replicas.values().copied().collect::<Vec<_>>(), "node {n} reads what the replicas hold");
        }
    });

    // Cut dc4 off from every other DC (both ways) with `redt netem set`.
    for dc in ["dc1", "dc2", "dc3"] {
        netem_partition(&config, &certs, "dc4", dc, true);
    }
    let dc4 = DcId(3);
    let schema = topo.table(KV).unwrap();
    let keys: Vec<u64> = (400..404).collect();
    let outcomes: BTreeMap<u64, TxnStatus> = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for &k in &keys {
            let client = client.clone();
            set.spawn(async move { (k, client.submit(NodeId(0), kv_call(KV, &[KvOp::Add(k, 1)])).await.status) });
        }
        let mut outcomes = BTreeMap::new();
        while let Some(r) = set.join_next().await {
            let (k, status) = r.unwrap();
            outcomes.insert(k, status);
        }
        outcomes
    });
    println!("with dc4 partitioned off: {outcomes:?}");
    for &k in &keys {
        let p = topo.partition_of(schema, k);
        let in_dc4 = topo.partitions[p.0 as usize].replicas.iter().any(|&n| topo.nodes[n.0 as usize].dc == dc4);
        if in_dc4 {
            assert!(matches!(outcomes[&k], TxnStatus::Aborted(_)), "key {k} ({p}, a replica in dc4): {outcomes:?}");
        } else {
            assert_eq!(outcomes[&k], TxnStatus::Committed, "key {k} ({p}, no replica in dc4): {outcomes:?}");
        }
    }
    assert_eq!(outcomes[&400], TxnStatus::Committed, "p0 is the partition without a replica in dc4");

    // Heal; then every partition commits again and every replica applies it.
    for dc in ["dc1", "dc2", "dc3"] {
        netem_partition(&config, &certs, "dc4", dc, false);
    }
    rt.block_on(async {
        for &k in &keys {
            commit_eventually(&client, NodeId(0), &[KvOp::Add(k, 1)], Duration::from_secs(20)).await;
        }
        let all: Vec<KvOp> = keys.iter().map(|&k| KvOp::Add(k, 1)).collect();
        commit_eventually(&client, NodeId(3), &all, Duration::from_secs(20)).await;
        assert_eq!(read_all(&client, NodeId(2), &keys).await, vec![3, 2, 2, 2], "only the committed adds applied");
    });
    let values = wait_replicas_settled(&topo, shm.path(), &keys, Duration::from_secs(15));
    assert_eq!(values, BTreeMap::from([(400, 3), (401, 2), (402, 2), (403, 2)]), "every replica agrees");
    drop(client);
    drop(rt);

    let out = guard.down();
    assert!(out.status.success(), "redt cluster down: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("4 node processes stopped"), "{}", text(&out));
    assert!(pids.iter().all(|&p| !pid_alive(p)), "every node process ended: {pids:?}");
    assert!(files.iter().all(|f| !f.exists()), "--wipe removed the MemStore files under --shm-dir: {files:?}");
}

/// Every ring of the cluster, read from the node processes' MemStore files: the undecided
/// entries left, as (node, transaction).
fn undecided_entries(topo: &Topology, shm_dir: &Path) -> Vec<(NodeId, redt_proto::TxnId)> {
    let prefix = format!("redt-{}-e{}", topo.name, topo.epoch.0);
    let layout = Layout::from_config(&topo.memstore);
    let mut out = Vec::new();
    for dc in &topo.dcs {
        let verbs = LocalVerbs::open_shared(shm_dir, &prefix, dc.nodes.iter().copied(), layout.size)
            .expect("map the DC's MemStore files");
        for &n in &dc.nodes {
            for (_, e) in redt_dc_executor::unfinished_entries(&verbs, n, &layout).expect("read the ring") {
                out.push((n, e.txn));
            }
        }
    }
    out
}

/// Each node's incarnation counter (how many times a node process started on its MemStore),
/// read from the MemStore files.
fn incarnations(topo: &Topology, shm_dir: &Path) -> BTreeMap<NodeId, u64> {
    let prefix = format!("redt-{}-e{}", topo.name, topo.epoch.0);
    let layout = Layout::from_config(&topo.memstore);
    let mut out = BTreeMap::new();
    for dc in &topo.dcs {
        let verbs = LocalVerbs::open_shared(shm_dir, &prefix, dc.nodes.iter().copied(), layout.size)
            .expect("map the DC's MemStore files");
        for &n in &dc.nodes {
            let mut word = [0u8; 8];
            verbs.read(n, layout.incarnation_offset(), &mut word).expect("read the incarnation counter");
            out.insert(n, u64::from_le_bytes(word));
        }
    }
    out
}

/// Recovery on real processes (docs/design.md §2 and "Recovery"): bank transfers run through every
/// node while one node process is killed with SIGKILL (its coordinators die between phases,
/// its executor and replay with them) and started again on its MemStore file. Recovery on
/// the survivors and on the restarted node decides every transaction the kill left open:
/// afterwards no ring holds an undecided entry, no record is locked, every replica agrees,
/// the total is kept, and the restarted node coordinates transfers again, under ids of its next
/// incarnation (above every id of its first life). The survivors' failure detectors suspect
/// the killed node (and its DC) while it is down, and nobody suspects it once it is back.
#[test]
fn a_killed_node_restarts_and_recovery_decides_what_it_left() {
    const PORT_KILL: u16 = 7660;
    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = if Path::new("/dev/shm").is_dir() { tempfile::tempdir_in("/dev/shm") } else { tempfile::tempdir() }
        .expect("a temporary MemStore directory");
    let name = format!("cluster-kill-{}", std::process::id());
    let config = work.path().join("local-fast-kill.yaml");
    std::fs::write(&config, local_fast_yaml(&name, PORT_KILL)).unwrap();
    let run_dir = work.path().join("run");
    let certs = run_dir.join("certs");
    let topo = Arc::new(Topology::load(&config).expect("the edited topology loads"));
    let mut guard = ClusterGuard::new(run_dir.clone());
    // The killed node (its whole DC in local-fast) comes back to the same placement
    // (recovery); failover would remove its DC for good.
    let up = |extra: &[&str]| {
        let mut args = vec!["--no-failover"];
        args.extend_from_slice(extra);
        cluster_up(&config, &run_dir, 64, shm.path(), &args)
    };
    let out = up(&[]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));
    let victim = &topo.nodes[2];

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = {
        let _in_runtime = rt.enter();
        Arc::new(Client::connect(topo.clone(), &certs, Duration::from_secs(30)).expect("the library client connects"))
    };
    const ACCOUNTS: u64 = 32;
    const FIRST: u64 = 100;
    const FUNDS: i64 = 1000;
    let accounts: Vec<u64> = (FIRST..FIRST + ACCOUNTS).collect();
    let (counts, first_life) = rt.block_on(async {
        let funding: Vec<KvOp> = accounts.iter().map(|&k| KvOp::Add(k, FUNDS)).collect();
        commit_eventually(&client, NodeId(1), &funding, Duration::from_secs(10)).await;
        // A transaction the victim coordinates in its first life (a read: the total stays).
        let first_life = commit_eventually(&client, victim.id, &[KvOp::Read(FIRST)], Duration::from_secs(10)).await.txn;
        let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut tasks = tokio::task::JoinSet::new();
        spawn_transfers(&mut tasks, &client, (FIRST, ACCOUNTS), 8, deadline, &counts);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let killed = redt(&["cluster", "kill", "--node", &victim.name, "--run-dir", path_str(&run_dir)]);
        assert!(killed.status.success(), "redt cluster kill: {}", text(&killed));
        let at = Instant::now();
        while let Some(r) = tasks.join_next().await {
            r.expect("a transfer task panicked");
        }
        ((counts.iter().map(|c| c.load(Ordering::Relaxed)).collect::<Vec<_>>(), at), first_life)
    });
    let (counts, killed_at) = counts;
    println!("transfers around the kill of {}: {counts:?} (committed, aborted, unknown)", victim.name);
    assert!(counts[0] > 0, "some transfers commit");

    // With its DC down (n = 3: one replica of a partition unreachable), the survivors still
    // decide every transaction they hold an entry of, the dead node's included.
    let survivors_done = loop {
        let left: Vec<_> = undecided_entries(&topo, shm.path()).into_iter().filter(|&(n, _)| n != victim.id).collect();
        if left.is_empty() {
            break killed_at.elapsed();
        }
        assert!(killed_at.elapsed() < Duration::from_secs(30), "survivors still hold undecided entries: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    println!("the survivors decided every entry they hold {survivors_done:?} after the kill");

    // `redt status` reports the dead node unreachable and the survivors' empty rings (a
    // node's ring figures may be up to a second old: asked again until they catch up).
    let status = wait_status(&run_dir, Duration::from_secs(5), |nodes| {
        nodes
            .iter()
            .enumerate()
            .all(|(i, n)| i == victim.id.0 as usize || (n["undecided_entries"] == 0 && n["recoveries"]["blocked"] == 0))
    })
    .unwrap_or_else(|last| panic!("the survivors' status still shows undecided entries after 5 s: {last}"));
    for (i, n) in status.iter().enumerate() {
        if i == victim.id.0 as usize {
            assert!(n["error"].is_string(), "the killed node is reported unreachable: {n}");
        } else {
            assert_eq!(n["undecided_entries"], 0, "{n}");
            assert_eq!(n["recoveries"]["blocked"], 0, "{n}");
        }
    }

    // Every survivor's failure detector suspects the killed node, and its DC with it (its only
    // node), within a generous bound (no timing is asserted).
    let victim_dc = topo.dcs[victim.dc.0 as usize].name.as_str();
    let suspects = wait_status(&run_dir, Duration::from_secs(30), |nodes| {
        nodes.iter().enumerate().filter(|&(i, _)| i != victim.id.0 as usize).all(|(_, n)| {
            names(&n["suspected_nodes"]) == [victim.name.as_str()] && names(&n["suspected_dcs"]) == [victim_dc]
        })
    })
    .unwrap_or_else(|last| panic!("the survivors do not all suspect {} within 30 s: {last}", victim.name));
    for (i, n) in suspects.iter().enumerate().filter(|&(i, _)| i != victim.id.0 as usize) {
        assert!(n["suspicions_total"].as_u64() >= Some(1), "survivor {i} counted its suspicion: {n}");
    }

    // Start the killed node again on its MemStore file, as `redt cluster up` started it.
    let restarted = Instant::now();
    let started = redt(&["cluster", "start", "--node", &victim.name, "--run-dir", path_str(&run_dir)]);
    assert!(started.status.success(), "redt cluster start: {}", text(&started));
    let settled = loop {
        let left = undecided_entries(&topo, shm.path());
        if left.is_empty() {
            break Ok(());
        }
        if restarted.elapsed() > Duration::from_secs(40) {
            break Err(left);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if let Err(left) = settled {
        panic!("undecided entries 40 s after the restart: {left:?}");
    }
    println!("every entry decided {:?} after the restart", restarted.elapsed());
    // What the restarted process settled before it served (`relock.rs`), if anything.
    let log = std::fs::read_to_string(run_dir.join("logs").join(format!("{}.log", victim.name))).unwrap_or_default();
    for line in log.lines().filter(|l| l.contains("lock words")) {
        println!("{line}");
    }
    // Once it is back, no node suspects it (nor any other node) any more.
    wait_status(&run_dir, Duration::from_secs(30), |nodes| {
        nodes.iter().all(|n| names(&n["suspected_nodes"]).is_empty() && names(&n["suspected_dcs"]).is_empty())
    })
    .unwrap_or_else(|last| panic!("a node still suspects another 30 s after the restart: {last}"));
    let replicas = wait_replicas_settled(&topo, shm.path(), &accounts, Duration::from_secs(20));
    assert_eq!(replicas.values().sum::<i64>(), ACCOUNTS as i64 * FUNDS, "every replica keeps the total: {replicas:?}");
    let second_life = rt.block_on(async {
        commit_eventually(&client, victim.id, &[KvOp::Add(FIRST, -1), KvOp::Add(FIRST + 1, 1)], Duration::from_secs(20))
            .await
            .txn
    });
    // The restarted process took the next incarnation from its MemStore file before issuing
    // ids: its ids lie above every id of its first life (docs/design.md, "Recovery", point 4).
    assert_eq!(TxnIds::incarnation_of(first_life), 1, "{first_life}");
    assert_eq!(TxnIds::incarnation_of(second_life), 2, "{second_life}");
    assert!(first_life < second_life, "{first_life} then {second_life}");
    assert_eq!(incarnations(&topo, shm.path())[&victim.id], 2, "the victim started twice");
    assert!(
        incarnations(&topo, shm.path()).iter().all(|(&n, &i)| i == if n == victim.id { 2 } else { 1 }),
        "every other node started once"
    );
    drop(client);
    drop(rt);
    // Every node, the restarted one too, reports no undecided entry and no lock held, as the
    // MemStore files show.
    let status = status_json(&run_dir, true);
    let nodes = status["nodes"].as_array().expect("a nodes array");
    assert_eq!(nodes.len(), topo.nodes.len());
    for n in nodes {
        assert_eq!(n["undecided_entries"], 0, "{n}");
        assert_eq!(n["locks_held"], 0, "{n}");
        assert!(n["committed"].as_u64().is_some(), "{n}");
    }
    let out = guard.down();
    assert!(out.status.success(), "redt cluster down: {}", text(&out));
}

/// The strings of a JSON array (none for anything else).
fn names(v: &serde_json::Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str()).collect()).unwrap_or_default()
}

/// Asks `redt status --json` every 200 ms until `done` holds for its `nodes` array (which it
/// returns), for at most `limit`; the last answer as text if it never does.
fn wait_status(
    run_dir: &Path,
    limit: Duration,
    done: impl Fn(&[serde_json::Value]) -> bool,
) -> Result<Vec<serde_json::Value>, String> {
    let t0 = Instant::now();
    loop {
        let status = status_json(run_dir, false);
        let nodes = status["nodes"].as_array().cloned().unwrap_or_default();
        if done(&nodes) {
            return Ok(nodes);
        }
        if t0.elapsed() > limit {
            return Err(status.to_string());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `redt status --json` of the cluster in `run_dir` (with `--locks` if asked), parsed.
fn status_json(run_dir: &Path, locks: bool) -> serde_json::Value {
    let mut args = vec!["status", "--json", "--window", "0s", "--timeout", "1s", "--run-dir", path_str(run_dir)];
    if locks {
        args.push("--locks");
    }
    let out = redt(&args);
    assert!(out.status.success(), "redt status: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("redt status --json: {e}: {}", text(&out)))
}

/// The topology file's `timeouts:` section (docs/recovery.md, "Timeouts"): `redt config check` prints
/// the values a node would use, the file's over the topology's defaults; a section whose
/// values break an ordering once the defaults are filled in is refused by `config check` and
/// by `cluster up` before any node starts, naming the key; a flag out of range is refused.
#[test]
fn the_timeouts_section_is_checked_before_any_node_starts() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let base = local_fast_yaml(&format!("cluster-timeouts-{}", std::process::id()), 7680);
    let good = work.path().join("good.yaml");
    std::fs::write(
        &good,
        format!(
            "{base}\ntimeouts:\n  phase1_timeout: 1s 500ms\n  recovery: {{ turn: 70ms }}\n  detector: {{ timeout: 300ms }}\n"
        ),
    )
    .unwrap();
    let out = redt(&["config", "check", path_str(&good)]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(shown.contains("phase1_timeout 1s 500ms,"), "{shown}");
    assert!(shown.contains("turn 70ms,"), "{shown}");
    assert!(shown.contains("clock_skew_bound 250ms,"), "an unset key keeps its default: {shown}");
    assert!(shown.contains("inside a DC 20ms / 300ms; between DCs 20ms / 300ms"), "{shown}");

    let bad = work.path().join("bad.yaml");
    std::fs::write(&bad, format!("{base}\ntimeouts:\n  recovery: {{ retry_base: 6s }}\n")).unwrap();
    let out = redt(&["config", "check", path_str(&bad)]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("timeouts.recovery.retry_base: 6s must not be above timeouts.recovery.retry_max"), "{err}");
    let run_dir = work.path().join("run");
    let out = redt(&["cluster", "up", "--config", path_str(&bad), "--run-dir", path_str(&run_dir)]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timeouts.recovery.retry_base"), "{}", text(&out));
    assert!(!run_dir.join("pids").exists(), "no node was started");

    let fast = work.path().join("fast.yaml");
    std::fs::write(&fast, format!("{base}\ntimeouts:\n  detector: {{ timeout: 10ms }}\n")).unwrap();
    let out = redt(&["config", "check", path_str(&fast)]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("timeouts.detector.timeout: 10ms must be above timeouts.detector.interval (20ms"), "{err}");

    let unknown = work.path().join("unknown.yaml");
    std::fs::write(&unknown, format!("{base}\ntimeouts: {{ phase2_timeout: 1s }}\n")).unwrap();
    let out = redt(&["config", "check", path_str(&unknown)]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `phase2_timeout`"), "{}", text(&out));

    let out = redt(&[
        "cluster",
        "up",
        "--config",
        path_str(&good),
        "--run-dir",
        path_str(&run_dir),
        "--phase1-timeout",
        "0s",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be above zero"), "{}", text(&out));
    assert!(!run_dir.join("pids").exists(), "no node was started");
}

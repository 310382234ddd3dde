//! `durability: disk` end to end (docs/durability.md): a `redt cluster up` of a
//! copy of `configs/local-fast.yaml` with disk images, acknowledged writes, then every node
//! process killed with SIGKILL and every shared-memory MemStore file deleted (what a reboot
//! leaves), then `redt cluster up` again: each node loads its image, restores it, and every
//! acknowledged write reads back.
//!
//! What this cannot show: the kernel's page cache of the images survives a process kill, so
//! writes copied to an image but not yet `fdatasync`ed are not lost here as a power loss
//! could lose them. The model test `dc-executor/tests/durability.rs` covers that.

mod common;
use common::{cluster_up, local_fast_yaml, path_str, redt, text, ClusterGuard};
use redt_coordinator::{Client, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::{NodeId, TableId, Topology};
use redt_protocol::call::kv_call;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Table `kv` of local-fast.yaml.
const KV: TableId = TableId(2);
/// Listen port of this test's cluster (other process tests use 7640–7660).
const PORT: u16 = 7670;
/// Keys written, one transaction each.
const KEYS: u64 = 60;

fn value_of(key: u64) -> i64 {
    (key * 7919 + 13) as i64
}

async fn submit_until_committed(client: &Client, node: NodeId, ops: &[KvOp]) -> Vec<Option<Vec<u8>>> {
    let t0 = Instant::now();
    loop {
        let out = client.submit(node, kv_call(KV, ops)).await;
        if out.status == TxnStatus::Committed {
            return out.reads;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{ops:?} did not commit in 20 s: {:?}", out.status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn acknowledged_writes_survive_the_loss_of_every_memstore_file() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = if Path::new("/dev/shm").is_dir() { tempfile::tempdir_in("/dev/shm") } else { tempfile::tempdir() }
        .expect("a temporary MemStore directory");
    let name = format!("durable-{}", std::process::id());
    let config = work.path().join("local-fast-disk.yaml");
    std::fs::write(&config, format!("{}\ndurability: disk\n", local_fast_yaml(&name, PORT))).unwrap();
    let run_dir = work.path().join("run");
    let certs = run_dir.join("certs");
    let topo = Arc::new(Topology::load(&config).expect("the edited topology loads"));
    let mut guard = ClusterGuard::new(run_dir.clone());
    let out = cluster_up(&config, &run_dir, 8, shm.path(), &["--no-failover"]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let connect = || {
        let _in_runtime = rt.enter();
        Client::connect(topo.clone(), &certs, Duration::from_secs(30)).expect("the library client connects")
    };
    let client = connect();
    rt.block_on(async {
        for k in 0..KEYS {
            let node = NodeId((k % topo.nodes.len() as u64) as u16);
            submit_until_committed(&client, node, &[KvOp::Write(k, value_of(k).to_le_bytes().to_vec())]).await;
        }
    });
    drop(client);

    // The host loses its memory: every node process killed, every MemStore file gone.
    for n in &topo.nodes {
        let out = redt(&["cluster", "kill", "--node", &n.name, "--run-dir", path_str(&run_dir)]);
        assert!(out.status.success(), "redt cluster kill {}: {}", n.name, text(&out));
    }
    let mut removed = 0;
    for f in std::fs::read_dir(shm.path()).unwrap().flatten() {
        std::fs::remove_file(f.path()).unwrap();
        removed += 1;
    }
    assert!(removed >= topo.nodes.len(), "each node had a MemStore file; found {removed} files");

    // Each node again, as `redt cluster up` started it, on no MemStore file.
    for n in &topo.nodes {
        let out = redt(&["cluster", "start", "--node", &n.name, "--run-dir", path_str(&run_dir)]);
        assert!(out.status.success(), "redt cluster start {}: {}", n.name, text(&out));
    }
    let logs: String = std::fs::read_dir(run_dir.join("logs"))
        .unwrap()
        .flatten()
        .map(|f| std::fs::read_to_string(f.path()).unwrap_or_default())
        .collect();
    let restored = logs.matches("restored from").count();
    assert_eq!(restored, topo.nodes.len(), "every node restores from its disk image; logs:\n{logs}");

    let client = connect();
    let reads = rt.block_on(async {
        let ops: Vec<KvOp> = (0..KEYS).map(KvOp::Read).collect();
        submit_until_committed(&client, NodeId(0), &ops).await
    });
    for (k, r) in reads.iter().enumerate() {
        let got = r.as_deref().map(|v| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v[..8]);
            i64::from_le_bytes(b)
        });
        assert_eq!(got, Some(value_of(k as u64)), "key {k}: the acknowledged write is lost");
    }
    drop(client);
    let out = guard.down();
    assert!(out.status.success(), "redt cluster down: {}", text(&out));
}

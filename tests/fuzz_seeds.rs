//! The seed corpus of the fuzzers (`fuzz/corpus/<target>/`): a few valid encodings
//! of each input, made here. The test checks that every committed seed still decodes (so a
//! decoder that starts refusing valid input fails it); `REDT_WRITE_FUZZ_SEEDS=1 cargo test
//! --test fuzz_seeds` writes them again.

use redt_dc_executor::ring::{self, Change, EntryStatus, LockIntent, RedoEntry, VoteWord};
use redt_dc_executor::verbs::{decode_request_body, encode_request_body, WorkRequest};
use redt_proto::wire::{AckReply, Body, Envelope, NetemSetRequest, ReserveTxnRequest, StatusRequest};
use redt_proto::{Cts, DcId, Epoch, NodeId, Offset, PartitionId, TableId, Topology, TxnId};
use redt_transport::frame::encode_frame;
use redt_transport::DEFAULT_MAX_FRAME_BYTES;
use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

fn wire_frames() -> Vec<Vec<u8>> {
    let netem = NetemSetRequest {
        from: "dc1".into(),
        to: "dc2".into(),
        symmetric: true,
        rtt_us: 40_000,
        jitter_us: -1,
        loss_ppm: -1,
        rate_bits_per_s: -1,
        partitioned: Some(true),
    };
    [
        Body::Ack(AckReply {}),
        Body::Status(StatusRequest { count_locks: true }),
        Body::NetemSet(netem),
        Body::ReserveTxn(ReserveTxnRequest {}),
    ]
    .into_iter()
    .map(|body| {
        let env = Envelope { epoch: 1, from: 2, body: Some(body) };
        encode_frame(&env, DEFAULT_MAX_FRAME_BYTES).expect("a small envelope frames").to_vec()
    })
    .collect()
}

fn ring_entries() -> Vec<Vec<u8>> {
    let entry = RedoEntry {
        txn: TxnId(7),
        status: EntryStatus::Logged,
        cts: Cts(0),
        vote: VoteWord::NONE,
        epoch: Epoch(1),
        coordinator: NodeId(0),
        start: Cts(1_000),
        participants: vec![DcId(0), DcId(1)],
        partitions: vec![PartitionId(0), PartitionId(3)],
        locks: vec![LockIntent {
            record: Offset(4_096),
            table: TableId(2),
            key: 42,
            lock_bits: 1,
            cells: 1,
            versions: vec![5],
        }],
        changes: vec![Change { record: Offset(4_096), table: TableId(2), key: 42, cell: 0, value: vec![1, 2, 3, 4] }],
    };
    [(entry, 3u64), (RedoEntry::filler(), 9)]
        .into_iter()
        .map(|(e, index)| {
            let mut seed = index.to_le_bytes().to_vec();
            seed.extend(ring::encode(&e, index));
            seed
        })
        .collect()
}

fn tcp_verbs_requests() -> Vec<Vec<u8>> {
    let o = Offset(64);
    vec![
        encode_request_body(NodeId(1), &[WorkRequest::Read { offset: o, len: 16 }]),
        encode_request_body(
            NodeId(2),
            &[
                WorkRequest::Write { offset: o, data: vec![7; 8] },
                WorkRequest::CompareAndSwap { offset: o, expected: 0, new: 1 },
                WorkRequest::FetchAndAdd { offset: o, add: 3 },
            ],
        ),
    ]
}

fn jsonl_lines() -> Vec<Vec<u8>> {
    [
        r#"{"value":[["r",1,null]]}"#,
        r#"{"value":[["append","x",5],["r","x",null]]}"#,
        r#"{"type":"invoke","value":[["w",2,"hi"],["w",3,-7],["r",2,null]]}"#,
    ]
    .iter()
    .map(|l| l.as_bytes().to_vec())
    .collect()
}

fn yaml_configs() -> Vec<Vec<u8>> {
    ["configs/local-fast.yaml", "configs/default.yaml", "deploy/cluster.yaml"]
        .iter()
        .map(|f| std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(f)).expect("a config file"))
        .collect()
}

/// Whether one seed decodes (why not, if not).
type Decodes = fn(&[u8]) -> Result<(), String>;

/// Every target's seeds, and a check that one decodes.
fn targets() -> Vec<(&'static str, Vec<Vec<u8>>, Decodes)> {
    vec![
        ("wire_frame", wire_frames(), |b| {
            redt_transport::frame::decode_body(&b[4..]).map(|_| ()).map_err(|e| e.to_string())
        }),
        ("ring_entry", ring_entries(), |b| {
            let index = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            ring::decode(NodeId(1), index, &b[8..]).map(|_| ()).map_err(|e| e.to_string())
        }),
        ("tcp_verbs_request", tcp_verbs_requests(), |b| decode_request_body(b).map(|_| ())),
        ("jsonl_client", jsonl_lines(), |b| {
            let ops = redt_bench::jepsen::parse_line(std::str::from_utf8(b).map_err(|e| e.to_string())?)?;
            redt_bench::jepsen::to_kv_ops(&ops).map(|_| ())
        }),
        ("yaml_config", yaml_configs(), |b| {
            let text = std::str::from_utf8(b).map_err(|e| e.to_string())?;
            Topology::from_yaml("seed.yaml", text).map(|_| ()).map_err(|e| e.to_string())
        }),
    ]
}

#[test]
fn every_seed_is_committed_and_decodes() {
    let write = std::env::var_os("REDT_WRITE_FUZZ_SEEDS").is_some();
    for (target, seeds, decodes) in targets() {
        let dir = corpus(target);
        if write {
            std::fs::create_dir_all(&dir).expect("create the corpus directory");
        }
        for (i, seed) in seeds.iter().enumerate() {
            let path = dir.join(format!("seed-{i}"));
            if write {
                std::fs::write(&path, seed).expect("write a seed");
            }
            let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                &committed == seed,
                "{} ({} bytes) is not what the generator makes now ({} bytes): run \
                 `REDT_WRITE_FUZZ_SEEDS=1 cargo test --release --test fuzz_seeds` and commit the corpus",
                path.display(),
                committed.len(),
                seed.len()
            );
            decodes(&committed).unwrap_or_else(|e| panic!("{} does not decode: {e}", path.display()));
        }
    }
}

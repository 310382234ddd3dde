//! The shipped topologies in `configs/` load and have the shape their comments promise.

use redt_proto::{DcId, Locking, NodeId, Partitioning, Topology};
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

fn configs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

fn load(name: &str) -> Topology {
    let path = configs_dir().join(name);
    Topology::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Bytes of one record of `usertable`: 64 B header + cells (8 B version + value), rounded
/// up to 64 B (the arithmetic the config comments use).
fn record_bytes(t: &Topology) -> u64 {
    let table = t.table_by_name("usertable").expect("usertable");
    // 64-byte header, then per cell an 8-byte version and the value padded to 8 bytes
    // (dc-executor's record layout), the whole rounded to 64-byte heap lines.
    let raw = 64 + table.cells.iter().map(|c| 8 + u64::from(c.bytes).div_ceil(8) * 8).sum::<u64>();
    raw.div_ceil(64) * 64
}

/// Checks placement: n distinct DCs per partition, each node primary of the same number of
/// partitions and holding the same number of replicas.
fn check_balanced(t: &Topology, n: usize) {
    let mut primaries = vec![0usize; t.nodes.len()];
    let mut held = vec![0usize; t.nodes.len()];
    for p in &t.partitions {
        assert_eq!(p.replicas.len(), n);
        let dcs: HashSet<DcId> = p.replicas.iter().map(|r| t.nodes[r.0 as usize].dc).collect();
        assert_eq!(dcs.len(), n, "{:?} replicas not in distinct DCs", p.id);
        primaries[p.replicas[0].0 as usize] += 1;
        for r in &p.replicas {
            held[r.0 as usize] += 1;
        }
    }
    let per_node = t.partitions.len() * n / t.nodes.len();
    assert!(primaries.iter().all(|&c| c == t.partitions.len() / t.nodes.len()), "{primaries:?}");
    assert!(held.iter().all(|&c| c == per_node), "{held:?}");
}

fn check_links(t: &Topology, rtt: Duration) {
    assert_eq!(t.links.len(), t.dcs.len());
    for (from, row) in t.links.iter().enumerate() {
        assert_eq!(row.len(), t.dcs.len());
        for (to, l) in row.iter().enumerate() {
            if from != to {
                assert_eq!(l.rtt, rtt);
                assert_eq!(l.jitter, Duration::ZERO);
                assert_eq!(l.loss, 0.0);
                assert_eq!(l.rate_bits_per_s, None);
            }
        }
    }
}

fn check_usertable(t: &Topology) {
    let table = t.table_by_name("usertable").expect("usertable");
    assert_eq!(table.id.0, 1);
    assert_eq!(table.cells.len(), 10);
    assert!(table.cells.iter().all(|c| c.bytes == 100));
    assert_eq!(table.cells[0].name, "field0");
    assert_eq!(table.cells[9].name, "field9");
    assert_eq!(table.locking, Locking::Cell);
    assert_eq!(table.partitioning, Partitioning::Modulo);
}

/// The MemStore heap holds `replicas_per_node` partitions of `records` records each.
fn check_memstore_fits(t: &Topology, records_per_partition: u64) {
    let per_node = (t.partitions.len() * t.partitions[0].replicas.len() / t.nodes.len()) as u64;
    let m = &t.memstore;
    let heap = m.size_bytes - m.index_bytes - m.ring_bytes - 64;
    let need = per_node * records_per_partition * record_bytes(t);
    assert!(heap >= need, "heap {heap} < needed {need}");
}

#[test]
fn default_is_the_paper_setup() {
    let t = load("default.yaml");
    assert_eq!(t.name, "redt-paper");
    assert_eq!(t.dcs.len(), 4);
    assert!(t.dcs.iter().all(|dc| dc.nodes.len() == 2));
    assert_eq!(t.nodes.len(), 8);
    for (i, n) in t.nodes.iter().enumerate() {
        let (dc, k) = (i / 2 + 1, i % 2 + 1);
        assert_eq!(n.name, format!("dc{dc}-n{k}"));
        assert_eq!(n.advertise.to_string(), format!("127.0.{dc}.{k}:7100"));
    }
    assert_eq!(t.partitions.len(), 8);
    check_balanced(&t, 3);
    // Partition p's primary is node p.
    for p in &t.partitions {
        assert_eq!(p.replicas[0], NodeId(p.id.0 as u16));
    }
    check_links(&t, Duration::from_millis(40));
    check_usertable(&t);
    assert_eq!(record_bytes(&t), 1216);
    check_memstore_fits(&t, 1 << 17);
}

#[test]
fn local_fast_is_small() {
    let t = load("local-fast.yaml");
    assert_eq!(t.dcs.len(), 4);
    assert!(t.dcs.iter().all(|dc| dc.nodes.len() == 1));
    assert_eq!(t.partitions.len(), 4);
    check_balanced(&t, 3);
    check_links(&t, Duration::from_millis(2));
    check_usertable(&t);
    assert_eq!(t.memstore.size_bytes, 160 << 20);
    check_memstore_fits(&t, 1 << 15);
}

#[test]
fn every_config_file_loads() {
    let mut count = 0;
    for entry in std::fs::read_dir(configs_dir()).expect("configs/ exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            if let Err(e) = Topology::load(&path) {
                panic!("{e}");
            }
            count += 1;
        }
    }
    assert!(count >= 2, "expected at least default.yaml and local-fast.yaml");
}

/// The commented `limits:` example in configs/default.yaml, uncommented, sets every key to its
/// default: the file documents the defaults truthfully.
#[test]
fn the_limits_example_in_default_yaml_spells_out_the_defaults() {
    let text = std::fs::read_to_string(configs_dir().join("default.yaml")).expect("default.yaml");
    let start = text.find("\n# limits:\n").expect("default.yaml has a commented limits example") + 1;
    let end = start + text[start..].find("\n\n").expect("the example ends with a blank line");
    let block: String = text[start..end].lines().map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or(l))).collect();
    let uncommented = format!("{}{block}{}", &text[..start], &text[end..]);
    assert!(uncommented.contains("\nlimits:\n  max_ops_per_txn: 1024"), "{block}");
    let t = Topology::from_yaml("default.yaml", &uncommented).expect("the uncommented example is valid");
    assert_eq!(t.limits, redt_proto::LimitsConfig::default());
    assert_eq!(load("default.yaml").limits, redt_proto::LimitsConfig::default());
}

//! The ordered index's READ cost, DEX's headline (Lu et al., PVLDB 17, 2024): READ
//! verbs per point lookup and per scan of 100 keys through one partition's B+-tree, with the
//! executor's inner-node cache on (warm) and off.
//!
//! The tree is built the way a replica builds it: one node's MemStore (in-process verbs), the
//! YCSB table's records of one partition created through [`DcHandle::insert_record`], which
//! keeps the tree beside the hash index. Two handles then read the same tree: one with a
//! cache of [`BTreeConfig::default`]'s inner nodes, warmed by as many lookups as are
//! measured, and one without a cache.

use rand::{Rng, SeedableRng};
use redt_dc_executor::{BTree, BTreeConfig, DcHandle, Layout, LocalVerbs, Verbs};
use redt_proto::{PartitionId, Topology};
use serde::Serialize;
use std::sync::Arc;

/// READs per operation of one handle.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TreeReads {
    /// READ verbs per point lookup.
    pub per_lookup: f64,
    /// READ verbs per scan of 100 entries.
    pub per_scan_100: f64,
}

/// What [`measure`] found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DexReport {
    /// Keys in the tree (one partition's records).
    pub keys: u64,
    /// Levels of the tree, leaves included.
    pub height: u8,
    /// Lookups and scans measured per handle.
    pub samples: u64,
    /// With the inner-node cache on, warmed.
    pub cache_on: TreeReads,
    /// Without a cache.
    pub cache_off: TreeReads,
}

/// Builds partition 0's tree of the first table of `topo` with `records_per_partition` keys
/// (the keys `0, P, 2P, …` of the modulo partitioning) and measures `samples` lookups of
/// uniformly drawn keys and `samples` scans of 100 entries from uniformly drawn keys, with
/// the cache on and off.
///
/// # Errors
/// A MemStore too small for the records, or a tree error, as text.
pub fn measure(topo: &Topology, records_per_partition: u64, samples: u64, seed: u64) -> Result<DexReport, String> {
    let table = topo.tables.first().ok_or("the topology declares no table")?;
    if !table.ordered {
        return Err(format!("table `{}` has no ordered index (ordered_index: false)", table.name));
    }
    let layout = Layout::from_config(&topo.memstore);
    let node = topo.partitions.first().and_then(|p| p.replicas.first()).copied().ok_or("no partition")?;
    let local = LocalVerbs::in_process([node], layout.size);
    layout.format(local.region(node).ok_or("no region")?);
    let verbs: Arc<dyn Verbs> = Arc::new(local);
    let dc = DcHandle::new(topo, verbs.clone());
    let parts = topo.partitions.len() as u64;
    let n = records_per_partition.max(1);
    for rank in 0..n {
        dc.insert_record(node, table.id, rank * parts, &[])
            .map_err(|e| format!("loading key {}: {e}", rank * parts))?;
    }
    let tree = dc
        .ordered
        .tree(verbs.as_ref(), node, table.id, PartitionId(0).0, false)
        .map_err(|e| e.to_string())?
        .ok_or("no tree was built")?;
    let height = tree.check(verbs.as_ref()).map_err(|e| e.to_string())?.height;
    let open = |cache| BTree::open(verbs.as_ref(), node, &layout, tree.anchor(), cache).map_err(|e| e.to_string());
    let warm = open(BTreeConfig::default().cache_nodes)?;
    let cold = open(0)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let key = |rng: &mut rand::rngs::StdRng| rng.gen_range(0..n) * parts;
    // Scans start at least 100 keys before the last one.
    let start = |rng: &mut rand::rngs::StdRng| rng.gen_range(0..n.saturating_sub(100).max(1)) * parts;
    for _ in 0..samples {
        warm.lookup(verbs.as_ref(), key(&mut rng)).map_err(|e| e.to_string())?;
    }
    let reads = |t: &BTree, rng: &mut rand::rngs::StdRng| -> Result<TreeReads, String> {
        let before = t.stats().snapshot();
        for _ in 0..samples {
            t.lookup(verbs.as_ref(), key(rng)).map_err(|e| e.to_string())?;
            t.scan(verbs.as_ref(), start(rng), u64::MAX, 100).map_err(|e| e.to_string())?;
        }
        let c = t.stats().snapshot().since(&before);
        Ok(TreeReads { per_lookup: c.reads_per_lookup(), per_scan_100: c.reads_per_scan() })
    };
    let cache_on = reads(&warm, &mut rng)?;
    let cache_off = reads(&cold, &mut rng)?;
    Ok(DexReport { keys: n, height, samples, cache_on, cache_off })
}

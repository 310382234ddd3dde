//! Topology variations for benches and sweeps: inter-DC RTT, nodes per DC, record size,
//! ports. Each returns a topology that follows the rules `redt-proto` checks on load
//! (distinct addresses, replicas in distinct DCs, MemStore sizes in 64-byte lines).

use redt_dc_executor::{RecordLayout, LINE};
use redt_proto::{CellSchema, Dc, DcId, NodeEntry, NodeId, Partition, PartitionId, Topology};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Sets the RTT of every inter-DC link (both directions; jitter, loss and rate kept).
pub fn set_rtt(topo: &mut Topology, rtt: Duration) {
    for (from, row) in topo.links.iter_mut().enumerate() {
        for (to, link) in row.iter_mut().enumerate() {
            if from != to {
                link.rtt = rtt;
            }
        }
    }
}

/// Moves every node to `port` (same IP addresses): its `listen` and `advertise` addresses.
pub fn set_port(topo: &mut Topology, port: u16) {
    for n in &mut topo.nodes {
        n.listen.set_port(port);
        n.advertise.port = port;
    }
}

/// `base`'s DCs, links, MemStore layout and tables with `nodes_per_dc` nodes in each DC
/// (node `i` of DC `d` on `127.0.<d+1>.<i+1>`, `base`'s port) and one partition per node:
/// partition `p` has its primary on node `p` and its other replicas on the node with the
/// same in-DC index in the next DCs (wrapping), `min(3, DCs)` replicas in all — the
/// placement of configs/default.yaml, so every node is the primary of one partition and
/// holds 3 replicas.
///
/// # Errors
/// `nodes_per_dc` of 0 or above 254.
pub fn grid(base: &Topology, nodes_per_dc: usize) -> Result<Topology, String> {
    if !(1..=254).contains(&nodes_per_dc) {
        return Err(format!("nodes per DC must be 1 to 254, got {nodes_per_dc}"));
    }
    let port = base.nodes.first().map_or(7100, |n| n.listen.port());
    let dcs = base.dcs.len();
    let mut t = base.clone();
    t.name = format!("{}-{}x{}", base.name, dcs, nodes_per_dc);
    t.nodes.clear();
    t.dcs.clear();
    for d in 0..dcs {
        let mut ids = Vec::new();
        for i in 0..nodes_per_dc {
            let id = NodeId((d * nodes_per_dc + i) as u16);
            let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, d as u8 + 1, i as u8 + 1)), port);
            t.nodes.push(NodeEntry {
                id,
                name: format!("{}-n{}", base.dcs[d].name, i + 1),
                dc: DcId(d as u16),
                listen: addr,
                advertise: addr.into(),
                metrics: None,
                grpc: None,
            });
            ids.push(id);
        }
        t.dcs.push(Dc { id: DcId(d as u16), name: base.dcs[d].name.clone(), nodes: ids, backend: base.dcs[d].backend });
    }
    let replicas = dcs.min(3);
    t.partitions = (0..dcs * nodes_per_dc)
        .map(|p| {
            let (d, i) = (p / nodes_per_dc, p % nodes_per_dc);
            Partition {
                id: PartitionId(p as u32),
                replicas: (0..replicas).map(|r| NodeId((((d + r) % dcs) * nodes_per_dc + i) as u16)).collect(),
                learners: Vec::new(),
            }
        })
        .collect();
    Ok(t)
}

/// Gives the YCSB table (the first table) `cells` cells of `bytes` bytes, and grows the
/// MemStore if `records_per_partition` such records per partition would not fit in the
/// heap with the headroom the file had (never shrinks it).
///
/// # Errors
/// A topology without tables.
pub fn set_record_size(
    topo: &mut Topology,
    cells: usize,
    bytes: usize,
    records_per_partition: u64,
) -> Result<(), String> {
    let old = topo.tables.first().ok_or("the topology declares no table")?.clone();
    let old_alloc = RecordLayout::new(&old).record_bytes.div_ceil(LINE) * LINE;
    let t = &mut topo.tables[0];
    let prefix = t.cells.first().map(|c| c.name.trim_end_matches(|ch: char| ch.is_ascii_digit()).to_string());
    let prefix = prefix.filter(|p| !p.is_empty()).unwrap_or_else(|| "field".into());
    t.cells = (0..cells).map(|i| CellSchema { name: format!("{prefix}{i}"), bytes: bytes as u32 }).collect();
    let alloc = RecordLayout::new(&topo.tables[0]).record_bytes.div_ceil(LINE) * LINE;
    let per_node = replicas_per_node(topo);
    let heap_off = LINE + topo.memstore.index_bytes + topo.memstore.ring_bytes;
    let heap = topo.memstore.size_bytes.saturating_sub(heap_off);
    // The headroom the file planned beyond its own records (kv records, inserts), kept.
    let planned_old = per_node * records_per_partition * old_alloc;
    let headroom = heap.saturating_sub(planned_old).max(32 << 20);
    let need = per_node * records_per_partition * alloc + headroom;
    if need > heap {
        topo.memstore.size_bytes = (heap_off + need).div_ceil(LINE) * LINE;
    }
    Ok(())
}

/// The most partition replicas any node holds.
pub fn replicas_per_node(topo: &Topology) -> u64 {
    let mut n = vec![0u64; topo.nodes.len()];
    for p in &topo.partitions {
        for r in &p.replicas {
            n[r.0 as usize] += 1;
        }
    }
    n.into_iter().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("default topology")
    }

    #[test]
    fn grid_of_two_matches_the_default_placement() {
        let base = paper();
        let g = grid(&base, 2).unwrap();
        assert_eq!(
            g.nodes.iter().map(|n| n.listen).collect::<Vec<_>>(),
            base.nodes.iter().map(|n| n.listen).collect::<Vec<_>>()
        );
        assert_eq!(g.partitions, base.partitions);
        let g3 = grid(&base, 3).unwrap();
        assert_eq!(g3.nodes.len(), 12);
        assert_eq!(g3.partitions.len(), 12);
        assert_eq!(replicas_per_node(&g3), 3);
        for p in &g3.partitions {
            let mut dcs: Vec<_> = p.replicas.iter().map(|r| g3.nodes[r.0 as usize].dc).collect();
            dcs.sort();
            dcs.dedup();
            assert_eq!(dcs.len(), 3);
        }
        let mut addrs: Vec<_> = g3.nodes.iter().map(|n| n.listen).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), 12);
        assert!(grid(&base, 0).is_err());
    }

    #[test]
    fn rtt_port_and_record_size() {
        let mut t = paper();
        set_rtt(&mut t, Duration::from_millis(80));
        assert!(t
            .links
            .iter()
            .enumerate()
            .all(|(i, r)| r.iter().enumerate().all(|(j, l)| i == j || l.rtt.as_millis() == 80)));
        set_port(&mut t, 7400);
        assert!(t.nodes.iter().all(|n| n.listen.port() == 7400 && n.advertise.port == 7400));
        let before = t.memstore.size_bytes;
        set_record_size(&mut t, 10, 100, 16384).unwrap();
        assert_eq!(t.memstore.size_bytes, before, "the default already fits 10x100");
        set_record_size(&mut t, 10, 1000, 16384).unwrap();
        assert_eq!(t.tables[0].cells.len(), 10);
        assert_eq!(t.tables[0].cells[3].name, "field3");
        assert!(t.memstore.size_bytes > 3 * 16384 * 10_000);
        assert_eq!(t.memstore.size_bytes % 64, 0);
    }
}

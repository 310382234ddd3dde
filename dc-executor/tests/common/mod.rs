//! A one-DC harness for integration tests: in-process MemStores, formatted, with replay.
#![allow(dead_code)]

pub mod kv;

use redt_dc_executor::{DcHandle, Executor, Hlc, LocalVerbs, ReplayTask, Verbs};
use redt_proto::{NodeId, TableId, Topology};
use std::sync::Arc;

/// Table id of the test table.
pub const T: TableId = TableId(1);

/// A topology of one DC with two nodes, two single-replica partitions (one per node), and
/// a table of `cells` cells of 8 bytes with cell-level locking.
pub fn topology(cells: usize, ring: &str) -> Topology {
    topology_with(cells, ring, true)
}

/// [`topology`] with the table's ordered index on or off.
pub fn topology_with(cells: usize, ring: &str, ordered: bool) -> Topology {
    let cell_list: Vec<String> = (0..cells).map(|i| format!("{{ name: c{i}, bytes: 8 }}")).collect();
    let yaml = format!(
        r#"
name: test
epoch: 1
memstore: {{ size: 8MiB, index: 256KiB, ring: {ring} }}
dcs:
  - name: dc1
    nodes:
      - {{ name: a, addr: "127.0.0.1:7001" }}
      - {{ name: b, addr: "127.0.0.2:7001" }}
tables:
  - {{ name: t, id: 1, ordered_index: {ordered}, cells: [{}] }}
partitions:
  - {{ replicas: [a] }}
  - {{ replicas: [b] }}
"#,
        cell_list.join(", ")
    );
    Topology::from_yaml("test.yaml", &yaml).expect("test topology is valid")
}

/// A running one-DC data path.
pub struct TestDc {
    pub topo: Topology,
    pub local: Arc<LocalVerbs>,
    pub dc: Arc<DcHandle>,
    pub hlc: Arc<Hlc>,
    pub replays: Vec<ReplayTask>,
}

impl TestDc {
    pub fn new(topo: Topology, replay: bool) -> Self {
        let layout = redt_dc_executor::Layout::from_config(&topo.memstore);
        let nodes: Vec<NodeId> = topo.nodes.iter().map(|n| n.id).collect();
        let local = Arc::new(LocalVerbs::in_process(nodes.iter().copied(), layout.size));
        for n in &nodes {
            layout.format(local.region(*n).unwrap());
        }
        let verbs: Arc<dyn Verbs> = local.clone();
        let dc = Arc::new(DcHandle::new(&topo, verbs));
        let replays = if replay {
            nodes
                .iter()
                .map(|&n| ReplayTask::spawn(local.region(n).unwrap().clone(), &dc, n, topo.node_name(n)))
                .collect()
        } else {
            Vec::new()
        };
        TestDc { topo, local, dc, hlc: Arc::new(Hlc::new()), replays }
    }

    /// The heap bump pointer of every node: what an allocation from fresh heap moves.
    pub fn heap_pointers(&self) -> Vec<u64> {
        self.topo
            .nodes
            .iter()
            .map(|n| {
                let mut w = [0u8; 8];
                self.local.read(n.id, self.dc.layout.heap_next_offset(), &mut w).unwrap();
                u64::from_le_bytes(w)
            })
            .collect()
    }

    /// Whether `key` is in its partition's tree on its node (false without a tree).
    pub fn in_tree(&self, key: u64) -> bool {
        let node = self.node_of(key);
        let part = kv::partitioner(self).partition_of(T, key);
        match self.dc.ordered.tree(self.local.as_ref(), node, T, part, false).unwrap() {
            Some(tree) => tree.lookup(self.local.as_ref(), key).unwrap().is_some(),
            None => false,
        }
    }

    /// The node holding `key`.
    pub fn node_of(&self, key: u64) -> NodeId {
        let t = self.topo.table(T).unwrap();
        self.topo.partitions[self.topo.partition_of(t, key).0 as usize].replicas[0]
    }

    pub fn executor(&self) -> Executor {
        Executor::new(self.dc.clone(), self.hlc.clone())
    }

    /// Stops replay after it has drained what it can.
    pub fn stop_replay(&mut self) {
        for r in self.replays.drain(..) {
            r.stop();
        }
    }
}

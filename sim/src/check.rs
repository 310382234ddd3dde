//! The checks after a simulated run has drained.

use crate::violation::{Leftover, Violation};
use crate::workload::{fill_steps, Step, Workload, BANK_START};
use crate::world::World;
use redt_checkers::bank::balance;
use redt_checkers::elle;
use redt_dc_executor::{decode_scan, list_items, unfinished_entries, CellVersion};
use redt_proto::{NodeId, Outcome, PartitionId};
use std::collections::{BTreeMap, BTreeSet};

/// Runs every check on a drained world and files leftovers and violations in its report.
pub(crate) fn check(w: &mut World) {
    let layout = w.layout();
    let table = w.workload_table();
    let keys = w.keys();
    let Some(schema) = w.topology.table(table).cloned() else { return };

    // Undecided entries, and the locks they hold.
    let mut leftovers = Vec::new();
    let mut locked_by_entries: BTreeSet<(NodeId, u64)> = BTreeSet::new();
    let mut absent_by_entries: BTreeSet<(NodeId, u64)> = BTreeSet::new();
    // Every node, a removed one included: it drops its old-epoch entries when it comes back.
    for n in &w.topology.nodes {
        let dc = &w.dcs[n.dc.0 as usize];
        let Ok(entries) = unfinished_entries(dc.verbs.as_ref(), n.id, &layout) else { continue };
        for (_, e) in entries {
            let locked_keys: Vec<u64> = e.locks.iter().filter(|l| l.table == table).map(|l| l.key).collect();
            for l in &e.locks {
                locked_by_entries.insert((n.id, l.key));
                let word = redt_dc_executor::lock_word(l.record);
                if layout.is_absent_lock(word) {
                    absent_by_entries.insert((n.id, word.0));
                }
            }
            let crash = w.started.get(&e.txn).and_then(|(start, participants)| {
                w.crash_log.iter().copied().find(|&(node, t)| {
                    t >= *start
                        && (node == e.coordinator || participants.contains(&w.topology.nodes[node.0 as usize].dc))
                })
            });
            leftovers.push(Leftover {
                txn: e.txn,
                node: n.id,
                dc: n.dc,
                status: e.status,
                coordinator: e.coordinator,
                participants: e.participants.clone(),
                locked_keys,
                crash,
            });
        }
    }
    let left_keys: BTreeSet<u64> = leftovers.iter().flat_map(|l| l.locked_keys.iter().copied()).collect();
    // What the record heaps hold (a figure, not a check: a retirer that crashed between its
    // release and its retirement leaves its records, by design).
    for n in &w.topology.nodes {
        let dc = &w.dcs[n.dc.0 as usize];
        if let Ok((indexed, unused)) = dc.unused_records(n.id) {
            w.report.records_indexed += indexed;
            w.report.records_unused += unused;
        }
        if let Ok(h) = dc.record_heap_usage(n.id) {
            w.report.records_free_bytes += h.free_bytes;
        }
    }
    w.report.deleted_records_freed += w.deleted_records_freed();
    let factor = w.membership.replication_factor();
    w.report.partitions_short = w.membership.partitions().filter(|(_, r)| r.voters().len() < factor).count() as u64;
    // Absent-key lock words (reads of keys with no record) held by no undecided entry.
    for n in &w.topology.nodes {
        let dc = &w.dcs[n.dc.0 as usize];
        let mut words = vec![0u8; layout.absent_bytes as usize];
        if dc.verbs.read(n.id, redt_proto::Offset(layout.absent_off), &mut words).is_err() {
            continue;
        }
        for (i, b) in words.chunks_exact(8).enumerate() {
            let word = u64::from_le_bytes(b.try_into().expect("8-byte chunk"));
            let offset = layout.absent_off + 8 * i as u64;
            if word != 0 && !absent_by_entries.contains(&(n.id, offset)) {
                w.report.violations.push(Violation::OrphanAbsentLock { node: n.id, offset, word });
            }
        }
    }
    // Every node is back and every partition healed after the drain: recovery must have
    // decided everything, crash or not.
    for l in leftovers {
        w.report.leftovers.push(l.clone());
        w.report.violations.push(Violation::Stuck(l));
    }

    // Every replica of every key in the final placement: locks, agreement.
    let placement = w.final_placement();
    let mut finals: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for &key in &keys {
        let p = w.topology.partition_of(&schema, key);
        let mut values: Vec<ReplicaImage> = Vec::new();
        for &n in &placement.partitions[p.0 as usize].replicas {
            let dc = w.topology.nodes[n.0 as usize].dc;
            let Ok(img) = w.dcs[dc.0 as usize].read_record(n, table, key) else { continue };
            if let Some(img) = &img {
                if img.lock != 0 && !locked_by_entries.contains(&(n, key)) {
                    w.report.violations.push(Violation::OrphanLock { node: n, key, word: img.lock });
                }
            }
            let cts = img.as_ref().and_then(|i| i.versions.iter().map(|v| v.cts().0).max()).unwrap_or(0);
            let cells = img
                .as_ref()
                .map(|i| i.values.iter().map(Vec::len).zip(i.versions.iter().copied()).collect())
                .unwrap_or_default();
            // A record holding only zero bytes holds no row: one no write ever reached
            // (created by the upsert of a transaction that then aborted) or a deleted one is
            // the same as no record.
            let value = img.map(|i| i.values.concat()).filter(|v| v.iter().any(|&b| b != 0));
            if value.is_some() && schema.ordered && !left_keys.contains(&key) {
                let dc = &w.dcs[dc.0 as usize];
                let part = dc.ordered.partitioner().partition_of(table, key);
                // A tree that cannot be read is no finding of this check.
                let indexed = match dc.ordered.tree(dc.verbs.as_ref(), n, table, part, false) {
                    Ok(Some(t)) => t.lookup(dc.verbs.as_ref(), key).map_or(true, |r| r.is_some()),
                    Ok(None) => false,
                    Err(_) => true,
                };
                if !indexed {
                    w.report.violations.push(Violation::Unindexed { node: n, key });
                }
            }
            values.push(ReplicaImage { node: n, value, cts, cells });
        }
        if left_keys.contains(&key) {
            continue; // a recoverer's to finish
        }
        // A replica a catch-up gave up on is behind by design until the key's next write.
        let behind = values.iter().any(|v| w.left_behind.contains(&(v.node, key)));
        if !behind && values.windows(2).any(|v| v[0].value != v[1].value) {
            // Shown from the first byte where the replicas differ.
            let first = values.first().and_then(|v| v.value.clone()).unwrap_or_default();
            let at = values
                .iter()
                .filter_map(|v| v.value.as_ref())
                .filter_map(|b| b.iter().zip(&first).position(|(x, y)| x != y))
                .min()
                .unwrap_or(0);
            let shown = values
                .iter()
                .map(|ReplicaImage { node: n, value: v, cts, cells }| {
                    let v = v
                        .as_ref()
                        .map(|b| format!("byte {at}: {}", hex(&b[at.min(b.len())..b.len().min(at + 24)])))
                        .unwrap_or_else(|| "missing".into());
                    // The version of the cell holding that byte.
                    let cell = cells.iter().scan(0, |end, &(len, version)| {
                        *end += len;
                        Some((*end, version))
                    });
                    let version = cell.filter(|&(end, _)| at < end).map(|(_, v)| v).next().unwrap_or_default();
                    let cell = format!("cell version ({}, cts {})", version.update_counter(), version.cts().0);
                    (*n, format!("{v} @cts {cts}, {cell}"))
                })
                .collect();
            w.report.violations.push(Violation::Diverged { key, values: shown });
        }
        // The final value: a replica no catch-up gave up on for the key holds it.
        let current = values.iter().find(|v| !w.left_behind.contains(&(v.node, key))).or(values.first());
        if let Some(ReplicaImage { value: Some(v), .. }) = current {
            finals.insert(key, v.clone());
        }
    }

    // Failover: what committed in the epochs after a removal, and on a partition with fewer
    // voters in its epoch than in the topology file.
    let first = w.topology.epoch;
    for h in w.hist.iter().filter(|h| h.outcome == Outcome::Committed && h.epoch > first) {
        w.report.committed_after_removal += 1;
        let Some(at) = w.placements.iter().find(|t| t.epoch == h.epoch) else { continue };
        let shrunk = |p: PartitionId| {
            at.partitions[p.0 as usize].replicas.len() < w.topology.partitions[p.0 as usize].replicas.len()
        };
        let touched = redt_protocol::call::procedure(at, &h.call)
            .ok()
            .and_then(|p| redt_protocol::plan::plan(at, p.as_ref()).ok())
            .is_some_and(|plan| plan.partitions.iter().any(|p| shrunk(p.id)));
        if touched {
            w.report.committed_on_shrunk_partitions += 1;
        }
    }

    match w.workload() {
        Workload::Bank => {
            let accounts = w.bank_accounts();
            if left_keys.is_empty() {
                let found: i64 = (0..accounts).map(|k| finals.get(&k).map(|v| balance(v)).unwrap_or(0)).sum();
                let expected = BANK_START * accounts as i64;
                if found != expected {
                    w.report.violations.push(Violation::BankTotal { found, expected });
                }
            }
            for h in w.hist.iter().filter(|h| h.outcome == Outcome::Committed && h.reads.len() == accounts as usize) {
                w.report.full_reads_committed += 1;
                let found: i64 = h.reads.iter().map(|r| r.as_deref().map(balance).unwrap_or(0)).sum();
                if found != BANK_START * accounts as i64 {
                    w.report.violations.push(Violation::BankRead { txn: h.txn, found });
                }
            }
        }
        Workload::Append | Workload::AppendScan | Workload::Churn | Workload::Interactive => {
            for h in w.hist.iter().filter(|h| h.outcome == Outcome::Committed) {
                for (step, read) in h.steps.iter().zip(&h.reads) {
                    if let Step::Delete { .. } = step {
                        w.report.deletes_committed += 1;
                    }
                    let Step::Scan { .. } = step else { continue };
                    let rows = read.as_deref().and_then(decode_scan).map_or(0, |r| r.len()) as u64;
                    let observed = fill_steps(std::slice::from_ref(step), std::slice::from_ref(read)).len() as u64;
                    w.report.scans_committed += 1;
                    w.report.scan_rows += rows;
                    w.report.scan_absent += observed.saturating_sub(rows);
                }
            }
            // A key ever deleted holds lists that start again from empty, which list-append
            // has no place for: it is left out (the index check above still covers it).
            let deleted = w.deleted_keys();
            let kept = |op: &elle::Op| match op {
                elle::Op::Append { key, .. } | elle::Op::Read { key, .. } => !deleted.contains(key),
            };
            let history: Vec<elle::Txn> = w
                .hist
                .iter()
                .enumerate()
                .map(|(id, h)| elle::Txn {
                    id,
                    process: h.process,
                    invoke_ns: h.invoke_us * 1000,
                    complete_ns: h.complete_us.map(|t| t * 1000),
                    outcome: h.outcome,
                    ops: h.ops.iter().filter(|op| kept(op)).cloned().collect(),
                })
                .collect();
            let lists: BTreeMap<u64, Vec<u64>> = keys
                .iter()
                .filter(|k| !deleted.contains(k))
                .map(|&k| (k, finals.get(&k).map(|v| list_items(&v[..])).unwrap_or_default()))
                .collect();
            let report = elle::check(&history, left_keys.is_empty().then_some(&lists));
            for a in report.anomalies {
                w.report.violations.push(Violation::Anomaly(a.to_string()));
            }
        }
        Workload::Ycsb => {}
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One replica's copy of a key, as the agreement check compares them.
struct ReplicaImage {
    node: NodeId,
    /// Every cell's value, concatenated (`None`: no record, or one no write ever reached).
    value: Option<Vec<u8>>,
    /// The newest cell's commit timestamp.
    cts: u64,
    /// Each cell's value length (bytes) and version, in cell order.
    cells: Vec<(usize, CellVersion)>,
}

//! Applying a `Committed` redo entry to a node's own records — the work of the replay task
//! (RedT §4.2, Algorithm 2 `ReplayLog`, with the Thomas write rule per cell).
//!
//! The replay task runs on the node that owns the region and uses local atomics. It takes
//! the exclusive bits of the groups it writes like any writer (so it never interleaves
//! with an executor holding them); if a group is held it gives up for now and the entry is
//! retried on a later pass. A cell is written only if the entry's `cts` is newer than the
//! cell's, so replaying an entry whose values the executor already wrote changes nothing.
//! The new version is the one the entry's writer saw advanced to `cts` — the version the
//! executor wrote on every up-to-date replica — or, for an entry that recorded none, the
//! cell's own advanced.

use crate::dc::COUNTER_BOUNDARY;
use crate::executor::cells_of;
use crate::lock;
use crate::record::{encode_cell, Catalog, CellVersion, COUNTERS, LOCK_WORD};
use crate::region::Region;
use crate::replay::Apply;
use crate::ring::RedoEntry;

/// Applies the changes of the committed `entry` to `region` (the node's own MemStore).
/// Returns [`Apply::Retry`] if a lock group it needs is held, [`Apply::Done`] otherwise
/// (changes to tables unknown to `catalog` are skipped: they cannot be on this node).
pub fn apply_committed(region: &Region, catalog: &Catalog, entry: &RedoEntry) -> Apply {
    let cts = entry.cts;
    for l in &entry.locks {
        let Ok(rl) = catalog.layout(l.table) else { continue };
        let changes: Vec<_> = entry.changes.iter().filter(|c| c.record == l.record).collect();
        if changes.is_empty() {
            continue;
        }
        let mut groups = 0u16;
        for ch in &changes {
            if let Some(&g) = rl.cell_group.get(ch.cell as usize) {
                groups |= 1 << g;
            }
        }
        let cas = lock::plan(0, groups, 0).expect("a zero guess never conflicts");
        let lock_at = l.record.0 + LOCK_WORD;
        if !region.contains(l.record.0, rl.record_bytes) {
            continue;
        }
        let old = region.masked_compare_and_swap(lock_at, cas.compare, cas.mask, cas.swap, cas.mask);
        if lock::outcome(&cas, old) != lock::LockOutcome::Acquired {
            return Apply::Retry;
        }
        let mut written = 0u16;
        for ch in &changes {
            let c = ch.cell as usize;
            if c >= rl.cells() {
                continue;
            }
            let at = l.record.0 + rl.cell_offsets[c];
            let mut v = [0u8; 8];
            region.read(at, &mut v);
            let cur = CellVersion(u64::from_le_bytes(v));
            if cts > cur.cts() {
                // The version the entry's writer saw where it recorded one (so a replica that
                // missed writes still ends with the writer's version), else this cell's own.
                let seen = l.seen_version(ch.cell).map(CellVersion).unwrap_or(cur);
                region.write(at, &encode_cell(seen.next(cts), &ch.value, rl.cell_bytes[c]));
                written |= 1 << rl.cell_group[c];
            }
        }
        for g in cells_of(written as u64) {
            let word = l.record.0 + COUNTERS + 8 * (g as u64 / 4);
            region.masked_fetch_and_add(word, 1u64 << (16 * (g % 4)), COUNTER_BOUNDARY);
        }
        region.fetch_and_add(lock_at, lock::release_operand(cas.added));
    }
    Apply::Done
}

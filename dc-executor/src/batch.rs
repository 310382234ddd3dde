//! Batches: several procedures run as one transaction, in order, each on the values the ones
//! before it wrote (docs/design.md, "Batches of held transactions").
//!
//! A coordinator that holds transactions behind a conflicting one of its own (decided-holder
//! takeover) may send the ones it holds as one transaction once that one is decided. The
//! batch locks each record once, for all its members (their accesses to one record merged:
//! cells read and written united), and writes each cell once: the last member's value. Each
//! member runs on what the members before it left, exactly as if it ran alone right after
//! them, so the batch commits as its members would, back to back, at one commit timestamp;
//! and it commits or aborts whole, so a member's writes never outlive a member before it.
//!
//! Every DC runs the whole batch on the records it holds, as it runs any procedure: a member
//! derives its writes from values of its own partition, so every DC computes the same writes
//! for the records it holds. A member's own abort ([`UserAbort`]) aborts the batch (a DC that
//! does not hold what the member read could not drop its writes), naming the member.

use crate::procedure::{Access, Procedure, RangeRead, RangeRow, ReadView, UserAbort, Write};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most members of one batch.
pub const MAX_MEMBERS: usize = 16;

/// One transaction made of `members`, run in order (see the module docs).
#[derive(Debug)]
pub struct BatchProcedure {
    members: Vec<Arc<dyn Procedure>>,
    /// The records the members touch, each once, in order of first mention.
    accesses: Vec<Access>,
    /// Whether each access's writes create its record ([`Procedure::creates`]), as the
    /// members that write it say (`None`: no member writes it).
    creates: Vec<Option<bool>>,
    /// Per member, per access of the member, the batch's access.
    map: Vec<Vec<usize>>,
    /// The members' range reads, routed by the batch's accesses.
    ranges: Vec<RangeRead>,
    /// Whether a member runs on what the members before it wrote (always, but in a mutant).
    overlay: bool,
    /// Whether a cell takes the last member's write (always, but in a mutant: the first's).
    last_writer_wins: bool,
    /// Whether the members run in their order (always, but in a mutant: reversed).
    in_order: bool,
}

/// What the members of a batch saw and what the batch writes ([`BatchProcedure::run_members`]).
/// The rows of a member's range reads are the batch's, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRuns {
    /// Per member, the value of every cell of each of its accesses as it ran (`None` for an
    /// access not held in the view's DC): what the members before it wrote, over what was
    /// read.
    pub views: Vec<Vec<Option<Vec<Vec<u8>>>>>,
    /// The batch's writes, in its own access indices: per cell written, the last member's
    /// value.
    pub writes: Vec<Write>,
}

impl BatchProcedure {
    /// A batch of `members`, in that order. A member's range read keeps its own routing
    /// access; its rows are the records as they were before the batch.
    ///
    /// # Errors
    /// A text naming the problem: no member, more than [`MAX_MEMBERS`], a member with CHECKs
    /// ([`Procedure::checks`]), a member reading a
    /// range that a member before it writes into (its rows would not show that write), or a
    /// record two members
    /// access with a different [`Access::upsert`], or write with a different
    /// [`Procedure::creates`] (one would abort on a missing record, or create one, where the
    /// other would not).
    pub fn new(members: Vec<Arc<dyn Procedure>>) -> Result<BatchProcedure, String> {
        if members.is_empty() {
            return Err("a batch needs at least one member".into());
        }
        if members.len() > MAX_MEMBERS {
            return Err(format!("a batch of {} members (at most {MAX_MEMBERS})", members.len()));
        }
        // A CHECK expects the version its transaction read before it started: a member
        // after one that writes the cell would fail it, and the batch has no way to check
        // the versions of its members one by one.
        if let Some(j) = members.iter().position(|m| !m.checks().is_empty()) {
            return Err(format!("batch member {j} checks versions (an optimistic transaction runs alone)"));
        }
        let mut accesses: Vec<Access> = Vec::new();
        let mut creates: Vec<Option<bool>> = Vec::new();
        // Whether each access routes a range read.
        let mut routes: Vec<bool> = Vec::new();
        let mut by_record: BTreeMap<(redt_proto::TableId, u64), usize> = BTreeMap::new();
        let mut map = Vec::with_capacity(members.len());
        let mut ranges: Vec<RangeRead> = Vec::new();
        for (j, m) in members.iter().enumerate() {
            for r in m.ranges() {
                let Some(a) = m.accesses().get(r.access) else {
                    return Err(format!("batch member {j} routes a range through an access it does not have"));
                };
                // The rows a range read returns are the records as they were before the batch:
                // a member before this one may not have written into its range.
                let written = accesses.iter().zip(&routes).any(|(w, &route)| {
                    !route
                        && w.write != 0
                        && w.table == a.table
                        && (r.from.min(r.to)..=r.from.max(r.to)).contains(&w.key)
                });
                if written {
                    return Err(format!(
                        "batch member {j} reads a range of table {} a member before it writes into",
                        a.table
                    ));
                }
            }
            let mut own = Vec::with_capacity(m.accesses().len());
            for (i, a) in m.accesses().iter().enumerate() {
                let c = (a.write != 0).then(|| a.upsert && m.creates(i));
                if let Some(r) = m.ranges().iter().find(|r| r.access == i) {
                    // A range's routing access stands for the range alone: never merged.
                    accesses.push(a.clone());
                    creates.push(c);
                    routes.push(true);
                    ranges.push(RangeRead { access: accesses.len() - 1, ..r.clone() });
                    own.push(accesses.len() - 1);
                    continue;
                }
                let u = match by_record.get(&(a.table, a.key)) {
                    Some(&u) => {
                        let differ = creates[u].zip(c).is_some_and(|(x, y)| x != y);
                        if accesses[u].upsert != a.upsert || differ {
                            return Err(format!(
                                "batch member {j} accesses key {} of table {} unlike a member before it (a missing record aborts or is created for one only)",
                                a.key, a.table
                            ));
                        }
                        accesses[u].read |= a.read;
                        accesses[u].write |= a.write;
                        creates[u] = creates[u].or(c);
                        u
                    }
                    None => {
                        accesses.push(a.clone());
                        creates.push(c);
                        routes.push(false);
                        by_record.insert((a.table, a.key), accesses.len() - 1);
                        accesses.len() - 1
                    }
                };
                own.push(u);
            }
            map.push(own);
        }
        Ok(BatchProcedure {
            members,
            accesses,
            creates,
            map,
            ranges,
            overlay: true,
            last_writer_wins: true,
            in_order: true,
        })
    }

    /// A deliberate bug, for the simulation's mutant tests: every member runs on the values
    /// read before the batch, as if no member ran before it, so a later member's write of a
    /// cell overwrites an earlier one's without having seen it (a lost update).
    #[cfg(feature = "mutants")]
    pub fn without_overlay(mut self) -> BatchProcedure {
        self.overlay = false;
        self
    }

    /// A deliberate bug, for the simulation's mutant tests: a cell several members write
    /// keeps the first one's value, as if the batch wrote back its first writer and let the
    /// later ones go.
    #[cfg(feature = "mutants")]
    pub fn first_writer_wins(mut self) -> BatchProcedure {
        self.last_writer_wins = false;
        self
    }

    /// A deliberate bug, for the simulation's mutant tests: the members run last to first
    /// (an executor that orders a batch otherwise than its coordinator did).
    #[cfg(feature = "mutants")]
    pub fn reversed(mut self) -> BatchProcedure {
        self.in_order = false;
        self
    }

    /// The members, in order.
    pub fn members(&self) -> &[Arc<dyn Procedure>] {
        &self.members
    }

    /// Per member, per access of the member, the batch access it maps to.
    pub fn access_map(&self) -> &[Vec<usize>] {
        &self.map
    }

    /// Runs the members in order on `view` (the batch's accesses): each on the values read,
    /// with every cell a member before it wrote replaced by that write (zero-padded to the
    /// cell's width, as the record stores it).
    ///
    /// # Errors
    /// The first member to abort, with its index: its own [`UserAbort`], or a write outside
    /// the cells it declared.
    pub fn run_members(&self, view: &ReadView<'_>) -> Result<MemberRuns, (usize, UserAbort)> {
        let mut cur: Vec<Option<Vec<Vec<u8>>>> =
            (0..self.accesses.len()).map(|u| view.values.get(u).cloned().flatten()).collect();
        let mut last: BTreeMap<(usize, u16), Vec<u8>> = BTreeMap::new();
        let mut views = vec![Vec::new(); self.members.len()];
        let order: Vec<usize> =
            if self.in_order { (0..self.members.len()).collect() } else { (0..self.members.len()).rev().collect() };
        for j in order {
            let m = &self.members[j];
            let values: Vec<Option<Vec<Vec<u8>>>> = self.map[j].iter().map(|&u| cur[u].clone()).collect();
            let rows: Vec<Vec<RangeRow>> = self.map[j].iter().map(|&u| view.rows(u).to_vec()).collect();
            let writes = m.run(&ReadView::with_rows(&values, &rows)).map_err(|e| (j, e))?;
            for w in writes {
                let Some(&u) = self.map[j].get(w.access) else {
                    return Err((j, UserAbort(format!("batch member {j} wrote an access it does not have"))));
                };
                if m.accesses()[w.access].write & (1u64 << (w.cell % 64)) == 0 || w.cell >= 64 {
                    return Err((j, UserAbort(format!("batch member {j} wrote cell {} it did not declare", w.cell))));
                }
                let overlaid = if self.overlay { cur[u].as_mut() } else { None };
                if let Some(cell) = overlaid.and_then(|cells| cells.get_mut(w.cell as usize)) {
                    let mut value = w.value.clone();
                    if value.len() < cell.len() {
                        value.resize(cell.len(), 0);
                    }
                    *cell = value;
                }
                if self.last_writer_wins || !last.contains_key(&(u, w.cell)) {
                    last.insert((u, w.cell), w.value);
                }
            }
            views[j] = values;
        }
        let writes = last.into_iter().map(|((access, cell), value)| Write { access, cell, value }).collect();
        Ok(MemberRuns { views, writes })
    }
}

impl Procedure for BatchProcedure {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn ranges(&self) -> &[RangeRead] {
        &self.ranges
    }

    fn creates(&self, access: usize) -> bool {
        self.creates.get(access).copied().flatten().unwrap_or(true)
    }

    fn run(&self, view: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        match self.run_members(view) {
            Ok(runs) => Ok(runs.writes),
            Err((j, UserAbort(why))) => Err(UserAbort(format!("batch member {j}: {why}"))),
        }
    }
}

#[cfg(test)]
mod tests;

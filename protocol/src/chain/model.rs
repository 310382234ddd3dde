//! An exhaustive model of chains across three DCs: every order of delivery, every loss of a
//! phase 1 or a vote, a timeout at any moment, and a crash of the chaining coordinator at any
//! moment followed by recovery in any order.
//!
//! The cluster: one cell, replicated in three DCs (n = 3, so Q = 3), starting at value 1.
//! Coordinator A runs A1 and, chained on it, A2 ([`ChainPlanner`] plans both); coordinator B
//! runs B1, which is not chained and locks No-Wait. Every transaction is a read-modify-write
//! `v := 4v + id`, so the final value spells the order of the committed writes. The rules under
//! test are the crate's: [`Chains`] at each DC's executor, [`dependency_ruling`] and
//! [`resolve`] at the coordinator and the recoverer, the Thomas write rule of the replay.
//!
//! Checks once nothing more can happen: every transaction decided; the coordinator's
//! acknowledged outcomes never reversed by the recoverer; no lock and no chain left; every
//! replica with the same value and version; and the committed transactions, ordered by commit
//! timestamp, replayed from the start give every value they read and the final value.

use super::*;
use redt_dc_executor::ThomasRule;
use redt_proto::{Cts, DcId, Decision, Epoch, NodeId};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{Hash, Hasher};

const A1: TxnId = TxnId(1);
const A2: TxnId = TxnId(2);
const B1: TxnId = TxnId(3);
const TXNS: [TxnId; 3] = [A1, A2, B1];
const COORD_A: NodeId = NodeId(0);
const COORD_B: NodeId = NodeId(1);
const EPOCH: Epoch = Epoch(1);
const CELL: CellRef = CellRef { table: redt_proto::TableId(1), key: 7, cell: 0 };
const START_VALUE: u64 = 1;

fn base_version() -> CellVersion {
    CellVersion::new(0, Cts(5))
}

fn coordinator(t: TxnId) -> NodeId {
    if t == B1 {
        COORD_B
    } else {
        COORD_A
    }
}

fn bytes(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

fn value(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

/// A DC's answer to a phase 1 (or what a fence or a PREPARE left instead).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Slot {
    Commit {
        read: ReadVersion,
        read_value: u64,
        write: u64,
    },
    Abort,
    /// No phase 1 ran: a decision or a PREPARE fenced it (an abort vote).
    Fenced,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Dc {
    value: u64,
    version: CellVersion,
    locked: bool,
    /// The holder of a lock taken outside a chain (B1).
    holder: Option<TxnId>,
    chains: Chains,
    slots: BTreeMap<TxnId, Slot>,
    /// Decisions applied here, with the version the writer read (resolved).
    decided: BTreeMap<TxnId, Decision>,
    /// Abort records (ballot 0 or a recoverer's) in the vote words.
    recorded: BTreeSet<TxnId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Msg {
    Phase1(TxnId, usize),
    /// The decision (`None`: abort; else the commit timestamp) and the version the write read.
    Decide(TxnId, usize, Option<u64>, Option<u64>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    dcs: Vec<Dc>,
    msgs: BTreeSet<Msg>,
    /// Votes each coordinator received.
    votes: BTreeMap<TxnId, BTreeMap<usize, Slot>>,
    /// Outcomes the coordinators decided and acknowledged.
    acked: BTreeMap<TxnId, Decision>,
    a_crashed: bool,
    /// Outcomes the recoverer decided (after A crashed).
    recovered: BTreeMap<TxnId, Decision>,
    /// A2's predecessor, as A's planner named it (None: A2 went out unchained).
    a2_after: Option<TxnId>,
    /// Messages lost so far (at most [`Setup::losses`]).
    losses: u8,
    /// The transaction whose phase 1 or vote was lost: only its coordinator's deadline can
    /// fire (a deadline with every vote on its way ends like one with a vote lost, since the
    /// late phase 1 finds the transaction fenced).
    lost: Option<TxnId>,
}

#[derive(Clone, Copy, Debug)]
struct Setup {
    /// DCs, each with one replica of the cell (n = Q = dcs).
    dcs: usize,
    /// B1's start timestamp (A1 starts at 20, A2 at 22).
    b1_start: Cts,
    /// Phase 1s or votes a schedule may lose: one already covers a timeout, a late phase 1
    /// fenced by the decision and a missing vote at the recoverer.
    losses: u8,
    /// Whether A may crash (then a recoverer decides its transactions).
    crash: bool,
    mutations: ChainMutations,
}

fn start(t: TxnId, s: &Setup) -> Cts {
    match t {
        A1 => Cts(20),
        A2 => Cts(22),
        _ => s.b1_start,
    }
}

impl World {
    fn new(s: &Setup) -> World {
        let mut planner = ChainPlanner::new(ChainLimits::default());
        let executors: BTreeMap<DcId, NodeId> = (0..s.dcs).map(|d| (DcId(d as u16), NodeId(d as u16))).collect();
        let access = [PlannedAccess { cell: CELL, writes: true }];
        assert_eq!(planner.plan(A1, &access, EPOCH, &executors, true, 0), ChainPlan::Fresh);
        let a2_after = match planner.plan(A2, &access, EPOCH, &executors, true, 0) {
            ChainPlan::Chained { after, .. } => Some(after[0].1),
            other => panic!("A2 must chain on A1: {other:?}"),
        };
        let dc = Dc {
            value: START_VALUE,
            version: base_version(),
            locked: false,
            holder: None,
            chains: Chains::new(ChainLimits::default()).with_mutations(s.mutations),
            slots: BTreeMap::new(),
            decided: BTreeMap::new(),
            recorded: BTreeSet::new(),
        };
        let mut msgs = BTreeSet::new();
        for t in TXNS {
            for d in 0..s.dcs {
                msgs.insert(Msg::Phase1(t, d));
            }
        }
        World {
            dcs: vec![dc; s.dcs],
            msgs,
            votes: BTreeMap::new(),
            acked: BTreeMap::new(),
            a_crashed: false,
            recovered: BTreeMap::new(),
            a2_after,
            losses: 0,
            lost: None,
        }
    }

    fn deps(&self, t: TxnId) -> Vec<TxnId> {
        if t == A2 {
            self.a2_after.into_iter().collect()
        } else {
            Vec::new()
        }
    }

    /// The executor of DC `d` runs `t`'s phase 1.
    fn phase1(&mut self, t: TxnId, d: usize) {
        let after = if t == A2 { self.a2_after } else { None };
        let dc = &mut self.dcs[d];
        if dc.slots.contains_key(&t) || dc.decided.contains_key(&t) {
            return; // fenced, or a duplicate
        }
        let id = t.0;
        let chainable = coordinator(t) == COORD_A;
        let lock_fresh = |dc: &mut Dc| -> Slot {
            if dc.locked {
                return Slot::Abort;
            }
            dc.locked = true;
            let write = dc.value * 4 + id;
            if chainable {
                let head = ChainHead {
                    txn: t,
                    coordinator: coordinator(t),
                    epoch: EPOCH,
                    now_ms: 0,
                    base: (bytes(dc.value), dc.version),
                };
                dc.chains.open(CELL, head, Some(bytes(write)));
            } else {
                dc.holder = Some(t);
            }
            Slot::Commit { read: ReadVersion::Committed(dc.version), read_value: dc.value, write }
        };
        let slot = if !chainable {
            lock_fresh(dc)
        } else {
            let j = Joiner {
                txn: t,
                coordinator: coordinator(t),
                epoch: EPOCH,
                after,
                after_decided_here: after.is_some_and(|a| dc.decided.contains_key(&a)),
                now_ms: 0,
            };
            match dc.chains.admit(&CELL, &j) {
                Admission::Lock => lock_fresh(dc),
                Admission::Join { value: v, read } => {
                    let read_value = value(&v);
                    let write = read_value * 4 + id;
                    dc.chains.join(CELL, t, Some(bytes(write)));
                    Slot::Commit { read, read_value, write }
                }
                Admission::Refuse(_) => Slot::Abort,
            }
        };
        dc.slots.insert(t, slot);
    }

    /// The executor of DC `d` applies `t`'s decision; `seen` is the version its write read
    /// (resolved by the decider).
    fn apply(&mut self, t: TxnId, d: usize, decision: Decision, seen: Option<CellVersion>) {
        let dc = &mut self.dcs[d];
        match dc.decided.entry(t) {
            std::collections::btree_map::Entry::Occupied(_) => return,
            std::collections::btree_map::Entry::Vacant(e) => e.insert(decision),
        };
        if let std::collections::btree_map::Entry::Vacant(e) = dc.slots.entry(t) {
            e.insert(Slot::Fenced);
            return;
        }
        // The replay: a committed write by the Thomas write rule.
        if let (Decision::Commit(cts), Some(Slot::Commit { write, .. })) = (decision, dc.slots.get(&t)) {
            if let Some(v) = ThomasRule::Versions.write(dc.version, cts, seen) {
                dc.value = *write;
                dc.version = v;
            }
        }
        if dc.holder == Some(t) {
            dc.holder = None;
            dc.locked = false;
        }
        for drained in dc.chains.decide(t, decision) {
            if let Some((v, version)) = drained.write_back {
                if version.rank() > dc.version.rank() {
                    dc.value = value(&v);
                    dc.version = version;
                }
            }
            dc.locked = false;
        }
    }

    fn outcome_known(&self, t: TxnId) -> Option<Decision> {
        if self.a_crashed && coordinator(t) == COORD_A {
            self.recovered.get(&t).copied()
        } else {
            self.acked.get(&t).copied()
        }
    }

    /// The commit rule over a full set of slots (coordinator with every vote, or recoverer
    /// after its PREPARE): `None` while a dependency is undecided.
    fn rule(&self, t: TxnId, slots: &BTreeMap<usize, Slot>, s: &Setup) -> Option<(Decision, Option<CellVersion>)> {
        let deps = self.deps(t);
        let floor = match dependency_ruling(&deps, |d| self.outcome_known(d), s.mutations) {
            DependencyRuling::Wait(_) => return None,
            DependencyRuling::Abort(_) => return Some((Decision::Abort, None)),
            DependencyRuling::Commit { floor } => floor,
        };
        let mut seen: Option<CellVersion> = None;
        for d in 0..self.dcs.len() {
            let Some(Slot::Commit { read, .. }) = slots.get(&d) else { return Some((Decision::Abort, None)) };
            let v = match resolve(*read, |c| self.outcome_known(c), s.mutations) {
                Resolved::Version(v) => v,
                Resolved::Undecided(_) => return None,
                Resolved::Aborted(_) => return Some((Decision::Abort, None)),
            };
            match seen {
                None => seen = Some(v),
                Some(prev) if prev != v => return Some((Decision::Abort, None)), // stale: n = 3 needs all
                Some(_) => {}
            }
        }
        let seen = seen.expect("three slots");
        let cts = start(t, s).max(floor).max(Cts(seen.cts().0 + 1));
        Some((Decision::Commit(cts), Some(seen)))
    }

    fn send_decision(&mut self, t: TxnId, decision: Decision, seen: Option<CellVersion>) {
        if decision == Decision::Abort {
            // Recorded at the replicas before anyone acts on it (atomic in this model).
            for dc in &mut self.dcs {
                dc.recorded.insert(t);
                dc.slots.entry(t).or_insert(Slot::Fenced);
            }
        }
        for d in 0..self.dcs.len() {
            let cts = match decision {
                Decision::Commit(c) => Some(c.0),
                Decision::Abort => None,
            };
            self.msgs.insert(Msg::Decide(t, d, cts, seen.map(|v| v.0)));
        }
    }

    fn coordinator_alive(&self, t: TxnId) -> bool {
        coordinator(t) == COORD_B || !self.a_crashed
    }

    /// Every event that can happen now, applied to a copy of the world.
    fn successors(&self, s: &Setup) -> Vec<World> {
        let mut out = Vec::new();
        for &m in &self.msgs {
            let mut w = self.clone();
            w.msgs.remove(&m);
            match m {
                Msg::Phase1(t, d) => {
                    // The vote reaches the coordinator at once, or is lost.
                    let mut lost = w.clone();
                    w.phase1(t, d);
                    let slot = w.dcs[d].slots[&t].clone();
                    if w.coordinator_alive(t) {
                        w.votes.entry(t).or_default().insert(d, slot);
                    }
                    out.push(w);
                    if lost.losses < s.losses {
                        lost.losses += 1;
                        lost.lost = Some(t);
                        let mut ran = lost.clone();
                        out.push(lost); // the phase 1 is lost
                        ran.phase1(t, d);
                        out.push(ran); // the vote is lost
                    }
                }
                Msg::Decide(t, d, cts, seen) => {
                    let decision = cts.map_or(Decision::Abort, |c| Decision::Commit(Cts(c)));
                    w.apply(t, d, decision, seen.map(CellVersion));
                    out.push(w);
                }
            }
        }
        for t in TXNS {
            if !self.coordinator_alive(t) || self.acked.contains_key(&t) {
                continue;
            }
            let votes = self.votes.get(&t).cloned().unwrap_or_default();
            if votes.values().any(|v| matches!(v, Slot::Abort | Slot::Fenced)) {
                let mut w = self.clone();
                w.acked.insert(t, Decision::Abort);
                w.send_decision(t, Decision::Abort, None);
                out.push(w);
                continue;
            }
            if votes.len() == self.dcs.len() {
                if let Some((decision, seen)) = self.rule(t, &votes, s) {
                    let mut w = self.clone();
                    w.acked.insert(t, decision);
                    w.send_decision(t, decision, seen);
                    out.push(w);
                }
            } else if self.lost == Some(t) {
                // The phase-1 deadline: abort unproven.
                let mut w = self.clone();
                w.acked.insert(t, Decision::Abort);
                w.send_decision(t, Decision::Abort, None);
                out.push(w);
            }
        }
        if s.crash && !self.a_crashed && [A1, A2].iter().any(|t| !self.acked.contains_key(t)) {
            let mut w = self.clone();
            w.a_crashed = true;
            out.push(w);
        }
        if self.a_crashed {
            for t in [A1, A2] {
                if self.recovered.contains_key(&t) {
                    continue;
                }
                // PREPARE: fence every replica without a vote, then decide from all three.
                let mut w = self.clone();
                for dc in &mut w.dcs {
                    dc.slots.entry(t).or_insert(Slot::Fenced);
                }
                let decision = if w.dcs.iter().any(|dc| dc.recorded.contains(&t)) {
                    Some((Decision::Abort, None))
                } else {
                    let slots: BTreeMap<usize, Slot> =
                        (0..w.dcs.len()).map(|d| (d, w.dcs[d].slots[&t].clone())).collect();
                    w.rule(t, &slots, s)
                };
                if let Some((decision, seen)) = decision {
                    w.recovered.insert(t, decision);
                    w.send_decision(t, decision, seen);
                    out.push(w);
                }
            }
        }
        out
    }

    /// The checks of a world where nothing more can happen; `Err` names the first broken one.
    fn check(&self, s: &Setup) -> Result<(), String> {
        let mut finals = BTreeMap::new();
        for t in TXNS {
            let f =
                if coordinator(t) == COORD_A && self.a_crashed { self.recovered.get(&t) } else { self.acked.get(&t) };
            let Some(&f) = f else { return Err(format!("{t:?} never decided")) };
            if let Some(&a) = self.acked.get(&t) {
                if a != f {
                    return Err(format!("{t:?} acknowledged {a:?}, recovered {f:?}"));
                }
            }
            finals.insert(t, f);
        }
        for (d, dc) in self.dcs.iter().enumerate() {
            if dc.locked || !dc.chains.is_empty() {
                return Err(format!("dc{d} left a lock or a chain"));
            }
        }
        let first = (self.dcs[0].value, self.dcs[0].version);
        for (d, dc) in self.dcs.iter().enumerate() {
            if (dc.value, dc.version) != first {
                return Err(format!("replicas differ: dc0 {first:?}, dc{d} {:?}", (dc.value, dc.version)));
            }
        }
        let mut committed: Vec<(Cts, TxnId)> = finals
            .iter()
            .filter_map(|(&t, &d)| match d {
                Decision::Commit(cts) => Some((cts, t)),
                Decision::Abort => None,
            })
            .collect();
        committed.sort();
        let mut v = START_VALUE;
        for (_, t) in &committed {
            for dc in &self.dcs {
                if let Some(Slot::Commit { read_value, .. }) = dc.slots.get(t) {
                    if *read_value != v {
                        return Err(format!("{t:?} read {read_value}, the serial order gives {v} ({committed:?})"));
                    }
                }
            }
            v = v * 4 + t.0;
        }
        if self.dcs[0].value != v {
            return Err(format!("final value {} but the committed {committed:?} give {v}", self.dcs[0].value));
        }
        let _ = s;
        Ok(())
    }
}

fn hash_of(x: &impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}

/// The world's fingerprint up to a renaming of the DCs (they are symmetric): the DCs are
/// ordered by what each holds, its messages and its votes, before hashing.
fn fingerprint(w: &World) -> u64 {
    let dc_msgs = |d: usize| -> Vec<Msg> {
        w.msgs
            .iter()
            .filter(|m| match m {
                Msg::Phase1(_, x) | Msg::Decide(_, x, _, _) => *x == d,
            })
            .copied()
            .collect()
    };
    let dc_votes = |d: usize| -> Vec<(TxnId, Slot)> {
        w.votes.iter().filter_map(|(t, v)| v.get(&d).map(|s| (*t, s.clone()))).collect()
    };
    let mut keys: Vec<u64> = (0..w.dcs.len())
        .map(|d| {
            let strip = |m: Msg| match m {
                Msg::Phase1(t, _) => Msg::Phase1(t, 0),
                Msg::Decide(t, _, c, v) => Msg::Decide(t, 0, c, v),
            };
            let msgs: Vec<Msg> = dc_msgs(d).into_iter().map(strip).collect();
            hash_of(&(&w.dcs[d], msgs, dc_votes(d)))
        })
        .collect();
    keys.sort_unstable();
    let rest = (&w.acked, w.a_crashed, &w.recovered, w.a2_after, w.losses, w.lost);
    hash_of(&(keys, hash_of(&rest)))
}

/// Explores every schedule from the start; returns the number of distinct worlds seen and the
/// first broken check, if any.
fn explore(s: Setup) -> (usize, Option<String>) {
    let mut seen = HashSet::new();
    let mut stack = vec![World::new(&s)];
    seen.insert(fingerprint(&stack[0]));
    let mut commits = [0usize; 3];
    let mut popped = 0u64;
    while let Some(w) = stack.pop() {
        popped += 1;
        if popped % 1_000_000 == 0 && std::env::var_os("REDT_CHAIN_MODEL_PROGRESS").is_some() {
            eprintln!("{} worlds, {} on the stack", seen.len(), stack.len());
        }
        let next = w.successors(&s);
        if next.is_empty() {
            if let Err(e) = w.check(&s) {
                return (seen.len(), Some(e));
            }
            for (i, t) in TXNS.iter().enumerate() {
                let f = if coordinator(*t) == COORD_A && w.a_crashed { w.recovered.get(t) } else { w.acked.get(t) };
                if matches!(f, Some(Decision::Commit(_))) {
                    commits[i] += 1;
                }
            }
            continue;
        }
        for n in next {
            if seen.insert(fingerprint(&n)) {
                stack.push(n);
            }
        }
    }
    assert!(commits.iter().all(|&c| c > 0), "every transaction commits in some schedule: {commits:?}");
    (seen.len(), None)
}

fn setups(dcs: usize, losses: u8, crash: bool, mutations: ChainMutations) -> impl Iterator<Item = Setup> {
    // B1 starts below A1, between A1 and A2, and above both: its commit timestamp falls on
    // either side of the chain's.
    [Cts(19), Cts(21), Cts(23)].into_iter().map(move |b1_start| Setup { dcs, b1_start, losses, crash, mutations })
}

fn passes_every_check(dcs: usize, losses: u8, crash: bool, b1_starts: &[Cts]) {
    for s in setups(dcs, losses, crash, ChainMutations::default()).filter(|s| b1_starts.contains(&s.b1_start)) {
        let (worlds, broken) = explore(s);
        eprintln!("{s:?}: {worlds} worlds");
        assert_eq!(broken, None, "{s:?}");
        assert!(worlds > 1_000, "only {worlds} worlds explored");
    }
}

#[test]
fn every_schedule_on_two_dcs_with_a_lost_message_and_a_crash_passes_every_check() {
    // B1's commit timestamp below and above the chain's (between: the three-DC run).
    passes_every_check(2, 1, true, &[Cts(19), Cts(23)]);
}

#[test]
fn every_schedule_on_three_dcs_passes_every_check() {
    passes_every_check(3, 0, false, &[Cts(19), Cts(21), Cts(23)]);
}

/// Runs the model with `mutations` until a schedule breaks a check; returns the first broken
/// check found over the setups.
#[cfg(feature = "mutants")]
fn first_broken(mutations: ChainMutations) -> Option<String> {
    setups(2, 1, true, mutations).find_map(|s| explore(s).1)
}

#[cfg(feature = "mutants")]
#[test]
fn a_mutant_that_drops_a_dependency_is_caught() {
    let broken = first_broken(ChainMutations { drop_dependency: true, ..ChainMutations::default() });
    eprintln!("{broken:?}");
    assert!(broken.is_some(), "no schedule broke a check");
}

#[cfg(feature = "mutants")]
#[test]
fn a_mutant_that_orders_a_chain_by_arrival_is_caught() {
    let broken = first_broken(ChainMutations { order_by_arrival: true, ..ChainMutations::default() });
    eprintln!("{broken:?}");
    assert!(broken.is_some(), "no schedule broke a check");
}

#[cfg(feature = "mutants")]
#[test]
fn a_mutant_that_releases_the_lock_before_the_last_writer_is_caught() {
    let broken = first_broken(ChainMutations { release_before_last_writer: true, ..ChainMutations::default() });
    eprintln!("{broken:?}");
    assert!(broken.is_some(), "no schedule broke a check");
}

//! A list-append checker for strict serializability: Adya's anomalies plus real-time order, in
//! the style of Elle, as a pure function of a history (and, optionally, the lists the database
//! holds at the end).
//!
//! Model: every key holds a list; an append adds a value that is unique per key across the
//! history; a read returns the whole list. Each transaction ended [`Outcome::Committed`],
//! [`Outcome::Aborted`] or [`Outcome::Unknown`] as its client saw it (Jepsen's `ok`, `fail` and
//! `info`). The checker verifies:
//!
//! - *Version order.* Each key's order is its final list if given, else its longest committed
//!   read. Every committed read must be a prefix of it (`IncompatibleOrder`); every value read must have
//!   been appended (`PhantomValue`) and appear once per read (`DuplicateInRead`); every
//!   `(key, value)` must be appended once (`DuplicateAppend`).
//! - *G1a* (aborted read): a read or the final list holds a value of an aborted transaction.
//! - *G1b* (intermediate read): a read ends at a value its writer followed with another append
//!   to the same key.
//! - *Internal consistency*: a read agrees with the transaction's own earlier read and appends.
//! - *Lost appends* (with final lists): every committed append is in its key's final list.
//! - *Cycles* in the dependency graph over committed transactions (and
//!   unknown ones whose appends someone observed). With `v_i`, `v_{i+1}` consecutive in a key's order:
//!   `ww` T1 → T2 when T1 appended `v_i` and T2 `v_{i+1}`; `wr` T1 → T2 when T2 read a list
//!   ending at T1's append; `rw` T1 → T2 when T1 read a list ending at `v_i` (or the empty list)
//!   and T2 appended `v_{i+1}` (or the first value); `rt` T1 → T2 when committed T1 completed
//!   before T2 was invoked.
//!
//! Each strongly connected component (Tarjan) yields one short cycle (breadth-first search),
//! searched with ever more edge kinds so the most severe class wins: only `ww` is G0, `ww` and
//! `wr` is G1c, exactly one `rw` is G-single, more is G2; a cycle that needs `rt` carries
//! `realtime: true`. One cycle per component: fixing it may reveal more. A problem with a
//! value (phantom, aborted, duplicated) is reported once, with its first reader in history
//! order. The work is linear in the history's size (reads' lengths included) except the
//! G-single search, which has a fixed budget.
//!
//! Definitions follow A. Adya, "Weak Consistency: A Generalized Theory and Optimistic
//! Implementations for Distributed Transactions" (MIT PhD thesis, 2000), and K. Kingsbury and
//! P. Alvaro, "Elle: Inferring Isolation Anomalies from Experimental Observations" (VLDB 2020).

use redt_proto::Outcome;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;

/// One micro-operation as the checker sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Appends `value` to the list at `key`.
    Append { key: u64, value: u64 },
    /// Reads the list at `key`; `None` when not known (a transaction that did not commit).
    Read { key: u64, list: Option<Vec<u64>> },
}

/// One transaction of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// Its index in the history; anomalies name transactions by it.
    pub id: usize,
    /// The client process that ran it.
    pub process: u64,
    /// When it was invoked.
    pub invoke_ns: u64,
    /// When its client saw it end; `None` for an unknown one that never returned.
    pub complete_ns: Option<u64>,
    /// How it ended as its client saw it.
    pub outcome: Outcome,
    /// Its micro-operations in order; a committed one has every read filled in.
    pub ops: Vec<Op>,
}

/// A dependency between two transactions, the kind of a cycle's step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Edge {
    /// Write-write: the second appended the value after the first's in a key's order.
    Ww,
    /// Write-read: the second read a list ending at the first's append.
    Wr,
    /// Read-write (anti-dependency): the second appended the value after the first's read.
    Rw,
    /// Real time: the first completed before the second was invoked.
    Rt,
}

/// A cycle: each step is a transaction id and the edge from it to the next step's (the last
/// step's edge leads back to the first), starting at the smallest id.
pub type Cycle = Vec<(usize, Edge)>;

/// One violation found in a history. Transactions are named by [`Txn::id`]; `None` where a
/// transaction is expected means the final list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// The input breaks the history's own rules: a committed read without a list, or a committed
    /// transaction with no completion time or one before its invocation.
    Malformed { txn: usize, problem: &'static str },
    /// `(key, value)` was appended by two operations.
    DuplicateAppend { key: u64, value: u64, first: usize, second: usize },
    /// A read (or the final list) holds `value` twice; reported once per value.
    DuplicateInRead { key: u64, value: u64, txn: Option<usize> },
    /// A read (or the final list) holds a value nobody appended; reported once per value.
    PhantomValue { key: u64, value: u64, txn: Option<usize> },
    /// `txn`'s read of `key` is not a prefix of the version order: at `index` it holds `read`
    /// where the order holds `order` (`None`: the order is shorter).
    IncompatibleOrder { key: u64, txn: usize, index: usize, read: u64, order: Option<u64> },
    /// Aborted read: `value`, appended by the failed `writer`, was read by `reader`.
    G1a { key: u64, value: u64, writer: usize, reader: Option<usize> },
    /// Intermediate read: `reader` read a list ending at `value`, which `writer` followed with
    /// another append to `key`.
    G1b { key: u64, value: u64, writer: usize, reader: usize },
    /// `txn` read `key` as `read` although its own earlier operations imply `expected` (the
    /// whole list if `whole`, else how the list must end).
    Internal { txn: usize, key: u64, read: Vec<u64>, expected: Vec<u64>, whole: bool },
    /// `txn` committed the append of `value` to `key`, which the final list lacks.
    LostAppend { key: u64, value: u64, txn: usize },
    /// Write cycle: `ww` edges only (plus `rt` if `realtime`).
    G0 { cycle: Cycle, realtime: bool },
    /// Circular information flow: `ww` and `wr` edges, at least one `wr`.
    G1c { cycle: Cycle, realtime: bool },
    /// A cycle with exactly one `rw` edge (read skew and its kin).
    GSingle { cycle: Cycle, realtime: bool },
    /// A cycle with two or more `rw` edges (write skew and its kin).
    G2 { cycle: Cycle, realtime: bool },
}

/// What [`check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation found.
    pub anomalies: Vec<Anomaly>,
    /// Transactions in the history.
    pub txns_checked: usize,
    /// Keys seen in the history or the final lists.
    pub keys: usize,
}

impl Report {
    /// No anomaly: the history is strictly serializable as far as the checker can tell.
    pub fn is_valid(&self) -> bool {
        self.anomalies.is_empty()
    }
}

const WW: u8 = 1;
const WR: u8 = 2;
const RW: u8 = 4;
const RT: u8 = 8;
const ALL: u8 = WW | WR | RW | RT;
/// Edge visits allowed per component when looking for a cycle with a single `rw` edge (one
/// search per `rw` edge); past it the checker settles for any cycle, still correctly classified.
const SINGLE_RW_BUDGET: usize = 4_000_000;
/// Anomalies the summary prints.
const SHOWN: usize = 20;

/// Who appended a `(key, value)` (the first, if several did): the transaction's index, and
/// whether it was its last append to the key.
#[derive(Clone, Copy)]
struct Writer {
    txn: usize,
    last: bool,
}

type Writers = HashMap<(u64, u64), Writer>;
/// Each key's committed reads: the reader's index and the list.
type Reads<'h> = BTreeMap<u64, Vec<(usize, &'h [u64])>>;

/// A key, its version order, and its committed reads: reader, list, whether a prefix of the order.
struct KeyView<'h> {
    key: u64,
    order: &'h [u64],
    reads: Vec<(usize, &'h [u64], bool)>,
}

/// Checks `history` (and each key's `final_lists`, if given; a key missing from them counts as
/// empty) and reports every anomaly found. Never panics on malformed input.
pub fn check(history: &[Txn], final_lists: Option<&BTreeMap<u64, Vec<u64>>>) -> Report {
    let mut out = Vec::new();
    let (writers, mut reads) = scan(history, &mut out);
    for &key in final_lists.into_iter().flat_map(BTreeMap::keys) {
        reads.entry(key).or_default();
    }
    let keys = reads.len();
    let (views, observed) = orders(history, &writers, reads, final_lists, &mut out);
    if let Some(finals) = final_lists {
        let present: HashSet<(u64, u64)> = finals.iter().flat_map(|(k, l)| l.iter().map(|v| (*k, *v))).collect();
        for txn in history.iter().filter(|t| t.outcome == Outcome::Committed) {
            for op in &txn.ops {
                match *op {
                    Op::Append { key, value } if !present.contains(&(key, value)) => {
                        out.push(Anomaly::LostAppend { key, value, txn: txn.id })
                    }
                    _ => {}
                }
            }
        }
    }
    let committed: Vec<bool> = history
        .iter()
        .zip(&observed)
        .map(|(t, &seen)| t.outcome == Outcome::Committed || (t.outcome == Outcome::Unknown && seen))
        .collect();
    cycles(history, &dependencies(history, &writers, &views, &committed), &mut out);
    Report { anomalies: out, txns_checked: history.len(), keys }
}

/// Indexes the appends (flagging duplicates) and the committed reads per key, and checks each
/// committed transaction on its own.
fn scan<'h>(history: &'h [Txn], out: &mut Vec<Anomaly>) -> (Writers, Reads<'h>) {
    let mut writers = Writers::new();
    let mut reads = Reads::new();
    for (t, txn) in history.iter().enumerate() {
        let ok = txn.outcome == Outcome::Committed;
        let problem = match txn.complete_ns {
            None if ok => Some("ok without a completion time"),
            Some(c) if ok && c < txn.invoke_ns => Some("completed before it was invoked"),
            _ => None,
        };
        out.extend(problem.map(|problem| Anomaly::Malformed { txn: txn.id, problem }));
        if ok {
            internal(txn, out);
        }
        let mut later: HashSet<u64> = HashSet::new();
        for op in txn.ops.iter().rev() {
            if let Op::Append { key, value } = *op {
                let last = later.insert(key);
                if let Some(w) = writers.get(&(key, value)) {
                    out.push(Anomaly::DuplicateAppend { key, value, first: history[w.txn].id, second: txn.id });
                } else {
                    writers.insert((key, value), Writer { txn: t, last });
                }
            }
        }
        for op in &txn.ops {
            let (Op::Read { key, .. } | Op::Append { key, .. }) = op;
            let rs = reads.entry(*key).or_default();
            match op {
                Op::Read { list: Some(list), .. } if ok => rs.push((t, list)),
                Op::Read { list: None, .. } if ok => {
                    out.push(Anomaly::Malformed { txn: txn.id, problem: "ok read without a list" })
                }
                _ => {}
            }
        }
    }
    (writers, reads)
}

/// Each key's version order and what its reads say about it; also which transactions' appends
/// someone observed.
fn orders<'h>(
    history: &[Txn],
    writers: &Writers,
    reads: Reads<'h>,
    final_lists: Option<&'h BTreeMap<u64, Vec<u64>>>,
    out: &mut Vec<Anomaly>,
) -> (Vec<KeyView<'h>>, Vec<bool>) {
    let id = |t: usize| history[t].id;
    let failed = |t: usize| history[t].outcome == Outcome::Aborted;
    let mut observed = vec![false; history.len()];
    let mut reported: HashSet<(bool, u64, u64)> = HashSet::new();
    let mut views = Vec::with_capacity(reads.len());
    for (key, rs) in reads {
        let order: &[u64] = match final_lists {
            Some(finals) => finals.get(&key).map_or(&[], Vec::as_slice),
            None => rs.iter().fold(&[], |best, &(_, l)| if l.len() > best.len() { l } else { best }),
        };
        // A value's problem is reported once, with its first reader in history order.
        let mut flag = |out: &mut Vec<Anomaly>, duplicate: bool, value: u64, reader: Option<usize>| {
            if reported.insert((duplicate, key, value)) {
                out.push(match writers.get(&(key, value)) {
                    _ if duplicate => Anomaly::DuplicateInRead { key, value, txn: reader },
                    Some(w) => Anomaly::G1a { key, value, writer: id(w.txn), reader },
                    None => Anomaly::PhantomValue { key, value, txn: reader },
                });
            }
        };
        // Positions in the order of a duplicate (true) or a phantom or aborted value (false).
        let mut bad: Vec<(usize, bool)> = Vec::new();
        let mut seen = HashSet::new();
        for (pos, &v) in order.iter().enumerate() {
            if !seen.insert(v) {
                bad.push((pos, true));
            }
            match writers.get(&(key, v)) {
                Some(w) if !failed(w.txn) => observed[w.txn] = true,
                _ => bad.push((pos, false)),
            }
        }
        let mut next_bad = 0;
        let mut view = KeyView { key, order, reads: Vec::with_capacity(rs.len()) };
        for (t, list) in rs {
            let compatible = list.len() <= order.len() && order[..list.len()] == *list;
            if compatible {
                // Its problems are the order's up to its length: no need to scan it again.
                while let Some(&(pos, duplicate)) = bad.get(next_bad).filter(|(pos, _)| *pos < list.len()) {
                    flag(out, duplicate, order[pos], Some(id(t)));
                    next_bad += 1;
                }
            } else {
                let index = list.iter().zip(order).take_while(|(a, b)| a == b).count();
                let read = list.get(index).copied().unwrap_or_default();
                out.push(Anomaly::IncompatibleOrder { key, txn: id(t), index, read, order: order.get(index).copied() });
                let mut seen = HashSet::new();
                for &v in list {
                    if !seen.insert(v) {
                        flag(out, true, v, Some(id(t)));
                    }
                    match writers.get(&(key, v)) {
                        Some(w) if !failed(w.txn) => observed[w.txn] = true,
                        _ => flag(out, false, v, Some(id(t))),
                    }
                }
            }
            if let Some((&value, w)) = list.last().and_then(|v| writers.get(&(key, *v)).map(|w| (v, w))) {
                if w.txn != t && !w.last && !failed(w.txn) {
                    out.push(Anomaly::G1b { key, value, writer: id(w.txn), reader: id(t) });
                }
            }
            view.reads.push((t, list, compatible));
        }
        for &(pos, duplicate) in &bad[next_bad..] {
            flag(out, duplicate, order[pos], None);
        }
        views.push(view);
    }
    (views, observed)
}

/// The dependency graph over the `committed` transactions (nodes `0..n`), plus one node per
/// distinct completion time (nodes `n..`) carrying real-time order.
fn dependencies(history: &[Txn], writers: &Writers, views: &[KeyView], committed: &[bool]) -> Csr {
    let n = history.len();
    let node = |key: u64, v: &u64| writers.get(&(key, *v)).map(|w| w.txn).filter(|&w| committed[w]);
    let mut edges: Vec<(usize, usize, u8)> = Vec::new();
    for KeyView { key, order, reads } in views {
        for pair in order.windows(2) {
            if let (Some(a), Some(b)) = (node(*key, &pair[0]), node(*key, &pair[1])) {
                if a != b {
                    edges.push((a, b, WW));
                }
            }
        }
        for &(t, list, compatible) in reads {
            if let Some(w) = list.last().and_then(|v| node(*key, v)).filter(|&w| w != t) {
                edges.push((w, t, WR));
            }
            if let Some(w) = order.get(list.len()).filter(|_| compatible).and_then(|v| node(*key, v)) {
                if w != t {
                    edges.push((t, w, RW));
                }
            }
        }
    }
    // Real time without all O(n²) pairs: one node per distinct completion time c_0 < c_1 < …,
    // chained c_k → c_{k+1}. A committed transaction links to its completion's node; the node of
    // the latest completion strictly before a transaction's invocation links to it. So T1
    // reaches T2 through the chain exactly when T1 completed before T2 was invoked, and a path
    // T1 → c_i → … → c_j → T2 in a cycle is reported as the single edge T1 -rt-> T2. Only
    // transactions that completed no earlier than invoked link out, so real time alone never
    // closes a cycle.
    let done = |t: &Txn| t.complete_ns.filter(|&c| t.outcome == Outcome::Committed && c >= t.invoke_ns);
    let mut times: Vec<u64> = history.iter().filter_map(done).collect();
    times.sort_unstable();
    times.dedup();
    edges.extend((1..times.len()).map(|k| (n + k - 1, n + k, RT)));
    for (t, txn) in history.iter().enumerate().filter(|(t, _)| committed[*t]) {
        if let Some(Ok(k)) = done(txn).map(|c| times.binary_search(&c)) {
            edges.push((t, n + k, RT));
        }
        let before = times.partition_point(|&c| c < txn.invoke_ns);
        if before > 0 {
            edges.push((n + before - 1, t, RT));
        }
    }
    Csr::new(n + times.len(), edges)
}

/// Reports one cycle per strongly connected component of `graph` with two transactions or more.
fn cycles(history: &[Txn], graph: &Csr, out: &mut Vec<Anomaly>) {
    let n = history.len();
    let comp = tarjan(graph, ALL);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); comp.iter().max().map_or(0, |m| m + 1)];
    for (v, &c) in comp.iter().enumerate() {
        members[c].push(v);
    }
    let mut local = vec![0; graph.len()];
    for nodes in members.iter().filter(|m| m.iter().filter(|&&v| v < n).count() > 1) {
        for (i, &v) in nodes.iter().enumerate() {
            local[v] = i;
        }
        let mut sub = Vec::new();
        for (i, &u) in nodes.iter().enumerate() {
            sub.extend(graph.out(u).iter().filter(|(v, _)| comp[*v] == comp[u]).map(|&(v, m)| (i, local[v], m)));
        }
        let Some(found) = worst_cycle(&Csr::new(nodes.len(), sub)) else { continue };
        let mut cycle: Cycle =
            found.into_iter().filter(|(v, _)| nodes[*v] < n).map(|(v, m)| (history[nodes[v]].id, edge(m))).collect();
        let start = cycle.iter().enumerate().min_by_key(|(_, (t, _))| *t).map_or(0, |(i, _)| i);
        cycle.rotate_left(start);
        let realtime = cycle.iter().any(|s| s.1 == Edge::Rt);
        out.push(match cycle.iter().filter(|s| s.1 == Edge::Rw).count() {
            0 if cycle.iter().all(|s| s.1 != Edge::Wr) => Anomaly::G0 { cycle, realtime },
            0 => Anomaly::G1c { cycle, realtime },
            1 => Anomaly::GSingle { cycle, realtime },
            _ => Anomaly::G2 { cycle, realtime },
        });
    }
}

/// Flags a committed transaction's read that disagrees with its own earlier read of the key
/// and appends since (or, with no earlier read, does not end with those appends).
fn internal(txn: &Txn, out: &mut Vec<Anomaly>) {
    let mut state: HashMap<u64, (Option<&[u64]>, Vec<u64>)> = HashMap::new();
    for op in &txn.ops {
        match op {
            Op::Append { key, value } => state.entry(*key).or_default().1.push(*value),
            Op::Read { key, list: Some(list) } => {
                let (prev, own) = state.entry(*key).or_default();
                let before = *prev;
                let fine = match before {
                    Some(p) => list.len() == p.len() + own.len() && list.starts_with(p) && list.ends_with(own),
                    None => list.ends_with(own),
                };
                if !fine {
                    let expected = before.map_or_else(|| own.clone(), |p| [p, own.as_slice()].concat());
                    let whole = before.is_some();
                    out.push(Anomaly::Internal { txn: txn.id, key: *key, read: list.clone(), expected, whole });
                }
                *prev = Some(list);
                own.clear();
            }
            Op::Read { list: None, .. } => {}
        }
    }
}

/// The edge kind of one bit.
fn edge(bit: u8) -> Edge {
    match bit {
        WW => Edge::Ww,
        WR => Edge::Wr,
        RW => Edge::Rw,
        _ => Edge::Rt,
    }
}

/// A graph in compressed sparse rows; each edge carries the set of its kinds as bits.
struct Csr {
    offsets: Vec<usize>,
    targets: Vec<(usize, u8)>,
}

impl Csr {
    /// The graph of `nodes` nodes and `edges`, merging parallel edges' kinds.
    fn new(nodes: usize, mut edges: Vec<(usize, usize, u8)>) -> Csr {
        edges.sort_unstable();
        let mut merged: Vec<(usize, usize, u8)> = Vec::with_capacity(edges.len());
        for (u, v, m) in edges {
            match merged.last_mut() {
                Some(last) if (last.0, last.1) == (u, v) => last.2 |= m,
                _ => merged.push((u, v, m)),
            }
        }
        let mut offsets = vec![0; nodes + 1];
        for &(u, _, _) in &merged {
            offsets[u + 1] += 1;
        }
        for i in 0..nodes {
            offsets[i + 1] += offsets[i];
        }
        Csr { offsets, targets: merged.into_iter().map(|(_, v, m)| (v, m)).collect() }
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn out(&self, u: usize) -> &[(usize, u8)] {
        &self.targets[self.offsets[u]..self.offsets[u + 1]]
    }
}

/// Tarjan's strongly connected components over the edges of a kind in `mask`, iteratively (a
/// history's chains are deeper than the stack): each node's component number.
fn tarjan(g: &Csr, mask: u8) -> Vec<usize> {
    const NONE: usize = usize::MAX;
    let n = g.len();
    let (mut index, mut low, mut comp) = (vec![NONE; n], vec![0; n], vec![NONE; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut calls) = (Vec::new(), Vec::<(usize, usize)>::new());
    let (mut next_index, mut next_comp) = (0, 0);
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        calls.push((root, 0));
        while let Some(top) = calls.last_mut() {
            let u = top.0;
            if let Some(&(v, m)) = g.out(u).get(top.1) {
                top.1 += 1;
                if m & mask != 0 {
                    if index[v] == NONE {
                        index[v] = next_index;
                        low[v] = next_index;
                        next_index += 1;
                        stack.push(v);
                        on_stack[v] = true;
                        calls.push((v, 0));
                    } else if on_stack[v] {
                        low[u] = low[u].min(index[v]);
                    }
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[u]);
            }
            if low[u] == index[u] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp[w] = next_comp;
                    if w == u {
                        break;
                    }
                }
                next_comp += 1;
            }
        }
    }
    comp
}

/// The most severe short cycle of a strongly connected `g`, as (node, edge bit) steps: it tries
/// `ww` only, then `ww`+`wr`, then one `rw` closed by `ww`/`wr`, then `ww`+`wr`+`rw`, then the
/// same three with `rt` allowed on the paths, and finally anything.
fn worst_cycle(g: &Csr) -> Option<Vec<(usize, u8)>> {
    let mut bfs = Bfs { seen: vec![0; g.len()], stamp: 0, parent: vec![(0, 0); g.len()], queue: VecDeque::new() };
    let mut budget = SINGLE_RW_BUDGET;
    // (whether the cycle is one `rw` edge closed by a path, the kinds allowed on the path)
    let stages = [(false, WW), (false, WW | WR), (true, WW | WR), (false, WW | WR | RW)];
    let realtime = [(false, WW | WR | RT), (true, WW | WR | RT), (false, ALL)];
    for (single_rw, mask) in stages.into_iter().chain(realtime) {
        if single_rw {
            for u in 0..g.len() {
                for &(v, _) in g.out(u).iter().filter(|(_, m)| m & RW != 0) {
                    if budget == 0 {
                        break;
                    }
                    if let Some(rest) = bfs.path(g, v, u, mask, &mut budget) {
                        return Some([vec![(u, RW)], rest].concat());
                    }
                }
            }
            continue;
        }
        let comp = tarjan(g, mask);
        let mut size = vec![0; g.len()];
        comp.iter().for_each(|&c| size[c] += 1);
        if let Some(start) = (0..g.len()).find(|&v| size[comp[v]] > 1) {
            let mut unlimited = usize::MAX;
            return bfs.path(g, start, start, mask, &mut unlimited);
        }
    }
    None
}

/// Breadth-first search state reused across searches (`seen[v] == stamp` marks a visit).
struct Bfs {
    seen: Vec<usize>,
    stamp: usize,
    parent: Vec<(usize, u8)>,
    queue: VecDeque<usize>,
}

impl Bfs {
    /// A shortest path from `from` to `to` over edges of a kind in `mask` (a cycle when they are
    /// equal), as (node, edge bit) steps leaving each node, spending at most `budget` edge visits.
    fn path(&mut self, g: &Csr, from: usize, to: usize, mask: u8, budget: &mut usize) -> Option<Vec<(usize, u8)>> {
        self.stamp += 1;
        self.queue.clear();
        self.queue.push_back(from);
        self.seen[from] = self.stamp;
        while let Some(u) = self.queue.pop_front() {
            for &(v, m) in g.out(u) {
                *budget = budget.checked_sub(1)?;
                let bits = m & mask;
                if bits == 0 {
                    continue;
                }
                let label = bits & bits.wrapping_neg();
                if v == to {
                    let mut steps = vec![(u, label)];
                    let mut at = u;
                    while at != from {
                        let (p, l) = self.parent[at];
                        steps.push((p, l));
                        at = p;
                    }
                    steps.reverse();
                    return Some(steps);
                }
                if self.seen[v] != self.stamp {
                    self.seen[v] = self.stamp;
                    self.parent[v] = (u, label);
                    self.queue.push_back(v);
                }
            }
        }
        None
    }
}

impl Anomaly {
    /// The anomaly's short name, as Elle spells the cycle classes (`G-single-realtime`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Anomaly::Malformed { .. } => "malformed",
            Anomaly::DuplicateAppend { .. } => "duplicate-append",
            Anomaly::DuplicateInRead { .. } => "duplicate-in-read",
            Anomaly::PhantomValue { .. } => "phantom-value",
            Anomaly::IncompatibleOrder { .. } => "incompatible-order",
            Anomaly::G1a { .. } => "G1a",
            Anomaly::G1b { .. } => "G1b",
            Anomaly::Internal { .. } => "internal",
            Anomaly::LostAppend { .. } => "lost-append",
            Anomaly::G0 { realtime, .. } => ["G0", "G0-realtime"][*realtime as usize],
            Anomaly::G1c { realtime, .. } => ["G1c", "G1c-realtime"][*realtime as usize],
            Anomaly::GSingle { realtime, .. } => ["G-single", "G-single-realtime"][*realtime as usize],
            Anomaly::G2 { realtime, .. } => ["G2", "G2-realtime"][*realtime as usize],
        }
    }
}

/// A list's last few items, for messages.
fn show(list: &[u64]) -> String {
    let tail: Vec<String> = list.iter().skip(list.len().saturating_sub(6)).map(u64::to_string).collect();
    let more = if list.len() > 6 { format!("… ({} items) ", list.len()) } else { String::new() };
    format!("[{more}{}]", tail.join(", "))
}

/// Who read something: a transaction or the final list.
fn reader(txn: &Option<usize>) -> String {
    txn.map_or_else(|| "the final list".to_string(), |t| format!("txn {t}"))
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name();
        match self {
            Anomaly::Malformed { txn, problem } => write!(f, "{name}: txn {txn}: {problem}"),
            Anomaly::DuplicateAppend { key, value, first, second } => {
                write!(f, "{name}: key {key} value {value} appended by txn {first} and txn {second}")
            }
            Anomaly::DuplicateInRead { key, value, txn } => {
                write!(f, "{name}: {} holds key {key} value {value} twice", reader(txn))
            }
            Anomaly::PhantomValue { key, value, txn } => {
                write!(f, "{name}: {} holds key {key} value {value}, which no txn appended", reader(txn))
            }
            Anomaly::IncompatibleOrder { key, txn, index, read, order } => {
                let order = order.map_or_else(|| "nothing".to_string(), |v| v.to_string());
                write!(f, "{name}: txn {txn} read key {key} with {read} at index {index}, the order has {order}")
            }
            Anomaly::G1a { key, value, writer, reader: r } => {
                write!(f, "{name}: {} holds key {key} value {value} of failed txn {writer}", reader(r))
            }
            Anomaly::G1b { key, value, writer, reader } => {
                write!(f, "{name}: txn {reader} read key {key} ending at {value}, not txn {writer}'s last append")
            }
            Anomaly::Internal { txn, key, read, expected, whole } => {
                let how = if *whole { "be" } else { "end with" };
                write!(
                    f,
                    "{name}: txn {txn} read key {key} as {}, its own ops say {how} {}",
                    show(read),
                    show(expected)
                )
            }
            Anomaly::LostAppend { key, value, txn } => {
                write!(f, "{name}: txn {txn} appended {value} to key {key}, missing from the final list")
            }
            Anomaly::G0 { cycle, .. }
            | Anomaly::G1c { cycle, .. }
            | Anomaly::GSingle { cycle, .. }
            | Anomaly::G2 { cycle, .. } => {
                write!(f, "{name}:")?;
                for (t, e) in cycle {
                    write!(f, " txn {t} -{e}->")?;
                }
                write!(f, " txn {}", cycle.first().map_or(0, |s| s.0))
            }
        }
    }
}

impl fmt::Display for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(["ww", "wr", "rw", "rt"][*self as usize])
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "list-append check of {} txns over {} keys: ", self.txns_checked, self.keys)?;
        if self.is_valid() {
            return writeln!(f, "no anomalies");
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &self.anomalies {
            *counts.entry(a.name()).or_default() += 1;
        }
        let counts: Vec<String> = counts.iter().map(|(name, k)| format!("{name} {k}")).collect();
        writeln!(f, "{} anomalies ({})", self.anomalies.len(), counts.join(", "))?;
        for a in self.anomalies.iter().take(SHOWN) {
            writeln!(f, "  {a}")?;
        }
        if self.anomalies.len() > SHOWN {
            writeln!(f, "  ... and {} more", self.anomalies.len() - SHOWN)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use Outcome::{Aborted, Committed, Unknown};

    fn a(key: u64, value: u64) -> Op {
        Op::Append { key, value }
    }

    fn r(key: u64, list: &[u64]) -> Op {
        Op::Read { key, list: Some(list.to_vec()) }
    }

    fn txn(id: usize, outcome: Outcome, (invoke_ns, done): (u64, u64), ops: Vec<Op>) -> Txn {
        Txn { id, process: id as u64, invoke_ns, complete_ns: Some(done), outcome, ops }
    }

    /// Committed transactions, all concurrent (no real-time edges).
    fn concurrent(txns: Vec<Vec<Op>>) -> Vec<Txn> {
        txns.into_iter().enumerate().map(|(i, ops)| txn(i, Outcome::Committed, (0, 100), ops)).collect()
    }

    fn lists(of: &[(u64, &[u64])]) -> BTreeMap<u64, Vec<u64>> {
        of.iter().map(|(k, l)| (*k, l.to_vec())).collect()
    }

    fn names(history: &[Txn], finals: Option<&BTreeMap<u64, Vec<u64>>>) -> Vec<&'static str> {
        check(history, finals).anomalies.iter().map(Anomaly::name).collect()
    }

    /// A serial execution against an in-memory map of lists: transaction `i` runs alone at
    /// `span(i)`; aborted ones and half the unknown ones take no effect. Also the final lists.
    fn serial(
        spec: &[(u8, Vec<(bool, u64)>)],
        span: impl Fn(u64) -> (u64, u64),
    ) -> (Vec<Txn>, BTreeMap<u64, Vec<u64>>) {
        let (mut db, mut next) = (BTreeMap::<u64, Vec<u64>>::new(), 0);
        let mut history = Vec::new();
        for (i, (pick, ops)) in spec.iter().enumerate() {
            let outcome = [Committed, Committed, Committed, Committed, Committed, Committed, Aborted, Unknown]
                [usize::from(pick % 8)];
            let applies = outcome == Outcome::Committed || pick % 16 == 7;
            let ops = ops.iter().map(|&(read, key)| {
                let list = db.entry(key).or_default();
                if read {
                    return Op::Read { key, list: (outcome == Outcome::Committed).then(|| list.clone()) };
                }
                next += 1;
                if applies {
                    list.push(next);
                }
                a(key, next)
            });
            let mut t = txn(i, outcome, span(i as u64), ops.collect());
            t.complete_ns = t.complete_ns.filter(|_| outcome != Unknown);
            history.push(t);
        }
        (history, db)
    }

    fn spec() -> impl Strategy<Value = Vec<(u8, Vec<(bool, u64)>)>> {
        prop::collection::vec((any::<u8>(), prop::collection::vec((any::<bool>(), 0u64..4), 1..5)), 1..40)
    }

    fn garbage() -> impl Strategy<Value = Txn> {
        let op = (any::<bool>(), 0u64..4, 0u64..8, prop::option::of(prop::collection::vec(0u64..8, 0..5)))
            .prop_map(|(read, key, value, list)| if read { Op::Read { key, list } } else { Op::Append { key, value } });
        (0usize..40, 0u64..50, prop::option::of(0u64..50), 0u8..3, prop::collection::vec(op, 0..5)).prop_map(
            |(id, invoke_ns, complete_ns, o, ops)| Txn {
                id,
                process: 0,
                invoke_ns,
                complete_ns,
                outcome: [Outcome::Committed, Aborted, Unknown][usize::from(o)],
                ops,
            },
        )
    }

    proptest! {
        #[test]
        fn serial_histories_are_valid(spec in spec(), with_final: bool) {
            let (history, finals) = serial(&spec, |i| (10 * i, 10 * i + 5));
            let report = check(&history, with_final.then_some(&finals));
            prop_assert!(report.is_valid(), "{}", report);
        }

        #[test]
        fn a_swapped_read_is_caught(spec in spec(), which: prop::sample::Index, at: prop::sample::Index) {
            let (mut history, finals) = serial(&spec, |i| (10 * i, 10 * i + 5));
            let long: Vec<(usize, usize)> = history.iter().enumerate().filter(|(_, t)| t.outcome == Outcome::Committed)
                .flat_map(|(i, t)| t.ops.iter().enumerate().filter_map(move |(o, op)| match op {
                    Op::Read { list: Some(l), .. } if l.len() >= 2 => Some((i, o)),
                    _ => None,
                }))
                .collect();
            prop_assume!(!long.is_empty());
            let (t, o) = long[which.index(long.len())];
            if let Op::Read { list: Some(l), .. } = &mut history[t].ops[o] {
                let j = at.index(l.len() - 1);
                l.swap(j, j + 1);
            }
            let report = check(&history, Some(&finals));
            prop_assert!(report.anomalies.iter().any(|a| matches!(a, Anomaly::IncompatibleOrder { .. })), "{}", report);
        }

        #[test]
        fn garbage_never_panics(
            history in prop::collection::vec(garbage(), 0..30),
            finals in prop::option::of(
                prop::collection::btree_map(0u64..4, prop::collection::vec(0u64..8, 0..6), 0..4)
            ),
        ) {
            let report = check(&history, finals.as_ref());
            prop_assert!(report.to_string().starts_with("list-append check"));
        }
    }

    #[test]
    fn a_valid_serial_history_has_no_anomaly() {
        let ops = [
            vec![a(1, 1), a(2, 1)],
            vec![r(1, &[1]), a(1, 2), r(1, &[1, 2])],
            vec![r(1, &[1, 2]), r(2, &[1]), a(2, 2)],
            vec![r(2, &[1, 2]), r(3, &[])],
        ];
        let history: Vec<Txn> = ops
            .into_iter()
            .enumerate()
            .map(|(i, ops)| txn(i, Outcome::Committed, (10 * i as u64, 10 * i as u64 + 5), ops))
            .collect();
        let finals = lists(&[(1, &[1, 2]), (2, &[1, 2])]);
        assert!(check(&history, None).is_valid());
        let report = check(&history, Some(&finals));
        assert!(report.is_valid(), "{report}");
        assert_eq!((report.txns_checked, report.keys), (4, 3));
    }

    #[test]
    fn g0_write_cycle() {
        let history = concurrent(vec![vec![a(1, 1), a(2, 2)], vec![a(1, 3), a(2, 4)]]);
        let report = check(&history, Some(&lists(&[(1, &[1, 3]), (2, &[4, 2])])));
        let cycle = vec![(0, Edge::Ww), (1, Edge::Ww)];
        assert_eq!(report.anomalies, vec![Anomaly::G0 { cycle, realtime: false }]);
    }

    #[test]
    fn g1a_aborted_read() {
        let mut history = concurrent(vec![vec![a(1, 1)], vec![r(1, &[1])]]);
        history[0].outcome = Aborted;
        let report = check(&history, None);
        assert_eq!(report.anomalies, vec![Anomaly::G1a { key: 1, value: 1, writer: 0, reader: Some(1) }]);
        history[1].ops = vec![r(1, &[])];
        let report = check(&history, Some(&lists(&[(1, &[1])])));
        assert_eq!(report.anomalies, vec![Anomaly::G1a { key: 1, value: 1, writer: 0, reader: None }]);
    }

    #[test]
    fn g1b_intermediate_read() {
        let history = concurrent(vec![vec![a(1, 1), a(1, 2)], vec![r(1, &[1])], vec![r(1, &[1, 2])]]);
        let report = check(&history, None);
        assert!(report.anomalies.contains(&Anomaly::G1b { key: 1, value: 1, writer: 0, reader: 1 }), "{report}");
    }

    #[test]
    fn g1c_circular_information_flow() {
        let history = concurrent(vec![vec![a(1, 1), r(2, &[2])], vec![a(2, 2), r(1, &[1])]]);
        assert_eq!(names(&history, None), vec!["G1c"]);
    }

    #[test]
    fn g_single_read_skew() {
        let history = vec![
            txn(0, Outcome::Committed, (0, 10), vec![a(1, 1), a(2, 2)]),
            txn(1, Outcome::Committed, (20, 100), vec![r(1, &[1]), r(2, &[2, 4])]),
            txn(2, Outcome::Committed, (20, 100), vec![a(1, 3), a(2, 4)]),
        ];
        let report = check(&history, Some(&lists(&[(1, &[1, 3]), (2, &[2, 4])])));
        let cycle = vec![(1, Edge::Rw), (2, Edge::Wr)];
        assert_eq!(report.anomalies, vec![Anomaly::GSingle { cycle, realtime: false }]);
    }

    #[test]
    fn g2_write_skew() {
        let history = concurrent(vec![vec![r(1, &[]), r(2, &[]), a(1, 1)], vec![r(1, &[]), r(2, &[]), a(2, 2)]]);
        let report = check(&history, Some(&lists(&[(1, &[1]), (2, &[2])])));
        let cycle = vec![(0, Edge::Rw), (1, Edge::Rw)];
        assert_eq!(report.anomalies, vec![Anomaly::G2 { cycle, realtime: false }]);
    }

    #[test]
    fn a_stale_order_violates_real_time() {
        let history = vec![
            txn(0, Outcome::Committed, (0, 10), vec![a(1, 1)]),
            txn(1, Outcome::Committed, (20, 30), vec![r(2, &[])]),
            txn(2, Outcome::Committed, (40, 50), vec![a(1, 2)]),
        ];
        let finals = lists(&[(1, &[2, 1])]);
        let report = check(&history, Some(&finals));
        assert_eq!(report.anomalies, vec![Anomaly::G0 { cycle: vec![(0, Edge::Rt), (2, Edge::Ww)], realtime: true }]);
        assert_eq!(report.anomalies[0].to_string(), "G0-realtime: txn 0 -rt-> txn 2 -ww-> txn 0");
        assert!(check(&concurrent(vec![vec![a(1, 1)], vec![], vec![a(1, 2)]]), Some(&finals)).is_valid());
        // Invoked just as the other completed: concurrent, so either order is fine.
        let history = vec![
            txn(0, Outcome::Committed, (0, 10), vec![a(1, 1)]),
            txn(1, Outcome::Committed, (10, 20), vec![a(1, 2)]),
        ];
        assert!(check(&history, Some(&finals)).is_valid());
    }

    #[test]
    fn the_most_severe_cycle_of_a_component_is_reported() {
        // T0 and T1 write-skew over keys 3 and 4; T0 and T2 form a write cycle over keys 1 and 2.
        let history = concurrent(vec![
            vec![r(3, &[]), a(4, 10), a(1, 1), a(2, 2)],
            vec![r(4, &[]), a(3, 11)],
            vec![a(1, 3), a(2, 4)],
        ]);
        let finals = lists(&[(1, &[1, 3]), (2, &[4, 2]), (3, &[11]), (4, &[10])]);
        let cycle = vec![(0, Edge::Ww), (2, Edge::Ww)];
        assert_eq!(check(&history, Some(&finals)).anomalies, vec![Anomaly::G0 { cycle, realtime: false }]);
    }

    #[test]
    fn incompatible_order() {
        let history = concurrent(vec![vec![a(1, 1)], vec![a(1, 2)], vec![r(1, &[1, 2])], vec![r(1, &[2])]]);
        let report = check(&history, None);
        let found = Anomaly::IncompatibleOrder { key: 1, txn: 3, index: 0, read: 2, order: Some(1) };
        assert_eq!(report.anomalies, vec![found]);
    }

    #[test]
    fn lost_append() {
        let history = concurrent(vec![vec![a(1, 1)], vec![a(1, 2)]]);
        let report = check(&history, Some(&lists(&[(1, &[1])])));
        assert_eq!(report.anomalies, vec![Anomaly::LostAppend { key: 1, value: 2, txn: 1 }]);
    }

    #[test]
    fn phantom_value() {
        let report = check(&concurrent(vec![vec![r(1, &[7])]]), None);
        assert_eq!(report.anomalies, vec![Anomaly::PhantomValue { key: 1, value: 7, txn: Some(0) }]);
    }

    #[test]
    fn duplicate_append_and_duplicate_in_read() {
        let report = check(&concurrent(vec![vec![a(1, 1)], vec![a(1, 1)]]), None);
        assert_eq!(report.anomalies, vec![Anomaly::DuplicateAppend { key: 1, value: 1, first: 0, second: 1 }]);
        let report = check(&concurrent(vec![vec![a(1, 1)], vec![r(1, &[1, 1])]]), None);
        assert_eq!(report.anomalies, vec![Anomaly::DuplicateInRead { key: 1, value: 1, txn: Some(1) }]);
    }

    #[test]
    fn internal_inconsistency() {
        let report = check(&concurrent(vec![vec![a(1, 1), r(1, &[])]]), None);
        let found = Anomaly::Internal { txn: 0, key: 1, read: vec![], expected: vec![1], whole: false };
        assert_eq!(report.anomalies, vec![found]);
        let report = check(&concurrent(vec![vec![a(1, 5)], vec![r(1, &[5]), a(1, 6), r(1, &[5])]]), None);
        let found = Anomaly::Internal { txn: 1, key: 1, read: vec![5], expected: vec![5, 6], whole: true };
        assert_eq!(report.anomalies, vec![found]);
    }

    #[test]
    fn info_counts_only_when_observed() {
        let mut history = concurrent(vec![vec![a(1, 1), a(2, 2)], vec![a(1, 3), a(2, 4)]]);
        history[0].outcome = Unknown;
        history[0].complete_ns = None;
        assert_eq!(names(&history, Some(&lists(&[(1, &[1, 3]), (2, &[4, 2])]))), vec!["G0"]);
        assert!(check(&history, Some(&lists(&[(1, &[3]), (2, &[4])]))).is_valid());
    }

    #[test]
    fn malformed_input_is_reported_not_panicked_on() {
        let mut history = concurrent(vec![vec![Op::Read { key: 1, list: None }], vec![a(1, 1)]]);
        history[1].complete_ns = None;
        assert_eq!(names(&history, None), vec!["malformed", "malformed"]);
    }

    #[test]
    fn the_summary_is_capped() {
        let report = check(&concurrent(vec![(0..25).map(|v| r(v, &[v])).collect()]), None);
        let text = report.to_string();
        assert_eq!(text.lines().count(), 22, "{text}");
        assert!(text.contains("25 anomalies (phantom-value 25)") && text.ends_with("... and 5 more\n"), "{text}");
    }

    #[test]
    fn twenty_thousand_transactions() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let spec: Vec<(u8, Vec<(bool, u64)>)> = (0..20_000)
            .map(|_| {
                let pick = next() as u8;
                (
                    pick,
                    (0..1 + next() % 4)
                        .map(|_| (next() % 2 == 0, if next() % 10 == 0 { 0 } else { next() % 100 }))
                        .collect(),
                )
            })
            .collect();
        let jitter: Vec<u64> = (0..40_000).map(|_| next() % 300).collect();
        let span = |i: u64| ((100 * i).saturating_sub(jitter[i as usize * 2]), 100 * i + jitter[i as usize * 2 + 1]);
        let (history, finals) = serial(&spec, span);
        let longest = finals.values().map(Vec::len).max().unwrap_or(0);
        let start = std::time::Instant::now();
        let report = check(&history, Some(&finals));
        println!("20000 txns, longest list {longest}: {:?}", start.elapsed());
        assert!(report.is_valid(), "{report}");
        assert!(check(&history, None).is_valid());
        assert_eq!(report.keys, 100);
        // Reversed final lists: every read incompatible, and one component of nearly everything.
        let reversed: BTreeMap<u64, Vec<u64>> =
            finals.iter().map(|(k, l)| (*k, l.iter().rev().copied().collect())).collect();
        let start = std::time::Instant::now();
        let report = check(&history, Some(&reversed));
        println!("reversed: {} anomalies in {:?}", report.anomalies.len(), start.elapsed());
        assert!(report.anomalies.iter().any(|a| matches!(a, Anomaly::G1c { .. })));
    }
}

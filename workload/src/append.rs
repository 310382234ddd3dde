//! Jepsen list-append's draws: transactions of point reads (`KvOp::Read`) and appends of
//! unique, increasing integers (`KvOp::Append`) on a small set of active keys, each key
//! retired for a fresh one after so many appends ([`Keys`]: a list holds only so many items in
//! its cell); and the checker's view of a transaction once its reads are known: the history's
//! micro-operations filled ([`fill`], [`redt_checkers::history`]), or Elle's operations of
//! [`Step`]s that may also be range reads and deletes ([`fill_steps`], [`unfilled`],
//! [`redt_checkers::elle`]).

use rand::Rng;
use redt_checkers::elle::Op;
use redt_checkers::history::Mop;
use redt_dc_executor::{decode_scan, list_items, KvOp};
use std::collections::{BTreeMap, HashMap};

/// The active keys and how often each was appended to.
#[derive(Clone, Debug)]
pub struct Keys {
    active: Vec<u64>,
    writes: HashMap<u64, u32>,
    next: u64,
    max: u32,
}

impl Keys {
    /// `keys` (at least 1) active keys from `first` on, each retired after `max` appends (at
    /// least 1) for the next key past every key used so far.
    pub fn new(first: u64, keys: usize, max: u32) -> Self {
        Keys {
            active: (first..first + keys as u64).collect(),
            writes: HashMap::new(),
            next: first + keys as u64,
            max: max.max(1),
        }
    }

    /// One past the highest key used so far (active or retired).
    pub fn end(&self) -> u64 {
        self.next
    }

    /// Draws one of the active keys, uniformly.
    pub fn pick(&self, rng: &mut impl Rng) -> u64 {
        self.active[rng.gen_range(0..self.active.len())]
    }

    /// Counts an append to `k`, retiring it once it had its `max`.
    pub fn appended(&mut self, k: u64) {
        let w = self.writes.entry(k).or_default();
        *w += 1;
        if *w >= self.max {
            if let Some(slot) = self.active.iter_mut().find(|x| **x == k) {
                *slot = self.next;
                self.next += 1;
            }
        }
    }
}

/// Draws one micro-operation on `key`: a read with probability `read_ratio` (0 to 1), else an
/// append of the value `next_value` gives.
pub fn mop(rng: &mut impl Rng, key: u64, read_ratio: f64, next_value: impl FnOnce() -> u64) -> Mop {
    if rng.gen_bool(read_ratio) {
        Mop::Read(key, None)
    } else {
        Mop::Append(key, next_value())
    }
}

/// Draws one transaction of 1 to `max_len` (at least 1) micro-operations, each on an active
/// key of `keys` ([`Keys::pick`], an append counted with [`Keys::appended`]) and a read with
/// probability `read_ratio` (clamped to 0–1); appends take the values `next_value` gives.
pub fn draw(
    keys: &mut Keys,
    max_len: usize,
    read_ratio: f64,
    rng: &mut impl Rng,
    mut next_value: impl FnMut() -> u64,
) -> Vec<Mop> {
    let n = rng.gen_range(1..=max_len.max(1));
    let read_ratio = read_ratio.clamp(0.0, 1.0);
    (0..n)
        .map(|_| {
            let k = keys.pick(rng);
            let m = mop(rng, k, read_ratio, &mut next_value);
            if let Mop::Append(..) = m {
                keys.appended(k);
            }
            m
        })
        .collect()
}

/// The key/value operations of `mops`.
pub fn kv_ops(mops: &[Mop]) -> Vec<KvOp> {
    mops.iter()
        .map(|m| match m {
            Mop::Append(k, v) => KvOp::Append(*k, *v),
            Mop::Read(k, _) => KvOp::Read(*k),
        })
        .collect()
}

/// `mops` with the reads filled from a committed outcome's `reads`, one per micro-operation (a
/// never-written key reads as the empty list).
pub fn fill(mops: &[Mop], reads: &[Option<Vec<u8>>]) -> Vec<Mop> {
    mops.iter()
        .enumerate()
        .map(|(i, m)| match m {
            Mop::Read(k, _) => Mop::Read(*k, reads.get(i).and_then(|r| r.as_deref()).map(list_items)),
            other => other.clone(),
        })
        .collect()
}

/// Elle's operation of a history's micro-operation.
pub fn to_op(m: Mop) -> Op {
    match m {
        Mop::Append(key, value) => Op::Append { key, value },
        Mop::Read(key, list) => Op::Read { key, list },
    }
}

/// One operation of a drawn transaction as Elle's history records it: a list-append operation,
/// or a range read that becomes list reads once its result is known ([`fill_steps`]), or a
/// delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A list-append operation (its read unfilled).
    Op(Op),
    /// A [`KvOp::Scan`] of `from..=to`, at most `limit` rows.
    Scan {
        /// The first key of the range.
        from: u64,
        /// The last key of the range.
        to: u64,
        /// Most rows returned.
        limit: u32,
    },
    /// A [`KvOp::Delete`] of `key` (no operation of the checker's).
    Delete {
        /// The key deleted.
        key: u64,
    },
}

/// The checker's operations of a transaction that did not commit: its appends (and its point
/// reads, unfilled); a scan of it observed nothing the checker can use.
pub fn unfilled(steps: &[Step]) -> Vec<Op> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Op(op) => Some(op.clone()),
            Step::Scan { .. } | Step::Delete { .. } => None,
        })
        .collect()
}

/// The checker's operations of a committed transaction from the values its operations read
/// (`reads`, one per step). A point read becomes the list it read (a missing record: the empty
/// list). A scan becomes one read per key it observed, in key order: each row it returned, as
/// its list, and every other key of the range up to its last row, as the empty list — every
/// other key of the range when it returned fewer rows than its limit. Each partition's piece
/// returns the first `limit` rows of its part of the range (keys without a row do not count),
/// and the scan keeps the first `limit` of them all, so a key at or below the last row returned
/// that held a row would have been returned; and with fewer rows than the limit, no piece was
/// cut short. A scan result that does not decode is read as no rows; one that holds a key
/// outside its range is kept, so the checker sees what it returned. A delete observes nothing.
pub fn fill_steps(steps: &[Step], reads: &[Option<Vec<u8>>]) -> Vec<Op> {
    let mut ops = Vec::with_capacity(steps.len());
    for (step, r) in steps.iter().zip(reads.iter().chain(std::iter::repeat(&None))) {
        match step {
            Step::Op(Op::Read { key, .. }) => {
                ops.push(Op::Read { key: *key, list: Some(r.as_deref().map(list_items).unwrap_or_default()) })
            }
            Step::Op(other) => ops.push(other.clone()),
            Step::Delete { .. } => {}
            Step::Scan { from, to, limit } => {
                let rows: BTreeMap<u64, Vec<u64>> = r
                    .as_deref()
                    .and_then(decode_scan)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, list_items(&v)))
                    .collect();
                let last = match rows.last_key_value() {
                    Some((&k, _)) if rows.len() >= *limit as usize => k.min(*to),
                    _ => *to,
                };
                let absent: Vec<u64> = (*from..=last).filter(|k| !rows.contains_key(k)).collect();
                let mut observed: Vec<(u64, Vec<u64>)> =
                    rows.into_iter().chain(absent.into_iter().map(|k| (k, Vec::new()))).collect();
                observed.sort_by_key(|o| o.0);
                ops.extend(observed.into_iter().map(|(key, list)| Op::Read { key, list: Some(list) }));
            }
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use redt_dc_executor::encode_scan;

    fn list(items: &[u64]) -> Vec<u8> {
        let mut v = vec![redt_dc_executor::LIST_TAG];
        v.extend_from_slice(&(items.len() as u32).to_le_bytes());
        for i in items {
            v.extend_from_slice(&i.to_le_bytes());
        }
        v
    }

    #[test]
    fn keys_retire_after_their_appends_and_values_are_unique() {
        let mut keys = Keys::new(0, 2, 3);
        let mut value = 0;
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut per_key: HashMap<u64, u32> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        let mut last = 0;
        for _ in 0..200 {
            let m = draw(&mut keys, 4, 0.3, &mut rng, || {
                value += 1;
                value
            });
            assert!((1..=4).contains(&m.len()));
            for op in m {
                if let Mop::Append(k, v) = op {
                    *per_key.entry(k).or_default() += 1;
                    assert!(seen.insert(v) && v > last, "unique, increasing values");
                    last = v;
                }
            }
        }
        assert!(per_key.values().all(|&n| n <= 3), "{per_key:?}");
        assert!(keys.end() > 10, "keys were retired");
        let filled = fill(&[Mop::Read(1, None), Mop::Append(1, 5)], &[Some(vec![0; 16]), None]);
        assert_eq!(filled[0], Mop::Read(1, Some(vec![])));
        assert_eq!(kv_ops(&filled), vec![KvOp::Read(1), KvOp::Append(1, 5)]);
        assert_eq!(to_op(filled[1].clone()), Op::Append { key: 1, value: 5 });
    }

    #[test]
    fn a_whole_scan_observes_the_keys_it_did_not_return_as_empty() {
        let steps = [Step::Scan { from: 3, to: 6, limit: 4 }, Step::Op(Op::Append { key: 9, value: 1 })];
        let rows = encode_scan(&[(4, list(&[7])), (6, list(&[8, 9]))]);
        let ops = fill_steps(&steps, &[Some(rows), None]);
        let read = |key, l: &[u64]| Op::Read { key, list: Some(l.to_vec()) };
        assert_eq!(
            ops,
            vec![read(3, &[]), read(4, &[7]), read(5, &[]), read(6, &[8, 9]), Op::Append { key: 9, value: 1 }]
        );
    }

    #[test]
    fn a_scan_its_limit_cut_observes_the_keys_up_to_its_last_row() {
        let read = |key, l: &[u64]| Op::Read { key, list: Some(l.to_vec()) };
        let steps = [Step::Scan { from: 3, to: 8, limit: 2 }];
        let ops = fill_steps(&steps, &[Some(encode_scan(&[(4, list(&[1])), (6, list(&[2]))]))]);
        assert_eq!(ops, vec![read(3, &[]), read(4, &[1]), read(5, &[]), read(6, &[2])], "7 and 8 were not read");
        let steps = [Step::Scan { from: 3, to: 6, limit: 3 }];
        let ops = fill_steps(&steps, &[Some(encode_scan(&[(5, list(&[2]))]))]);
        assert_eq!(ops, vec![read(3, &[]), read(4, &[]), read(5, &[2]), read(6, &[])], "fewer rows than the limit");
        assert_eq!(unfilled(&steps), Vec::new(), "an uncommitted scan observed nothing");
        assert_eq!(fill_steps(&[Step::Delete { key: 4 }], &[None]), Vec::new(), "a delete observes nothing");
    }
}

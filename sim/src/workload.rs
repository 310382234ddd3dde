//! The workloads the simulated clients run: bank transfers, Jepsen list-append (with or without
//! range reads) and YCSB, all drawn from the run's seeded generator.

use rand::rngs::StdRng;
use rand::Rng;
use redt_checkers::elle::Op;
use redt_dc_executor::{decode_scan, list_items, KvOp, YcsbOp};
use redt_proto::wire::ProcedureCall;
use redt_proto::TableId;
use redt_protocol::call::{kv_call, ycsb_call};
use std::collections::BTreeMap;
use std::str::FromStr;

/// Which workload the clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Transfers between [`BANK_ACCOUNTS`] accounts of [`BANK_START`] each, and reads of every
    /// balance; the total must hold on every replica.
    Bank,
    /// Jepsen list-append over a few hot keys: 1–4 reads and appends of unique values.
    Append,
    /// YCSB: 4 reads or single-cell updates of preloaded records, Zipf-free uniform keys.
    Ycsb,
    /// List-append with range reads (the phantom test): 1–4 point reads, appends and
    /// [`KvOp::Scan`]s over a window of [`SCAN_WINDOW`] keys that slides up by one key every
    /// [`SCAN_SLIDE`] transactions drawn, so new keys keep being inserted inside ranges other
    /// transactions read. A scan observes every key of its range up to its last row (every
    /// key of the range when it returned fewer rows than its limit) that it does not return as
    /// the empty list; that absence is what makes a phantom visible. Every [`DELETE_EVERY`]th
    /// transaction deletes a key of the window ([`KvOp::Delete`]), which later appends bring
    /// back; the checker leaves the keys ever deleted out of the list-append history (a list
    /// that starts again from empty has no place in it) and checks instead that every key
    /// holding a row is in its replicas' ordered indexes.
    AppendScan,
    /// List-append with deletes (the record-reclamation test): 1–3 point reads and appends
    /// over a window of [`CHURN_WINDOW`] keys that slides up by one key every [`CHURN_SLIDE`]
    /// transactions, so fresh keys keep being created, and one transaction in
    /// [`CHURN_DELETE_ONE_IN`] deletes a key of the window (half of them its lowest, which the
    /// window leaves soon), which later appends may bring back.
    /// Deleted records are freed once their grace passes (`SimConfig::deleted_grace`) while
    /// older writes of their keys may still be in flight; the checks are append-scan's.
    Churn,
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Workload, String> {
        match s {
            "bank" => Ok(Workload::Bank),
            "append" | "list-append" => Ok(Workload::Append),
            "ycsb" => Ok(Workload::Ycsb),
            "append-scan" => Ok(Workload::AppendScan),
            "churn" => Ok(Workload::Churn),
            other => Err(format!("unknown workload `{other}` (bank, append, append-scan, churn, ycsb)")),
        }
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Workload::Bank => "bank",
            Workload::Append => "append",
            Workload::Ycsb => "ycsb",
            Workload::AppendScan => "append-scan",
            Workload::Churn => "churn",
        })
    }
}

/// Accounts of the bank workload.
pub const BANK_ACCOUNTS: u64 = 32;
/// Starting balance of each account.
pub const BANK_START: i64 = 100;
/// Keys of the list-append workload (few, so transactions conflict).
pub const APPEND_KEYS: u64 = 10;
/// Preloaded records of the YCSB workload.
pub const YCSB_RECORDS: u64 = 32;
/// Keys of the append-scan workload's window: its point operations and the start of its scans.
pub const SCAN_WINDOW: u64 = 10;
/// Transactions drawn per step up of the append-scan window.
pub const SCAN_SLIDE: u64 = 24;
/// Most keys an append-scan range spans (it may reach past the window's top, where the window
/// inserts next).
pub const SCAN_WIDTH: u64 = 10;
/// Transactions drawn per delete of the append-scan workload.
pub const DELETE_EVERY: u64 = 48;

/// Keys of the churn workload's window.
pub const CHURN_WINDOW: u64 = 4;
/// Transactions drawn per step up of the churn window.
pub const CHURN_SLIDE: u64 = 8;
/// One churn transaction in this many is a delete.
pub const CHURN_DELETE_ONE_IN: u32 = 4;

/// One operation of a drawn transaction as the history records it: a list-append operation,
/// or a range read that becomes list reads once its result is known ([`fill`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A list-append operation (its read unfilled).
    Op(Op),
    /// A [`KvOp::Scan`] of `from..=to`, at most `limit` rows.
    Scan { from: u64, to: u64, limit: u32 },
    /// A [`KvOp::Delete`] of `key` (no operation of the checker's).
    Delete { key: u64 },
}

/// One transaction a client is about to submit.
pub struct Draw {
    /// The call.
    pub call: ProcedureCall,
    /// Its list-append operations and scans, one per operation of the call, for the history;
    /// empty for the other workloads.
    pub steps: Vec<Step>,
}

/// Draws transactions; `next_value` keeps appended values unique across the run.
pub struct Generator {
    pub workload: Workload,
    pub kv: TableId,
    pub usertable: TableId,
    pub ycsb_cells: usize,
    next_value: u64,
    /// Transactions drawn (the append-scan window's position).
    drawn: u64,
    /// One past the highest key drawn (append-scan).
    key_end: u64,
    /// The keys a delete was drawn for (append-scan).
    deleted: std::collections::BTreeSet<u64>,
}

impl Generator {
    pub fn new(workload: Workload, kv: TableId, usertable: TableId, ycsb_cells: usize) -> Generator {
        Generator {
            workload,
            kv,
            usertable,
            ycsb_cells,
            next_value: 1,
            drawn: 0,
            key_end: 0,
            deleted: Default::default(),
        }
    }

    /// The keys a delete was drawn for: the checker leaves them out of the list-append history.
    pub fn deleted(&self) -> &std::collections::BTreeSet<u64> {
        &self.deleted
    }

    /// The keys whose replicas the checks read at the end.
    pub fn keys(&self) -> Vec<u64> {
        match self.workload {
            Workload::Bank => (0..BANK_ACCOUNTS).collect(),
            Workload::Append => (0..APPEND_KEYS).collect(),
            Workload::Ycsb => (0..YCSB_RECORDS).collect(),
            Workload::AppendScan | Workload::Churn => (0..self.key_end).collect(),
        }
    }

    /// A churn transaction: a delete of a window key, or 1–3 point reads and appends on it.
    fn draw_churn(&mut self, rng: &mut StdRng) -> Draw {
        let lo = self.drawn / CHURN_SLIDE;
        self.drawn += 1;
        if rng.gen_ratio(1, CHURN_DELETE_ONE_IN) {
            // Half the deletes take the window's lowest key, which the window leaves soon: no
            // later append brings it back, so its record is freed once its grace passes.
            let key = if rng.gen_bool(0.5) { lo } else { lo + rng.gen_range(0..CHURN_WINDOW) };
            return self.delete(key);
        }
        let n = rng.gen_range(1..=3);
        let (mut steps, mut kv) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let key = lo + rng.gen_range(0..CHURN_WINDOW);
            self.read_or_append(rng, key, 0.3, &mut steps, &mut kv);
        }
        Draw { call: kv_call(self.kv, &kv), steps }
    }

    /// A delete of `key`, which the checker leaves out of the list-append history.
    fn delete(&mut self, key: u64) -> Draw {
        self.deleted.insert(key);
        self.key_end = self.key_end.max(key + 1);
        Draw { call: kv_call(self.kv, &[KvOp::Delete(key)]), steps: vec![Step::Delete { key }] }
    }

    /// Adds to a transaction a point read of `key` (with probability `read`) or an append of a
    /// fresh value to it.
    fn read_or_append(&mut self, rng: &mut StdRng, key: u64, read: f64, steps: &mut Vec<Step>, kv: &mut Vec<KvOp>) {
        self.key_end = self.key_end.max(key + 1);
        if rng.gen_bool(read) {
            steps.push(Step::Op(Op::Read { key, list: None }));
            kv.push(KvOp::Read(key));
        } else {
            let value = self.next_value;
            self.next_value += 1;
            steps.push(Step::Op(Op::Append { key, value }));
            kv.push(KvOp::Append(key, value));
        }
    }

    /// An append-scan transaction: 1–4 operations on the window's keys, a third of them scans
    /// while the transaction has appended nothing yet (a scan reads the values before the
    /// transaction's own writes, so after an append it would contradict the transaction's own
    /// append in the checker's eyes). Two scans in three have a limit covering their range.
    fn draw_append_scan(&mut self, rng: &mut StdRng) -> Draw {
        let lo = self.drawn / SCAN_SLIDE;
        self.drawn += 1;
        if self.drawn % DELETE_EVERY == 0 {
            // Spread over the window without drawing from `rng`, so the other transactions
            // stay what they were.
            let key = lo + (self.drawn / DELETE_EVERY * 7) % SCAN_WINDOW;
            return self.delete(key);
        }
        let n = rng.gen_range(1..=4);
        let (mut steps, mut kv) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let key = lo + rng.gen_range(0..SCAN_WINDOW);
            let appended = steps.iter().any(|s| matches!(s, Step::Op(Op::Append { .. })));
            if !appended && rng.gen_bool(1.0 / 3.0) {
                let to = key + rng.gen_range(0..SCAN_WIDTH);
                let width = (to - key + 1) as u32;
                let limit = if rng.gen_bool(2.0 / 3.0) { width } else { rng.gen_range(1..=width) };
                self.key_end = self.key_end.max(to + 1);
                steps.push(Step::Scan { from: key, to, limit });
                kv.push(KvOp::Scan(key, to, limit));
                continue;
            }
            self.read_or_append(rng, key, 0.5, &mut steps, &mut kv);
        }
        Draw { call: kv_call(self.kv, &kv), steps }
    }

    pub fn draw(&mut self, rng: &mut StdRng) -> Draw {
        match self.workload {
            Workload::Bank => {
                if rng.gen_bool(0.1) {
                    let ops: Vec<KvOp> = (0..BANK_ACCOUNTS).map(KvOp::Read).collect();
                    return Draw { call: kv_call(self.kv, &ops), steps: Vec::new() };
                }
                let from = rng.gen_range(0..BANK_ACCOUNTS);
                let to = (from + rng.gen_range(1..BANK_ACCOUNTS)) % BANK_ACCOUNTS;
                let x = rng.gen_range(1..=10);
                Draw { call: kv_call(self.kv, &[KvOp::Add(from, -x), KvOp::Add(to, x)]), steps: Vec::new() }
            }
            Workload::Append => {
                let n = rng.gen_range(1..=4);
                let mut ops = Vec::with_capacity(n);
                let mut kv = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = rng.gen_range(0..APPEND_KEYS);
                    if rng.gen_bool(0.5) {
                        ops.push(Op::Read { key, list: None });
                        kv.push(KvOp::Read(key));
                    } else {
                        let value = self.next_value;
                        self.next_value += 1;
                        ops.push(Op::Append { key, value });
                        kv.push(KvOp::Append(key, value));
                    }
                }
                Draw { call: kv_call(self.kv, &kv), steps: ops.into_iter().map(Step::Op).collect() }
            }
            Workload::AppendScan => self.draw_append_scan(rng),
            Workload::Churn => self.draw_churn(rng),
            Workload::Ycsb => {
                let ops: Vec<YcsbOp> = (0..4)
                    .map(|_| {
                        let key = rng.gen_range(0..YCSB_RECORDS);
                        if rng.gen_bool(0.5) {
                            let cell = rng.gen_range(0..self.ycsb_cells) as u16;
                            YcsbOp::Update { key, cell, value: vec![rng.gen(); 8] }
                        } else {
                            YcsbOp::Read { key }
                        }
                    })
                    .collect();
                Draw { call: ycsb_call(self.usertable, self.ycsb_cells, &ops), steps: Vec::new() }
            }
        }
    }
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
pub fn fill(steps: &[Step], reads: &[Option<Vec<u8>>]) -> Vec<Op> {
    let mut ops = Vec::with_capacity(steps.len());
    for (step, r) in steps.iter().zip(reads.iter().chain(std::iter::repeat(&None))) {
        match step {
            Step::Op(Op::Read { key, .. }) => ops.push(Op::Read {
                key: *key,
                list: Some(r.as_deref().map(redt_dc_executor::list_items).unwrap_or_default()),
            }),
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
    fn a_whole_scan_observes_the_keys_it_did_not_return_as_empty() {
        let steps = [Step::Scan { from: 3, to: 6, limit: 4 }, Step::Op(Op::Append { key: 9, value: 1 })];
        let rows = encode_scan(&[(4, list(&[7])), (6, list(&[8, 9]))]);
        let ops = fill(&steps, &[Some(rows), None]);
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
        let ops = fill(&steps, &[Some(encode_scan(&[(4, list(&[1])), (6, list(&[2]))]))]);
        assert_eq!(ops, vec![read(3, &[]), read(4, &[1]), read(5, &[]), read(6, &[2])], "7 and 8 were not read");
        let steps = [Step::Scan { from: 3, to: 6, limit: 3 }];
        let ops = fill(&steps, &[Some(encode_scan(&[(5, list(&[2]))]))]);
        assert_eq!(ops, vec![read(3, &[]), read(4, &[]), read(5, &[2]), read(6, &[])], "fewer rows than the limit");
        assert_eq!(unfilled(&steps), Vec::new(), "an uncommitted scan observed nothing");
    }

    #[test]
    fn a_delete_is_drawn_every_so_often_and_observes_nothing() {
        let mut g = Generator::new(Workload::AppendScan, TableId(1), TableId(1), 1);
        let mut rng = <StdRng as rand::SeedableRng>::seed_from_u64(7);
        let draws: Vec<Draw> = (0..DELETE_EVERY * 3).map(|_| g.draw(&mut rng)).collect();
        let deletes: Vec<u64> = draws
            .iter()
            .flat_map(|d| d.steps.iter())
            .filter_map(|s| match s {
                Step::Delete { key } => Some(*key),
                _ => None,
            })
            .collect();
        assert_eq!(deletes.len(), 3);
        assert_eq!(g.deleted().iter().copied().collect::<Vec<_>>(), {
            let mut d = deletes.clone();
            d.sort_unstable();
            d.dedup();
            d
        });
        assert_eq!(fill(&[Step::Delete { key: 4 }], &[None]), Vec::new());
    }
}

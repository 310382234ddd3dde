//! The workloads the simulated clients run: bank transfers, Jepsen list-append (with or without
//! range reads) and YCSB, all drawn from the run's seeded generator through the draws of
//! [`redt_workload`] (the harness's own), with the sim's fixed sizes; the list-append windows
//! with range reads and deletes are the sim's alone.

use rand::rngs::StdRng;
use rand::Rng;
use redt_checkers::elle::Op;
use redt_dc_executor::{KvOp, YcsbOp};
use redt_proto::wire::ProcedureCall;
use redt_proto::TableId;
use redt_protocol::call::{kv_call, ycsb_call};
use redt_workload::append::{self as list_append, Keys};
use redt_workload::bank::{self, BankTxn};
use redt_workload::ycsb::{draw_rank, draw_update, Distribution};
use std::str::FromStr;

pub use redt_workload::append::{fill_steps, unfilled, Step};

/// Which workload the clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Transfers between `BANK_ACCOUNTS` accounts of `BANK_START` each, and (one transaction
    /// in 10) reads of every balance; the total must hold on every replica and in every
    /// committed read of every balance. Committing (`SimConfig::committing`):
    /// `BANK_ACCOUNTS_PER_CLIENT` accounts per client (32 to 512), one read of every balance
    /// in 20.
    Bank,
    /// Jepsen list-append over a few hot keys (`APPEND_KEYS`): 1–4 reads and appends of unique
    /// values. Committing: `APPEND_KEYS_PER_CLIENT` active keys per client, each retired for a
    /// fresh key after `APPEND_MAX_PER_KEY` appends.
    Append,
    /// YCSB: 4 reads or single-cell updates of `YCSB_RECORDS` preloaded records, uniform keys.
    /// Committing: `YCSB_RECORDS_PER_CLIENT` records per client.
    Ycsb,
    /// List-append with range reads (the phantom test): 1–4 point reads, appends and
    /// [`KvOp::Scan`]s over a window of `SCAN_WINDOW` keys that slides up by one key every
    /// `SCAN_SLIDE` transactions drawn, so new keys keep being inserted inside ranges other
    /// transactions read. A scan observes every key of its range up to its last row (every
    /// key of the range when it returned fewer rows than its limit) that it does not return as
    /// the empty list; that absence is what makes a phantom visible. Every `DELETE_EVERY`th
    /// transaction deletes a key of the window ([`KvOp::Delete`]), which later appends bring
    /// back; the checker leaves the keys ever deleted out of the list-append history (a list
    /// that starts again from empty has no place in it) and checks instead that every key
    /// holding a row is in its replicas' ordered indexes.
    AppendScan,
    /// List-append with deletes (the record-reclamation test): 1–3 point reads and appends
    /// over a window of `CHURN_WINDOW` keys that slides up by one key every `CHURN_SLIDE`
    /// transactions, so fresh keys keep being created, and one transaction in
    /// `CHURN_DELETE_ONE_IN` deletes a key of the window (half of them its lowest, which the
    /// window leaves soon), which later appends may bring back.
    /// Deleted records are freed once their grace passes (`SimConfig::deleted_grace`) while
    /// older writes of their keys may still be in flight; the checks are append-scan's.
    Churn,
    /// Optimistic, interactive list-append (docs/design.md, "Optimistic transactions:
    /// versioned reads and CHECK"): a client reads 1–`INTERACTIVE_READS` of the
    /// `APPEND_KEYS` hot keys with a versioned read (its node's DC without locks, the keys its
    /// DC does not hold at the nearest DC holding them), thinks 0–`INTERACTIVE_THINK_US`, then
    /// commits appends that depend on what it read, with a CHECK of every key it read at the
    /// version read (`Generator::interactive_commit`). The history records the lists the
    /// versioned read returned as the transaction's reads, invoked when the read started; the
    /// list-append checks (Elle's included) must find every committed transaction strict
    /// serializable. An abort, a failed read included, starts a new transaction with a new
    /// read, never the same call again.
    Interactive,
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
            "interactive" | "rw-append" => Ok(Workload::Interactive),
            other => Err(format!("unknown workload `{other}` (bank, append, append-scan, churn, interactive, ycsb)")),
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
            Workload::Interactive => "interactive",
        })
    }
}

/// Accounts of the bank workload.
pub const BANK_ACCOUNTS: u64 = 32;
/// Starting balance of each account.
pub const BANK_START: i64 = 100;
/// Largest transfer of the bank workload.
pub const BANK_MAX_TRANSFER: i64 = 10;
/// Fraction of bank transactions that read every account.
pub const BANK_READ_ALL_RATIO: f64 = 0.1;
/// Keys of the list-append workload (few, so transactions conflict).
pub const APPEND_KEYS: u64 = 10;
/// Preloaded records of the YCSB workload.
pub const YCSB_RECORDS: u64 = 32;
/// Committing (`SimConfig::committing`): accounts of the bank workload per client, at least
/// `BANK_ACCOUNTS` and at most `BANK_MAX_ACCOUNTS`; the key space grows with the clients, so
/// contention does not grow with the topology.
pub const BANK_ACCOUNTS_PER_CLIENT: u64 = 32;
/// Committing: most accounts of the bank workload (a read of every account is one operation
/// per account, planned again at every replica it reads, so the runs stay short).
pub const BANK_MAX_ACCOUNTS: u64 = 512;
/// Committing: fraction of bank transactions that read every account (each conflicts with
/// every transfer in flight).
pub const BANK_COMMITTING_READ_ALL_RATIO: f64 = 0.05;
/// Committing: active keys of the list-append workload per client (at least `APPEND_KEYS`).
pub const APPEND_KEYS_PER_CLIENT: u64 = 16;
/// Committing: appends drawn to a list-append key before it is retired for a fresh one (a
/// list holds at most 255 items in the `kv` table's 2 KiB cell).
pub const APPEND_MAX_PER_KEY: u32 = 128;
/// Committing: preloaded records of the YCSB workload per client (at least `YCSB_RECORDS`).
pub const YCSB_RECORDS_PER_CLIENT: u64 = 64;
/// Fraction of YCSB operations that are updates.
pub const YCSB_WRITE_RATIO: f64 = 0.5;
/// Bytes of a YCSB update's value.
pub const YCSB_VALUE_BYTES: usize = 8;
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

/// Most keys an interactive transaction reads (at least 1).
pub const INTERACTIVE_READS: usize = 3;
/// Longest think time of an interactive client between its versioned read and its commit, µs.
pub const INTERACTIVE_THINK_US: u64 = 5_000;

/// One key an interactive transaction's versioned read returned: the key, its cell's raw
/// version word, and its value padded back to the cell's width (empty: no value).
pub type ReadItem = (u64, u64, Vec<u8>);

/// One transaction a client is about to submit.
#[derive(Clone)]
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
    /// The bank's accounts, `0..BANK_ACCOUNTS` (committing: `BANK_ACCOUNTS_PER_CLIENT` per
    /// client, within `BANK_ACCOUNTS..=BANK_MAX_ACCOUNTS`).
    accounts: Vec<u64>,
    /// The fraction of bank transactions that read every account.
    read_all_ratio: f64,
    /// The list-append workload's active keys: `0..APPEND_KEYS`, never retired (committing:
    /// `APPEND_KEYS_PER_CLIENT` per client from 0 on, each retired for a fresh one after
    /// `APPEND_MAX_PER_KEY` appends drawn).
    append_keys: Keys,
    /// The YCSB workload's records, `0..ycsb_records`: `YCSB_RECORDS` (committing:
    /// `YCSB_RECORDS_PER_CLIENT` per client).
    ycsb_records: u64,
}

impl Generator {
    /// A generator of `workload`. With `committing` clients in all (`SimConfig::committing`),
    /// the key spaces of bank, list-append and YCSB grow with the clients (so a larger
    /// topology, with more clients, meets no more contention per transaction) and fewer bank
    /// transactions read every account; without, they are fixed. The windows of append-scan
    /// and churn never grow.
    pub fn new(
        workload: Workload,
        kv: TableId,
        usertable: TableId,
        ycsb_cells: usize,
        committing: Option<usize>,
    ) -> Generator {
        let (accounts, read_all_ratio, append_keys, ycsb_records) = match committing {
            None => (BANK_ACCOUNTS, BANK_READ_ALL_RATIO, Keys::new(0, APPEND_KEYS as usize, u32::MAX), YCSB_RECORDS),
            Some(clients) => {
                let clients = clients.max(1) as u64;
                (
                    (BANK_ACCOUNTS_PER_CLIENT * clients).clamp(BANK_ACCOUNTS, BANK_MAX_ACCOUNTS),
                    BANK_COMMITTING_READ_ALL_RATIO,
                    Keys::new(0, (APPEND_KEYS_PER_CLIENT * clients).max(APPEND_KEYS) as usize, APPEND_MAX_PER_KEY),
                    (YCSB_RECORDS_PER_CLIENT * clients).max(YCSB_RECORDS),
                )
            }
        };
        Generator {
            workload,
            kv,
            usertable,
            ycsb_cells,
            next_value: 1,
            drawn: 0,
            key_end: 0,
            deleted: Default::default(),
            accounts: (0..accounts).collect(),
            read_all_ratio,
            append_keys,
            ycsb_records,
        }
    }

    /// The bank's accounts, `0..` this.
    pub fn bank_accounts(&self) -> u64 {
        self.accounts.len() as u64
    }

    /// The keys a delete was drawn for: the checker leaves them out of the list-append history.
    pub fn deleted(&self) -> &std::collections::BTreeSet<u64> {
        &self.deleted
    }

    /// The keys whose replicas the checks read at the end.
    pub fn keys(&self) -> Vec<u64> {
        match self.workload {
            Workload::Bank => self.accounts.clone(),
            Workload::Append | Workload::Interactive => (0..self.append_keys.end()).collect(),
            Workload::Ycsb => (0..self.ycsb_records).collect(),
            Workload::AppendScan | Workload::Churn => (0..self.key_end).collect(),
        }
    }

    /// The keys an interactive transaction reads first: 1–[`INTERACTIVE_READS`] distinct
    /// active keys, in the order drawn.
    pub fn interactive_reads(&mut self, rng: &mut StdRng) -> Vec<u64> {
        let n = rng.gen_range(1..=INTERACTIVE_READS);
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.append_keys.pick(rng);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }

    /// The commit of an interactive transaction whose versioned read returned `read`: a CHECK
    /// of every key read at its version, and appends of fresh values that depend on what it
    /// read: one to the key read whose list is the shortest (the first drawn on a tie), one
    /// to each other key read with probability 1/3, and with probability 1/4 a blind append
    /// to an active key (read or not). Its steps are the reads (the lists returned) then the
    /// appends; the second value is what each step read, for [`fill_steps`] (the values
    /// returned for the reads, nothing for the appends).
    pub fn interactive_commit(&mut self, rng: &mut StdRng, read: &[ReadItem]) -> (Draw, Vec<Option<Vec<u8>>>) {
        let mut steps: Vec<Step> = read.iter().map(|r| Step::Op(Op::Read { key: r.0, list: None })).collect();
        let mut reads: Vec<Option<Vec<u8>>> = read.iter().map(|r| Some(r.2.clone())).collect();
        let mut kv: Vec<KvOp> = read.iter().map(|r| KvOp::Check(r.0, r.1)).collect();
        let shortest = read.iter().min_by_key(|r| redt_dc_executor::list_len(&r.2)).map(|r| r.0);
        let mut targets: Vec<u64> = Vec::new();
        for r in read {
            if Some(r.0) == shortest || rng.gen_ratio(1, 3) {
                targets.push(r.0);
            }
        }
        if rng.gen_ratio(1, 4) {
            targets.push(self.append_keys.pick(rng));
        }
        for key in targets {
            let value = take_value(&mut self.next_value);
            self.append_keys.appended(key);
            kv.push(KvOp::Append(key, value));
            steps.push(Step::Op(Op::Append { key, value }));
            reads.push(None);
        }
        (Draw { call: kv_call(self.kv, &kv), steps }, reads)
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
        let m = list_append::mop(rng, key, read, || take_value(&mut self.next_value));
        kv.extend(list_append::kv_ops(std::slice::from_ref(&m)));
        steps.push(Step::Op(list_append::to_op(m)));
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

    /// The same transaction again, for a client's retry after an abort: the same operations
    /// on the same keys, each append with a fresh value (values stay unique across the run, so
    /// the checker tells one attempt's appends from another's).
    pub fn again(&mut self, d: &Draw) -> Draw {
        if d.steps.is_empty() {
            return d.clone();
        }
        let mut kv = Vec::with_capacity(d.steps.len());
        let steps = d
            .steps
            .iter()
            .map(|s| match s {
                Step::Op(Op::Append { key, .. }) => {
                    let value = take_value(&mut self.next_value);
                    kv.push(KvOp::Append(*key, value));
                    Step::Op(Op::Append { key: *key, value })
                }
                Step::Op(Op::Read { key, .. }) => {
                    kv.push(KvOp::Read(*key));
                    Step::Op(Op::Read { key: *key, list: None })
                }
                Step::Scan { from, to, limit } => {
                    kv.push(KvOp::Scan(*from, *to, *limit));
                    s.clone()
                }
                Step::Delete { key } => {
                    kv.push(KvOp::Delete(*key));
                    s.clone()
                }
            })
            .collect();
        Draw { call: kv_call(self.kv, &kv), steps }
    }

    pub fn draw(&mut self, rng: &mut StdRng) -> Draw {
        match self.workload {
            Workload::Bank => {
                let ops = match bank::draw(rng, &self.accounts, BANK_MAX_TRANSFER, self.read_all_ratio) {
                    BankTxn::ReadAll(ops) => ops,
                    BankTxn::Transfer { ops, .. } => ops.to_vec(),
                };
                Draw { call: kv_call(self.kv, &ops), steps: Vec::new() }
            }
            // An interactive transaction is drawn in two steps by the simulated client
            // (`interactive_reads`, then `interactive_commit` once it read); drawn at once, it
            // is a list-append transaction.
            Workload::Append | Workload::Interactive => {
                let next_value = &mut self.next_value;
                let mops = list_append::draw(&mut self.append_keys, 4, 0.5, rng, || take_value(next_value));
                let call = kv_call(self.kv, &list_append::kv_ops(&mops));
                Draw { call, steps: mops.into_iter().map(|m| Step::Op(list_append::to_op(m))).collect() }
            }
            Workload::AppendScan => self.draw_append_scan(rng),
            Workload::Churn => self.draw_churn(rng),
            Workload::Ycsb => {
                let ops: Vec<YcsbOp> = (0..4)
                    .map(|_| {
                        let key = draw_rank(Distribution::Uniform, 0.0, self.ycsb_records, rng);
                        if rng.gen_bool(YCSB_WRITE_RATIO) {
                            draw_update(rng, key, self.ycsb_cells, YCSB_VALUE_BYTES)
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

/// The next of the values appends take, counted on in `next`.
fn take_value(next: &mut u64) -> u64 {
    *next += 1;
    *next - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_delete_is_drawn_every_so_often_and_observes_nothing() {
        let mut g = Generator::new(Workload::AppendScan, TableId(1), TableId(1), 1, None);
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
        assert_eq!(fill_steps(&[Step::Delete { key: 4 }], &[None]), Vec::new());
    }
}

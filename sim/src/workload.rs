//! The workloads the simulated clients run: bank transfers, Jepsen list-append and YCSB, all
//! drawn from the run's seeded generator.

use rand::rngs::StdRng;
use rand::Rng;
use redt_bench::elle::Op;
use redt_coordinator::call::{kv_call, ycsb_call};
use redt_dc_executor::{KvOp, YcsbOp};
use redt_proto::wire::ProcedureCall;
use redt_proto::TableId;
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
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Workload, String> {
        match s {
            "bank" => Ok(Workload::Bank),
            "append" | "list-append" => Ok(Workload::Append),
            "ycsb" => Ok(Workload::Ycsb),
            other => Err(format!("unknown workload `{other}` (bank, append, ycsb)")),
        }
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Workload::Bank => "bank",
            Workload::Append => "append",
            Workload::Ycsb => "ycsb",
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

/// One transaction a client is about to submit.
pub struct Draw {
    /// The call.
    pub call: ProcedureCall,
    /// Its list-append operations (reads unfilled), for the history; empty otherwise.
    pub ops: Vec<Op>,
}

/// Draws transactions; `next_value` keeps appended values unique across the run.
pub struct Generator {
    pub workload: Workload,
    pub kv: TableId,
    pub usertable: TableId,
    pub ycsb_cells: usize,
    next_value: u64,
}

impl Generator {
    pub fn new(workload: Workload, kv: TableId, usertable: TableId, ycsb_cells: usize) -> Generator {
        Generator { workload, kv, usertable, ycsb_cells, next_value: 1 }
    }

    /// The keys whose replicas the checks read at the end.
    pub fn keys(&self) -> Vec<u64> {
        match self.workload {
            Workload::Bank => (0..BANK_ACCOUNTS).collect(),
            Workload::Append => (0..APPEND_KEYS).collect(),
            Workload::Ycsb => (0..YCSB_RECORDS).collect(),
        }
    }

    pub fn draw(&mut self, rng: &mut StdRng) -> Draw {
        match self.workload {
            Workload::Bank => {
                if rng.gen_bool(0.1) {
                    let ops: Vec<KvOp> = (0..BANK_ACCOUNTS).map(KvOp::Read).collect();
                    return Draw { call: kv_call(self.kv, &ops), ops: Vec::new() };
                }
                let from = rng.gen_range(0..BANK_ACCOUNTS);
                let to = (from + rng.gen_range(1..BANK_ACCOUNTS)) % BANK_ACCOUNTS;
                let x = rng.gen_range(1..=10);
                Draw { call: kv_call(self.kv, &[KvOp::Add(from, -x), KvOp::Add(to, x)]), ops: Vec::new() }
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
                Draw { call: kv_call(self.kv, &kv), ops }
            }
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
                Draw { call: ycsb_call(self.usertable, self.ycsb_cells, &ops), ops: Vec::new() }
            }
        }
    }
}

/// Fills the reads of a committed list-append transaction from the values it read.
pub fn fill(ops: &[Op], reads: &[Option<Vec<u8>>]) -> Vec<Op> {
    ops.iter()
        .zip(reads.iter().chain(std::iter::repeat(&None)))
        .map(|(op, r)| match op {
            Op::Read { key, .. } => {
                Op::Read { key: *key, list: Some(r.as_deref().map(redt_dc_executor::list_items).unwrap_or_default()) }
            }
            other => other.clone(),
        })
        .collect()
}

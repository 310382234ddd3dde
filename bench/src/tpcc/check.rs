//! The twelve consistency conditions of TPC-C clause 3.3.2, checked against the live
//! database: every relevant record is read from the primary replica of its warehouse's
//! partition (`DcHandle::read_record`, one-sided READs, no locks). Run it on a quiet
//! database (no transaction in flight, phase 2 finished).
//!
//! A NEW-ORDER row exists when its record holds a row (a cell not all zero): Delivery deletes
//! the row by writing zero to every cell, and the records New-Order has not filled yet are
//! all zero too.
//!
//! Condition 11 (`#ORDER − #NEW-ORDER = 2100` per district) only holds until the first
//! Delivery; after a run it is checked in its general form `#ORDER − #NEW-ORDER = 2100 +
//! deliveries`, with the deliveries counted as the orders after the loaded 2,100 that have
//! no NEW-ORDER row (deleted) and, when the driver knows them, as the committed Delivery
//! transactions of that district (which must agree).

use super::loader::read_at;
use super::schema::{self as sc, table, Scale, DISTRICTS, MAX_OL};
use redt_coordinator::EmbeddedCluster;
use redt_proto::{NodeId, TableId, Topology};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

/// The result of one condition.
#[derive(Clone, Debug, Serialize)]
pub struct Condition {
    /// Condition number (1..12).
    pub id: u32,
    /// What it states.
    pub rule: &'static str,
    /// Number of rows or groups it was checked on.
    pub checked: u64,
    /// Number of them that violate it.
    pub violations: u64,
    /// The first violation found.
    pub first_violation: Option<String>,
}

impl Condition {
    /// Whether the condition holds.
    pub fn passed(&self) -> bool {
        self.violations == 0
    }
}

/// All twelve conditions.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// Conditions 1..12, in order.
    pub conditions: Vec<Condition>,
    /// Whether all hold.
    pub passed: bool,
    /// Records read.
    pub records_read: u64,
    /// Seconds the check took.
    pub seconds: f64,
}

impl CheckReport {
    /// One line per condition.
    pub fn lines(&self) -> Vec<String> {
        self.conditions
            .iter()
            .map(|c| {
                let verdict =
                    if c.passed() { "pass".to_string() } else { format!("FAIL ({} violations)", c.violations) };
                let mut s = format!("{:>2}. {:<64} {:<6} ({} checked)", c.id, c.rule, verdict, c.checked);
                if let Some(v) = &c.first_violation {
                    s.push_str(&format!("\n      first violation: {v}"));
                }
                s
            })
            .collect()
    }
}

/// What the check needs to know besides the database.
#[derive(Clone, Debug, Default)]
pub struct CheckInput {
    /// Warehouses.
    pub warehouses: u32,
    /// The scale loaded.
    pub scale: Option<Scale>,
    /// HISTORY sequence numbers used per (w, slot) for slots ≥ 1 (the run's Payments):
    /// rows `0..n` are read (absent ones skipped).
    pub history_seqs: HashMap<(u32, u32), u64>,
    /// Committed Delivery transactions per (w, d), when every outcome is known.
    pub deliveries: Option<HashMap<(u32, u32), u64>>,
}

const RULES: [&str; 12] = [
    "W_YTD = sum(D_YTD)",
    "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
    "max(NO_O_ID) - min(NO_O_ID) + 1 = #NEW-ORDER rows (per district)",
    "sum(O_OL_CNT) = #ORDER-LINE rows (per district)",
    "O_CARRIER_ID null <=> a NEW-ORDER row exists",
    "O_OL_CNT = #ORDER-LINE rows of the order",
    "OL_DELIVERY_D null <=> O_CARRIER_ID null",
    "W_YTD = sum(H_AMOUNT) (per warehouse)",
    "D_YTD = sum(H_AMOUNT) (per district)",
    "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT)",
    "#ORDER - #NEW-ORDER = 2100 (+ deliveries since load)",
    "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT)",
];

struct Acc {
    conds: Vec<Condition>,
}

impl Acc {
    fn new() -> Self {
        Acc {
            conds: RULES
                .iter()
                .enumerate()
                .map(|(i, r)| Condition { id: i as u32 + 1, rule: r, checked: 0, violations: 0, first_violation: None })
                .collect(),
        }
    }
    fn check(&mut self, id: usize, ok: bool, what: impl FnOnce() -> String) {
        let c = &mut self.conds[id - 1];
        c.checked += 1;
        if !ok {
            c.violations += 1;
            if c.first_violation.is_none() {
                c.first_violation = Some(what());
            }
        }
    }
}

/// Whether a record's cells hold a row: some cell is not all zero bytes (dc-executor
/// `RecordView::is_absent`, negated).
fn holds_row(cells: &[Vec<u8>]) -> bool {
    cells.iter().any(|c| c.iter().any(|&b| b != 0))
}

fn money(c: i64) -> String {
    format!("{:.2}", c as f64 / 100.0)
}

/// Checks the twelve conditions on `cluster`, on the primaries of the topology file's
/// placement.
pub fn check(cluster: &EmbeddedCluster, input: &CheckInput) -> CheckReport {
    check_replica(cluster, &cluster.topology, 0, input)
}

/// Checks the twelve conditions on `cluster`, each warehouse read from replica `rank` of its
/// partition in the placement `topo` (0: the primary; the last replica when the partition has
/// fewer): after a failover, the current placement's replicas, rebuilt ones included.
pub fn check_replica(cluster: &EmbeddedCluster, topo: &Topology, rank: usize, input: &CheckInput) -> CheckReport {
    let primary = |w: u32| -> NodeId {
        let schema = topo.table(table::WAREHOUSE).expect("TPC-C topology");
        let replicas = &topo.partitions[topo.partition_of(schema, sc::warehouse_key(w)).0 as usize].replicas;
        replicas[rank.min(replicas.len() - 1)]
    };
    check_with(input, &mut |w, t, key| read_at(topo, &cluster.dcs, primary(w), t, key))
}

/// Checks the twelve conditions on the records `read` returns: `read(w, table, key)` is the
/// record `key` of `table` of warehouse `w`'s partition (its cells), `None` when absent.
pub fn check_with(input: &CheckInput, read: &mut dyn FnMut(u32, TableId, u64) -> Option<Vec<Vec<u8>>>) -> CheckReport {
    let t0 = Instant::now();
    let scale = input.scale.unwrap_or(Scale::SPEC);
    let mut reads = 0u64;
    let mut acc = Acc::new();
    let mut read = |w: u32, t, key| {
        reads += 1;
        read(w, t, key)
    };
    let g = |v: &Vec<Vec<u8>>, cell: u16| sc::get(&v[cell as usize]);

    // Sums of HISTORY: per warehouse, per district, per customer.
    let mut h_w: HashMap<u32, i64> = HashMap::new();
    let mut h_d: HashMap<(u32, u32), i64> = HashMap::new();
    let mut h_c: HashMap<(u32, u32, u32), i64> = HashMap::new();
    // Delivered OL_AMOUNT per customer.
    let mut delivered: HashMap<(u32, u32, u32), i64> = HashMap::new();
    let mut customers: Vec<((u32, u32, u32), i64, i64)> = Vec::new();
    let mut w_ytd: HashMap<u32, i64> = HashMap::new();
    let mut d_ytd: HashMap<(u32, u32), i64> = HashMap::new();

    let mut add_history = |v: &Vec<Vec<u8>>, w: u32| {
        if g(v, sc::h::C_ID) <= 0 {
            return;
        }
        let amount = g(v, sc::h::AMOUNT);
        let d = g(v, sc::h::D_ID) as u32;
        *h_w.entry(w).or_default() += amount;
        *h_d.entry((w, d)).or_default() += amount;
        let key = (g(v, sc::h::C_W_ID) as u32, g(v, sc::h::C_D_ID) as u32, g(v, sc::h::C_ID) as u32);
        *h_c.entry(key).or_default() += amount;
    };

    for w in 1..=input.warehouses {
        let Some(wv) = read(w, table::WAREHOUSE, sc::warehouse_key(w)) else {
            acc.check(1, false, || format!("warehouse {w} is missing"));
            continue;
        };
        w_ytd.insert(w, g(&wv, sc::w::YTD));
        let mut sum_d_ytd = 0i64;
        for d in 1..=DISTRICTS {
            let Some(dv) = read(w, table::DISTRICT, sc::district_key(w, d)) else {
                acc.check(2, false, || format!("district ({w},{d}) is missing"));
                continue;
            };
            let ytd = g(&dv, sc::d::YTD);
            sum_d_ytd += ytd;
            d_ytd.insert((w, d), ytd);
            let next = (g(&dv, sc::d::NEXT_O_ID) as u64).max(1);
            let base = scale.delivered() as u64;
            // Orders after the loaded delivered ones that were delivered since the load.
            let mut since_load = 0u64;
            // Orders of the district, up to the last (pre-allocated) ORDERS record.
            let (mut max_o, mut max_no, mut min_no, mut n_no, mut n_orders) = (0u64, 0u64, u64::MAX, 0u64, 0u64);
            let (mut sum_ol_cnt, mut n_ol) = (0i64, 0i64);
            let mut o = 1u64;
            while let Some(ov) = read(w, table::ORDERS, sc::order_key(w, d, o)) {
                let ol_cnt = g(&ov, sc::o::OL_CNT);
                let present = read(w, table::NEW_ORDER, sc::new_order_key(w, d, o)).is_some_and(|v| holds_row(&v));
                if present {
                    max_no = max_no.max(o);
                    min_no = min_no.min(o);
                    n_no += 1;
                }
                let mut lines = 0i64;
                let carrier = g(&ov, sc::o::CARRIER_ID);
                let c_id = g(&ov, sc::o::C_ID) as u32;
                for l in 1..=MAX_OL {
                    let Some(lv) = read(w, table::ORDER_LINE, sc::order_line_key(w, d, o, l)) else {
                        if ol_cnt == 0 || l as i64 > ol_cnt {
                            break; // loaded orders have exactly their lines
                        }
                        continue;
                    };
                    if g(&lv, sc::ol::I_ID) <= 0 {
                        continue;
                    }
                    lines += 1;
                    let ddate = g(&lv, sc::ol::DELIVERY_D);
                    acc.check(7, (ddate == 0) == (carrier == 0), || {
                        format!("order line ({w},{d},{o},{l}): OL_DELIVERY_D {ddate}, O_CARRIER_ID {carrier}")
                    });
                    if ddate != 0 {
                        *delivered.entry((w, d, c_id)).or_default() += g(&lv, sc::ol::AMOUNT);
                    }
                }
                n_ol += lines;
                if ol_cnt > 0 {
                    n_orders += 1;
                    if o > base && !present {
                        since_load += 1;
                    }
                    max_o = max_o.max(o);
                    sum_ol_cnt += ol_cnt;
                    acc.check(5, (carrier == 0) == present, || {
                        format!("order ({w},{d},{o}): O_CARRIER_ID {carrier}, NEW-ORDER row present: {present}")
                    });
                    acc.check(6, ol_cnt == lines, || format!("order ({w},{d},{o}): O_OL_CNT {ol_cnt}, {lines} lines"));
                } else if present || lines > 0 {
                    acc.check(6, false, || {
                        format!("({w},{d},{o}): no ORDER row but {lines} lines, new-order {present}")
                    });
                }
                o += 1;
            }
            acc.check(2, next - 1 == max_o && (n_no == 0 || max_no == next - 1), || {
                format!(
                    "district ({w},{d}): D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {max_no}",
                    next - 1
                )
            });
            if n_no > 0 {
                acc.check(3, max_no - min_no + 1 == n_no, || {
                    format!("district ({w},{d}): max(NO_O_ID) {max_no} - min(NO_O_ID) {min_no} + 1 != {n_no} rows")
                });
            } else {
                acc.check(3, true, String::new);
            }
            acc.check(4, sum_ol_cnt == n_ol, || format!("district ({w},{d}): sum(O_OL_CNT) {sum_ol_cnt}, {n_ol} rows"));
            let mut ok = n_orders as i64 - n_no as i64 == (base + since_load) as i64;
            let mut why = format!(
                "district ({w},{d}): #ORDER {n_orders} - #NEW-ORDER {n_no} = {}, expected {base} + {since_load} delivered",
                n_orders as i64 - n_no as i64
            );
            if let Some(dl) = &input.deliveries {
                let counted = dl.get(&(w, d)).copied().unwrap_or(0);
                if counted != since_load {
                    ok = false;
                    why = format!(
                        "district ({w},{d}): {since_load} NEW-ORDER rows deleted since load, the driver committed {counted}"
                    );
                }
            }
            acc.check(11, ok, || why);
            for c in 1..=scale.customers {
                if let Some(cv) = read(w, table::CUSTOMER, sc::customer_key(w, d, c)) {
                    customers.push(((w, d, c), g(&cv, sc::c::BALANCE), g(&cv, sc::c::YTD_PAYMENT)));
                }
            }
            for c in 1..=scale.customers {
                if let Some(hv) = read(w, table::HISTORY, sc::history_key(w, 0, (d as u64) << 12 | c as u64)) {
                    add_history(&hv, w);
                }
            }
        }
        let ytd = w_ytd[&w];
        acc.check(1, ytd == sum_d_ytd, || {
            format!("warehouse {w}: W_YTD {} != sum(D_YTD) {}", money(ytd), money(sum_d_ytd))
        });
        let mut slots: Vec<_> = input.history_seqs.iter().filter(|((hw, _), _)| *hw == w).collect();
        slots.sort();
        for (&(_, slot), &n) in slots {
            for seq in 0..n {
                if let Some(hv) = read(w, table::HISTORY, sc::history_key(w, slot, seq)) {
                    add_history(&hv, w);
                }
            }
        }
    }
    for (&w, &ytd) in &w_ytd {
        let h = h_w.get(&w).copied().unwrap_or(0);
        acc.check(8, ytd == h, || format!("warehouse {w}: W_YTD {} != sum(H_AMOUNT) {}", money(ytd), money(h)));
    }
    let mut ds: Vec<_> = d_ytd.iter().collect();
    ds.sort();
    for (&(w, d), &ytd) in ds {
        let h = h_d.get(&(w, d)).copied().unwrap_or(0);
        acc.check(9, ytd == h, || format!("district ({w},{d}): D_YTD {} != sum(H_AMOUNT) {}", money(ytd), money(h)));
    }
    for &(k, balance, ytd_payment) in &customers {
        let dl = delivered.get(&k).copied().unwrap_or(0);
        let h = h_c.get(&k).copied().unwrap_or(0);
        acc.check(10, balance == dl - h, || {
            format!("customer {k:?}: C_BALANCE {} != delivered {} - paid {}", money(balance), money(dl), money(h))
        });
        acc.check(12, balance + ytd_payment == dl, || {
            format!(
                "customer {k:?}: C_BALANCE {} + C_YTD_PAYMENT {} != delivered {}",
                money(balance),
                money(ytd_payment),
                money(dl)
            )
        });
    }
    let passed = acc.conds.iter().all(|c| c.passed() && c.checked > 0);
    CheckReport { conditions: acc.conds, passed, records_read: reads, seconds: t0.elapsed().as_secs_f64() }
}

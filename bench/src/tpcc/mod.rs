//! TPC-C (specification v5.11) on redt: the nine tables as cell-level records, the loader
//! of clause 4.3, the five transactions as stored procedures, closed-loop terminals, and the
//! twelve consistency conditions of clause 3.3.2.
//!
//! - [`schema`]: tables, cells, key packing, generators (configs/tpcc.yaml).
//! - [`loader`]: the initial database, straight into every replica's MemStore.
//! - [`procedures`]: New-Order, Payment, Order-Status, Delivery, Stock-Level (crate
//!   `redt-tpcc`, which the coordinator builds `ProcedureKind::Tpcc` calls from).
//! - [`driver`]: `redt bench tpcc`.
//! - [`check`](mod@check): `--check`.
//! - [`tap`]: the driver's own verbs, counted apart from the transactions'.
//!
//! TPC-C's range queries (the oldest undelivered order, a customer's last order, the last 20
//! orders' lines, the customers with a last name) are range reads through the ordered index
//! inside the transactions, with next-key locks against phantoms (the tables
//! NEW_ORDER, ORDER_LINE, CUSTOMER_LAST and ORDER_CUSTOMER have `ordered_index: true` in
//! configs/tpcc.yaml). The keys their rows lead to are learned by a reconnaissance before the
//! transaction (one-sided READs and scans of the trees of the nearest replica) and checked
//! against the rows inside it (Calvin's OLLP; `procedures.rs` has the details).
//!
//! # Running
//!
//! `redt bench tpcc --warehouses 4 --duration 60s --check [--json]` loads the database
//! into an embedded cluster of configs/tpcc.yaml (4 DCs × 2 nodes, 3 replicas, 40 ms RTT;
//! warehouse w in partition (w − 1) % 8, so warehouses 1-4 have their primaries in dc1-dc4),
//! runs 4 closed-loop terminals per warehouse without keying or think times (`--think`
//! turns them on, with 10 terminals per warehouse), and reports tpmC, committed/s, the
//! abort rate and p50/p99 latency per transaction type, the load footprint in bytes per
//! warehouse per replica, and with `--check` the 12 conditions (exit status 1 if one
//! fails). `--scale ITEMS,CUSTOMERS,NEW` shrinks the load for tests.
//!
//! # Other processes
//!
//! TPC-C calls travel as `ProcedureKind::Tpcc` (kind + encoded parameters); every coordinator
//! and executor builds their procedures from `redt-tpcc`, so every process of a cluster
//! understands them with nothing to register. The driver itself (loader,
//! reconnaissance, pre-allocation) reaches the MemStores in-process, so it runs on the
//! embedded cluster only.

pub mod check;
pub mod driver;
pub mod loader;
pub mod tap;

pub use redt_tpcc::{procedures, schema};

pub use check::{check, CheckInput, CheckReport};
pub use driver::{run_tpcc, TpccConfig, TpccReport, DEFAULT_TERMINALS};
pub use schema::Scale;

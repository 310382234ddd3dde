//! What redt's workloads draw, shared by the harness (`redt-bench`: `redt bench …` and
//! `redt workload …`) and the deterministic simulation (`redt-sim`), so each draw exists once:
//! pure functions of a caller's random generator, with no cluster, no clock and no I/O. The
//! callers build the procedure calls and submit them.
//!
//! - [`bank`]: transfers between distinct accounts and reads of every account.
//! - [`append`]: Jepsen list-append micro-operations on a set of active keys that retire
//!   after so many appends, their key/value operations, and the checker's view of them once a
//!   transaction's reads are known (point reads, and range reads that observe absent keys).
//! - [`ycsb`]: YCSB's mixes, request distributions (scrambled zipfian, uniform, latest) and
//!   transactions of distinct keys.

#![forbid(unsafe_code)]

pub mod append;
pub mod bank;
pub mod ycsb;

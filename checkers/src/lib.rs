//! Checkers of what a run of redt did, shared by the workload harness (`redt-bench`) and the
//! deterministic simulation (`redt-sim`): pure functions over histories and final states, with
//! no cluster and no I/O beyond reading and writing history files.
//!
//! - [`elle`]: Elle's list-append checker (cycles of write-read, write-write, read-write and
//!   real-time dependencies; aborted and intermediate reads; duplicates).
//! - [`history`]: list-append histories in Jepsen's JSON-lines form, and the check of a history
//!   against the lists the database holds at the end.
//! - [`acked_writes`]: after a drill, whether any acknowledged commit was lost or an aborted
//!   write became visible.
//! - [`bank`]: the bank invariant (money is conserved on every replica).

#![forbid(unsafe_code)]

pub mod acked_writes;
pub mod bank;
pub mod elle;
pub mod history;

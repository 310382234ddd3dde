//! redt's deterministic whole-cluster simulation (docs/design.md, "The simulation"; after
//! FoundationDB's simulation and TAPIR's simtransport).
//!
//! One thread runs every node of a topology file: the real sans-IO state machines
//! ([`redt_protocol::CoordinatorTxn`], [`redt_protocol::ExecutorCore`]), the real
//! MemStores, records, index, redo rings and replay ([`redt_dc_executor`], in-process verbs),
//! on a simulated clock and a simulated network whose per-link delay, jitter, loss and
//! partitions come from the same [`redt_netem::WanModel`] as the real netem socket. Every
//! choice (message fates, faults, workload) is drawn from one seeded generator, so a seed
//! replays the same schedule, event for event.
//!
//! Faults ([`Faults`]): crash and restart of a node at any step (it keeps its MemStore, as a
//! `kill -9` keeps the `/dev/shm` file, and loses everything in memory), DC partitions that
//! heal, dropped, duplicated and delayed (so reordered) messages, clocks running ahead.
//!
//! The committing schedule ([`SimConfig::committing`], off by default: the named seeds were
//! found without it) makes most attempts commit, so the checks judge rich histories
//! ([`SimReport::committed_share`]): the clients retry an aborted transaction as the real
//! clients do (`redt_protocol::retry_policy::RetryPolicy`), the workloads' key spaces grow with the clients, and the
//! message faults come in bursts with healthy periods between.
//!
//! After the workload the run drains (faults off, partitions healed, crashed nodes back) and
//! `check` verifies: the list-append history is strictly serializable
//! ([`redt_checkers::elle`]), the bank total holds on every replica, every replica of a key agrees,
//! every acknowledged abort was recorded at a majority of every touched partition before the
//! client heard of it, and no lock or undecided redo entry is left — except those a crash left
//! to a recoverer, which are reported precisely ([`Leftover`]) until recovery exists.
//!
//! The `mutants` feature adds [`SimConfig`]'s deliberate bugs (and turns on `redt-protocol`'s),
//! for the tests that show each is caught; this crate's tests build with it.

#![forbid(unsafe_code)]

mod check;
mod client;
mod net;
mod violation;
mod workload;
mod world;

pub use violation::{Leftover, Violation};
pub use workload::Workload;
pub use world::{FailoverMode, Faults, SimConfig, SimReport};

use world::World;

/// Runs one simulated schedule and checks it.
///
/// # Errors
/// A topology the simulation cannot run (no `kv` table, no table for the workload).
pub fn run(cfg: SimConfig) -> Result<SimReport, String> {
    let mut w = World::new(cfg)?;
    w.run();
    check::check(&mut w);
    let mut report = std::mem::take(&mut w.report);
    report.end_us = w.now;
    Ok(report)
}

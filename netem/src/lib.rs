//! User-space WAN emulation for redt's inter-DC links (docs/design.md §4).
//!
//! This kernel has no `sch_netem`, so the conditions between data centers are applied inside
//! the QUIC socket: a [`NetemSocket`] implements quinn's [`quinn::AsyncUdpSocket`] and gives
//! every datagram it sends the fate the shared [`WanModel`] decides for its link: a one-way
//! delay of `rtt / 2` with uniform jitter, random loss, a rate limit (a serialization queue),
//! or a partition that drops everything.
//!
//! What this crate owns:
//! - [`WanModel`]: the pure, clock-free model (`model.rs`), built from a [`redt_proto::Topology`]
//!   and changed at run time through the `Arc<Mutex<WanModel>>` every socket shares;
//! - [`NetemSocket`] and [`endpoint`]: the thin tokio driver that carries the decisions out;
//! - [`tc_script`]: the equivalent `tc qdisc … netem` commands for hosts whose kernel has it;
//! - [`measure_rtt`]: a loopback QUIC check that the emulated delay is what was configured.
//!
//! What it leaves to others: parsing and validating the topology (`redt-proto`), TLS
//! certificates, connections and RPCs between nodes, and the handler that changes links on
//! request (`redt-coordinator`); deterministic in-memory simulation of the protocol cores
//! (each core's test harness).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod accuracy;
mod error;
mod model;
mod socket;
mod tc;

pub use accuracy::{measure_rtt, RttReport};
pub use error::{Error, Result};
pub use model::{DropCause, Fate, WanModel};
pub use socket::{endpoint, NetemSocket, NetemStats, QUEUE_LIMIT_BYTES, RELEASE_TICK};
pub use tc::{tc_script, tc_script_for_device, tc_script_for_model, DEFAULT_DEVICE};

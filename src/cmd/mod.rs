//! The `redt` subcommands.

pub mod bench;
pub mod client;
pub mod cluster;
pub mod netem;
pub mod tpcc;

use anyhow::Result;
use redt_proto::Topology;
use std::path::Path;

/// The embedded default topology, compiled in so `redt` runs from any directory.
pub const DEFAULT_TOPOLOGY: &str = include_str!("../../configs/default.yaml");

/// Loads `path`, or the embedded default when `None`.
pub fn load_topology(path: Option<&Path>) -> Result<Topology> {
    Ok(match path {
        Some(p) => Topology::load(p)?,
        None => Topology::from_yaml("configs/default.yaml (embedded)", DEFAULT_TOPOLOGY)?,
    })
}

/// A multi-threaded tokio runtime (2 workers per core is overkill on small machines; use
/// the default: one per core).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

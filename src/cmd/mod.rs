//! The `redt` subcommands.

pub mod attack;
pub mod bench;
pub mod bench_args;
pub mod client;
pub mod cluster;
pub mod drill;
mod duration;
pub mod netem;
mod pidfile;
pub mod sim;
pub mod status;
pub mod tpcc;

use anyhow::Result;
use clap::Args;
use redt_coordinator::CoordinatorOptions;
use redt_proto::{Protocol, Topology};
use redt_protocol::txn::LockWait;
use std::path::Path;

/// The embedded default topology, compiled in so `redt` runs from any directory.
pub const DEFAULT_TOPOLOGY: &str = include_str!("../../configs/default.yaml");

/// Loads `path`, or the embedded default when `None`, and checks that its limits fit its
/// rings ([`check_limits`]).
///
/// # Errors
/// The file cannot be read or is not a valid topology; its limits admit a redo entry larger
/// than its rings take.
pub fn load_topology(path: Option<&Path>) -> Result<Topology> {
    let (name, topology) = match path {
        Some(p) => (p.display().to_string(), Topology::load(p)?),
        None => {
            let name = "configs/default.yaml (embedded)";
            (name.to_string(), Topology::from_yaml(name, DEFAULT_TOPOLOGY)?)
        }
    };
    check_limits(&name, &topology)?;
    Ok(topology)
}

/// Checks that the largest redo entry `topology`'s `limits:` admit fits one entry of its
/// rings (`redt_dc_executor::ring::check_limits_fit_ring`): a node would otherwise accept
/// transactions no executor can log.
///
/// # Errors
/// Both sizes and the limit to lower, prefixed with `name` (the file).
pub fn check_limits(name: &str, topology: &Topology) -> Result<()> {
    redt_dc_executor::ring::check_limits_fit_ring(topology).map_err(|e| anyhow::anyhow!("{name}: {e}"))
}

/// The names of `topo`'s nodes, `dc1-n1, dc2-n1, …`, for an error about a node name.
pub fn node_names(topo: &Topology) -> String {
    topo.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// Writes `text` to standard output. A reader that went away (`redt status --json | head`)
/// ends the output quietly instead of failing.
///
/// # Errors
/// Any other write error.
pub fn print_out(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// A multi-threaded tokio runtime (2 workers per core is overkill on small machines; use
/// the default: one per core).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Concurrency control at the executors (`--cc`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cc {
    /// No-Wait: a phase 1 that meets a lock votes abort at once (RedT §4.2 as written).
    NoWait,
    /// A phase 1 that meets a lock held by another transaction waits for it at the executor,
    /// up to the lock wait (`--lock-wait`), holding nothing meanwhile; then votes abort.
    Wait,
    /// Decided-holder takeover: No-Wait at the executors, and a coordinator holds a
    /// transaction that conflicts with one of its own still undecided, then sends it carrying
    /// the decided ones' phase 2s, which the executors apply first.
    Takeover,
    /// Takeover with batches: the transaction that goes takes along, as one transaction,
    /// the held ones that conflict with it (at most 16 in all), each running on what the ones
    /// before it wrote.
    Batch,
}

/// `--no-early-ack`, `--cc` and `--lock-wait`, for every bench that starts embedded clusters.
#[derive(Args, Debug, Clone)]
pub struct AckArgs {
    /// Acknowledge commits only after phase 2.
    #[arg(long)]
    no_early_ack: bool,
    /// Concurrency control: no-wait (a phase 1 that meets a lock votes abort at once), wait
    /// (it waits for the lock at the executor, bounded by --lock-wait, holding nothing
    /// meanwhile), takeover (no-wait, and a coordinator holds a transaction that conflicts
    /// with one of its own undecided ones until it is decided, then sends it carrying that
    /// decision) or batch (takeover, and the transaction that goes takes the held ones that
    /// conflict with it along as one transaction). The baselines run No-Wait either way.
    /// [default: no-wait; `wait` waits for the topology's timeouts.lock_wait if set, else for
    /// its largest link RTT]
    #[arg(long, value_enum)]
    cc: Option<Cc>,
    /// Wait this long for a lock (`--cc wait` with this bound; 0: no-wait).
    #[arg(long, allow_hyphen_values = true, value_parser = duration::span, conflicts_with = "cc")]
    lock_wait: Option<std::time::Duration>,
}

impl AckArgs {
    /// Coordinator options running `protocol`, acknowledging commits early unless
    /// `--no-early-ack`, with the executors' lock wait of `--cc` / `--lock-wait`, the rest
    /// default.
    pub fn options(&self, protocol: Protocol) -> CoordinatorOptions {
        let lock_wait = match (self.cc, self.lock_wait) {
            (_, Some(d)) => LockWait::For(d),
            (Some(Cc::Wait), None) => LockWait::Waiting,
            (Some(Cc::NoWait | Cc::Takeover | Cc::Batch) | None, None) => LockWait::For(std::time::Duration::ZERO),
        };
        let takeover = matches!(self.cc, Some(Cc::Takeover | Cc::Batch));
        let batch = if self.cc == Some(Cc::Batch) { redt_dc_executor::MAX_BATCH_MEMBERS } else { 0 };
        CoordinatorOptions { protocol, early_ack: !self.no_early_ack, lock_wait, takeover, batch, ..Default::default() }
    }
}

/// `--no-early-ack` and `--protocol NAME` (default redt), for the benches that run one
/// protocol on an embedded cluster and have no other use for the flag.
#[derive(Args, Debug, Clone)]
pub struct ProtocolArgs {
    #[command(flatten)]
    ack: AckArgs,
    /// Commit protocol of the embedded cluster: redt, 2pc-paxos, ep-paxos, tapir, redt-tcp.
    #[arg(long, value_name = "NAME", default_value_t = Protocol::Redt, value_parser = clap::value_parser!(Protocol))]
    protocol: Protocol,
}

impl ProtocolArgs {
    /// Coordinator options for the chosen protocol, acknowledgement and lock wait
    /// ([`AckArgs::options`]).
    pub fn options(&self) -> CoordinatorOptions {
        self.ack.options(self.protocol)
    }
}

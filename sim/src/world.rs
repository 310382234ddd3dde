//! The simulated cluster and its event loop.

mod failover;

pub use failover::FailoverMode;

use crate::client;
use crate::net::{MessageFaults, Micros, Network, Queue};
use crate::violation::{Leftover, Violation};
use crate::workload::{self, Generator, Workload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redt_checkers::elle;
use redt_dc_executor::{
    apply_committed_rows, ring::ring_bounds, ring_scan, DcHandle, EntryRef, Gap, Hlc, Layout, LocalVerbs, Region,
    Replayed, Replayer, Verbs,
};
use redt_membership::{Command, Membership};
use redt_netem::WanModel;
use redt_proto::wire::ProcedureCall;
use redt_proto::{DcId, Decision, Epoch, NodeId, Outcome, PartitionId, Placement, Topology, TxnId};
use redt_protocol::catch_up::{CatchUpDebt, Shipper};
use redt_protocol::epochs::placement_of;
#[cfg(feature = "mutants")]
use redt_protocol::failover::FailoverMutations;
use redt_protocol::gap_watch::{GapAction, GapWatch};
use redt_protocol::message::{ReclaimAnswer, Reply, Request, Reservations};
use redt_protocol::rebuild::{Rebuild, RebuildAction, RebuildOptions};
use redt_protocol::retry_policy::RetryPolicy;
use redt_protocol::takeover::{Admission, Footprint, Takeover};
use redt_protocol::txn::Action;
use redt_protocol::ReclaimRound;
use redt_protocol::{
    AbortCause, CoordinatorOptions, CoordinatorTxn, Epochs, ExecutorCore, Orphan, Recoverer, RecoveryOptions, TxnIds,
    TxnMachine, TxnStatus,
};
#[cfg(feature = "mutants")]
use redt_protocol::{ExecutorMutations, RecoveryMutations};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which faults a run injects.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    /// Crash nodes (kill -9: the MemStore survives, memory does not) and restart them.
    pub crash: bool,
    /// Partition pairs of DCs for a while, then heal them.
    pub partition: bool,
    /// Probability of dropping any message.
    pub drop: f64,
    /// Probability of duplicating any message.
    pub duplicate: f64,
    /// Probability of holding any message back by up to 3 s (reordering it; longer than the
    /// phase-1 timeout, so phase 1 sometimes arrives after its decision).
    pub hold: f64,
    /// Run some nodes' clocks ahead by up to 2 s.
    pub clock_skew: bool,
    /// Kill every node of one DC for good and remove the DC from the placement (a new epoch,
    /// adopted by each surviving node after its own delay, as Raft's apply would reach it):
    /// failover (docs/design.md, "Failover").
    pub remove_dc: bool,
    /// Kill one node for good and remove it from the placement (its DC stays up): the same
    /// failover at the grain of a node. It comes back holding nothing and is restored.
    pub remove_node: bool,
}

impl Faults {
    /// No fault.
    pub fn none() -> Faults {
        Faults::default()
    }

    /// The probability of each enabled message fault (`drop`, `duplicate`, `hold`) during a
    /// burst of the committing schedule ([`SimConfig::committing`]), unless its own is higher.
    pub const BURST_RATE: f64 = 0.05;

    /// Every fault, at the rates the CI seeds use.
    pub fn all() -> Faults {
        Faults {
            crash: true,
            partition: true,
            drop: 0.02,
            duplicate: 0.02,
            hold: 0.02,
            clock_skew: true,
            remove_dc: false,
            remove_node: false,
        }
    }

    /// Parses a comma-separated list of `crash`, `partition`, `drop`, `dup`, `hold`, `skew`,
    /// `remove` (`remove_dc`), `remove-node` (`remove_node`), `all` (every fault but the two
    /// removals) or `none`.
    ///
    /// # Errors
    /// An unknown fault name.
    pub fn parse(s: &str) -> Result<Faults, String> {
        let mut f = Faults::none();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "all" => f = Faults::all(),
                "none" => f = Faults::none(),
                "crash" => f.crash = true,
                "partition" => f.partition = true,
                "drop" => f.drop = 0.02,
                "dup" | "duplicate" => f.duplicate = 0.02,
                "hold" | "delay" | "reorder" => f.hold = 0.02,
                "skew" | "clock" => f.clock_skew = true,
                "remove" | "remove-dc" => f.remove_dc = true,
                "remove-node" => f.remove_node = true,
                other => {
                    return Err(format!(
                    "unknown fault `{other}` (crash, partition, drop, dup, hold, skew, remove, remove-node, all, none)"
                ))
                }
            }
        }
        Ok(f)
    }
}

/// One simulated run.
///
/// Its deliberate bugs (`executor_mutations`, `recovery_mutations`, `failover_mutations`,
/// `remove_too_many`, `no_voter_repair`, `no_gap_locks`, `no_relink`) exist only in a build with
/// this crate's `mutants` feature (its tests turn it on; `redt`'s `mutants` feature for
/// `redt sim --mutant-*`).
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The cluster (its MemStore sizes are shrunk for the simulation: 4 MiB regions with a
    /// 256 KiB ring, so rings wrap).
    pub topology: Topology,
    /// The seed every choice is drawn from.
    pub seed: u64,
    /// What the clients run.
    pub workload: Workload,
    /// The faults injected.
    pub faults: Faults,
    /// Closed-loop clients per node.
    pub clients_per_node: usize,
    /// The committing schedule (`redt sim --committing`), under which most attempts commit so
    /// the checks judge rich histories: the clients retry a retryable abort as the real ones do
    /// (pauses scaled to the largest link round trip; not for append-scan and churn, whose hot windows a
    /// retry only meets again: retrying cut append-scan's commits on default.yaml, seeds 1–3,
    /// no faults, from 464 to 118), the key spaces of bank, list-append and YCSB grow with the
    /// clients (`workload::Generator::new`), and the message faults come in bursts with
    /// healthy periods between: one burst of 0.2–0.6 s per 1.5 s of the run (at least one),
    /// each starting at a random time, during which each enabled message fault hits at
    /// [`Faults::BURST_RATE`] (or its own rate if higher), and no message fault between.
    ///
    /// `false` (the default): the schedule the named seeds of `sim/tests/seeds.rs` were found
    /// under, drawing the same choices in the same order: no retries (a client draws a new
    /// transaction after a randomized back-off), fixed key spaces (32 bank accounts, a tenth
    /// of bank transactions reading every one; 10 list-append keys; 32 YCSB records), and the
    /// message faults at their rates throughout the run.
    pub committing: bool,
    /// Simulated time the clients submit for; then the run drains.
    pub duration: Duration,
    /// The coordinators' options (mutations included).
    pub options: CoordinatorOptions,
    /// Deliberate executor bugs (tests of the simulation).
    #[cfg(feature = "mutants")]
    pub executor_mutations: ExecutorMutations,
    /// Deliberate bugs in the recoverers (tests only).
    #[cfg(feature = "mutants")]
    pub recovery_mutations: RecoveryMutations,
    /// Deliberate bug in the membership (tests only): removals may leave a partition with fewer
    /// voters than recovery tolerates ([`Membership::set_too_few_voters_allowed`]).
    #[cfg(feature = "mutants")]
    pub remove_too_many: bool,
    /// Replaces [`RecoveryOptions::turn`] (`None`: the topology's). `Some(0)` makes every DC
    /// other than the coordinator's start recovering at once, so their recoverers duel with
    /// ballots, as clock skew or a slow scan can make them do with any turn.
    pub recovery_turn: Option<Duration>,
    /// Keep an event trace in the report.
    pub trace: bool,
    /// A deliberate bug (tests only): voters left after a removal do not repair from each
    /// other (`redt_protocol::epochs::repairs`), so a catch-up owed by the removed DC is
    /// lost.
    #[cfg(feature = "mutants")]
    pub no_voter_repair: bool,
    /// A deliberate bug (tests only): inserts take no gap lock
    /// ([`redt_dc_executor::OrderedIndex::set_gap_locks`]), so a key can appear inside a range
    /// an undecided transaction read (a phantom; the append-scan workload's checker must catch
    /// it).
    #[cfg(feature = "mutants")]
    pub no_gap_locks: bool,
    /// A deliberate bug (tests only): a write that brings a deleted key back does not put it
    /// back into its ordered index ([`redt_dc_executor::OrderedIndex::set_relink`]), so range
    /// reads miss a row (the index check must catch it).
    #[cfg(feature = "mutants")]
    pub no_relink: bool,
    /// How long after its delete a deleted record may be freed
    /// ([`ExecutorCore::with_deleted_grace`]; `None`: never): `SIM_DELETED_GRACE` for churn,
    /// shorter than its run, so that its deleted keys are freed and written again while
    /// catch-ups are in flight; for the others a node's default
    /// (`RecoveryOptions::deleted_grace`, 62 s with the simulation's skew bound), longer than
    /// their runs.
    pub deleted_grace: Option<Duration>,
    /// Replaces [`RecoveryOptions::catch_up_give_up`] (`None`: the topology's, 30 s):
    /// `SIM_CATCH_UP_GIVE_UP` for churn. With it set, a replica a shipper gave up on is
    /// left behind for the keys of that catch-up, as a node's is, and the check of the
    /// replicas' agreement leaves those keys out.
    pub catch_up_give_up: Option<Duration>,
    /// Who removes and restores DCs and nodes: the simulator right after a kill (the
    /// default), or the nodes' real failure detectors and the leader's real failover policy.
    pub failover: FailoverMode,
    /// Deliberate bugs in the failover policy (tests only; with [`FailoverMode::Policy`]).
    #[cfg(feature = "mutants")]
    pub failover_mutations: FailoverMutations,
}

/// The catch-up give-up of the churn workload's runs ([`SimConfig::catch_up_give_up`]): short,
/// so that its grace (`SIM_DELETED_GRACE`) is short too and records are freed within a run.
pub const SIM_CATCH_UP_GIVE_UP: Duration = Duration::from_millis(1_000);

/// The churn workload's [`SimConfig::deleted_grace`], as a node takes it
/// (`RecoveryOptions::deleted_grace`): twice its catch-up give-up (`SIM_CATCH_UP_GIVE_UP`)
/// plus the simulation's clock-skew bound (2 s), so no catch-up is still delivered when a
/// free its horizon would turn it away happens.
pub const SIM_DELETED_GRACE: Duration = Duration::from_millis(4_000);

/// How long the churn workload's clients run by default: longer than its grace, so records
/// are freed and their keys written again within the run.
pub const SIM_CHURN_DURATION: Duration = Duration::from_secs(10);

impl SimConfig {
    /// A run of `topology` with `seed`: 2 clients per node for 3 simulated seconds (10 for
    /// churn), not [`SimConfig::committing`].
    pub fn new(topology: Topology, seed: u64, workload: Workload, faults: Faults) -> SimConfig {
        let deleted_grace = Some(if workload == Workload::Churn {
            SIM_DELETED_GRACE
        } else {
            RecoveryOptions::for_topology(&topology, MAX_SKEW).deleted_grace()
        });
        SimConfig {
            topology,
            seed,
            workload,
            faults,
            clients_per_node: 2,
            committing: false,
            duration: if workload == Workload::Churn { SIM_CHURN_DURATION } else { Duration::from_secs(3) },
            options: CoordinatorOptions::default(),
            #[cfg(feature = "mutants")]
            executor_mutations: ExecutorMutations::default(),
            #[cfg(feature = "mutants")]
            recovery_mutations: RecoveryMutations::default(),
            #[cfg(feature = "mutants")]
            remove_too_many: false,
            recovery_turn: None,
            trace: false,
            #[cfg(feature = "mutants")]
            no_voter_repair: false,
            #[cfg(feature = "mutants")]
            no_gap_locks: false,
            #[cfg(feature = "mutants")]
            no_relink: false,
            deleted_grace,
            catch_up_give_up: (workload == Workload::Churn).then_some(SIM_CATCH_UP_GIVE_UP),
            failover: FailoverMode::default(),
            #[cfg(feature = "mutants")]
            failover_mutations: FailoverMutations::default(),
        }
    }
}

/// What a run did and found.
#[derive(Clone, Debug, Default)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Transactions answered committed, aborted, unknown.
    pub committed: u64,
    /// Aborted.
    pub aborted: u64,
    /// Unknown (a client's coordinator crashed, or an abort not yet recorded).
    pub unknown: u64,
    /// Transactions the clients ran (each attempted once, or more when retried), and how they
    /// ended: committed, given up (an abort not retried), unknown.
    pub transactions: u64,
    /// Of those, the committed ones.
    pub transactions_committed: u64,
    /// Of those, the ones given up: an abort not retryable, or the last of its retries.
    pub transactions_given_up: u64,
    /// Of those, the ones whose outcome is unknown (never retried: they may have committed).
    pub transactions_unknown: u64,
    /// Attempts that were retries of an aborted one (each is one more history entry).
    pub retries: u64,
    /// Held transactions a batch took along (`options.batch`).
    pub batched: u64,
    /// Aborted attempts by the cause their coordinator gave, indexed by
    /// [`AbortCause::index`]; an abort no coordinator decided (a call that could not start)
    /// counts in none.
    pub abort_causes: [u64; AbortCause::ALL.len()],
    /// Transactions submitted and answered outside every fault window (no node down, no DC
    /// cut off, and no fault begun in between), and those of them that committed.
    pub calm_attempts: u64,
    /// Of those, the committed ones.
    pub calm_committed: u64,
    /// Events processed.
    pub events: u64,
    /// Simulated time at the end, µs.
    pub end_us: u64,
    /// Crashes injected.
    pub crashes: u64,
    /// Messages dropped by the network (loss, partitions, faults).
    pub dropped: u64,
    /// Committed read-write inter-DC transactions, and their inter-DC messages and round
    /// trips as the coordinators counted them (RedT Table 2).
    pub rw_inter_commits: u64,
    /// Sum of their inter-DC messages.
    pub rw_inter_messages: u64,
    /// Sum of their inter-DC round trips.
    pub rw_inter_round_trips: u64,
    /// Recoveries started, and how they ended (committed, aborted; the rest were still
    /// running or blocked when the run ended).
    pub recoveries: u64,
    /// Recoveries that committed.
    pub recovered_commits: u64,
    /// Recoveries that aborted.
    pub recovered_aborts: u64,
    /// Gaps dead writers left at the head of a ring, filled, and their slots.
    pub gaps_filled: u64,
    /// Slots of those gaps.
    pub gap_slots: u64,
    /// Catch-ups shipped again from a ring's entry after their first shipper's memory was
    /// lost (docs/design.md §2, "a catch-up outlives its source").
    pub catch_ups_reshipped: u64,
    /// Catch-up shippers that gave up on some replica (`RecoveryOptions::catch_up_give_up`).
    pub catch_ups_given_up: u64,
    /// Replica changes replay left out as superseded by their record's floor (older than a
    /// freed delete of their key, or of another key of its slot).
    pub superseded_changes: u64,
    /// DCs killed for good and removed from the placement (the `remove` fault).
    pub dcs_removed: u64,
    /// Nodes killed for good and removed from the placement (the `remove-node` fault).
    pub nodes_removed: u64,
    /// Removals the membership refused (a DC or node killed all the same, and waited for):
    /// mostly a second replica of a partition lost before the first was rebuilt.
    pub removals_refused: u64,
    /// Commits of transactions planned in an epoch after a removal, and among them those
    /// touching a partition that lost a replica (with n = 3 these could not commit at all
    /// while the dead DC was still in the placement: Q = n).
    pub committed_after_removal: u64,
    /// Of those, the ones touching a partition that lost a replica.
    pub committed_on_shrunk_partitions: u64,
    /// Rebuilds started (a learner's snapshot copy; a rebuild restarted after its node
    /// crashed counts again).
    pub rebuilds_started: u64,
    /// Learners promoted to voters: replicas rebuilt.
    pub replicas_rebuilt: u64,
    /// Records the rebuilds applied.
    pub rebuild_records: u64,
    /// Partitions with fewer voters than the replication factor at the end of the run (a
    /// replica lost and not yet rebuilt).
    pub partitions_short: u64,
    /// Rows the rebuilds' purges emptied: held by a learner from before, refreshed by no
    /// voter's copy (`ExecutorCore::purge_unrefreshed`).
    pub rebuild_rows_purged: u64,
    /// Voter repairs completed: a voter of a partition that lost a voter copied it from the
    /// other voters (`redt_protocol::epochs::repairs`).
    pub voter_repairs: u64,
    /// Committed scans (append-scan), the rows they returned, and the keys of their ranges
    /// they observed absent (read as the empty list by the checker).
    pub scans_committed: u64,
    /// Rows those scans returned.
    pub scan_rows: u64,
    /// Keys those scans observed absent.
    pub scan_absent: u64,
    /// Committed reads of every account (bank), each checked to see the starting total.
    pub full_reads_committed: u64,
    /// Committed deletes (append-scan).
    pub deletes_committed: u64,
    /// Records in the hash indexes of the nodes alive at the end, and among them those an
    /// insert created that no commit wrote and nobody holds (aborted inserts that retirement
    /// missed: a retirer that died between its release and its retirement), and the bytes of
    /// retired records on the free lists.
    pub records_indexed: u64,
    /// Of those, the unused ones.
    pub records_unused: u64,
    /// Bytes on the free lists.
    pub records_free_bytes: u64,
    /// Deleted records freed once their grace passed (`SimConfig::deleted_grace`).
    pub deleted_records_freed: u64,
    /// Interactive transactions whose versioned read completed (each then committed its
    /// CHECKs and appends), and those whose read failed (a key busy on every replica of the
    /// DC read, a forwarded read lost or refused, a crash): each a transaction given up.
    pub reads_versioned: u64,
    /// Versioned reads that failed.
    pub reads_failed: u64,
    /// Locks and undecided entries left after the drain (each is also a violation).
    pub leftovers: Vec<Leftover>,
    /// What the checks found wrong.
    pub violations: Vec<Violation>,
    /// The event trace, if asked for.
    pub trace: Vec<String>,
}

impl SimReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// Attempts answered: committed, aborted or unknown (every entry of the history).
    pub fn attempts(&self) -> u64 {
        self.committed + self.aborted + self.unknown
    }

    /// Transactions still being retried when the clients stopped (the drain submits nothing).
    pub fn transactions_unfinished(&self) -> u64 {
        self.transactions
            .saturating_sub(self.transactions_committed + self.transactions_given_up + self.transactions_unknown)
    }

    /// The share of attempts that committed, 0 to 1 (0 with none).
    pub fn committed_share(&self) -> f64 {
        self.committed as f64 / self.attempts().max(1) as f64
    }

    /// The share of the attempts outside every fault window that committed, 0 to 1 (0 with
    /// none).
    pub fn calm_committed_share(&self) -> f64 {
        self.calm_committed as f64 / self.calm_attempts.max(1) as f64
    }

    /// Inter-DC messages per committed read-write inter-DC transaction.
    pub fn messages_per_commit(&self) -> f64 {
        self.rw_inter_messages as f64 / self.rw_inter_commits.max(1) as f64
    }

    /// Inter-DC round trips per committed read-write inter-DC transaction.
    pub fn round_trips_per_commit(&self) -> f64 {
        self.rw_inter_round_trips as f64 / self.rw_inter_commits.max(1) as f64
    }
}

impl std::fmt::Display for SimReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "seed {}: {} committed, {} aborted, {} unknown; {} crashes, {} messages dropped; {} events, {:.3} s simulated",
            self.seed,
            self.committed,
            self.aborted,
            self.unknown,
            self.crashes,
            self.dropped,
            self.events,
            self.end_us as f64 / 1e6
        )?;
        if self.abort_causes.iter().any(|&n| n > 0) {
            let causes: Vec<String> = AbortCause::ALL
                .iter()
                .filter(|c| self.abort_causes[c.index()] > 0)
                .map(|c| format!("{} {}", c.name(), self.abort_causes[c.index()]))
                .collect();
            writeln!(f, "  aborts by cause: {}", causes.join(", "))?;
        }
        if self.batched > 0 {
            writeln!(f, "  batches took {} held transactions along", self.batched)?;
        }
        writeln!(
            f,
            "  attempts: {:.1}% of {} committed; clients: {} transactions, {} committed, {} given up, {} unknown, \
             {} still retrying at the end; {} retries; outside fault windows {} of {} attempts committed ({:.1}%)",
            100.0 * self.committed_share(),
            self.attempts(),
            self.transactions,
            self.transactions_committed,
            self.transactions_given_up,
            self.transactions_unknown,
            self.transactions_unfinished(),
            self.retries,
            self.calm_committed,
            self.calm_attempts,
            100.0 * self.calm_committed_share()
        )?;
        writeln!(
            f,
            "  per committed rw inter-DC txn: {:.2} inter-DC messages, {:.2} inter-DC round trips ({} txns)",
            self.messages_per_commit(),
            self.round_trips_per_commit(),
            self.rw_inter_commits
        )?;
        writeln!(
            f,
            "  recoveries: {} started, {} committed, {} aborted; {} ring gaps filled ({} slots); \
             catch-ups: {} shipped again, {} given up; {} replica changes superseded",
            self.recoveries,
            self.recovered_commits,
            self.recovered_aborts,
            self.gaps_filled,
            self.gap_slots,
            self.catch_ups_reshipped,
            self.catch_ups_given_up,
            self.superseded_changes
        )?;
        writeln!(
            f,
            "  records: {} indexed, {} unused left by aborted inserts, {} freed after a delete; {} bytes on the free lists",
            self.records_indexed, self.records_unused, self.deleted_records_freed, self.records_free_bytes
        )?;
        if self.reads_versioned + self.reads_failed > 0 {
            writeln!(
                f,
                "  interactive: {} versioned reads completed, {} failed; {} commits aborted on a stale read",
                self.reads_versioned,
                self.reads_failed,
                self.abort_causes[AbortCause::StaleRead.index()]
            )?;
        }
        if self.full_reads_committed > 0 {
            writeln!(f, "  bank: {} committed reads of every account", self.full_reads_committed)?;
        }
        if self.scans_committed + self.deletes_committed > 0 {
            writeln!(
                f,
                "  scans: {} committed, {} rows returned, {} keys observed absent; {} deletes committed",
                self.scans_committed, self.scan_rows, self.scan_absent, self.deletes_committed
            )?;
        }
        if self.dcs_removed + self.nodes_removed + self.removals_refused > 0 {
            writeln!(
                f,
                "  failover: {} DC removed, {} nodes removed, {} removals refused; {} commits planned after it, {} on partitions that lost a replica; \
                 {} rebuilds started, {} replicas rebuilt ({} records copied, {} rows purged), {} voter repairs, \
                 {} partitions short of replicas at the end",
                self.dcs_removed,
                self.nodes_removed,
                self.removals_refused,
                self.committed_after_removal,
                self.committed_on_shrunk_partitions,
                self.rebuilds_started,
                self.replicas_rebuilt,
                self.rebuild_records,
                self.rebuild_rows_purged,
                self.voter_repairs,
                self.partitions_short
            )?;
        }
        for v in &self.violations {
            writeln!(f, "  VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// A message on the simulated wire.
enum Msg {
    Request {
        from: NodeId,
        from_inc: u64,
        rpc: u64,
        request: Request,
    },
    Reply {
        to_inc: u64,
        rpc: u64,
        reply: Reply,
    },
    /// A failure detector's heartbeat ([`FailoverMode::Policy`]).
    Heartbeat {
        from: NodeId,
        sent_at_us: u64,
    },
    /// A failover-policy question or answer ([`FailoverMode::Policy`]).
    Policy {
        from: NodeId,
        body: failover::PolicyMsg,
    },
}

enum Ev {
    Deliver {
        to: NodeId,
        msg: Msg,
    },
    /// A transaction `node` held back under decided-holder takeover has waited its phase-1
    /// timeout: it goes out as under No-Wait if still held (dropped if the node crashed).
    HeldTooLong {
        node: NodeId,
        inc: u64,
        txn: TxnId,
    },
    /// A phase 1 waiting for a lock at `node` (`Handled::retry`) tries again; dropped if
    /// the node crashed since (`inc`), as the real node's request task dies with its process.
    RetryPhase1 {
        node: NodeId,
        inc: u64,
        from: NodeId,
        from_inc: u64,
        rpc: u64,
        request: Request,
    },
    RpcDeadline {
        node: NodeId,
        inc: u64,
        rpc: u64,
    },
    TxnTimer {
        node: NodeId,
        inc: u64,
        txn: TxnId,
    },
    RecoveryTimer {
        node: NodeId,
        inc: u64,
        txn: TxnId,
    },
    RecoveryScan {
        node: NodeId,
    },
    Replay {
        node: NodeId,
    },
    Client {
        client: usize,
    },
    Crash {
        node: NodeId,
    },
    Restart {
        node: NodeId,
    },
    Partition {
        a: DcId,
        b: DcId,
    },
    Heal {
        a: DcId,
        b: DcId,
    },
    /// Kill every node of `dc`; its removal from the placement follows.
    KillDc {
        dc: DcId,
    },
    /// Kill `node`; its removal from the placement follows.
    KillNode {
        node: NodeId,
    },
    /// `node` applies placement `index` of [`World::placements`] (and every one before it).
    Adopt {
        node: NodeId,
        index: usize,
    },
    /// A removed node, or a node of a removed DC, starts again (it holds no replica; nothing
    /// it held is trusted).
    Return {
        node: NodeId,
    },
    ShipTimer {
        node: NodeId,
        inc: u64,
        ship: u64,
    },
    /// The membership adds learners for every partition short of its replication factor.
    PlanRebuild,
    /// A rebuild's timer.
    RebuildTimer {
        node: NodeId,
        inc: u64,
        partition: PartitionId,
    },
    /// The membership promotes a filled learner (its proposal committed by Raft).
    Promote {
        partition: PartitionId,
        node: NodeId,
        added_in: Epoch,
    },
    Drain,
    /// A burst of message faults begins (`on`) or ends ([`SimConfig::committing`]).
    Burst {
        on: bool,
    },
    /// A node's failure-detector timer ([`FailoverMode::Policy`]).
    DetectorTimer {
        node: NodeId,
        inc: u64,
    },
    /// The Raft leader's tick of its failover policy ([`FailoverMode::Policy`]).
    LeaderTick,
    /// A confirmation round's voters not heard from count as not suspecting.
    AskTimeout {
        leader: NodeId,
        inc: u64,
        round: u64,
    },
    /// A probe not answered found nothing.
    ProbeTimeout {
        id: u64,
    },
    /// An interactive client's versioned read `read` is not answered in time: it starts over.
    ReadTimeout {
        client: usize,
        read: u64,
    },
    /// An interactive client done thinking over versioned read `read` commits what it decided.
    ClientCommit {
        client: usize,
        read: u64,
    },
}

enum RpcOwner {
    Txn(TxnId, u64),
    Recovery(TxnId, u64),
    /// A catch-up shipper's attempt.
    Ship(u64, u64),
    /// A gap watch's question: its round and the writer asked.
    Gap(u64, NodeId),
    /// A rebuild's snapshot read: the partition and the attempt.
    Rebuild(PartitionId, u64),
    /// A round of freeing deleted records: the index of the ask in the round.
    Reclaim(usize),
    /// An interactive client's versioned read forwarded to another DC: the client, the read,
    /// and the indexes of the keys asked.
    Read(usize, u64, Vec<usize>),
}

struct Coord {
    txn: CoordinatorTxn,
    client: Option<usize>,
    answered_cost: Option<(u64, u64)>,
    /// A batch's members after its leader (`client`): each one's client, id and call.
    members: Vec<(usize, TxnId, ProcedureCall)>,
}

/// A node's round of freeing deleted records under way: the round, the answers so far (one
/// per ask), and the asks not answered yet.
type ReclaimUnderWay = (ReclaimRound, Vec<Option<ReclaimAnswer>>, usize);

struct SimNode {
    id: NodeId,
    dc: DcId,
    alive: bool,
    /// Killed and removed from the placement, alone or with its DC: kept down until
    /// [`Ev::Return`] (or the drain), then back holding no replica.
    held_down: bool,
    /// The placements it applied (kept across a crash, as a Raft log on disk is).
    epochs: Arc<Epochs>,
    inc: u64,
    core: Option<ExecutorCore>,
    replayer: Replayer,
    region: Arc<Region>,
    coords: BTreeMap<TxnId, Coord>,
    /// Decided-holder takeover's queue of its coordinators (`CoordinatorOptions::takeover`;
    /// lost in a crash), the transactions it holds back (their client and call), and the
    /// coordinators whose decision it was told.
    takeover: Takeover,
    /// Held back: each one's client, call, whether a batch may take it, and its footprint.
    held: BTreeMap<TxnId, (usize, ProcedureCall, bool, Footprint)>,
    /// The held transactions whose phase-1-timeout event is queued.
    waited: BTreeSet<TxnId>,
    phase2_told: BTreeSet<TxnId>,
    recoverers: BTreeMap<TxnId, Recoverer>,
    /// The watch over the gap at the head of this node's ring (lost in a crash).
    gaps: GapWatch,
    /// The time each recoverer's timer event is queued for (one event per recoverer).
    armed: HashMap<TxnId, Micros>,
    rpcs: HashMap<u64, RpcOwner>,
    /// Catch-ups being paid (lost in a crash; their masks in the ring are not): the shipper,
    /// the entries whose masks it clears when done, and its queued timer.
    shippers: BTreeMap<u64, (Shipper, Vec<EntryRef>, Option<Micros>)>,
    /// The keys each shipper's accepts carry, per target node (to note what a give-up leaves
    /// behind).
    shipped_keys: BTreeMap<u64, Vec<(NodeId, Vec<u64>)>>,
    /// Its learners' snapshot copies (lost in a crash, started again at the restart), with
    /// their queued timers; also its voter repairs (lost in a crash, not started again).
    rebuilds: BTreeMap<PartitionId, (Rebuild, Option<Micros>)>,
    /// The partitions of `rebuilds` that are voter repairs, not learners' copies.
    repairing: BTreeSet<PartitionId>,
    /// Its learners whose copy is complete, waiting for the promotion (lost in a crash: the
    /// copy is then made again).
    filled: BTreeSet<(PartitionId, Epoch)>,
    /// Its round of freeing deleted records under way (lost in a crash): the round, the
    /// answers so far, and the asks not answered yet.
    reclaim: Option<ReclaimUnderWay>,
    /// The ids its coordinators take (lost in a crash; the incarnation counter in its
    /// MemStore is not): `None` until booted.
    ids: Option<TxnIds>,
    skew_ms: u64,
    /// Its failure detector, suspect view and failover policy ([`FailoverMode::Policy`];
    /// started afresh at each boot).
    failover: Option<failover::NodeFailover>,
}

struct Client {
    node: NodeId,
    process: u64,
    busy: Option<usize>,
    /// The transaction it runs (until it commits, ends unknown or is given up) and the
    /// attempts made of it so far.
    current: Option<(workload::Draw, u32)>,
    /// The versioned read of an interactive transaction under way (before its commit).
    reading: Option<Reading>,
}

/// An interactive client's versioned read under way ([`Workload::Interactive`]).
struct Reading {
    /// Its id (stale timers and answers name another).
    id: u64,
    /// The keys.
    keys: Vec<u64>,
    /// When it started, µs: the transaction's invocation.
    started_us: u64,
    /// Per key, what was read: version and value padded to the cell's width.
    got: Vec<Option<(u64, Vec<u8>)>>,
    /// Forwarded reads not answered yet.
    waiting: usize,
}

/// One history entry (list-append and bank reads are checked from it).
pub(crate) struct Hist {
    pub process: u64,
    pub txn: TxnId,
    pub call: ProcedureCall,
    /// The batch it led, when it led one (its outcome is the batch's).
    pub ran: Option<ProcedureCall>,
    pub invoke_us: u64,
    pub complete_us: Option<u64>,
    pub outcome: Outcome,
    /// Its list-append operations and scans (empty for the other workloads).
    pub steps: Vec<workload::Step>,
    /// The checker's operations: [`workload::fill_steps`]ed once committed, else
    /// [`workload::unfilled`].
    pub ops: Vec<elle::Op>,
    pub reads: Vec<Option<Vec<u8>>>,
    /// The placement epoch its coordinator planned it in.
    pub epoch: redt_proto::Epoch,
    /// An interactive transaction's reads, one per step (`workload::Generator::interactive_commit`):
    /// what its versioned read returned, taken as its reads once it commits in place of the
    /// answer's (its CHECKs read nothing).
    pub pre_reads: Option<Vec<Option<Vec<u8>>>>,
    /// [`World::fault_starts`] when it was submitted, if no fault was under way then.
    pub calm_since: Option<u64>,
}

/// The whole simulated cluster.
pub(crate) struct World {
    pub topology: Arc<Topology>,
    pub dcs: Vec<Arc<DcHandle>>,
    nodes: Vec<SimNode>,
    clients: Vec<Client>,
    queue: Queue<Ev>,
    net: Network,
    rng: StdRng,
    base: Instant,
    pub(crate) now: Micros,
    cfg: SimConfig,
    gen: Generator,
    next_rpc: u64,
    draining: bool,
    /// Upper bound of a client's pause after a transaction it gave up or whose outcome it
    /// does not know: two of the largest link RTT (µs).
    backoff_us: u64,
    /// How clients retry aborted transactions.
    retries: RetryPolicy,
    /// When and how recovery runs (the clock-skew bound covers the skew fault's 2 s).
    recovery: RecoveryOptions,
    /// `(replica, key)`: a catch-up shipper gave up on the replica for the key
    /// ([`SimConfig::catch_up_give_up`]); the replica may hold an older value of it.
    pub(crate) left_behind: BTreeSet<(NodeId, u64)>,
    /// When the drain last found every ring free of undecided entries (µs), to check it at
    /// most every 100 ms.
    last_ring_check: Micros,
    pub hist: Vec<Hist>,
    /// When each transaction started, and its participant DCs.
    pub started: HashMap<TxnId, (Micros, Vec<DcId>)>,
    /// Crashes: node and time.
    pub crash_log: Vec<(NodeId, Micros)>,
    /// Per transaction, the DCs holding evidence of its abort (an abort vote, or a record
    /// acknowledged) — the simulator's own view, to check the coordinator's.
    abort_evidence: HashMap<TxnId, BTreeSet<DcId>>,
    /// Every placement the membership committed, in order (the first is the topology file's,
    /// [`Placement::initial`]).
    pub placements: Vec<Placement>,
    /// The membership state machine the placements come from (what the Raft group would
    /// replicate; `redt_membership::Membership`).
    pub(crate) membership: Membership,
    /// Membership events queued and not yet run (rebuild plans, promotions): the drain waits
    /// for them.
    membership_pending: u32,
    /// Faults begun so far (crashes, kills, partitions, bursts of message faults): a transaction submitted and answered
    /// while none was under way and none began is outside every fault window.
    fault_starts: u64,
    /// The message faults of the run ([`Faults`]): in force throughout, or during bursts.
    message_faults: MessageFaults,
    /// Bursts of message faults under way ([`SimConfig::committing`]).
    bursts: u32,
    /// Whether the message faults come in bursts ([`SimConfig::committing`]).
    bursts_planned: bool,
    /// The last interactive versioned read's id.
    next_read: u64,
    /// The failover policy's questions and probes under way, and when each node was last down
    /// ([`FailoverMode::Policy`]).
    rounds: failover::Rounds,
    pub report: SimReport,
}

/// The wall clock every node starts from, ms since `redt_dc_executor::ORIGIN_UNIX_MS`.
const WALL_START_MS: u64 = 10_000_000;
/// How long an RPC waits for its reply (the transport's call deadline).
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// Replay runs every this often on each live node.
const REPLAY_EVERY_US: u64 = 2_000;
/// The largest clock skew the skew fault injects (and the recoverers' skew bound).
const MAX_SKEW: Duration = Duration::from_secs(2);
/// One burst of message faults per this much of the run, µs ([`SimConfig::committing`]).
const BURST_EVERY_US: u64 = 1_500_000;
/// The drain gives up this long after the workload ends.
const DRAIN_LIMIT: Duration = Duration::from_secs(120);

impl World {
    /// A world of `cfg`'s topology at time 0, nothing run yet.
    pub(crate) fn new(cfg: SimConfig) -> Result<World, String> {
        let mut topology = cfg.topology.clone();
        topology.memstore.size_bytes = 4 << 20;
        topology.memstore.index_bytes = 512 << 10;
        topology.memstore.ring_bytes = 256 << 10;
        let topology = Arc::new(topology);
        let nodes_len = topology.nodes.len();
        let layout = Layout::from_config(&topology.memstore);
        let mut dcs = Vec::new();
        let mut regions: BTreeMap<NodeId, Arc<Region>> = BTreeMap::new();
        for dc in &topology.dcs {
            let local = Arc::new(LocalVerbs::in_process(dc.nodes.iter().copied(), layout.size));
            for &n in &dc.nodes {
                let r = local.region(n).ok_or("a DC node without a region")?.clone();
                layout.format(&r);
                regions.insert(n, r);
            }
            let v: Arc<dyn Verbs> = local;
            let handle = DcHandle::new(&topology, v);
            dcs.push(Arc::new(handle));
        }
        let kv = topology.table_by_name("kv").ok_or("the simulation needs a `kv` table (cell 0 ≥ 8 bytes)")?.id;
        let (usertable, cells) = match topology.table_by_name("usertable") {
            Some(t) => (t.id, t.cells.len()),
            None if cfg.workload == Workload::Ycsb => return Err("the ycsb workload needs a `usertable` table".into()),
            None => (kv, 1),
        };
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let nodes = topology
            .nodes
            .iter()
            .map(|n| {
                let max_skew = MAX_SKEW.as_millis() as u64;
                let skew_ms = if cfg.faults.clock_skew && rng.gen_bool(0.3) { rng.gen_range(1..max_skew) } else { 0 };
                SimNode {
                    id: n.id,
                    dc: n.dc,
                    alive: true,
                    held_down: false,
                    epochs: Arc::new(Epochs::new(Placement::initial(topology.clone()))),
                    inc: 0,
                    core: None,
                    replayer: Replayer::new(layout, n.id),
                    region: regions[&n.id].clone(),
                    coords: BTreeMap::new(),
                    takeover: Takeover::new(),
                    held: BTreeMap::new(),
                    waited: BTreeSet::new(),
                    phase2_told: BTreeSet::new(),
                    recoverers: BTreeMap::new(),
                    // Replaced at boot, with the DC's writers.
                    gaps: GapWatch::new(Vec::new(), Duration::ZERO),
                    armed: HashMap::new(),
                    rpcs: HashMap::new(),
                    reclaim: None,
                    shippers: BTreeMap::new(),
                    shipped_keys: BTreeMap::new(),
                    rebuilds: BTreeMap::new(),
                    repairing: BTreeSet::new(),
                    filled: BTreeSet::new(),
                    ids: None,
                    skew_ms,
                    failover: None,
                }
            })
            .collect();
        let wan = WanModel::from_topology(&topology);
        let mut net = Network::new(wan, Duration::from_micros(20));
        let mut message_faults = MessageFaults {
            drop: cfg.faults.drop,
            duplicate: cfg.faults.duplicate,
            hold: cfg.faults.hold,
            hold_max: Duration::from_secs(3),
        };
        // In bursts (committing), messages meet their faults only while a burst lasts, each
        // enabled one at `Faults::BURST_RATE` at least.
        let bursts = cfg.committing && message_faults.any();
        if bursts {
            message_faults = message_faults.at_least(Faults::BURST_RATE);
        } else {
            net.faults = message_faults;
        }
        let gen = Generator::new(
            cfg.workload,
            kv,
            usertable,
            cells,
            cfg.committing.then_some(nodes_len * cfg.clients_per_node),
        );
        let retries = match cfg.workload {
            Workload::Bank | Workload::Append | Workload::Ycsb if cfg.committing => client::for_topology(&topology),
            _ => RetryPolicy::none(),
        };
        let max_rtt = topology.links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default();
        let mut recovery = RecoveryOptions::for_topology(&topology, MAX_SKEW);
        if let Some(turn) = cfg.recovery_turn {
            recovery.turn = turn;
        }
        if let Some(give_up) = cfg.catch_up_give_up {
            recovery.catch_up_give_up = give_up;
        }
        let factor = topology.partitions.iter().map(|p| p.replicas.len()).max().unwrap_or(1);
        let membership = Membership::from_topology(&topology, factor).map_err(|e| e.to_string())?;
        let mut w = World {
            backoff_us: 2 * max_rtt.as_micros() as u64,
            retries,
            bursts_planned: bursts,
            next_read: 0,
            recovery,
            last_ring_check: 0,
            left_behind: BTreeSet::new(),
            topology,
            dcs,
            nodes,
            clients: Vec::new(),
            queue: Queue::new(),
            net,
            rng,
            base: Instant::now(),
            now: 0,
            gen,
            next_rpc: 0,
            draining: false,
            hist: Vec::new(),
            started: HashMap::new(),
            crash_log: Vec::new(),
            abort_evidence: HashMap::new(),
            placements: Vec::new(),
            membership,
            membership_pending: 0,
            fault_starts: 0,
            message_faults,
            bursts: 0,
            rounds: failover::Rounds { last_down: vec![None; nodes_len], ..failover::Rounds::default() },
            report: SimReport { seed: cfg.seed, ..SimReport::default() },
            cfg,
        };
        #[cfg(feature = "mutants")]
        w.switch_on_mutants();
        w.placements.push(Placement::initial(w.topology.clone()));
        for i in 0..w.nodes.len() {
            w.boot(i);
        }
        w.load()?;
        Ok(w)
    }

    /// Switches on the configuration's deliberate bugs that live in the world's shared state:
    /// the DCs' ordered indexes, the recovery options, the membership. (The executors' are
    /// switched on at each boot, the failover policies' at each start.)
    #[cfg(feature = "mutants")]
    fn switch_on_mutants(&mut self) {
        for dc in &self.dcs {
            dc.ordered.set_gap_locks(!self.cfg.no_gap_locks);
            dc.ordered.set_relink(!self.cfg.no_relink);
        }
        self.recovery.mutations = self.cfg.recovery_mutations;
        self.membership.set_too_few_voters_allowed(self.cfg.remove_too_many);
    }

    /// Writes the workload's starting records into every replica.
    fn load(&mut self) -> Result<(), String> {
        let (table, values): (_, Vec<Vec<u8>>) = match self.cfg.workload {
            Workload::Bank => (self.gen.kv, vec![workload::BANK_START.to_le_bytes().to_vec()]),
            Workload::Ycsb => (self.gen.usertable, vec![vec![0u8; 8]; self.gen.ycsb_cells]),
            Workload::Append | Workload::AppendScan | Workload::Churn | Workload::Interactive => return Ok(()),
        };
        let schema = self.topology.table(table).ok_or("no table")?.clone();
        for key in self.gen.keys() {
            let p = self.topology.partition_of(&schema, key);
            for &n in &self.topology.partitions[p.0 as usize].replicas {
                let dc = self.topology.nodes[n.0 as usize].dc;
                let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
                self.dcs[dc.0 as usize]
                    .insert_record(n, table, key, &refs)
                    .map_err(|e| format!("loading {key}: {e}"))?;
            }
        }
        Ok(())
    }

    fn boot(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        let dc = self.dcs[n.dc.0 as usize].clone();
        let core = ExecutorCore::new(n.epochs.clone(), n.id, dc.clone(), Arc::new(Hlc::new()))
            .with_ring_patience(Duration::ZERO)
            .with_deleted_grace(self.cfg.deleted_grace, self.recovery.clock_skew_bound)
            .with_lock_wait(self.cfg.options.lock_wait_for(&self.topology));
        #[cfg(feature = "mutants")]
        let core = core.with_mutations(self.cfg.executor_mutations);
        n.core = Some(core);
        n.replayer = Replayer::new(dc.layout, n.id);
        n.gaps = GapWatch::new(self.topology.dcs[n.dc.0 as usize].nodes.clone(), self.recovery.gap_wait);
        n.alive = true;
        // Transaction ids continue above anything handed out before a crash: the next
        // incarnation, from the node's MemStore, as a real node takes it.
        n.ids = Some(TxnIds::start(&dc, n.id).expect("a formatted in-process MemStore has incarnations left"));
        // A restart (not the first boot) ends a time down.
        if n.inc > 0 {
            self.note_down(i);
        }
        self.start_failover(i);
    }

    fn instant(&self, t: Micros) -> Instant {
        self.base + Duration::from_micros(t)
    }

    fn micros(&self, i: Instant) -> Micros {
        i.saturating_duration_since(self.base).as_micros() as u64
    }

    fn wall_ms(&self, node: NodeId) -> u64 {
        WALL_START_MS + self.now / 1000 + self.nodes[node.0 as usize].skew_ms
    }

    fn trace(&mut self, s: impl FnOnce() -> String) {
        if self.cfg.trace {
            let line = format!("{:>10.3} ms  {}", self.now as f64 / 1000.0, s());
            self.report.trace.push(line);
        }
    }

    pub(crate) fn run(&mut self) {
        let duration = self.cfg.duration.as_micros() as u64;
        for n in 0..self.nodes.len() {
            for _ in 0..self.cfg.clients_per_node {
                let c = self.clients.len();
                self.clients.push(Client {
                    node: NodeId(n as u16),
                    process: c as u64,
                    busy: None,
                    current: None,
                    reading: None,
                });
                let at = self.rng.gen_range(0..1_000);
                self.queue.push(at, Ev::Client { client: c });
            }
            self.queue.push(self.rng.gen_range(0..REPLAY_EVERY_US), Ev::Replay { node: NodeId(n as u16) });
            let scan = self.recovery.scan_every.as_micros() as u64;
            self.queue.push(self.rng.gen_range(0..scan), Ev::RecoveryScan { node: NodeId(n as u16) });
        }
        if self.cfg.faults.crash {
            let crashes = self.rng.gen_range(1..=3);
            for _ in 0..crashes {
                let node = NodeId(self.rng.gen_range(0..self.nodes.len()) as u16);
                let at = self.rng.gen_range(0..duration);
                self.queue.push(at, Ev::Crash { node });
            }
        }
        if self.cfg.faults.partition && self.topology.dcs.len() > 1 {
            for _ in 0..self.rng.gen_range(1..=2) {
                let a = DcId(self.rng.gen_range(0..self.topology.dcs.len()) as u16);
                let mut b = DcId(self.rng.gen_range(0..self.topology.dcs.len()) as u16);
                if a == b {
                    b = DcId((a.0 + 1) % self.topology.dcs.len() as u16);
                }
                let at = self.rng.gen_range(0..duration);
                self.queue.push(at, Ev::Partition { a, b });
                self.queue.push(at + self.rng.gen_range(300_000..3_000_000), Ev::Heal { a, b });
            }
        }
        if self.cfg.faults.remove_dc && self.topology.dcs.len() > 2 {
            let dc = DcId(self.rng.gen_range(0..self.topology.dcs.len()) as u16);
            let at = self.rng.gen_range(duration / 5..duration / 2);
            self.queue.push(at, Ev::KillDc { dc });
        }
        if self.cfg.faults.remove_node && self.nodes.len() > 2 {
            let node = NodeId(self.rng.gen_range(0..self.nodes.len()) as u16);
            let at = self.rng.gen_range(duration / 5..duration / 2);
            self.queue.push(at, Ev::KillNode { node });
        }
        if self.cfg.failover == FailoverMode::Policy {
            self.queue.push(self.policy_tick(), Ev::LeaderTick);
        }
        if self.bursts_planned {
            for _ in 0..(duration / BURST_EVERY_US).max(1) {
                let at = self.rng.gen_range(0..duration);
                self.queue.push(at, Ev::Burst { on: true });
                self.queue.push(at + self.rng.gen_range(200_000..600_000), Ev::Burst { on: false });
            }
        }
        self.queue.push(duration, Ev::Drain);
        let limit = duration + DRAIN_LIMIT.as_micros() as u64;
        while let Some((at, ev)) = self.queue.pop() {
            self.now = self.now.max(at);
            self.report.events += 1;
            self.step(ev);
            if self.draining && self.quiet() {
                break;
            }
            if self.now > limit {
                break;
            }
        }
        // Let replay finish what the run decided.
        for i in 0..self.nodes.len() {
            self.replay(i, 64);
        }
    }

    /// Whether nothing is left to do: no transaction, recovery, shipment or client in flight,
    /// and (checked at most every 100 ms) no undecided entry, no catch-up owed and nothing
    /// unreplayed in any ring (its head at its tail: a gap a dead writer left at the head
    /// holds back the committed entries behind it until the gap watch fills it).
    fn quiet(&mut self) -> bool {
        let learners = self.final_placement().partitions.iter().any(|p| !p.learners.is_empty());
        // Under the real policy, the drain also waits for every DC and node to be restored.
        let removed = self.cfg.failover == FailoverMode::Policy
            && (self.membership.dcs().any(|(_, s)| s != redt_membership::Status::Up)
                || self.membership.nodes().any(|(_, _, s)| s != redt_membership::Status::Up));
        let idle =
            self.nodes.iter().all(|n| {
                n.coords.is_empty() && n.shippers.is_empty() && n.recoverers.is_empty() && n.rebuilds.is_empty()
            }) && self.clients.iter().all(|c| c.busy.is_none())
                && self.membership_pending == 0
                && !learners
                && !removed;
        if !idle || self.now < self.last_ring_check + 100_000 {
            return false;
        }
        self.last_ring_check = self.now;
        let layout = self.layout();
        self.nodes.iter().all(|n| {
            let dc = &self.dcs[n.dc.0 as usize];
            let replayed = ring_bounds(dc.verbs.as_ref(), n.id, &layout).is_ok_and(|(head, tail)| head == tail);
            replayed
                && ring_scan(dc.verbs.as_ref(), n.id, &layout)
                    .map(|s| s.unfinished.is_empty() && s.owed.is_empty())
                    .unwrap_or(false)
        })
    }

    fn replay(&mut self, i: usize, rounds: usize) {
        let n = &mut self.nodes[i];
        if !n.alive {
            return;
        }
        let dc = self.dcs[n.dc.0 as usize].clone();
        #[cfg(feature = "mutants")]
        let rule = self.cfg.executor_mutations.thomas_rule();
        #[cfg(not(feature = "mutants"))]
        let rule = redt_dc_executor::ThomasRule::default();
        // Changes superseded by their record's floor are counted, and the check of the
        // replicas' agreement keeps their keys: with the catch-up floors no replica frees a
        // key below a change still to be shipped, so a superseded change is one its replica
        // already held before a newer delete.
        let mut superseded = 0;
        for _ in 0..rounds {
            let mut out = Replayed::default();
            let step =
                n.replayer.step(&n.region, &mut |e| apply_committed_rows(&n.region, &dc.catalog, e, rule, &mut out));
            // An error is the replay thread's to log; the index check finds what it left.
            let _ = dc.relink_rows(n.id, &out.rows);
            superseded += out.superseded;
            if step.applied + step.flushed == 0 {
                break;
            }
        }
        self.report.superseded_changes += superseded;
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { to, msg } => self.deliver(to, msg),
            Ev::RetryPhase1 { node, inc, from, from_inc, rpc, request } => {
                let n = &self.nodes[node.0 as usize];
                if n.alive && n.inc == inc {
                    self.serve(node, from, from_inc, rpc, request);
                }
            }
            Ev::DetectorTimer { node, inc } => self.detector_timer(node, inc),
            Ev::LeaderTick => self.leader_tick(),
            Ev::AskTimeout { leader, inc, round } => self.ask_timeout(leader, inc, round),
            Ev::ProbeTimeout { id } => self.probe_timeout(id),
            Ev::RpcDeadline { node, inc, rpc } => {
                let n = &mut self.nodes[node.0 as usize];
                if !n.alive || n.inc != inc {
                    return;
                }
                match n.rpcs.remove(&rpc) {
                    Some(RpcOwner::Txn(txn, attempt)) => {
                        let now = self.instant(self.now);
                        if let Some(c) = self.nodes[node.0 as usize].coords.get_mut(&txn) {
                            c.txn.handle_failure(attempt, "call deadline", now);
                        }
                        self.pump(node, txn);
                    }
                    Some(RpcOwner::Recovery(txn, attempt)) => {
                        let now = self.instant(self.now);
                        if let Some(r) = self.nodes[node.0 as usize].recoverers.get_mut(&txn) {
                            r.handle_failure(attempt, "call deadline", now);
                        }
                        self.pump_recovery(node, txn);
                    }
                    Some(RpcOwner::Ship(ship, attempt)) => {
                        let now = self.instant(self.now);
                        if let Some((s, _, _)) = self.nodes[node.0 as usize].shippers.get_mut(&ship) {
                            s.handle_failure(attempt, "call deadline", now);
                        }
                        self.pump_ship(node, ship);
                    }
                    Some(RpcOwner::Rebuild(partition, attempt)) => {
                        let now = self.instant(self.now);
                        if let Some((r, _)) = self.nodes[node.0 as usize].rebuilds.get_mut(&partition) {
                            r.handle_failure(attempt, "call deadline", now);
                        }
                        self.pump_rebuild(node, partition);
                    }
                    Some(RpcOwner::Reclaim(ask)) => self.reclaim_answered(node, ask, None),
                    Some(RpcOwner::Read(client, read, _)) => {
                        if self.clients[client].reading.as_ref().is_some_and(|r| r.id == read) {
                            self.read_failed(client, "call deadline");
                        }
                    }
                    // The round stays unanswered; the watch starts another.
                    Some(RpcOwner::Gap(..)) | None => {}
                }
            }
            Ev::HeldTooLong { node, inc, txn } => {
                let n = &mut self.nodes[node.0 as usize];
                if !n.alive || n.inc != inc {
                    return;
                }
                if let Some((c, call, _, _)) = n.held.remove(&txn) {
                    self.trace(|| format!("{node} held {txn} its phase-1 timeout: sent as No-Wait"));
                    self.start_txn(node, c, txn, call, BTreeMap::new(), Vec::new());
                }
            }
            Ev::TxnTimer { node, inc, txn } => {
                let n = &mut self.nodes[node.0 as usize];
                if !n.alive || n.inc != inc {
                    return;
                }
                let now = self.instant(self.now);
                if let Some(c) = self.nodes[node.0 as usize].coords.get_mut(&txn) {
                    c.txn.handle_timeout(now);
                }
                self.pump(node, txn);
            }
            Ev::RecoveryTimer { node, inc, txn } => {
                let now = self.instant(self.now);
                let n = &mut self.nodes[node.0 as usize];
                if !n.alive || n.inc != inc || n.armed.get(&txn) != Some(&self.now) {
                    return;
                }
                n.armed.remove(&txn);
                if let Some(r) = n.recoverers.get_mut(&txn) {
                    r.handle_timeout(now);
                }
                self.pump_recovery(node, txn);
            }
            Ev::RecoveryScan { node } => {
                self.scan(node);
                self.watch_gap(node);
                self.reclaim(node);
                let every = self.recovery.scan_every.as_micros() as u64;
                self.queue.push(self.now + every, Ev::RecoveryScan { node });
            }
            Ev::Replay { node } => {
                self.replay(node.0 as usize, 1);
                self.queue.push(self.now + REPLAY_EVERY_US, Ev::Replay { node });
            }
            Ev::Client { client } => self.client(client),
            Ev::ReadTimeout { client, read } => {
                if self.clients[client].reading.as_ref().is_some_and(|r| r.id == read) {
                    self.read_failed(client, "timed out");
                }
            }
            Ev::ClientCommit { client, read } => self.commit_read(client, read),
            Ev::Crash { node } => {
                self.fault_starts += 1;
                self.crash(node)
            }
            Ev::Restart { node } => {
                if !self.nodes[node.0 as usize].alive && !self.nodes[node.0 as usize].held_down {
                    self.trace(|| format!("restart {node}"));
                    self.boot(node.0 as usize);
                    self.start_rebuilds(node);
                    self.restart_repairs(node);
                }
            }
            Ev::Partition { a, b } => {
                self.fault_starts += 1;
                if !self.draining {
                    self.trace(|| format!("partition {a} <-> {b}"));
                    let _ = self.net.wan.set_partitioned(a, b, true);
                    let _ = self.net.wan.set_partitioned(b, a, true);
                }
            }
            Ev::Heal { a, b } => {
                self.trace(|| format!("heal {a} <-> {b}"));
                let _ = self.net.wan.set_partitioned(a, b, false);
                let _ = self.net.wan.set_partitioned(b, a, false);
            }
            Ev::KillDc { dc } => {
                self.fault_starts += 1;
                self.kill_dc(dc)
            }
            Ev::KillNode { node } => {
                self.fault_starts += 1;
                self.kill_node(node)
            }
            Ev::PlanRebuild => {
                self.membership_pending -= 1;
                self.plan_rebuild();
            }
            Ev::Promote { partition, node, added_in } => {
                self.membership_pending -= 1;
                match self.membership.apply(&Command::Promote { partition, node, added_in }) {
                    Ok(_) => {
                        self.report.replicas_rebuilt += 1;
                        self.trace(|| format!("{node} becomes a voter of {partition}"));
                        self.commit_placement();
                    }
                    Err(e) => self.trace(|| format!("promotion of {node} for {partition} refused: {e}")),
                }
            }
            Ev::RebuildTimer { node, inc, partition } => {
                let now = self.instant(self.now);
                let n = &mut self.nodes[node.0 as usize];
                if !n.alive || n.inc != inc {
                    return;
                }
                let Some((r, armed)) = n.rebuilds.get_mut(&partition) else { return };
                if *armed != Some(self.now) {
                    return;
                }
                *armed = None;
                r.handle_timeout(now);
                self.pump_rebuild(node, partition);
            }
            Ev::Return { node } => self.come_back(node),
            Ev::Adopt { node, index } => {
                let n = &self.nodes[node.0 as usize];
                let before = n.epochs.current();
                for t in &self.placements[..=index] {
                    n.epochs.adopt(t.clone());
                }
                let epoch = n.epochs.epoch();
                self.trace(|| format!("{node} adopts {epoch}"));
                self.start_rebuilds(node);
                self.start_repairs(node, &before);
            }
            Ev::ShipTimer { node, inc, ship } => {
                let now = self.instant(self.now);
                let n = &mut self.nodes[node.0 as usize];
                if !n.alive || n.inc != inc {
                    return;
                }
                let Some((s, _, armed)) = n.shippers.get_mut(&ship) else { return };
                if *armed != Some(self.now) {
                    return;
                }
                *armed = None;
                s.handle_timeout(now);
                self.pump_ship(node, ship);
            }
            Ev::Burst { on } => {
                if on {
                    self.fault_starts += 1;
                    self.bursts += 1;
                } else {
                    self.bursts -= 1;
                }
                if !self.draining {
                    self.net.faults = if self.bursts > 0 { self.message_faults } else { MessageFaults::default() };
                }
            }
            Ev::Drain => {
                self.trace(|| "drain: faults off, partitions healed, crashed nodes restart".into());
                self.draining = true;
                self.net.faults = MessageFaults::default();
                let dcs = self.topology.dcs.len() as u16;
                for a in 0..dcs {
                    for b in 0..dcs {
                        let _ = self.net.wan.set_partitioned(DcId(a), DcId(b), false);
                    }
                }
                for i in 0..self.nodes.len() {
                    if !self.nodes[i].alive {
                        if self.nodes[i].held_down {
                            self.come_back(NodeId(i as u16));
                        } else {
                            self.boot(i);
                            self.start_rebuilds(NodeId(i as u16));
                            self.restart_repairs(NodeId(i as u16));
                        }
                    }
                }
            }
        }
    }

    /// Kills `node`, then removes it from the placement (its DC stays up): a new epoch each
    /// other node adopts between 0.5 and 1.5 s later, as for a DC ([`World::kill_dc`]). It
    /// comes back 2 to 4 s after the kill (or at the drain), holding no replica, and is
    /// restored.
    fn kill_node(&mut self, node: NodeId) {
        if self.draining || self.nodes[node.0 as usize].held_down {
            return;
        }
        self.trace(|| format!("kill {node}; it is removed from the placement"));
        self.crash(node);
        self.nodes[node.0 as usize].held_down = true;
        let back = self.now + self.rng.gen_range(2_000_000..4_000_000);
        self.queue.push(back, Ev::Return { node });
        if self.cfg.failover == FailoverMode::Policy {
            // The detectors and the leader's policy find it.
            return;
        }
        if let Err(e) = self.membership.apply(&Command::RemoveNode(node)) {
            self.trace(|| format!("removing {node} refused: {e}"));
            self.report.removals_refused += 1;
            return;
        }
        self.placements.push(placement_of(&self.topology, &self.membership));
        let index = self.placements.len() - 1;
        self.report.nodes_removed += 1;
        for n in 0..self.nodes.len() {
            if n != node.0 as usize {
                let at = self.now + self.rng.gen_range(500_000..1_500_000);
                self.queue.push(at, Ev::Adopt { node: NodeId(n as u16), index });
            }
        }
        let at = self.now + self.rng.gen_range(1_500_000..2_500_000);
        self.membership_pending += 1;
        self.queue.push(at, Ev::PlanRebuild);
    }

    /// Kills every node of `dc`, then removes `dc` from the placement: a new epoch each
    /// surviving node adopts between 0.5 and 1.5 s later (detection, the membership's Raft
    /// commit, and its apply on that node). The DC's nodes come back 2 to 4 s after the kill
    /// (or at the drain), holding no replica.
    fn kill_dc(&mut self, dc: DcId) {
        if self.draining {
            return;
        }
        self.trace(|| format!("kill {dc}; it is removed from the placement"));
        let members: Vec<NodeId> = self.topology.dcs[dc.0 as usize].nodes.clone();
        for &node in &members {
            self.crash(node);
            let n = &mut self.nodes[node.0 as usize];
            n.held_down = true;
            let back = self.now + self.rng.gen_range(2_000_000..4_000_000);
            self.queue.push(back, Ev::Return { node });
        }
        if self.cfg.failover == FailoverMode::Policy {
            // The detectors and the leader's policy find it.
            return;
        }
        if let Err(e) = self.membership.apply(&Command::RemoveDc(dc)) {
            self.trace(|| format!("removing {dc} refused: {e}"));
            self.report.removals_refused += 1;
            return;
        }
        self.placements.push(placement_of(&self.topology, &self.membership));
        let index = self.placements.len() - 1;
        self.report.dcs_removed += 1;
        for n in 0..self.nodes.len() {
            if !members.contains(&NodeId(n as u16)) {
                let at = self.now + self.rng.gen_range(500_000..1_500_000);
                self.queue.push(at, Ev::Adopt { node: NodeId(n as u16), index });
            }
        }
        // Rebuild into the DCs left without a replica, once the removal is applied.
        let at = self.now + self.rng.gen_range(1_500_000..2_500_000);
        self.membership_pending += 1;
        self.queue.push(at, Ev::PlanRebuild);
    }

    /// Pushes the membership's placement as a new one, adopted by every node 0.1 to 0.5 s
    /// later (the Raft commit and its apply there).
    fn commit_placement(&mut self) {
        self.placements.push(placement_of(&self.topology, &self.membership));
        let index = self.placements.len() - 1;
        for n in 0..self.nodes.len() {
            let at = self.now + self.rng.gen_range(100_000..500_000);
            self.queue.push(at, Ev::Adopt { node: NodeId(n as u16), index });
        }
    }

    /// The membership adds a learner for every replica missing from a partition
    /// (`Membership::plan_rebuild`), in one new epoch each (every node applies each).
    fn plan_rebuild(&mut self) {
        for shortfall in self.membership.plan_rebuild() {
            for command in shortfall.proposals {
                if self.membership.apply(&command).is_ok() {
                    self.trace(|| format!("membership: {command:?}"));
                    self.commit_placement();
                }
            }
        }
    }

    /// Starts a snapshot copy for every partition `node` is a learner of in its current
    /// placement and is not copying yet.
    fn start_rebuilds(&mut self, node: NodeId) {
        let i = node.0 as usize;
        if !self.nodes[i].alive {
            return;
        }
        let current = self.nodes[i].epochs.current();
        let now = self.instant(self.now);
        let mut started = Vec::new();
        for p in &current.partitions {
            let voters = &p.replicas;
            let n = &mut self.nodes[i];
            if let Some((r, _)) = n.rebuilds.get_mut(&p.id) {
                // A voter removed since the copy began is no longer copied from.
                for s in r.sources() {
                    if !voters.contains(&s) {
                        r.drop_source(s);
                    }
                }
                continue;
            }
            let Some(added_in) = p.learner(node).map(|l| l.added_in) else { continue };
            if n.filled.contains(&(p.id, added_in)) {
                continue;
            }
            let Some(at) = n.epochs.get(added_in) else { continue };
            let from = at.partitions[p.id.0 as usize].replicas.clone();
            if let Some(core) = n.core.as_mut() {
                core.begin_refresh(p.id);
            }
            n.rebuilds.insert(p.id, (Rebuild::start(p.id, added_in, &from, sim_copy_options(), now), None));
            started.push(p.id);
        }
        for p in started {
            self.report.rebuilds_started += 1;
            self.trace(|| format!("{node} starts rebuilding {p}"));
            self.pump_rebuild(node, p);
        }
    }

    /// Starts the voter repairs `node` owes after its placement moved on from `before`
    /// (`redt_protocol::epochs::repairs`): the same snapshot copy as a learner's, from every
    /// other voter, at the node's current epoch, with no promotion at the end.
    fn start_repairs(&mut self, node: NodeId, before: &Topology) {
        let i = node.0 as usize;
        if !self.nodes[i].alive {
            return;
        }
        #[cfg(feature = "mutants")]
        if self.cfg.no_voter_repair {
            return;
        }
        let current = self.nodes[i].epochs.current();
        let now = self.instant(self.now);
        let mut started = Vec::new();
        for (p, from) in redt_protocol::epochs::repairs(before, &current, node) {
            let n = &mut self.nodes[i];
            if n.rebuilds.contains_key(&p) || from.is_empty() {
                continue;
            }
            n.rebuilds.insert(p, (Rebuild::start_repair(p, current.epoch, &from, sim_copy_options(), now), None));
            n.repairing.insert(p);
            started.push(p);
        }
        for p in started {
            self.trace(|| format!("{node} repairs {p} from the other voters"));
            self.pump_rebuild(node, p);
        }
    }

    /// A restarted node repairs again every partition that lost a voter since the topology
    /// file's placement, as a real node does (it compares the first placement it adopts with
    /// its file's): its memory of the repairs it made, or had under way, is gone.
    fn restart_repairs(&mut self, node: NodeId) {
        let file = self.placements[0].clone();
        self.start_repairs(node, &file);
    }

    fn pump_rebuild(&mut self, node: NodeId, partition: PartitionId) {
        let i = node.0 as usize;
        loop {
            let now = self.instant(self.now);
            let n = &mut self.nodes[i];
            let Some((r, _)) = n.rebuilds.get_mut(&partition) else { return };
            let Some(action) = r.poll_action() else { break };
            match action {
                RebuildAction::Send { attempt, to, request } => {
                    self.call(node, to, RpcOwner::Rebuild(partition, attempt), request)
                }
                RebuildAction::Apply { source, records, horizon } => {
                    let applied = match n.core.as_mut() {
                        Some(core) => core.apply_snapshot(&records, horizon).map_err(|e| e.to_string()),
                        None => Err("node down".into()),
                    };
                    if let Ok(k) = applied {
                        self.report.rebuild_records += k as u64;
                    }
                    r.applied(source, applied, now);
                }
                RebuildAction::Purge { from_bucket } => {
                    let purged = match n.core.as_mut() {
                        Some(core) => match core.purge_unrefreshed(partition, from_bucket) {
                            Ok(step) => step,
                            Err(e) => Err(e.to_string()),
                        },
                        None => Err("node down".into()),
                    };
                    if let Ok(step) = &purged {
                        self.report.rebuild_rows_purged += step.rows;
                    }
                    let shown = format!("{purged:?}");
                    r.purged(purged, now);
                    self.trace(|| format!("{node} purges {partition} from bucket {from_bucket}: {shown}"));
                }
            }
        }
        let n = &mut self.nodes[i];
        let Some((r, armed)) = n.rebuilds.get_mut(&partition) else { return };
        if r.is_done() && n.repairing.remove(&partition) {
            n.rebuilds.remove(&partition);
            self.report.voter_repairs += 1;
            self.trace(|| format!("{node} repaired {partition}"));
            return;
        }
        if r.is_done() {
            let added_in = r.epoch();
            n.rebuilds.remove(&partition);
            n.filled.insert((partition, added_in));
            if self.cfg.failover == FailoverMode::Policy {
                // The leader's next probe of it finds the copy filled.
                self.trace(|| format!("{node} filled {partition}"));
                return;
            }
            self.trace(|| format!("{node} filled {partition}: proposes its promotion"));
            let at = self.now + self.rng.gen_range(100_000..300_000);
            self.membership_pending += 1;
            self.queue.push(at, Ev::Promote { partition, node, added_in });
            return;
        }
        let Some(t) = r.poll_timeout() else { return };
        let armed_at = *armed;
        let at = (self.micros(t) + u64::from(self.instant(self.micros(t)) < t)).max(self.now);
        if armed_at.is_none_or(|a| at < a) {
            let n = &mut self.nodes[i];
            if let Some((_, armed)) = n.rebuilds.get_mut(&partition) {
                *armed = Some(at);
            }
            let inc = n.inc;
            self.queue.push(at, Ev::RebuildTimer { node, inc, partition });
        }
    }

    /// A removed node (alone or with its DC) starts again on its MemStore, and learns the current placement
    /// from the membership's Raft log 0.1 to 0.5 s later: until then it plans in the epoch it
    /// died in (the survivors' epoch fence turns those transactions away), and its old
    /// entries are dropped, not recovered (`ExecutorCore::discard_if_removed`).
    fn come_back(&mut self, node: NodeId) {
        let i = node.0 as usize;
        if !self.nodes[i].held_down {
            return;
        }
        self.nodes[i].held_down = false;
        if self.nodes[i].alive {
            return;
        }
        let placed = self.placements.last().is_some_and(|t| t.partitions.iter().any(|p| p.holds(node)));
        self.trace(|| format!("{node} comes back ({})", if placed { "still placed" } else { "removed" }));
        self.boot(i);
        // Its removal refused (too few voters would have been left), it is a voter still and
        // restarts as a crashed node does, repairing what lost a voter while it was down.
        if placed {
            self.restart_repairs(node);
        }
        let index = self.placements.len() - 1;
        let at = self.now + self.rng.gen_range(100_000..500_000);
        self.queue.push(at, Ev::Adopt { node, index });
        if self.cfg.failover == FailoverMode::Policy {
            // The leader's probes find it back and restore it.
            return;
        }
        // Its whole DC back: the membership restores it, and rebuilds replicas there.
        let dc = self.nodes[i].dc;
        let whole = self.topology.dcs[dc.0 as usize].nodes.iter().all(|n| !self.nodes[n.0 as usize].held_down);
        let restored_dc = whole && self.membership.apply(&Command::RestoreDc(dc)).is_ok();
        if restored_dc {
            self.trace(|| format!("membership: {dc} restored"));
        }
        // A node removed on its own: restored too.
        let restored_node = self.membership.apply(&Command::RestoreNode(node)).is_ok();
        if restored_node {
            self.trace(|| format!("membership: {node} restored"));
        }
        if restored_dc || restored_node {
            self.membership_pending += 1;
            let at = self.now + self.rng.gen_range(200_000..600_000);
            self.queue.push(at, Ev::PlanRebuild);
        }
    }

    fn crash(&mut self, node: NodeId) {
        if self.draining || !self.nodes[node.0 as usize].alive {
            return;
        }
        self.trace(|| format!("crash {node}"));
        self.report.crashes += 1;
        self.crash_log.push((node, self.now));
        self.note_down(node.0 as usize);
        let n = &mut self.nodes[node.0 as usize];
        n.alive = false;
        n.inc += 1;
        if let Some(core) = n.core.take() {
            self.report.deleted_records_freed += core.deleted_records().0;
        }
        n.rpcs.clear();
        n.shippers.clear();
        n.shipped_keys.clear();
        n.rebuilds.clear();
        n.reclaim = None;
        n.repairing.clear();
        n.filled.clear();
        n.recoverers.clear();
        n.armed.clear();
        let coords = std::mem::take(&mut n.coords);
        let held = std::mem::take(&mut n.held);
        n.waited.clear();
        n.takeover = Takeover::new();
        n.phase2_told.clear();
        // Their clients see the connection drop: outcome unknown.
        for (_, c) in coords {
            for client in c.client.into_iter().chain(c.members.iter().map(|m| m.0)) {
                self.complete(client, Outcome::Unknown, Vec::new(), false, None);
            }
        }
        // Held back, they sent nothing: certainly not committed.
        for (_, (client, _, _, _)) in held {
            self.complete(client, Outcome::Aborted, Vec::new(), false, None);
        }
        // Reading, they committed nothing yet: they start over.
        let reading: Vec<usize> = (0..self.clients.len())
            .filter(|&c| self.clients[c].node == node && self.clients[c].reading.is_some())
            .collect();
        for c in reading {
            self.read_failed(c, "its node crashed");
        }
        let back = self.now + self.rng.gen_range(200_000..2_000_000);
        self.queue.push(back, Ev::Restart { node });
    }

    fn client(&mut self, c: usize) {
        if self.draining || self.clients[c].busy.is_some() || self.clients[c].reading.is_some() {
            return;
        }
        let node = self.clients[c].node;
        if !self.nodes[node.0 as usize].alive {
            self.queue.push(self.now + 50_000, Ev::Client { client: c });
            return;
        }
        if self.cfg.workload == Workload::Interactive {
            self.start_read(c);
            return;
        }
        // A retry runs the same call again; else a new transaction is drawn.
        let (draw, attempts) = match self.clients[c].current.take() {
            Some((d, attempts)) => {
                self.report.retries += 1;
                (self.gen.again(&d), attempts + 1)
            }
            None => {
                self.report.transactions += 1;
                (self.gen.draw(&mut self.rng), 1)
            }
        };
        self.begin_txn(c, node, (draw, attempts), self.now, None);
    }

    /// Starts client `c`'s attempt `attempt` of `draw` at `node`: a transaction id issued
    /// there, the history's record of it (invoked at `invoke_us`; `pre_reads`: what an
    /// interactive transaction's versioned read returned), and its admission.
    fn begin_txn(
        &mut self,
        c: usize,
        node: NodeId,
        (draw, attempt): (workload::Draw, u32),
        invoke_us: u64,
        pre_reads: Option<Vec<Option<Vec<u8>>>>,
    ) {
        self.clients[c].current = Some((draw.clone(), attempt));
        let n = &mut self.nodes[node.0 as usize];
        let dc = self.dcs[n.dc.0 as usize].clone();
        let ids = n.ids.as_mut().expect("a live node was booted");
        let txn = ids.issue(&dc).expect("the in-process MemStore has incarnations left");
        let h = self.hist.len();
        self.hist.push(Hist {
            process: self.clients[c].process,
            txn,
            call: draw.call.clone(),
            ran: None,
            invoke_us,
            complete_us: None,
            outcome: Outcome::Unknown,
            ops: workload::unfilled(&draw.steps),
            steps: draw.steps,
            reads: Vec::new(),
            epoch: self.nodes[node.0 as usize].epochs.epoch(),
            calm_since: self.calm().then_some(self.fault_starts),
            pre_reads,
        });
        self.clients[c].busy = Some(h);
        self.admit(node, c, txn, draw.call, true);
    }

    /// Starts client `c`'s interactive transaction: a versioned read of the keys it draws
    /// (`workload::Generator::interactive_reads`), as its node serves one
    /// (`redt_protocol::versioned_read`): the keys its DC holds read now from the DC's
    /// replicas without locks, the others forwarded to a replica of the nearest DC holding
    /// them, one request per node, over the simulated network.
    fn start_read(&mut self, c: usize) {
        let node = self.clients[c].node;
        let i = node.0 as usize;
        self.report.transactions += 1;
        let keys = self.gen.interactive_reads(&mut self.rng);
        self.next_read += 1;
        let id = self.next_read;
        let topology = self.nodes[i].epochs.current();
        let table = self.gen.kv;
        let route = redt_protocol::versioned_read::route(&topology, self.nodes[i].dc, table, &keys);
        let mut reading =
            Reading { id, keys: keys.clone(), started_us: self.now, got: vec![None; keys.len()], waiting: 0 };
        if !route.local.is_empty() {
            let local: Vec<u64> = route.local.iter().map(|&k| keys[k]).collect();
            let Some(core) = self.nodes[i].core.as_ref() else {
                self.queue.push(self.now + 50_000, Ev::Client { client: c });
                return;
            };
            match core.versioned_read(u32::from(table.0), &local) {
                Ok(items) => {
                    for (&k, item) in route.local.iter().zip(items) {
                        reading.got[k] = Some((item.version, item.value));
                    }
                }
                Err(e) => {
                    self.trace(|| format!("client {c}: versioned read at {node} refused: {e}"));
                    self.clients[c].reading = Some(reading);
                    self.read_failed(c, "refused");
                    return;
                }
            }
        }
        reading.waiting = route.remote.len();
        self.trace(|| format!("client {c} reads {keys:?} at {node} ({} forwarded)", reading.waiting));
        self.clients[c].reading = Some(reading);
        for (to, idx) in route.remote {
            let sub: Vec<u64> = idx.iter().map(|&k| keys[k]).collect();
            let request = Request::VersionedRead { table: u32::from(table.0), keys: sub };
            self.call(node, to, RpcOwner::Read(c, id, idx), request);
        }
        let timeout = self.cfg.options.phase1_timeout.as_micros() as u64;
        self.queue.push(self.now + timeout, Ev::ReadTimeout { client: c, read: id });
        self.read_progress(c);
    }

    /// A forwarded part of client `c`'s versioned read `read` answered `reply` (the keys at
    /// `idx` of the read).
    fn read_answered(&mut self, c: usize, read: u64, idx: Vec<usize>, reply: Reply) {
        let Some(r) = self.clients[c].reading.as_mut().filter(|r| r.id == read) else { return };
        match reply {
            Reply::VersionedValues(items)
                if items.len() == idx.len() && idx.iter().zip(&items).all(|(&k, it)| r.keys[k] == it.key) =>
            {
                for (k, item) in idx.into_iter().zip(items) {
                    r.got[k] = Some((item.version, item.value));
                }
                r.waiting -= 1;
                self.read_progress(c);
            }
            other => {
                self.trace(|| format!("client {c}: a forwarded versioned read answered {other:?}"));
                self.read_failed(c, "a forwarded read failed");
            }
        }
    }

    /// Once every part of client `c`'s versioned read is in, it thinks, then commits.
    fn read_progress(&mut self, c: usize) {
        let Some(r) = self.clients[c].reading.as_ref() else { return };
        if r.waiting > 0 {
            return;
        }
        let read = r.id;
        let think = self.rng.gen_range(0..=workload::INTERACTIVE_THINK_US);
        self.queue.push(self.now + think, Ev::ClientCommit { client: c, read });
    }

    /// Client `c`'s versioned read failed (`why`): nothing was committed, it starts over
    /// after a pause, with a new transaction.
    fn read_failed(&mut self, c: usize, why: &str) {
        if self.clients[c].reading.take().is_none() {
            return;
        }
        self.report.reads_failed += 1;
        self.report.transactions_given_up += 1;
        self.trace(|| format!("client {c}: versioned read failed: {why}"));
        let pause = self.rng.gen_range(0..self.backoff_us.max(2_000));
        self.queue.push(self.now + pause, Ev::Client { client: c });
    }

    /// Client `c` commits what it decided on its versioned read `read`: CHECKs of every key
    /// read at its version and the appends that depend on them
    /// (`workload::Generator::interactive_commit`), invoked (for the history) when the read
    /// started.
    fn commit_read(&mut self, c: usize, read: u64) {
        if self.clients[c].reading.as_ref().is_none_or(|r| r.id != read) {
            return;
        }
        let node = self.clients[c].node;
        if self.draining || !self.nodes[node.0 as usize].alive {
            self.read_failed(c, "draining, or its node is down");
            return;
        }
        let Some(r) = self.clients[c].reading.take() else { return };
        self.report.reads_versioned += 1;
        let width = self.topology.table(self.gen.kv).map_or(0, |t| t.cells[0].bytes as usize);
        let items: Vec<workload::ReadItem> = r
            .keys
            .iter()
            .zip(r.got)
            .map(|(&k, got)| {
                let (version, mut value) = got.unwrap_or_default();
                if !value.is_empty() {
                    value.resize(width.max(value.len()), 0);
                }
                (k, version, value)
            })
            .collect();
        let (draw, pre_reads) = self.gen.interactive_commit(&mut self.rng, &items);
        self.begin_txn(c, node, (draw, 1), r.started_us, Some(pre_reads));
    }

    /// Starts client `c`'s transaction `txn` on `node`, or, under decided-holder takeover,
    /// holds it back while one of the node's own undecided transactions conflicts with it.
    /// With batches (`may_batch`, and the options' `batch`), the transaction that goes takes
    /// along the held ones a batch may take, as the node's gate does.
    fn admit(&mut self, node: NodeId, c: usize, txn: TxnId, call: ProcedureCall, may_batch: bool) {
        let i = node.0 as usize;
        let mut carried = BTreeMap::new();
        let mut members = Vec::new();
        if self.cfg.options.takeover {
            let current = self.nodes[i].epochs.current();
            if let Ok(p) = redt_protocol::call::procedure(&current, &call) {
                let footprint = Footprint::of(p.as_ref());
                let batch = self.cfg.options.batch.min(redt_dc_executor::MAX_BATCH_MEMBERS);
                let may_batch = may_batch && batch >= 2 && redt_protocol::call::batchable(&call);
                let n = &mut self.nodes[i];
                let held: Vec<(TxnId, &Footprint)> =
                    n.held.iter().filter(|(_, h)| h.2).map(|(&t, h)| (t, &h.3)).collect();
                let fps: Vec<&Footprint> = held.iter().map(|(_, f)| *f).collect();
                let max = if may_batch { batch } else { 0 };
                let (admission, picked) = n.takeover.admit_batch(txn, footprint.clone(), &fps, max);
                let joining: Vec<TxnId> = picked.into_iter().map(|k| held[k].0).collect();
                match admission {
                    Admission::Go { carried: c, .. } => {
                        carried = c;
                        for t in joining {
                            let (client, call, _, _) = self.nodes[i].held.remove(&t).expect("picked from the held");
                            self.nodes[i].waited.remove(&t);
                            members.push((client, t, call));
                        }
                    }
                    Admission::Wait { behind } => {
                        self.trace(|| format!("{node} holds {txn} behind {behind}"));
                        let first = self.nodes[i].held.insert(txn, (c, call, may_batch, footprint)).is_none();
                        if first && !self.nodes[i].waited.contains(&txn) {
                            self.nodes[i].waited.insert(txn);
                            let (inc, after) = (self.nodes[i].inc, self.cfg.options.phase1_timeout);
                            self.queue.push(self.now + after.as_micros() as u64, Ev::HeldTooLong { node, inc, txn });
                        }
                        return;
                    }
                }
            }
        }
        self.start_txn(node, c, txn, call, carried, members);
    }

    /// Starts client `c`'s transaction `txn` on `node` now, its phase 1 to each DC carrying
    /// `carried`'s phase 2s; with `members` (their clients, ids and calls), as a batch led by
    /// it.
    fn start_txn(
        &mut self,
        node: NodeId,
        c: usize,
        txn: TxnId,
        call: ProcedureCall,
        carried: BTreeMap<DcId, Vec<redt_protocol::message::Decide>>,
        members: Vec<(usize, TxnId, ProcedureCall)>,
    ) {
        let i = node.0 as usize;
        self.nodes[i].waited.remove(&txn);
        let now = self.instant(self.now);
        let wall = self.wall_ms(node);
        let Some(start) = self.nodes[i].core.as_ref().map(|c| c.hlc().tick(wall)) else { return };
        let epochs = self.nodes[i].epochs.clone();
        let ran = if members.is_empty() {
            call
        } else {
            self.trace(|| format!("{node} batches {:?} after {txn}", members.iter().map(|m| m.1).collect::<Vec<_>>()));
            self.report.batched += members.len() as u64;
            let calls = std::iter::once(call).chain(members.iter().map(|m| m.2.clone())).collect();
            redt_protocol::batch::call(calls)
        };
        let started = CoordinatorTxn::start(
            epochs.current(),
            node,
            txn,
            ran.clone(),
            0,
            self.cfg.options.clone(),
            start,
            now,
            carried,
        );
        let Some(h) = self.clients[c].busy else { return };
        // Planned now, in the current epoch (a held transaction may start epochs later).
        for client in std::iter::once(c).chain(members.iter().map(|m| m.0)) {
            if let Some(h) = self.clients[client].busy {
                self.hist[h].epoch = epochs.epoch();
            }
        }
        self.hist[h].ran = (!members.is_empty()).then(|| ran.clone());
        match started.map(|t| t.with_placement(epochs)) {
            Ok(t) => {
                self.trace(|| format!("{node} starts {txn}"));
                let participants = t_participants(&self.topology, &ran);
                self.started.insert(txn, (self.now, participants));
                self.nodes[i].coords.insert(txn, Coord { txn: t, client: Some(c), answered_cost: None, members });
                self.pump(node, txn);
            }
            Err(e) => {
                self.nodes[i].takeover.finished(txn);
                self.trace(|| format!("{node} cannot start {txn}: {e}"));
                if members.is_empty() {
                    self.complete(c, Outcome::Aborted, Vec::new(), true, None);
                } else {
                    self.run_alone(node, c, txn, members);
                }
            }
        }
    }

    /// A batch led by client `c`'s `txn` will not commit as one (a member's own abort, or it
    /// could not be built): every call runs alone, the leader's under a fresh id.
    fn run_alone(&mut self, node: NodeId, c: usize, txn: TxnId, members: Vec<(usize, TxnId, ProcedureCall)>) {
        self.trace(|| format!("{node}: the batch of {txn} runs alone"));
        let i = node.0 as usize;
        let fresh = {
            let n = &mut self.nodes[i];
            let dc = self.dcs[n.dc.0 as usize].clone();
            n.ids.as_mut().and_then(|ids| ids.issue(&dc).ok())
        };
        if let (Some(h), Some(fresh)) = (self.clients[c].busy, fresh) {
            self.hist[h].txn = fresh;
            self.hist[h].ran = None;
            let call = self.hist[h].call.clone();
            self.admit(node, c, fresh, call, false);
        }
        for (client, t, call) in members {
            self.admit(node, client, t, call, false);
        }
    }

    /// Admits again the transactions `node` held back behind one now decided or finished.
    fn readmit(&mut self, node: NodeId, woken: Vec<TxnId>) {
        for w in woken {
            if let Some((c, call, may_batch, _)) = self.nodes[node.0 as usize].held.remove(&w) {
                self.admit(node, c, w, call, may_batch);
            }
        }
    }

    /// Ends client `c`'s attempt with `outcome` (an abort's `cause`, if its coordinator gave
    /// one) and schedules its next attempt: the same call again after a retryable abort
    /// ([`RetryPolicy`]), else a new transaction.
    fn complete(
        &mut self,
        c: usize,
        outcome: Outcome,
        reads: Vec<Option<Vec<u8>>>,
        returned: bool,
        cause: Option<AbortCause>,
    ) {
        let Some(h) = self.clients[c].busy.take() else { return };
        let e = &mut self.hist[h];
        e.outcome = outcome;
        e.complete_us = returned.then_some(self.now);
        // An interactive transaction read with its versioned read, not in its commit.
        let reads = match (&e.pre_reads, outcome) {
            (Some(pre), Outcome::Committed) => pre.clone(),
            _ => reads,
        };
        if outcome == Outcome::Committed {
            e.ops = workload::fill_steps(&e.steps, &reads);
        }
        e.reads = reads;
        if e.calm_since.is_some() && e.calm_since == Some(self.fault_starts) && self.calm() {
            self.report.calm_attempts += 1;
            self.report.calm_committed += u64::from(outcome == Outcome::Committed);
        }
        match outcome {
            Outcome::Committed => self.report.committed += 1,
            Outcome::Aborted => self.report.aborted += 1,
            Outcome::Unknown => {
                self.report.unknown += 1;
                // Jepsen's convention: after an unknown outcome the client continues as a new
                // process.
                self.clients[c].process += 1_000_000;
            }
        }
        let attempts = self.clients[c].current.as_ref().map_or(1, |(_, a)| *a);
        let retry = outcome == Outcome::Aborted && self.retries.retries_after(attempts, cause);
        match outcome {
            Outcome::Committed => self.report.transactions_committed += 1,
            Outcome::Aborted if retry => {}
            Outcome::Aborted => self.report.transactions_given_up += 1,
            Outcome::Unknown => self.report.transactions_unknown += 1,
        }
        if !retry {
            self.clients[c].current = None;
        }
        // Think time after a commit; after an abort, the retry policy's pause, so that clients
        // do not abort each other in lock step; after a transaction given up or unknown, a
        // randomized pause of up to two of the topology's largest RTT.
        let pause = match outcome {
            Outcome::Committed => self.rng.gen_range(0..2_000),
            _ if retry => client::delay_us(&self.retries, attempts, &mut self.rng),
            _ => self.rng.gen_range(0..self.backoff_us.max(2_000)),
        };
        self.queue.push(self.now + pause, Ev::Client { client: c });
    }

    /// Whether no fault is under way: every node up, no DC cut off from another, no burst of
    /// message faults.
    fn calm(&self) -> bool {
        let dcs = self.topology.dcs.len() as u16;
        self.bursts == 0
            && self.nodes.iter().all(|n| n.alive)
            && (0..dcs).all(|a| (0..dcs).all(|b| !self.net.wan.is_partitioned(DcId(a), DcId(b))))
    }

    /// Carries out the actions of `node`'s transaction `txn` and re-arms its timer.
    fn pump(&mut self, node: NodeId, txn: TxnId) {
        loop {
            let Some(c) = self.nodes[node.0 as usize].coords.get_mut(&txn) else { return };
            let Some(action) = c.txn.poll_action() else { break };
            match action {
                Action::Send { attempt, to, request } => {
                    self.trace(|| format!("{node} -> {to}: {} {txn}", kind(&request)));
                    self.call(node, to, RpcOwner::Txn(txn, attempt), request);
                }
                Action::Answer { answer, class, cost, .. } => {
                    let client = c.client;
                    let members = std::mem::take(&mut c.members);
                    if !members.is_empty() && redt_protocol::batch::runs_alone(&answer) {
                        if let Some(client) = client {
                            self.run_alone(node, client, txn, members);
                        }
                        continue;
                    }
                    if let Some(cost) = cost {
                        c.answered_cost = Some((cost.inter_dc_messages, cost.round_trips));
                    }
                    self.trace(|| format!("{node} answers {txn}: {:?}", answer.status));
                    let (o, reads) = match answer.status {
                        TxnStatus::Committed => (Outcome::Committed, answer.reads),
                        TxnStatus::Aborted(_) => {
                            self.check_abort_recorded(txn);
                            if let (Some(cause), Some(_)) = (answer.cause, client) {
                                self.report.abort_causes[cause.index()] += 1;
                            }
                            (Outcome::Aborted, Vec::new())
                        }
                        TxnStatus::Unknown(_) => (Outcome::Unknown, Vec::new()),
                    };
                    if o == Outcome::Committed && class.read_write && class.inter_dc {
                        if let Some((m, r)) = cost.map(|c| (c.inter_dc_messages, c.round_trips)) {
                            self.report.rw_inter_commits += 1;
                            self.report.rw_inter_messages += m;
                            self.report.rw_inter_round_trips += r;
                        }
                    }
                    if members.is_empty() {
                        if let Some(client) = client {
                            self.complete(client, o, reads, true, answer.cause);
                        }
                        continue;
                    }
                    let calls: Vec<ProcedureCall> = client
                        .and_then(|c| self.clients[c].busy)
                        .map(|h| self.hist[h].call.clone())
                        .into_iter()
                        .chain(members.iter().map(|m| m.2.clone()))
                        .collect();
                    let mut split = redt_protocol::batch::split_reads(&calls, reads).into_iter();
                    for c in client.into_iter().chain(members.iter().map(|m| m.0)) {
                        self.complete(c, o, split.next().unwrap_or_default(), true, answer.cause);
                    }
                }
                Action::Finished { class, after_answer } => {
                    if let (Some(c), true) = (after_answer, class.read_write && class.inter_dc) {
                        self.report.rw_inter_messages += c.messages;
                        self.report.rw_inter_round_trips += c.round_trips;
                    }
                }
                // A coordinator never yields it (a baseline primary's reply).
                Action::Reply { .. } => {}
            }
        }
        let n = &mut self.nodes[node.0 as usize];
        let Some(c) = n.coords.get(&txn) else { return };
        if self.cfg.options.takeover && !n.phase2_told.contains(&txn) {
            if let Some(phase2) = c.txn.decided_phase2() {
                n.phase2_told.insert(txn);
                let woken = n.takeover.decided(txn, phase2);
                self.readmit(node, woken);
            }
        }
        let n = &mut self.nodes[node.0 as usize];
        let Some(c) = n.coords.get(&txn) else { return };
        if c.txn.is_done() {
            n.coords.remove(&txn);
            n.phase2_told.remove(&txn);
            let woken = n.takeover.finished(txn);
            self.readmit(node, woken);
            return;
        }
        if let Some(t) = c.txn.poll_timeout() {
            let inc = n.inc;
            let at = self.micros(t).max(self.now);
            self.queue.push(at, Ev::TxnTimer { node, inc, txn });
        }
    }

    /// The recovery scan of `node` (docs/design.md §2, recovery): every undecided phase-1 entry of
    /// its ring whose transaction is old enough (the coordinator's DC first, the others
    /// later), and that no coordinator or recoverer of this node is working on, gets a
    /// recoverer.
    /// Starts a round of freeing `node`'s deleted records whose grace has passed
    /// (`ExecutorCore::take_reclaims`), unless one is under way: every recovery scan.
    fn reclaim(&mut self, node: NodeId) {
        let i = node.0 as usize;
        let now_ms = self.wall_ms(node);
        let n = &mut self.nodes[i];
        if !n.alive || n.reclaim.is_some() {
            return;
        }
        let Some(round) = n.core.as_mut().and_then(|c| c.take_reclaims(now_ms)) else { return };
        let asks: Vec<(NodeId, Request)> = round.asks.clone();
        self.nodes[i].reclaim = Some((round, vec![None; asks.len()], asks.len()));
        for (k, (to, request)) in asks.into_iter().enumerate() {
            self.call(node, to, RpcOwner::Reclaim(k), request);
        }
    }

    /// Ask `ask` of `node`'s reclaim round was answered (`None`: it failed); the round ends
    /// once every ask was.
    fn reclaim_answered(&mut self, node: NodeId, ask: usize, answer: Option<ReclaimAnswer>) {
        let i = node.0 as usize;
        let now_ms = self.wall_ms(node);
        let n = &mut self.nodes[i];
        let Some((_, answers, pending)) = n.reclaim.as_mut() else { return };
        if let Some(slot) = answers.get_mut(ask) {
            *slot = answer;
            *pending -= 1;
        }
        if *pending > 0 {
            return;
        }
        let Some((round, answers, _)) = n.reclaim.take() else { return };
        if let Some(core) = n.core.as_mut() {
            core.finish_reclaims(round, &answers, now_ms);
        }
    }

    fn scan(&mut self, node: NodeId) {
        let i = node.0 as usize;
        if !self.nodes[i].alive {
            return;
        }
        let layout = self.layout();
        let dc = self.nodes[i].dc;
        let Ok(found) = ring_scan(self.dcs[dc.0 as usize].verbs.as_ref(), node, &layout) else { return };
        let wall = self.wall_ms(node);
        for (_, e) in found.unfinished {
            let Some(orphan) = Orphan::of(&e) else { continue };
            // A node removed from the placement drops its old-epoch entries.
            if let Some(core) = self.nodes[i].core.as_mut() {
                if core.discard_if_removed(&e).unwrap_or(false) {
                    let txn = orphan.txn;
                    self.trace(|| format!("{node} drops {txn}: removed from the placement"));
                    continue;
                }
            }
            let n = &self.nodes[i];
            if n.coords.contains_key(&orphan.txn) || n.recoverers.contains_key(&orphan.txn) {
                continue;
            }
            if !orphan.due(&self.topology, dc, self.cfg.options.phase1_timeout, &self.recovery, wall) {
                continue;
            }
            let txn = orphan.txn;
            // With the replica sets of the epoch it was planned in; one this node has not
            // applied yet waits for a later scan.
            let epochs = n.epochs.clone();
            let Some(topology) = orphan.placement(&epochs) else { continue };
            self.trace(|| format!("{node} recovers {txn}"));
            self.report.recoveries += 1;
            let now = self.instant(self.now);
            let r = Recoverer::start(topology, node, orphan, self.recovery.clone(), now).with_placement(epochs);
            self.nodes[i].recoverers.insert(txn, r);
            self.pump_recovery(node, txn);
        }
        // Catch-ups still owed (docs/design.md §2, "a catch-up outlives its source"): shipped again
        // from the entry once as old as a recoverable orphan, unless this node pays it already.
        for owed in found.owed {
            let Some(orphan) = Orphan::of(&owed.entry) else { continue };
            let n = &self.nodes[i];
            if n.shippers.values().any(|(s, _, _)| s.txn() == orphan.txn) {
                continue;
            }
            if !orphan.due(&self.topology, dc, self.cfg.options.phase1_timeout, &self.recovery, wall) {
                continue;
            }
            let Some(core) = n.core.as_ref() else { return };
            let debt = core.reship(&owed);
            let txn = debt.txn;
            self.trace(|| format!("{node} ships the catch-up of {txn} again (ring index {})", owed.index));
            self.report.catch_ups_reshipped += 1;
            self.pay(node, debt);
        }
    }

    /// Starts paying `debt` on `node`: a shipper delivers its accepts, and its entries' masks
    /// are cleared when it is done.
    fn pay(&mut self, node: NodeId, debt: CatchUpDebt) {
        let CatchUpDebt { txn, ship, owed } = debt;
        for (peer, req) in &ship {
            self.trace(|| format!("{node} ships to {peer}: {} {txn}", kind(req)));
        }
        let now = self.instant(self.now);
        let placement = Some(self.nodes[node.0 as usize].epochs.clone());
        let keys: Vec<(NodeId, Vec<u64>)> = ship
            .iter()
            .map(|(peer, req)| {
                let keys = match req {
                    Request::Accept(a) => a.changes.iter().map(|c| c.key).collect(),
                    _ => Vec::new(),
                };
                (*peer, keys)
            })
            .collect();
        let shipper = Shipper::start(txn, ship, &self.topology, &self.recovery, placement, now);
        self.next_rpc += 1;
        let id = self.next_rpc;
        self.nodes[node.0 as usize].shipped_keys.insert(id, keys);
        self.nodes[node.0 as usize].shippers.insert(id, (shipper, owed, None));
        self.pump_ship(node, id);
    }

    /// Carries out the actions of `node`'s shipper `ship`, clears its masks once it is done,
    /// and re-arms its timer.
    fn pump_ship(&mut self, node: NodeId, ship: u64) {
        let i = node.0 as usize;
        loop {
            let Some((s, _, _)) = self.nodes[i].shippers.get_mut(&ship) else { return };
            let Some(action) = s.poll_action() else { break };
            if let Action::Send { attempt, to, request } = action {
                self.call(node, to, RpcOwner::Ship(ship, attempt), request);
            }
        }
        let n = &mut self.nodes[i];
        let Some((s, _, armed)) = n.shippers.get_mut(&ship) else { return };
        if s.is_done() {
            let Some((s, owed, _)) = n.shippers.remove(&ship) else { return };
            let keys = n.shipped_keys.remove(&ship).unwrap_or_default();
            let txn = s.txn();
            if !s.delivered() {
                self.report.catch_ups_given_up += 1;
                // Left behind by design only where the run shortens the give-up (churn); a
                // give-up after the default 30 s is no part of a healthy run, and the check
                // of the replicas' agreement keeps its keys.
                let behind = if self.cfg.catch_up_give_up.is_some() { s.undelivered() } else { Vec::new() };
                for (peer, keys) in keys.into_iter().filter(|(p, _)| behind.contains(p)) {
                    self.trace(|| {
                        format!("{node} gave up the catch-up of {txn} to {peer}: left behind for keys {keys:?}")
                    });
                    self.left_behind.extend(keys.into_iter().map(|k| (peer, k)));
                }
            }
            if let Some(core) = self.nodes[i].core.as_mut() {
                let _ = core.clear_owed(txn, &owed);
            }
            self.trace(|| format!("{node} paid the catch-up of {txn} (delivered: {})", s.delivered()));
            return;
        }
        let Some(t) = s.poll_timeout() else { return };
        let armed = *armed;
        // Rounded up: a timer must not fire before its deadline.
        let at = (self.micros(t) + u64::from(self.instant(self.micros(t)) < t)).max(self.now);
        if armed.is_none_or(|a| at < a) {
            let n = &mut self.nodes[i];
            if let Some((_, _, armed)) = n.shippers.get_mut(&ship) {
                *armed = Some(at);
            }
            let inc = n.inc;
            self.queue.push(at, Ev::ShipTimer { node, inc, ship });
        }
    }

    /// The gap watch of `node`'s ring: looks at its head and asks the DC's writers when a
    /// gap has stayed there.
    fn watch_gap(&mut self, node: NodeId) {
        let i = node.0 as usize;
        let now = self.instant(self.now);
        let n = &mut self.nodes[i];
        let Some(core) = n.core.as_ref().filter(|_| n.alive) else { return };
        let Ok(gap) = core.head_gap() else { return };
        for action in n.gaps.observe(gap, now) {
            match action {
                GapAction::Ask { round, to } => {
                    self.call(node, to, RpcOwner::Gap(round, to), Request::Reservations(Reservations { ring: node }))
                }
                GapAction::Fill(gap) => self.fill_gap(node, gap),
            }
        }
    }

    fn fill_gap(&mut self, node: NodeId, gap: Gap) {
        let Some(core) = self.nodes[node.0 as usize].core.as_mut() else { return };
        if let Ok(slots) = core.fill_gap(gap) {
            if slots > 0 {
                self.report.gaps_filled += 1;
                self.report.gap_slots += slots;
                self.trace(|| format!("{node} fills the gap [{}, {}) at the head of its ring", gap.from, gap.to));
            }
        }
    }

    /// Carries out the actions of `node`'s recoverer of `txn` and re-arms its timer.
    fn pump_recovery(&mut self, node: NodeId, txn: TxnId) {
        loop {
            let Some(r) = self.nodes[node.0 as usize].recoverers.get_mut(&txn) else { return };
            let Some(action) = r.poll_action() else { break };
            if let Action::Send { attempt, to, request } = action {
                self.trace(|| format!("{node} -> {to}: recovery {} {txn}", kind(&request)));
                self.call(node, to, RpcOwner::Recovery(txn, attempt), request);
            }
        }
        let n = &mut self.nodes[node.0 as usize];
        let Some(r) = n.recoverers.get(&txn) else { return };
        if r.is_done() {
            match r.applied_decision() {
                Some(Decision::Commit(_)) => self.report.recovered_commits += 1,
                Some(Decision::Abort) => self.report.recovered_aborts += 1,
                None => {}
            }
            let d = r.decision();
            n.recoverers.remove(&txn);
            n.armed.remove(&txn);
            self.trace(|| format!("{node} recovered {txn}: {d:?}"));
            return;
        }
        if let Some(t) = r.poll_timeout() {
            let inc = n.inc;
            // Rounded up: a timer must not fire before its deadline.
            let at = (self.micros(t) + u64::from(self.instant(self.micros(t)) < t)).max(self.now);
            let n = &mut self.nodes[node.0 as usize];
            if n.armed.get(&txn).is_none_or(|&armed| at < armed) {
                n.armed.insert(txn, at);
                self.queue.push(at, Ev::RecoveryTimer { node, inc, txn });
            }
        }
    }

    /// Sends `request` from `from` to `to` as an RPC owned by `owner`, with a deadline.
    fn call(&mut self, from: NodeId, to: NodeId, owner: RpcOwner, request: Request) {
        self.next_rpc += 1;
        let rpc = self.next_rpc;
        let n = &mut self.nodes[from.0 as usize];
        n.rpcs.insert(rpc, owner);
        let inc = n.inc;
        let msg = Msg::Request { from, from_inc: inc, rpc, request };
        self.send(from, to, msg);
        self.queue.push(self.now + RPC_TIMEOUT.as_micros() as u64, Ev::RpcDeadline { node: from, inc, rpc });
    }

    fn send(&mut self, from: NodeId, to: NodeId, msg: Msg) {
        if from == to {
            // A node's own executor side: no network, nothing lost.
            self.queue.push(self.now, Ev::Deliver { to, msg });
            return;
        }
        let (a, b) = (self.nodes[from.0 as usize].dc, self.nodes[to.0 as usize].dc);
        let times = self.net.fate(a, b, 256, self.now, &mut self.rng);
        if times.is_empty() {
            self.report.dropped += 1;
            self.trace(|| format!("lost {from} -> {to}"));
            return;
        }
        let copies = times.len();
        let mut msg = Some(msg);
        for (i, at) in times.into_iter().enumerate() {
            let m = if i + 1 == copies { msg.take() } else { msg.as_ref().map(clone_msg) };
            if let Some(m) = m {
                self.queue.push(at, Ev::Deliver { to, msg: m });
            }
        }
    }

    /// Node `to` handles `request` from `from` on its executor core and replies (a phase 1
    /// waiting for a lock replies later, `Ev::RetryPhase1`).
    fn serve(&mut self, to: NodeId, from: NodeId, from_inc: u64, rpc: u64, request: Request) {
        let i = to.0 as usize;
        let now_ms = self.wall_ms(to);
        let txn = request.txn();
        let dc = self.nodes[i].dc;
        let is_record = matches!(request, Request::Record(_));
        let Some(core) = self.nodes[i].core.as_mut() else { return };
        let handled = core.handle(from, request, now_ms);
        self.report.superseded_changes += core.take_superseded();
        // Owed whatever the reply: a phase 1 that waits for a lock has applied the phase 2s
        // it carried.
        for debt in handled.catch_up {
            self.pay(to, debt);
        }
        if let Some((at_ms, request)) = handled.retry {
            // Waits for a lock: no reply yet, the same request again at `at_ms`.
            let at = self.now + at_ms.saturating_sub(now_ms).max(1) * 1000;
            let inc = self.nodes[i].inc;
            self.queue.push(at, Ev::RetryPhase1 { node: to, inc, from, from_inc, rpc, request });
            return;
        }
        match &handled.reply {
            Reply::Vote { vote, .. } if !vote.is_commit() => {
                self.abort_evidence.entry(txn).or_default().insert(dc);
            }
            Reply::Recorded(true) if is_record => {
                self.abort_evidence.entry(txn).or_default().insert(dc);
            }
            _ => {}
        }
        self.send(to, from, Msg::Reply { to_inc: from_inc, rpc, reply: handled.reply });
    }

    fn deliver(&mut self, to: NodeId, msg: Msg) {
        let i = to.0 as usize;
        if !self.nodes[i].alive {
            return;
        }
        match msg {
            Msg::Heartbeat { from, sent_at_us } => self.heard(i, from, Some(sent_at_us)),
            Msg::Policy { from, body } => {
                self.heard(i, from, None);
                self.deliver_policy(to, from, body);
            }
            Msg::Request { from, from_inc, rpc, request } => {
                self.heard(i, from, None);
                self.serve(to, from, from_inc, rpc, request);
            }
            Msg::Reply { to_inc, rpc, reply } => {
                let n = &mut self.nodes[i];
                if n.inc != to_inc {
                    return;
                }
                match n.rpcs.remove(&rpc) {
                    Some(RpcOwner::Txn(txn, attempt)) => {
                        let now = self.instant(self.now);
                        if let Some(c) = self.nodes[i].coords.get_mut(&txn) {
                            c.txn.handle_reply(attempt, reply, now);
                        }
                        self.pump(to, txn);
                    }
                    Some(RpcOwner::Recovery(txn, attempt)) => {
                        self.trace(|| format!("{to}: recovery of {txn} answered {reply:?}"));
                        let now = self.instant(self.now);
                        if let Some(r) = self.nodes[i].recoverers.get_mut(&txn) {
                            r.handle_reply(attempt, reply, now);
                        }
                        self.pump_recovery(to, txn);
                    }
                    Some(RpcOwner::Gap(round, from)) => {
                        if let Reply::Reserved(held) = reply {
                            if let Some(GapAction::Fill(gap)) = self.nodes[i].gaps.answer(round, from, held) {
                                self.fill_gap(to, gap);
                            }
                        }
                    }
                    Some(RpcOwner::Rebuild(partition, attempt)) => {
                        let now = self.instant(self.now);
                        if let Some((r, _)) = self.nodes[i].rebuilds.get_mut(&partition) {
                            r.handle_reply(attempt, reply, now);
                        }
                        self.pump_rebuild(to, partition);
                    }
                    Some(RpcOwner::Reclaim(ask)) => {
                        let answer = match reply {
                            Reply::ReclaimChecked(a) => Some(a),
                            _ => None,
                        };
                        self.reclaim_answered(to, ask, answer);
                    }
                    Some(RpcOwner::Read(client, read, idx)) => self.read_answered(client, read, idx, reply),
                    Some(RpcOwner::Ship(ship, attempt)) => {
                        self.trace(|| format!("{to}: shipment {ship} answered {reply:?}"));
                        let now = self.instant(self.now);
                        if let Some((s, _, _)) = self.nodes[i].shippers.get_mut(&ship) {
                            s.handle_reply(attempt, reply, now);
                        }
                        self.pump_ship(to, ship);
                    }
                    None => {}
                }
            }
        }
    }

    /// docs/design.md §2: an abort is acknowledged only once a majority of every touched
    /// partition's replicas hold it (an abort vote, or the recorded abort).
    fn check_abort_recorded(&mut self, txn: TxnId) {
        let Some(h) = self.hist.iter().rev().find(|h| h.txn == txn) else { return };
        // The replica sets of the epoch the transaction was planned in.
        let placement: &Topology = self.placements.iter().find(|t| t.epoch == h.epoch).map_or(&self.topology, |p| p);
        let Ok(procedure) = redt_protocol::call::procedure(placement, h.ran.as_ref().unwrap_or(&h.call)) else {
            return;
        };
        let Ok(plan) = redt_protocol::plan::plan(placement, procedure.as_ref()) else { return };
        let held = self.abort_evidence.get(&txn).cloned().unwrap_or_default();
        for p in &plan.partitions {
            let have = p.replicas.iter().filter(|(_, dc)| held.contains(dc)).count();
            let need = redt_protocol::decision::majority(p.replicas.len());
            if have < need {
                self.report.violations.push(Violation::AbortAckedUnrecorded { txn, partition: p.id, have, need });
                return;
            }
        }
    }

    pub(crate) fn layout(&self) -> Layout {
        self.dcs[0].layout
    }

    pub(crate) fn bank_accounts(&self) -> u64 {
        self.gen.bank_accounts()
    }

    pub(crate) fn keys(&self) -> Vec<u64> {
        self.gen.keys()
    }

    /// Deleted records the live nodes' executors freed.
    pub(crate) fn deleted_records_freed(&self) -> u64 {
        self.nodes.iter().filter_map(|n| n.core.as_ref()).map(|c| c.deleted_records().0).sum()
    }

    pub(crate) fn deleted_keys(&self) -> std::collections::BTreeSet<u64> {
        self.gen.deleted().clone()
    }

    pub(crate) fn workload_table(&self) -> redt_proto::TableId {
        match self.cfg.workload {
            Workload::Ycsb => self.gen.usertable,
            _ => self.gen.kv,
        }
    }

    pub(crate) fn workload(&self) -> Workload {
        self.cfg.workload
    }

    /// The placement the run ended in (the last the membership committed).
    pub(crate) fn final_placement(&self) -> Placement {
        self.placements.last().cloned().unwrap_or_else(|| Placement::initial(self.topology.clone()))
    }
}

fn t_participants(topology: &Topology, call: &ProcedureCall) -> Vec<DcId> {
    redt_protocol::call::procedure(topology, call)
        .ok()
        .and_then(|p| redt_protocol::plan::plan(topology, p.as_ref()).ok())
        .map(|p| p.participants)
        .unwrap_or_default()
}

fn kind(r: &Request) -> &'static str {
    match r {
        Request::Execute(_) => "execute",
        Request::Record(_) => "record",
        Request::Decide(_) => "decide",
        Request::Accept(_) => "accept",
        Request::Prepare(_) => "prepare",
        Request::LogDecision(_) => "log-decision",
        Request::RecoveryPrepare(_) => "prepare(b)",
        Request::Reservations(_) => "reservations",
        Request::SnapshotRead(_) => "snapshot-read",
        Request::ReclaimCheck(_) => "reclaim-check",
        Request::VersionedRead { .. } => "versioned-read",
    }
}

fn clone_msg(m: &Msg) -> Msg {
    match m {
        Msg::Request { from, from_inc, rpc, request } => {
            Msg::Request { from: *from, from_inc: *from_inc, rpc: *rpc, request: request.clone() }
        }
        Msg::Reply { to_inc, rpc, reply } => Msg::Reply { to_inc: *to_inc, rpc: *rpc, reply: reply.clone() },
        Msg::Heartbeat { from, sent_at_us } => Msg::Heartbeat { from: *from, sent_at_us: *sent_at_us },
        Msg::Policy { from, body } => Msg::Policy { from: *from, body: body.clone() },
    }
}

/// The snapshot copies' options in the simulation: small chunks (so a copy takes several
/// rounds and interleaves with commits), no bandwidth bound (time is virtual).
fn sim_copy_options() -> RebuildOptions {
    RebuildOptions { chunk_bytes: 2048, bytes_per_sec: None, ..RebuildOptions::default() }
}

//! `redt sim`: runs the deterministic whole-cluster simulation (crate `redt-sim`) for one
//! seed with its event trace, or for many seeds as a soak.

use anyhow::{bail, Result};
use clap::Args;
use redt_sim::{run, FailoverMode, Faults, SimConfig, Workload};
use std::path::PathBuf;
use std::time::Duration;

/// `redt sim` arguments.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Topology file (default: the embedded configs/default.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Replays this one seed and prints its report (with `--trace`, every event).
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Runs seeds 0..N (a soak) and prints every failing one; exits non-zero if any fails.
    #[arg(long)]
    seeds: Option<u64>,
    /// First seed of a soak.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Workload: bank, append, append-scan (list-append with range reads), churn (list-append
    /// with deletes whose records are freed), interactive (optimistic list-append: a versioned
    /// read, then appends committed with CHECKs of what was read; also `rw-append`), ycsb.
    #[arg(long, default_value = "append", value_parser = parse_workload)]
    workload: Workload,
    /// Faults: a comma-separated list of crash, partition, drop, dup, hold (with --committing,
    /// the three message faults in bursts), skew, remove (kill a DC and remove it from the
    /// placement; it comes back holding nothing), remove-node, or all (every fault but the
    /// removals), none.
    #[arg(long, default_value = "all", value_parser = Faults::parse)]
    faults: Faults,
    /// Closed-loop clients per node.
    #[arg(long, default_value_t = 2)]
    clients_per_node: usize,
    /// The committing schedule, under which most attempts commit: clients retry retryable
    /// aborts (bank, append, ycsb; up to 10 times, pauses from one to eight of the topology's
    /// largest link RTT, at least 10 ms), the key spaces of bank, append and ycsb grow with
    /// the clients, and the message faults come in bursts of 0.2–0.6 s (one per 1.5 s of the
    /// run, each enabled fault at 5%) with none between. Without it, the schedule the named
    /// mutant seeds were found under.
    #[arg(long)]
    committing: bool,
    /// Simulated time the clients submit for (then the run drains): 3 s, 10 s for churn (longer
    /// than its 4 s grace, so records are freed within the run).
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::duration::run_time)]
    duration: Option<Duration>,
    /// Print the event trace of `--seed`.
    #[arg(long)]
    trace: bool,
    /// Who removes and restores DCs and nodes: `policy` (the default), each node's real
    /// failure detector over the simulated wire and the Raft leader's real failover policy,
    /// whose removals are checked to be of suspects down or cut off from a majority; or
    /// `oracle`, the simulator right after a kill (detection, confirmation and the Raft commit
    /// taken as a delay).
    #[arg(long, default_value = "policy", value_parser = parse_failover)]
    failover: FailoverMode,
    /// How long a phase 1 that meets a lock waits for it at the executor (0: No-Wait; default:
    /// the topology's `timeouts.lock_wait`, else its largest link RTT).
    #[arg(long, allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    lock_wait: Option<Duration>,
    /// Decided-holder takeover: a coordinator holds a transaction that conflicts with one of
    /// its own undecided ones, then sends it carrying that decision (as `--cc takeover`).
    #[arg(long)]
    takeover: bool,
    /// Takeover with batches (implies `--takeover`; as `--cc batch`): the transaction that
    /// goes takes along the held ones that conflict with it, as one transaction.
    #[arg(long)]
    batch: bool,
    /// Frees deleted records this long after their delete (the churn workload's default is
    /// 4 s, far shorter than a node's 60 s, so runs free records; the others free none).
    #[arg(long, value_parser = crate::cmd::duration::run_time)]
    deleted_grace: Option<Duration>,
    /// The deliberate bugs (a build with the `mutants` feature only).
    #[cfg(feature = "mutants")]
    #[command(flatten, next_help_heading = "Deliberate bugs (for finding the seeds that catch them)")]
    mutants: MutantArgs,
}

/// `redt sim`'s deliberate bugs, each a switch of `SimConfig` or of a `*Mutations` struct of
/// `redt-protocol`. They exist only in a build with the `mutants` feature
/// (`cargo build --release --features mutants`).
#[cfg(feature = "mutants")]
#[derive(Args, Debug)]
struct MutantArgs {
    /// Inserts take no gap lock, so a key can appear inside a range an undecided transaction
    /// read (a phantom).
    #[arg(long)]
    mutant_no_gap_locks: bool,
    /// A write that brings a deleted key back does not put it back into its ordered index.
    #[arg(long)]
    mutant_no_relink: bool,
    /// Freeing a deleted record does not raise its node's deletion horizon, so an older write
    /// of the key arriving after the free brings it back.
    #[arg(long)]
    mutant_free_deleted_without_horizon: bool,
    /// A rebuilt learner keeps the rows no voter's copy refreshed, so a key its voters deleted
    /// and freed keeps its old value.
    #[arg(long)]
    mutant_keep_unrefreshed: bool,
    /// A replica frees a deleted key's record without asking the other replicas whether they
    /// hold the delete too.
    #[arg(long)]
    mutant_reclaim_without_check: bool,
    /// A recovered commit tells a DC it did not hear from to abort its entries even when no
    /// catch-up can bring it the values.
    #[arg(long)]
    mutant_abort_unheard_without_catch_up: bool,
    /// A replica frees a deleted key's record without looking at the replicas' catch-up
    /// floors, so a catch-up made late meets the horizon the free raised.
    #[arg(long)]
    mutant_reclaim_below_no_floor: bool,
    /// A recoverer waits for a majority of every partition even when abort votes and records
    /// alone rule out every commit.
    #[arg(long)]
    mutant_abort_votes_need_a_majority: bool,
    /// A recovered commit takes a vote that read past the commit's timestamp (a phase 1 run
    /// again after the commit was applied) for the up-to-date source of its catch-up.
    #[arg(long)]
    mutant_stale_vote_as_source: bool,
    /// With `--takeover`: a phase 2 carried on a phase 1 is applied without the catch-up it
    /// names, so a DC the commit left behind is never shipped the values.
    #[arg(long)]
    mutant_carried_without_catch_up: bool,
    /// With `--batch`: a batch's members each run on the values read before the batch, not on
    /// what the members before them wrote (a lost update).
    #[arg(long)]
    mutant_batch_without_overlay: bool,
    /// With `--batch`: a cell several members of a batch write keeps the first one's value.
    #[arg(long)]
    mutant_batch_first_writer_wins: bool,
    /// With `--batch`: the executors of odd-numbered DCs run a batch's members last to first.
    #[arg(long)]
    mutant_batch_order_by_dc: bool,
    /// A recoverer's decision leaves the transaction's rows of the promise tables held, so a
    /// replica whose ring had no room for a fence entry keeps its row for good.
    #[arg(long)]
    mutant_decision_keeps_promise_rows: bool,
    /// A PREPARE answers a replica's vote from the aborted try of a phase 1 that waited for a
    /// lock, hiding the commit vote of the try after it.
    #[arg(long)]
    mutant_prepare_reads_first_try: bool,
    /// With `--failover policy`: the leader removes what its own detector suspects without
    /// asking the voters.
    #[arg(long)]
    mutant_confirm_alone: bool,
    /// Phase 1 skips the CHECKs of optimistic transactions: every replica passes them, so an
    /// interactive transaction commits writes computed from a stale versioned read.
    #[arg(long)]
    mutant_skip_version_checks: bool,
    /// A coordinator's ballot-0 abort record counts a DC that already applied a decision
    /// (perhaps a recoverer's commit) toward its abort majority.
    #[arg(long)]
    mutant_record_after_decision_counts: bool,
}

#[cfg(feature = "mutants")]
impl MutantArgs {
    /// Switches the chosen bugs on in `c`.
    fn apply(&self, c: &mut SimConfig) {
        c.no_gap_locks = self.mutant_no_gap_locks;
        c.no_relink = self.mutant_no_relink;
        c.executor_mutations.free_deleted_without_horizon = self.mutant_free_deleted_without_horizon;
        c.executor_mutations.keep_unrefreshed = self.mutant_keep_unrefreshed;
        c.executor_mutations.reclaim_without_check = self.mutant_reclaim_without_check;
        c.executor_mutations.reclaim_below_no_floor = self.mutant_reclaim_below_no_floor;
        c.executor_mutations.decision_keeps_promise_rows = self.mutant_decision_keeps_promise_rows;
        c.executor_mutations.prepare_reads_first_try = self.mutant_prepare_reads_first_try;
        c.recovery_mutations.abort_unheard_without_catch_up = self.mutant_abort_unheard_without_catch_up;
        c.recovery_mutations.abort_votes_need_a_majority = self.mutant_abort_votes_need_a_majority;
        c.recovery_mutations.stale_vote_as_source = self.mutant_stale_vote_as_source;
        c.executor_mutations.carried_without_catch_up = self.mutant_carried_without_catch_up;
        c.executor_mutations.batch_without_overlay = self.mutant_batch_without_overlay;
        c.executor_mutations.batch_first_writer_wins = self.mutant_batch_first_writer_wins;
        c.executor_mutations.batch_order_by_dc = self.mutant_batch_order_by_dc;
        c.failover_mutations.confirm_alone = self.mutant_confirm_alone;
        c.executor_mutations.skip_version_checks = self.mutant_skip_version_checks;
        c.executor_mutations.record_after_decision_counts = self.mutant_record_after_decision_counts;
    }
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse()
}

fn parse_failover(s: &str) -> Result<FailoverMode, String> {
    match s {
        "oracle" => Ok(FailoverMode::Oracle),
        "policy" => Ok(FailoverMode::Policy),
        other => Err(format!("unknown failover mode `{other}` (oracle, policy)")),
    }
}

/// Runs `redt sim`.
///
/// # Errors
/// A bad topology, neither `--seed` nor `--seeds`, or (soak) a failing seed.
pub fn run_sim(a: &SimArgs) -> Result<()> {
    let topology = super::load_topology(a.config.as_deref())?;
    let config = |seed: u64| {
        let mut c = SimConfig::new(topology.clone(), seed, a.workload, a.faults);
        c.clients_per_node = a.clients_per_node;
        c.committing = a.committing;
        if let Some(d) = a.duration {
            c.duration = d;
        }
        c.failover = a.failover;
        #[cfg(feature = "mutants")]
        a.mutants.apply(&mut c);
        if a.deleted_grace.is_some() {
            c.deleted_grace = a.deleted_grace;
        }
        if let Some(w) = a.lock_wait {
            c.options.lock_wait = redt_protocol::txn::LockWait::For(w);
        }
        c.options.takeover = a.takeover || a.batch;
        if a.batch {
            c.options.batch = redt_dc_executor::MAX_BATCH_MEMBERS;
        }
        c
    };
    if a.duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration must be above zero");
    }
    match (a.seed, a.seeds) {
        (Some(seed), _) => {
            let mut c = config(seed);
            c.trace = a.trace;
            let r = run(c).map_err(anyhow::Error::msg)?;
            for line in &r.trace {
                println!("{line}");
            }
            print!("{r}");
            if !r.ok() {
                bail!("seed {seed} failed its checks");
            }
        }
        (None, Some(n)) => {
            let mut failed = Vec::new();
            let bar = indicatif::ProgressBar::new(n);
            for seed in a.from..a.from + n {
                let r = run(config(seed)).map_err(anyhow::Error::msg)?;
                if !r.ok() {
                    bar.suspend(|| print!("{r}"));
                    failed.push(seed);
                }
                bar.inc(1);
            }
            bar.finish_and_clear();
            println!("{} seeds from {}: {} failed {:?}", n, a.from, failed.len(), failed);
            if !failed.is_empty() {
                bail!("{} seeds failed", failed.len());
            }
        }
        (None, None) => bail!("give --seed N (replay one schedule) or --seeds N (a soak)"),
    }
    Ok(())
}

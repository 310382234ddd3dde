//! The seeded whole-cluster simulation over the CI seeds: every schedule, with
//! crashes, partitions, lost, duplicated and delayed messages and skewed clocks, must pass
//! every check (docs/design.md §2). A failing seed prints its report; replay it with
//! `redt sim --seed N --config F --workload W --faults all --trace`.

use redt_proto::Topology;
use redt_sim::{run, FailoverMode, Faults, SimConfig, SimReport, Violation, Workload};

fn topology(name: &str) -> Topology {
    let path = format!("{}/../configs/{name}", env!("CARGO_MANIFEST_DIR"));
    Topology::load(std::path::Path::new(&path)).expect("config loads")
}

/// `cfg` with the simulator's own failover (`FailoverMode::Oracle`: a killed DC or node
/// removed right after the kill, no failure detector). The named seeds that pin it were found
/// under it, and their schedules depend on its timing; the sweeps run the real failure
/// detectors and failover policy (the default).
fn oracle(mut cfg: SimConfig) -> SimConfig {
    cfg.failover = FailoverMode::Oracle;
    cfg
}

/// The schedule of CI seed `seed`: the workload and topology rotate with it.
fn schedule(seed: u64, topologies: &[Topology]) -> SimConfig {
    let workload = [Workload::Append, Workload::Bank, Workload::Ycsb][(seed % 3) as usize];
    let faults = if seed % 10 == 9 { Faults::none() } else { Faults::all() };
    let t = topologies[(seed / 3 % topologies.len() as u64) as usize].clone();
    let mut cfg = SimConfig::new(t, seed, workload, faults);
    // Every other seed lets the other DCs' recoverers start together and duel.
    if seed / 9 % 2 == 1 {
        cfg.recovery_turn = Some(std::time::Duration::ZERO);
    }
    cfg
}

/// Runs seeds `range` on two threads; returns the reports that failed a check.
fn sweep(range: std::ops::Range<u64>) -> (usize, Vec<SimReport>) {
    let topologies = vec![topology("local-fast.yaml"), topology("default.yaml"), topology("world-5dc.yaml")];
    let seeds: Vec<u64> = range.collect();
    let failed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for part in seeds.chunks(seeds.len().div_ceil(2)) {
            let (topologies, failed) = (&topologies, &failed);
            s.spawn(move || {
                for &seed in part {
                    let r = run(schedule(seed, topologies)).expect("the schedule runs");
                    if !r.ok() {
                        failed.lock().unwrap().push(r);
                    }
                }
            });
        }
    });
    (seeds.len(), failed.into_inner().unwrap())
}

/// Every CI seed passes every check. Bugs the seeds found, each now fixed and kept by a unit
/// test beside the code:
///
/// - a late RECORD swapped the vote word of a ring slot its entry had left, corrupting a
///   later entry and stopping replay with its locks held
///   (`dc-executor/tests/executor.rs`, `a_late_record_never_writes_into_a_reused_slot`);
/// - a duplicated phase 1 that arrived after the abort vote of its first copy ran again and
///   took locks no decision would release
///   (`coordinator/tests/executor_core.rs`, `a_repeated_phase1_after_an_abort_vote_…`);
/// - a repeated phase 1 after a commit vote reported other redo entries than the first;
/// - seed 322 (bank, default.yaml): a writer that gave up a reservation (RingFull) and then
///   crashed, or sat idle, never paid its filler, so replay stopped at the gap for good and a
///   recovered commit's catch-up was never applied (`coordinator/src/gap_watch.rs`,
///   `dc-executor/tests/gap.rs`);
/// - seed 1313 (bank, default.yaml, `--seeds 1000 --from 1000`): a catch-up replica crashed after the
///   decision reached it but before its redo did, so the redo stayed `Logged` for good (a
///   catch-up is now one accept carrying the decision; `coordinator/tests/executor_core.rs`,
///   `a_decided_accept_is_written_committed`);
/// - seed 1465 (append, default.yaml): a phase 1 repeated after a restart left a second entry
///   and a repeated decision naming the first touched nothing
///   (`a_mutant_that_ignores_repeated_decisions_is_caught`);
/// - seed 1109 (bank, local-fast.yaml, `--seeds 500 --from 1000`): a recoverer that found a
///   commit already applied recomputed the catch-up and aborted an up-to-date DC's redo
///   (`a_mutant_that_recomputes_catch_up_after_an_applied_commit_is_caught`).
///
/// Open bugs, each with the seed that shows it (the test asserts they still fail, so fixing one
/// means removing it here): none.
const OPEN_BUGS: &[u64] = &[];

#[test]
fn ci_seeds_pass_every_check() {
    let n: u64 = std::env::var("REDT_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(510);
    let (ran, failed) = sweep(0..n);
    for r in &failed {
        eprintln!("{r}");
    }
    assert!(ran >= 500 || n < 500, "at least 500 schedules");
    let unexpected: Vec<u64> = failed.iter().map(|r| r.seed).filter(|s| !OPEN_BUGS.contains(s)).collect();
    assert!(unexpected.is_empty(), "{} of {ran} seeds failed: {unexpected:?}", unexpected.len());
    for &seed in OPEN_BUGS.iter().filter(|&&s| s < n) {
        assert!(failed.iter().any(|r| r.seed == seed), "open bug seed {seed} passes now: remove it from OPEN_BUGS");
    }
}

/// Mutant: the coordinator acknowledges an abort before recording it at a majority
/// (docs/design.md §2). Seed 0 (list-append, no faults) catches it; the same seed passes unmutated.
#[test]
fn a_mutant_that_acks_unrecorded_aborts_is_caught() {
    let mut cfg = SimConfig::new(topology("local-fast.yaml"), 0, Workload::Append, Faults::none());
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 0 passes unmutated");
    cfg.options.mutations.ack_abort_before_record = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::AbortAckedUnrecorded { .. })),
        "seed 0 catches the mutant: {r}"
    );
}

/// Mutant: an executor lets a phase 1 that arrives after its transaction's decision (a
/// duplicate, or one held back past the phase-1 timeout) take locks. Recovery now finds and
/// releases them (the run passes its checks), but only after the recovery delay: seed 3
/// (list-append, duplicated and delayed messages, no crash) needs recoverers with the mutant
/// and none without it.
#[test]
fn a_mutant_that_lets_late_phase1_lock_is_caught() {
    let faults = Faults { duplicate: 0.05, hold: 0.05, ..Faults::none() };
    let mut cfg = SimConfig::new(topology("local-fast.yaml"), 3, Workload::Append, faults);
    let clean = run(cfg.clone()).expect("runs");
    assert!(clean.ok() && clean.recoveries == 0, "seed 3 passes unmutated, with nothing to recover: {clean}");
    cfg.executor_mutations.late_phase1_takes_locks = true;
    let r = run(cfg).expect("runs");
    assert!(r.recoveries > 0, "seed 3 catches the mutant: its locks outlive the decision: {r}");
}

/// Mutant: recoverers decide by the RedT paper's §5.1.1 rule (commit when more than half the
/// replicas alive voted commit; records and applied decisions ignored), which can reverse an
/// outcome (docs/design.md, "Recovery"). Seed 1311 (bank on local-fast.yaml, every fault, the
/// other DCs' recoverers starting together) catches it: replicas of one key disagree. The same
/// seed passes unmutated. (Seed 1249 did until transaction ids carried the incarnation: the
/// ids salt the retry jitter, so the schedules changed; 1311, 1312, 1326 and 1330 are the
/// seeds of 1200–1349 that catch it now.)
#[test]
fn a_mutant_with_the_papers_recovery_rule_is_caught() {
    let mut cfg = oracle(SimConfig::new(topology("local-fast.yaml"), 1311, Workload::Bank, Faults::all()));
    cfg.recovery_turn = Some(std::time::Duration::ZERO);
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 1311 passes unmutated");
    cfg.recovery_mutations.papers_rule = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 1311 catches the mutant: {r}"
    );
}

/// Mutant: votes beat a higher-ballot record (a majority of up-to-date commit votes commits
/// over a recorded abort). Seed 34 of the lossy schedule (bank on local-fast.yaml, failover
/// oracle) catches it: replicas of key 11 disagree. The same seed passes unmutated.
/// (`scan_for_mutant_seeds` with `REDT_SIM_MUTANT_LOSSY=1 REDT_SIM_MUTANT_ORACLE=1` finds 34,
/// 1129, 2825 and 5810 of 0–5999 on local-fast.yaml.)
#[test]
fn a_mutant_whose_votes_beat_records_is_caught() {
    let mut cfg = oracle(lossy(topology("local-fast.yaml"), 34, Workload::Bank));
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 34 passes unmutated");
    cfg.recovery_mutations.votes_beat_records = true;
    let r = run(cfg).expect("runs");
    assert!(!r.ok(), "seed 34 catches the mutant: {r}");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 34 catches the mutant by a divergence: {r}"
    );
}

/// A lossy schedule: every fault, a fifth of all messages dropped, and the other DCs'
/// recoverers starting together (`recovery_turn` 0) so they duel.
fn lossy(topology: Topology, seed: u64, workload: Workload) -> SimConfig {
    let mut faults = Faults::all();
    faults.drop = 0.2;
    let mut cfg = SimConfig::new(topology, seed, workload, faults);
    cfg.recovery_turn = Some(std::time::Duration::ZERO);
    cfg
}

/// Lossy schedules pass every check too: 20 seeds of each workload on each of local-fast,
/// default and world-5dc (180 runs; `cargo test -p redt-sim --release` takes a few seconds for
/// them).
#[test]
fn lossy_seeds_pass_every_check() {
    let mut failed = Vec::new();
    for name in ["local-fast.yaml", "default.yaml", "world-5dc.yaml"] {
        let t = topology(name);
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 0..20 {
                let r = run(lossy(t.clone(), seed, workload)).expect("runs");
                if !r.ok() {
                    failed.push(format!("{name} {workload:?} {r}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{} lossy runs failed:\n{}", failed.len(), failed.join("\n"));
}

/// Mutant: a recoverer applies its decision as soon as it chooses it, without recording it at
/// a majority first. Seed 320 of the lossy schedule (bank on default.yaml) catches it: key 5
/// ends with a write at cts 2560000001 on node#7 and the loaded value on node#1 and node#5.
/// (Seed 72 on local-fast.yaml caught it until recoverers shipped their catch-ups themselves:
/// there the mutant's only harm was a lost catch-up; `scan_for_mutant_seeds` found 320, the
/// one seed of 0..1000 that catches it now.) The same seed passes unmutated.
#[test]
fn a_mutant_that_acts_before_recording_is_caught() {
    let mut cfg = oracle(lossy(topology("default.yaml"), 320, Workload::Bank));
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 320 passes unmutated");
    cfg.recovery_mutations.act_before_recording = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 320 catches the mutant: {r}"
    );
}

/// Mutant: a decision for a transaction already decided here touches nothing, even the entry
/// it names (the rule before seed 1465 found the entry a phase 1 repeated after a restart
/// leaves). Seed 1465 (list-append on default.yaml, every fault) catches it; the same seed
/// passes unmutated.
#[test]
fn a_mutant_that_ignores_repeated_decisions_is_caught() {
    let mut cfg = SimConfig::new(topology("default.yaml"), 1465, Workload::Append, Faults::all());
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 1465 passes unmutated");
    cfg.executor_mutations.repeated_decision_touches_nothing = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Stuck(_))),
        "seed 1465 catches the mutant: {r}"
    );
}

/// Mutant: a recoverer that finds a commit already applied recomputes the catch-up from the
/// promises, counting the replicas that applied it as missing votes, so a DC that was up to
/// date is told to abort and nobody ships it the values. The guard that tells a DC it did not
/// hear from to abort only if a catch-up reaches it covers the same case, so this rule is
/// tested as a layer of its own, with that guard off
/// (`RecoveryMutations::abort_unheard_without_catch_up`): seed 1109 (bank on local-fast.yaml,
/// every fault) passes, and catches the mutant.
#[test]
fn a_mutant_that_recomputes_catch_up_after_an_applied_commit_is_caught() {
    let mut cfg = oracle(SimConfig::new(topology("local-fast.yaml"), 1109, Workload::Bank, Faults::all()));
    cfg.recovery_turn = Some(std::time::Duration::ZERO);
    cfg.recovery_mutations.abort_unheard_without_catch_up = true;
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 1109 passes with the guard off");
    cfg.recovery_mutations.catch_up_after_applied = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 1109 catches the mutant: {r}"
    );
}

/// Fixed (n ≥ 4, outside the CI schedule): a catch-up outlives its source (docs/design.md §2). With
/// `Q(n) < n` a commit leaves replicas behind; seed 2012 on sim-20dc.yaml (n = 5) had the
/// source's executor crash while its accept to a behind replica (whose ring was full) was
/// still being retried: every entry was decided, so no recoverer ran and the replica kept the
/// old value. The source's entry now keeps a catch-up mask until the accept is acknowledged,
/// its restarted process ships it again from the ring, and a catch-up that finds a full ring
/// is applied to the records at once. Unit tests: `a_catch_up_owed_survives_a_restart_and_is_
/// shipped_again` (coordinator/tests/executor_core.rs), `an_owed_catch_up_holds_the_head_until_
/// cleared` (dc-executor replay).
#[test]
fn a_catch_up_survives_its_sources_crash() {
    let r = run(SimConfig::new(topology("sim-20dc.yaml"), 2012, Workload::Bank, Faults::all())).expect("runs");
    assert!(r.ok(), "seed 2012 passes: {r}");
}

/// Mutant: a catch-up source decides its redo without the catch-up mask, so its shipments live
/// only in its memory (the bug before). Seed 2015 (bank on sim-20dc.yaml, every fault) catches
/// it: a source crashes before its accept lands and a replica stays behind; the same seed passes
/// unmutated. Found with `scan_for_mutant_seeds` (2015, 2018, 2024, 2026 and 2039 of
/// 2000..2040).
#[test]
fn a_mutant_whose_catch_up_lives_in_memory_is_caught() {
    let mut cfg = oracle(SimConfig::new(topology("sim-20dc.yaml"), 2015, Workload::Bank, Faults::all()));
    let clean = run(cfg.clone()).expect("runs");
    assert!(clean.ok(), "seed 2015 passes unmutated: {clean}");
    cfg.executor_mutations.catch_up_not_durable = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 2015 catches the mutant: {r}"
    );
}

/// Seeds 8084 and 2062 on sim-20dc.yaml (bank, every fault; n = 5) ended with one replica of
/// a key holding its loaded value while four held a committed write. Not a protocol bug: the
/// simulation called the drain quiet once no entry was undecided and no catch-up owed, while
/// a restarted node's ring still had a gap at its head (a reservation its previous life made
/// and never wrote) with the committed catch-up behind it. The gap watch fills such a gap
/// after `gap_wait`; the drain now also waits for every ring's head to reach its tail.
#[test]
fn the_drain_waits_for_a_gap_at_a_rings_head() {
    for seed in [8084, 2062] {
        let r =
            run(oracle(SimConfig::new(topology("sim-20dc.yaml"), seed, Workload::Bank, Faults::all()))).expect("runs");
        assert!(r.ok(), "seed {seed} passes: {r}");
        assert!(r.gaps_filled > 0, "seed {seed} fills the gap at the head: {r}");
    }
}

/// A 20-DC topology (n = 5) runs in the simulator and costs what 4 DCs cost per committed
/// transaction: 2 inter-DC round trips.
#[test]
fn twenty_dcs_cost_two_round_trips() {
    let r = run(SimConfig::new(topology("sim-20dc.yaml"), 7, Workload::Ycsb, Faults::none())).expect("runs");
    assert!(r.ok(), "{r}");
    assert!(r.rw_inter_commits > 0, "{r}");
    assert_eq!(r.round_trips_per_commit(), 2.0, "{r}");
}

/// Replays one CI seed with its event trace (`REDT_SIM_SEED=N`, optionally
/// `REDT_SIM_GREP=text` to keep only matching lines); a no-op without the variable.
#[test]
fn replay_seed_from_env() {
    let Some(seed) = std::env::var("REDT_SIM_SEED").ok().and_then(|s| s.parse().ok()) else { return };
    let topologies = vec![topology("local-fast.yaml"), topology("default.yaml"), topology("world-5dc.yaml")];
    let mut cfg = schedule(seed, &topologies);
    cfg.trace = true;
    let r = run(cfg).expect("the schedule runs");
    let grep = std::env::var("REDT_SIM_GREP").unwrap_or_default();
    for line in r.trace.iter().filter(|l| l.contains(&grep)) {
        println!("{line}");
    }
    println!("{r}");
}

/// Scans bank seeds from `REDT_SIM_MUTANT_FROM` (100 of them, or `REDT_SIM_MUTANT_SEEDS`)
/// with one mutant and prints those it fails while the unmutated run passes: how the seeds of
/// the mutant tests were found. `REDT_SIM_MUTANT` names the mutant (`catch_up_not_durable`,
/// the default, `act_before_recording`, `votes_beat_records`, `no_promise_table`,
/// `catch_up_after_applied` or `abort_unheard_without_catch_up`), `REDT_SIM_MUTANT_CONFIG` the
/// topology (`sim-20dc.yaml` by default), `REDT_SIM_MUTANT_LOSSY=1` makes the schedules lossy,
/// `REDT_SIM_MUTANT_REMOVE=1` adds a DC removal to the others, `REDT_SIM_MUTANT_TURN0=1`
/// lets every DC recover at once (no turns) and `REDT_SIM_MUTANT_ORACLE=1` runs the failover
/// oracle. A no-op without `REDT_SIM_MUTANT_FROM`.
#[test]
fn scan_for_mutant_seeds() {
    let env = |k: &str| std::env::var(k).ok();
    let Some(from) = env("REDT_SIM_MUTANT_FROM").and_then(|s| s.parse::<u64>().ok()) else { return };
    let n: u64 = env("REDT_SIM_MUTANT_SEEDS").and_then(|s| s.parse().ok()).unwrap_or(100);
    let t = topology(&env("REDT_SIM_MUTANT_CONFIG").unwrap_or_else(|| "sim-20dc.yaml".into()));
    let mutant = env("REDT_SIM_MUTANT").unwrap_or_else(|| "catch_up_not_durable".into());
    let lossy_schedule = env("REDT_SIM_MUTANT_LOSSY").as_deref() == Some("1");
    let remove_dc = env("REDT_SIM_MUTANT_REMOVE").as_deref() == Some("1");
    let turn0 = env("REDT_SIM_MUTANT_TURN0").as_deref() == Some("1");
    for seed in from..from + n {
        let clean = if lossy_schedule {
            lossy(t.clone(), seed, Workload::Bank)
        } else {
            SimConfig::new(t.clone(), seed, Workload::Bank, Faults { remove_dc, ..Faults::all() })
        };
        let mut clean = if env("REDT_SIM_MUTANT_ORACLE").as_deref() == Some("1") { oracle(clean) } else { clean };
        if turn0 {
            clean.recovery_turn = Some(std::time::Duration::ZERO);
        }
        let mut cfg = clean.clone();
        match mutant.as_str() {
            "act_before_recording" => cfg.recovery_mutations.act_before_recording = true,
            "votes_beat_records" => cfg.recovery_mutations.votes_beat_records = true,
            "catch_up_not_durable" => cfg.executor_mutations.catch_up_not_durable = true,
            "no_promise_table" => cfg.executor_mutations.no_promise_table = true,
            "catch_up_after_applied" => cfg.recovery_mutations.catch_up_after_applied = true,
            "abort_unheard_without_catch_up" => cfg.recovery_mutations.abort_unheard_without_catch_up = true,
            other => panic!("unknown mutant {other}"),
        }
        let mutated = run(cfg).expect("runs");
        if mutated.ok() {
            continue;
        }
        let clean = run(clean).expect("runs");
        println!(
            "seed {seed}: mutant fails ({} violations: {:?}), clean {}",
            mutated.violations.len(),
            mutated.violations.first(),
            clean.ok()
        );
    }
}

/// Failover: one DC is killed, on top of every other fault; the nodes' failure detectors
/// suspect it, the failover policy confirms with the voters and removes it from the placement
/// (as a DC, or node by node as each is confirmed; a DC killed late may come back first and
/// is then never removed), and the survivors adopt the new epoch; the dead DC's nodes
/// come back 2–4 s after the kill holding no replica, plan in their old epoch until they learn
/// the new one (the survivors' epoch fence votes those transactions abort), and drop their
/// old undecided entries instead of recovering them. 20 seeds of each workload on the two
/// n = 3 topologies (default and local-fast, 4 DCs): every check passes on the final
/// placement's replicas (no lock or undecided entry left on any node, the returned ones
/// included), and the partitions that lost a replica (Q = n = 3: nothing could commit on them
/// while the dead DC was placed) commit again in the new epoch.
///
/// In these 3 s schedules the membership's rebuild (learners, snapshot copy, promotion)
/// mostly runs during the drain; `rebuild_seeds_pass_every_check` runs it under load.
///
/// With n ≥ 4 (world-5dc-n5) the same schedules found replicas left behind until voters
/// repaired from each other: see `a_catch_up_whose_only_source_is_removed_is_repaired`.
#[test]
fn removal_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let (mut shrunk_commits, mut removing_runs) = (0, 0);
    for name in ["default.yaml", "local-fast.yaml"] {
        let t = topology(name);
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 0..20 {
                let faults = Faults { remove_dc: true, ..Faults::all() };
                let r = run(SimConfig::new(t.clone(), seed, workload, faults)).expect("runs");
                if r.dcs_removed + r.nodes_removed > 0 {
                    removing_runs += 1;
                }
                shrunk_commits += r.committed_on_shrunk_partitions;
                if !r.ok() {
                    failed.push(format!("{name} {workload:?} {r}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{} removal runs failed:\n{}", failed.len(), failed.join("\n"));
    // 105 when written: a DC killed late in a 3 s run may come back before the policy confirms it.
    assert!(removing_runs >= 100, "the policy removes the killed DC: in {removing_runs} of 120 runs");
    assert!(shrunk_commits > 40, "the shrunk partitions commit again: {shrunk_commits} commits");
}

/// A schedule of `seconds` with every fault and a DC removed, on `name`.
fn removal(name: &str, seed: u64, workload: Workload, seconds: u64) -> SimConfig {
    let faults = Faults { remove_dc: true, ..Faults::all() };
    let mut cfg = SimConfig::new(topology(name), seed, workload, faults);
    cfg.duration = std::time::Duration::from_secs(seconds);
    cfg
}

/// Rebuild (docs/design.md, "Rebuild"): after a DC is removed the membership
/// adds a learner for every replica a partition lost — in the DC left without one, or in the
/// removed DC once it is back — each learner copies its partition from every voter (snapshot
/// reads behind the voters' epoch floor) while commits ship it their writes, and is then
/// promoted. 6 s schedules, so the copies run under load, on default.yaml and local-fast.yaml:
/// every check passes on the final placement, whose rebuilt replicas hold the same values as
/// the others, and every run ends with every partition back at its replication factor.
#[test]
fn rebuild_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let (mut rebuilt, mut removing_runs) = (0, 0);
    for name in ["default.yaml", "local-fast.yaml"] {
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 0..15 {
                let r = run(removal(name, seed, workload, 6)).expect("runs");
                if r.dcs_removed + r.nodes_removed > 0 {
                    removing_runs += 1;
                }
                rebuilt += r.replicas_rebuilt;
                if !r.ok() || r.partitions_short > 0 {
                    failed.push(format!("{name} {workload:?} {r}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{} rebuild runs failed:\n{}", failed.len(), failed.join("\n"));
    // 89 when written.
    assert!(removing_runs >= 85, "the policy removes the killed DC: in {removing_runs} of 90 runs");
    assert!(rebuilt >= removing_runs * 3, "every lost replica is rebuilt: {rebuilt} in {removing_runs} runs");
}

/// The learner must receive the writes committed while it copies: a catch-up source that
/// ships learners nothing (`ExecutorMutations::no_catch_up_to_learners`) leaves a promoted
/// replica behind. Seed 14 (bank, default.yaml, 6 s) catches it (the first from 0 to; which
/// seed does moves whenever the protocol's messages change the schedules).
#[test]
fn a_mutant_that_ships_learners_nothing_is_caught() {
    let mut cfg = oracle(removal("default.yaml", 14, Workload::Bank, 6));
    assert!(run(cfg.clone()).expect("runs").ok(), "the seed passes without the mutant");
    cfg.executor_mutations.no_catch_up_to_learners = true;
    let r = run(cfg).expect("runs");
    assert!(r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })), "not caught: {r}");
}

/// With n ≥ 4 a removal could lose a catch-up. Seed 1 (bank, world-5dc-n5, every fault and
/// `remove`): txn 4.268435462 committed with 4 of 5 votes just after dc#1's kill, node#2
/// behind on key 6's partition, and its coordinator gave that partition's catch-up to one
/// source, node#1 (the first up-to-date replica), which was dead. Without a removal node#1's
/// next life recovers its entry and ships the catch-up; with it the coordinator stops retrying
/// a removed node and node#1, back, drops its old entries, so node#2 kept the old value
/// (replicas disagreed, and the bank total read from node#2 was off). Now every voter of a
/// partition that lost a voter copies it from the other voters under the Thomas write rule
/// (`redt_protocol::epochs::repairs`); without that repair (`SimConfig::no_voter_repair`)
/// the seed diverges again.
#[test]
fn a_catch_up_whose_only_source_is_removed_is_repaired() {
    let faults = Faults { remove_dc: true, ..Faults::all() };
    let mut cfg = SimConfig::new(topology("world-5dc-n5.yaml"), 1, Workload::Bank, faults);
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "{r}");
    assert!(r.voter_repairs > 0, "{r}");
    cfg.no_voter_repair = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "the mutant without voter repairs is not caught: {r}"
    );
}

/// Seed 2082 (ycsb, default.yaml, 6 s, every fault and `remove`) once left a recovery going
/// on for ever: txn 4.268435456 lost its coordinator (node#4, dc#2); dc#2 was removed; a
/// recoverer recorded Commit on survivors, and one partition's replicas were then node#4
/// (removed), node#2 (never voted, so it held no entry to record in) and one survivor: the
/// highest-ballot record had to be completed and a majority could never hold it. A PREPARE
/// now writes a fence entry on a replica that holds none, which promises the ballot and can
/// hold a record (`redt_dc_executor`'s `prepare.rs`). Seeds 1443 (ycsb), 7199 (bank) and 7020
/// (ycsb) showed it too. Without fence entries (`ExecutorMutations::no_fence_entries`) seed
/// 2097 (the same shape) ends with a recovery stuck (2082 did, until voter repairs shifted
/// the schedules).
#[test]
fn a_replica_that_never_voted_holds_a_recovery_record() {
    let r = run(oracle(removal("default.yaml", 2082, Workload::Ycsb, 6))).expect("runs");
    assert!(r.ok(), "{r}");
    let mut cfg = oracle(removal("default.yaml", 2097, Workload::Ycsb, 6));
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 2097 passes unmutated");
    cfg.executor_mutations.no_fence_entries = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Stuck(_))),
        "the mutant without fence entries is not caught: {r}"
    );
}

/// Seed 40186 (bank, local-fast.yaml, 6 s, every fault and `remove`) left a recovery going on
/// for ever: txn 1.268435457's replicas were node#0 (holding its recorded Commit), node#1
/// (its DC removed) and node#2, whose ring was full when the first PREPARE came after its
/// restart, so it answered `NoVote` and never wrote a fence entry later. No majority could
/// hold the record. A replica now keeps the ballot such an answer promised and writes its
/// fence entry at a later PREPARE once the ring has room. The mutant that never does
/// (`ExecutorMutations::no_fence_after_full_ring`) ends stuck on the same seed.
#[test]
fn a_replica_whose_ring_was_full_holds_a_recovery_record_later() {
    let mut cfg = oracle(removal("local-fast.yaml", 40186, Workload::Bank, 6));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "{r}");
    cfg.executor_mutations.no_fence_after_full_ring = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Stuck(_))),
        "the mutant that never fences after a full ring is not caught: {r}"
    );
}

/// Seed 88 (bank, world-5dc.yaml, 6 s): a recoverer decided Commit counting the vote of a
/// node whose DC had been removed and which dropped its entry right after; the commit could
/// never be recorded at a majority and the recovery went on for ever. Recoverers now ignore
/// the promises of a DC removed in their current placement, and a node that is a voter of
/// nothing answers no PREPARE.
#[test]
fn a_removed_dcs_vote_does_not_decide_a_recovery() {
    let r = run(removal("world-5dc.yaml", 88, Workload::Bank, 6)).expect("runs");
    assert!(r.ok(), "{r}");
}

fn node_removal(name: &str, seed: u64, workload: Workload, seconds: u64) -> SimConfig {
    let faults = Faults { remove_node: true, ..Faults::all() };
    let mut cfg = SimConfig::new(topology(name), seed, workload, faults);
    cfg.duration = std::time::Duration::from_secs(seconds);
    cfg
}

/// A node removed on its own (the `remove-node` fault; its DC keeps serving): the
/// membership drops its replicas in a new epoch, the partitions it held rebuild in another
/// DC, and it comes back holding nothing and is restored. Every check passes on 4 DCs × 2
/// nodes, every workload, 6 s schedules.
#[test]
fn node_removal_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let mut removed = 0;
    for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
        for seed in 0..8 {
            let r = run(node_removal("default.yaml", seed, workload, 6)).expect("runs");
            removed += r.nodes_removed;
            if !r.ok() {
                failed.push(format!("{workload:?} {r}"));
            }
        }
    }
    assert!(failed.is_empty(), "{} failed:\n{}", failed.len(), failed.join("\n"));
    assert!(removed >= 20, "only {removed} node removals in 24 runs");
}

/// Seed 8 (bank, default.yaml, 6 s, every fault and `remove-node`): node#4 came back removed
/// and dropped its undecided old-epoch entries by aborting the transaction's entries in every
/// ring of its DC; its neighbour node#5, a voter still, held a commit-voted entry of a
/// transaction that had committed, and lost the write (its replica of key 19 kept the loaded
/// value). A removed node now aborts only the entries of its own ring. The mutant that aborts
/// across the DC (`ExecutorMutations::discard_across_the_dc`) diverges on the same seed.
#[test]
fn a_removed_node_drops_only_its_own_entries() {
    let mut cfg = oracle(node_removal("default.yaml", 8, Workload::Bank, 6));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "{r}");
    assert_eq!(r.nodes_removed, 1, "{r}");
    cfg.executor_mutations.discard_across_the_dc = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "the mutant that discards across the DC is not caught: {r}"
    );
}

/// Seed 70117 (bank, world-5dc-n5.yaml, 3 s, every fault and `remove`): a commit left dc#2
/// behind (its vote stale); its catch-up landed, but the coordinator died before dc#2's abort
/// reached it, and a recoverer that saw the commit applied elsewhere committed dc#2's stale
/// redo, whose values then stayed at the commit's timestamp over the shipped ones (replicas
/// of key 29 disagreed, the bank total was off). A catch-up's first shipment to a voter now
/// says its DC was behind, and the receiver aborts its own redo of the transaction, or writes
/// the shipped values over it if it was applied. Since seed 70185 replay also lets the copy
/// computed from the newer version win a tie at one timestamp, so each defence alone passes
/// this seed: the mutant that ignores the word (`ExecutorMutations::apply_stale_redo`)
/// diverges only together with the one that keeps the first copy (`first_write_at_cts`).
#[test]
fn a_behind_replica_never_keeps_its_stale_redo() {
    let mut cfg = oracle(removal("world-5dc-n5.yaml", 70117, Workload::Bank, 3));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "{r}");
    cfg.executor_mutations.apply_stale_redo = true;
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "the tie rule alone keeps seed 70117 whole: {r}");
    cfg.executor_mutations.first_write_at_cts = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "the mutant that applies stale redo is not caught: {r}"
    );
}

/// Seed 70185 (bank, world-5dc-n5.yaml, 3 s, every fault and `remove`): a commit left node#4's
/// DC behind; the coordinator's abort and first catch-up to it were lost (node#4 crashed), the
/// re-shipments landed in its ring behind its own stale entry, and node#4's own recovery then
/// found the commit applied elsewhere and committed that stale redo (92 where the quorum
/// wrote 86). Both copies carry the commit's timestamp, and replay kept the first to land.
/// Replay now orders versions by `(cts, update counter)`, so the copy computed from the newer
/// version wins whichever lands first ([`redt_dc_executor::ThomasRule`]). The mutant that
/// keeps the first copy (`ExecutorMutations::first_write_at_cts`) diverges on the same seed.
#[test]
fn of_two_copies_of_a_write_the_one_from_the_newer_version_wins() {
    let mut cfg = oracle(removal("world-5dc-n5.yaml", 70185, Workload::Bank, 3));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "{r}");
    cfg.executor_mutations.first_write_at_cts = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "the mutant that keeps the first copy at one timestamp is not caught: {r}"
    );
}

/// Seed 55 (ycsb, default.yaml, 6 s, every fault and `remove-node`): two recoverers of one
/// transaction raced. The first, which had not heard from dc#1, committed, aborted dc#1's
/// redo and gave its catch-up to dc#3; the second found the commit applied and committed
/// dc#3's entry first, with no catch-up (nothing could have been left behind, it reckoned), so
/// dc#3's executor took the first recoverer's decision for a repeat and shipped nothing:
/// node#2 and node#3 kept the loaded values of keys 14 and 15. A recoverer now also ships
/// each catch-up itself, from the source's redo its promises carried. The mutant that leaves
/// it to the source (`RecoveryMutations::ship_only_through_the_source`) diverges on the
/// same seed.
#[test]
fn a_recovered_catch_up_reaches_its_replicas_when_another_recoverer_won_the_source() {
    let mut cfg = oracle(node_removal("default.yaml", 55, Workload::Ycsb, 6));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "{r}");
    cfg.recovery_mutations.ship_only_through_the_source = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "the mutant that ships only through the source is not caught: {r}"
    );
}

/// Seed 50339 (ycsb, default.yaml, 6 s, every fault and `remove`): a node of the removed DC
/// came back and, not yet told, recovered a transaction, counting its DC mate's commit vote:
/// it recorded Commit at a higher ballot at dc#0 and dc#3, while an earlier recoverer's Abort
/// at a lower ballot had reached only dc#2. The survivors' recoverers all chose the commit
/// (the highest-ballot record) and needed dc#2 to hold it for a majority without the removed
/// DC, but dc#2's vote word kept the first decision it had recorded: undecided for good. A
/// RECORD replaces a lower ballot's decision, as a Paxos acceptor does (docs/design.md,
/// "Recovery"). The mutant that keeps the first (`ExecutorMutations::first_record_stays`)
/// is stuck on the same seed.
#[test]
fn a_higher_ballot_record_replaces_a_lower_ones_so_the_survivors_finish() {
    let mut cfg = oracle(removal("default.yaml", 50339, Workload::Ycsb, 6));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "{r}");
    cfg.executor_mutations.first_record_stays = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Stuck(_))),
        "the mutant that keeps the first recorded decision is not caught: {r}"
    );
}

/// Two removals in one run (`all,remove,remove-node`, bank, default.yaml, 6 s): a DC and then
/// a node die. Before the membership refused a removal that leaves a partition with fewer
/// voters than recovery tolerates (`Membership::fewest_voters`: 2 of 3), the second removal
/// left some partitions one voter of three, and transactions of the first epoch, two of their three replicas gone for
/// good, stayed undecided (20 of seeds 9000–9029). Now the node stays placed and is waited
/// for: seeds 9000–9009 pass every check (and four world-5dc-n5 seeds, 3 s), and the mutant
/// that lets the removal through
/// (`SimConfig::remove_too_many`) leaves seed 9000 stuck.
#[test]
fn a_second_replica_lost_before_the_first_is_rebuilt_is_waited_for() {
    let two = |seed| {
        let faults = Faults { remove_dc: true, remove_node: true, ..Faults::all() };
        let mut cfg = SimConfig::new(topology("default.yaml"), seed, Workload::Bank, faults);
        cfg.duration = std::time::Duration::from_secs(6);
        cfg
    };
    let mut reports: Vec<_> = (9000..9010).map(|s| run(two(s)).expect("runs")).collect();
    // n = 5 keeps 4 voters: a second DC (here a node, one per DC) is refused too, and comes
    // back a voter that repairs what lost a voter while it was down (seeds 12, 14 and 15
    // failed before it did; 12's node#3 kept a loaded value the others had overwritten).
    for seed in [1, 12, 14, 15] {
        let faults = Faults { remove_dc: true, remove_node: true, ..Faults::all() };
        reports.push(run(SimConfig::new(topology("world-5dc-n5.yaml"), seed, Workload::Bank, faults)).expect("runs"));
    }
    let failed: Vec<String> = reports.iter().filter(|r| !r.ok()).map(|r| r.to_string()).collect();
    assert!(failed.is_empty(), "{} failed:\n{}", failed.len(), failed.join("\n"));
    assert!(reports.iter().any(|r| r.removals_refused > 0), "no removal was refused in 10 runs");
    let mut cfg = two(9000);
    cfg.remove_too_many = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Stuck(_))),
        "the mutant that removes too many replicas is not caught: {r}"
    );
}

/// The list-append checker with range reads (the phantom test): the append-scan
/// workload mixes point reads, appends and scans (`KvOp::Scan`, next-key gap locks on the kv
/// table's ordered index) over a sliding window of keys, so new keys keep being inserted
/// inside ranges other transactions read. A scan whose limit covers its range reads every key
/// of the range it did not return as the empty list, so a phantom closes a dependency cycle.
/// 12 seeds on each of local-fast, default and world-5dc with every fault, half of them also
/// removing a DC: every check passes, and the scans committed and observed absent keys.
#[test]
fn append_scan_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let (mut scans, mut absent, mut deletes) = (0, 0, 0);
    for name in ["local-fast.yaml", "default.yaml", "world-5dc.yaml"] {
        let t = topology(name);
        for seed in 0..12 {
            let faults = Faults { remove_dc: seed % 2 == 1, ..Faults::all() };
            let r = run(SimConfig::new(t.clone(), seed, Workload::AppendScan, faults)).expect("runs");
            scans += r.scans_committed;
            absent += r.scan_absent;
            deletes += r.deletes_committed;
            if !r.ok() {
                failed.push(format!("{name} {r}"));
            }
        }
    }
    assert!(failed.is_empty(), "{} append-scan runs failed:\n{}", failed.len(), failed.join("\n"));
    assert!(scans > 0 && absent > 0, "scans committed ({scans}) and observed absent keys ({absent})");
    assert!(deletes > 0, "deletes committed");
}

/// Optimistic, interactive transactions (docs/design.md, "Optimistic transactions: versioned
/// reads and CHECK"): each client reads 1–3 hot keys' lists with a versioned read (its DC's
/// replicas without locks, at any moment, a lagging replica included; the keys its DC does not
/// hold at the nearest DC holding them), then commits appends that depend on what it read, with
/// a CHECK of every key read. The history takes the lists the versioned read returned as the
/// transaction's reads, invoked when the read started, so Elle's list-append checker judges
/// the read and the commit as one strict-serializable transaction. 12 seeds on each of
/// local-fast, default and world-5dc-n5 (n = 5: commits leave replicas behind, and a versioned
/// read may read one) with every fault, the odd seeds also removing a DC: every check passes,
/// the interactive transactions committed, and CHECKs failed on stale reads.
#[test]
fn interactive_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let (mut committed, mut reads, mut stale) = (0, 0, 0);
    for name in ["local-fast.yaml", "default.yaml", "world-5dc-n5.yaml"] {
        let t = topology(name);
        for seed in 0..12 {
            let faults = Faults { remove_dc: seed % 2 == 1, ..Faults::all() };
            let r = run(SimConfig::new(t.clone(), seed, Workload::Interactive, faults)).expect("runs");
            committed += r.committed;
            reads += r.reads_versioned;
            stale += r.abort_causes[redt_protocol::stats::AbortCause::StaleRead.index()];
            if !r.ok() {
                failed.push(format!("{name} {r}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} interactive runs failed:
{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(committed > 100 && reads >= committed, "committed {committed} after {reads} versioned reads");
    assert!(stale > 0, "no CHECK ever failed on a stale read");
}

/// Seed 1 (interactive, local-fast.yaml, every fault) and seed 2 (interactive, default.yaml,
/// no fault): a CHECK holds its transaction to the versions its read returned. The mutant
/// whose executors skip the version checks (`ExecutorMutations::skip_version_checks`, `redt sim
/// --mutant-skip-version-checks`) commits appends decided on a list another commit had grown
/// since: Elle finds the cycle (G-single: the stale reader's read misses a write that precedes
/// its own append).
#[test]
fn a_mutant_that_skips_version_checks_is_caught() {
    for (name, seed, faults) in [("local-fast.yaml", 1, Faults::all()), ("default.yaml", 2, Faults::none())] {
        let cfg = || SimConfig::new(topology(name), seed, Workload::Interactive, faults);
        let r = run(cfg()).expect("runs");
        assert!(r.ok(), "{name} seed {seed} passes as built: {r}");
        let mut mutant = cfg();
        mutant.executor_mutations.skip_version_checks = true;
        let r = run(mutant).expect("runs");
        assert!(
            r.violations.iter().any(|v| matches!(v, Violation::Anomaly(_))),
            "{name} seed {seed}: the mutant that skips version checks is not caught: {r}"
        );
    }
}

/// Deleted records freed (`redt_dc_executor`'s `deleted.rs`): the churn workload appends to
/// a sliding window of keys and deletes one key in four transactions, half of them the
/// window's lowest, which no later append brings back; each node frees a deleted record one
/// simulated second after its delete (`SIM_DELETED_GRACE`) while catch-ups of older writes may
/// still be in flight. 16 seeds on each of local-fast, world-5dc and world-5dc-n5 (n = 5, so
/// commits leave replicas behind and catch-ups reach them late) with every fault: every check
/// passes, and records were freed. The workload found, with freeing off too, a catch-up whose
/// row replay applied after a delete had taken its key out of the tree (seed 261 on
/// world-5dc-n5; replay now puts the key back, `DcHandle::relink_rows`).
#[test]
fn churn_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let (mut deletes, mut freed) = (0, 0);
    for name in ["local-fast.yaml", "world-5dc.yaml", "world-5dc-n5.yaml"] {
        let t = topology(name);
        for seed in 0..16 {
            let r = run(SimConfig::new(t.clone(), seed, Workload::Churn, Faults::all())).expect("runs");
            deletes += r.deletes_committed;
            freed += r.deleted_records_freed;
            if !r.ok() {
                failed.push(format!("{name} {r}"));
            }
        }
    }
    assert!(failed.is_empty(), "{} churn runs failed:\n{}", failed.len(), failed.join("\n"));
    assert!(deletes > 0 && freed > 0, "deletes committed ({deletes}) and records freed ({freed})");
}

/// The purge that ends a learner's copy (`ExecutorCore::purge_unrefreshed`): a DC removed
/// from the placement comes back with the MemStore it kept and is rebuilt onto it from its
/// partitions' voters (with n = 5 over five DCs no other DC can take its replicas). A key it
/// held whose delete it missed, and which the voters freed while it was out of the placement,
/// is in no snapshot chunk; the purge empties and frees it. It takes an outage longer than the
/// grace, so the run takes a 1 s grace. The catch-up floors hold frees back while entries of
/// the outage are undecided, which makes such a free rare (600 seeds from 3000 with the purge
/// off found none), so the purge is tested as a layer of its own, with the floors off
/// (`ExecutorMutations::reclaim_below_no_floor`): seed 3121 of churn on world-5dc-n5, every
/// fault and a DC removal, passes and purges a row; with the purge off too
/// (`ExecutorMutations::keep_unrefreshed`, `redt sim --mutant-keep-unrefreshed
/// --mutant-reclaim-below-no-floor --deleted-grace 1s`) the rebuilt learner keeps the old
/// value and the replicas disagree.
#[test]
fn a_mutant_that_keeps_what_a_rebuild_did_not_refresh_is_caught() {
    let faults = Faults { remove_dc: true, ..Faults::all() };
    let mut cfg = oracle(SimConfig::new(topology("world-5dc-n5.yaml"), 3121, Workload::Churn, faults));
    cfg.deleted_grace = Some(std::time::Duration::from_secs(1));
    cfg.executor_mutations.reclaim_below_no_floor = true;
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "the seed passes with the floors off: {r}");
    assert!(r.rebuild_rows_purged > 0, "the rebuild purged a row: {r}");
    cfg.executor_mutations.keep_unrefreshed = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 3121 catches the mutant by replicas that disagree: {r}"
    );
}

/// The check before a free (`ExecutorCore::take_reclaims`): a replica frees its record of a
/// deleted key only once every other replica of the key's partition holds the delete too.
/// Without it (`ExecutorMutations::reclaim_without_check`, `redt sim
/// --mutant-reclaim-without-check`) the replicas free on their own clocks: with n = 5 a voter
/// still waiting for the delete's catch-up keeps the old row, a DC rebuilt after its removal
/// merges that row from it, and the delete, shipped before the learner was added, never
/// reaches the learner. Seed 3289 of churn on world-5dc-n5, every fault and a DC removal,
/// catches it (`--seeds 400 --from 3150` fails seeds 3289, 3422 and 3531, which pass as
/// built; 3167 did until recoverers aborted from abort votes and records alone).
#[test]
fn a_mutant_that_frees_without_asking_the_other_replicas_is_caught() {
    let faults = Faults { remove_dc: true, ..Faults::all() };
    let mut cfg = oracle(SimConfig::new(topology("world-5dc-n5.yaml"), 3289, Workload::Churn, faults));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "the seed passes as built: {r}");
    assert!(r.deleted_records_freed > 0, "records were freed: {r}");
    cfg.executor_mutations.reclaim_without_check = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 3289 catches the mutant by replicas that disagree: {r}"
    );
}

/// The catch-up floors (`redt_dc_executor::DcHandle::catch_up_floor`): a replica frees a
/// deleted key only below the oldest start of the entries on its own and its fellow replicas'
/// rings that may still make a catch-up. Without them (`ExecutorMutations::
/// reclaim_below_no_floor`, `redt sim --mutant-reclaim-below-no-floor`) a phase 2 that
/// reaches its source DC late ships a catch-up older than a horizon another key of its slot
/// raised meanwhile, and its replica never gets the write. Seed 44087 of churn on sim-20dc,
/// every fault and a DC removal, catches it (`redt sim --seeds 500 --from 44000
/// --mutant-reclaim-below-no-floor` fails seeds 44087 and 44424 first); the same seed passes
/// as built.
#[test]
fn a_mutant_that_frees_below_a_catch_up_floor_is_caught() {
    let faults = Faults { remove_dc: true, ..Faults::all() };
    let mut cfg = oracle(SimConfig::new(topology("sim-20dc.yaml"), 44087, Workload::Churn, faults));
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "the seed passes as built: {r}");
    assert!(r.deleted_records_freed > 0, "records were freed: {r}");
    cfg.executor_mutations.reclaim_below_no_floor = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 44087 catches the mutant by replicas that disagree: {r}"
    );
}

/// A recovered commit tells a DC it did not hear from to abort its entries, as a DC left
/// behind, only if a catch-up brings the values to every replica the DC holds of the
/// transaction. Without that (`RecoveryMutations::abort_unheard_without_catch_up`, `redt sim
/// --mutant-abort-unheard-without-catch-up`) a recoverer that found the commit applied, whose
/// up-to-date replicas answered "applied" and so carried no redo to ship, aborts an
/// up-to-date DC's entry and nobody gives it the write. Seed 42023 of churn on sim-20dc, every
/// fault and a DC removal, runs with the catch-up floors off
/// (`ExecutorMutations::reclaim_below_no_floor`): it passes, and catches the mutant (`redt sim
/// --seed 42023 --mutant-reclaim-below-no-floor --mutant-abort-unheard-without-catch-up`). As
/// built, churn seeds 41600–42599 on sim-20dc and 41000–41999 on world-5dc-n5 (`all,remove`)
/// did not catch it.
#[test]
fn a_mutant_that_aborts_a_dc_it_did_not_hear_from_without_a_catch_up_is_caught() {
    let faults = Faults { remove_dc: true, ..Faults::all() };
    let mut cfg = oracle(SimConfig::new(topology("sim-20dc.yaml"), 42023, Workload::Churn, faults));
    cfg.executor_mutations.reclaim_below_no_floor = true;
    assert!(run(cfg.clone()).expect("runs").ok(), "seed 42023 passes with the floors off");
    cfg.recovery_mutations.abort_unheard_without_catch_up = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 42023 catches the mutant by replicas that disagree: {r}"
    );
}

/// The deletion-horizon mutant: freeing a deleted record does not raise its slot's horizon
/// (`ExecutorMutations::free_deleted_without_horizon`), so a catch-up of a write older than
/// the delete, reaching a replica after the free, creates the key there again. With the
/// catch-up floors no catch-up older than a delete is still to be shipped when the key is
/// freed, so the horizon guards what is left (a copy delayed past its acknowledgement, a
/// catch-up after its shipper gave up), which 800 seeds of churn on sim-20dc with `all,remove`
/// did not produce; it is tested as a layer of its own, with the floors off
/// (`ExecutorMutations::reclaim_below_no_floor`): seed 39 of churn on world-5dc-n5 (every
/// fault) passes, and with the horizon off too (`redt sim --mutant-free-deleted-without-horizon
/// --mutant-reclaim-below-no-floor`) the replicas of a key disagree.
#[test]
fn a_mutant_that_frees_deleted_records_without_a_horizon_is_caught() {
    let mut cfg = oracle(SimConfig::new(topology("world-5dc-n5.yaml"), 39, Workload::Churn, Faults::all()));
    cfg.executor_mutations.reclaim_below_no_floor = true;
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "the seed passes with the floors off: {r}");
    assert!(r.deleted_records_freed > 0, "records were freed: {r}");
    cfg.executor_mutations.free_deleted_without_horizon = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Diverged { .. })),
        "seed 39 catches the mutant by replicas that disagree: {r}"
    );
}

/// The delete mutant: a write that brings a deleted key back does not put it back into its
/// ordered index (`SimConfig::no_relink`, wired to `OrderedIndex::set_relink(false)`), so
/// range reads would miss its row. The append-scan workload deletes a window key every
/// `DELETE_EVERY` transactions and its appends bring keys back; the index check at the end
/// finds a key holding a row that its replica's tree lacks. Seed 3 on local-fast (no faults)
/// catches it (`redt sim --seeds 10 --config configs/local-fast.yaml --workload append-scan
/// --faults none --mutant-no-relink` fails all of seeds 0..10); the same seed passes as built.
#[test]
fn a_mutant_that_does_not_relink_a_deleted_key_is_caught_by_the_index_check() {
    let mut cfg = SimConfig::new(topology("local-fast.yaml"), 3, Workload::AppendScan, Faults::none());
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "the seed passes as built: {r}");
    assert!(r.deletes_committed > 0, "deletes committed: {r}");
    cfg.no_relink = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, redt_sim::Violation::Unindexed { .. })),
        "seed 3 catches the mutant by a key missing from its index: {r}"
    );
}

/// The phantom mutant: inserts take no gap lock (`SimConfig::no_gap_locks`, wired to
/// `OrderedIndex::set_gap_locks(false)`). On sim-phantom.yaml (n = 1; dc-a and dc-b 200 ms
/// apart, dc-c 2 ms from both) a transaction coordinated in dc-a reads its range's piece in
/// dc-b 100 ms after the others, while one coordinated in dc-c commits an insert into the
/// range dc-a already read and an append dc-b's piece then reads: the scan is fractured.
/// Seed 29 (append-scan, no faults) catches it as a dependency cycle (G2: txn 3 -rw-> txn 7
/// -rw-> txn 8 -wr-> txn 3; `redt sim --seeds 40 --config
/// configs/sim-phantom.yaml --workload append-scan --faults none --mutant-no-gap-locks` fails
/// 6 of seeds 0..40); the same seed passes with gap locks.
#[test]
fn a_mutant_without_gap_locks_is_caught_by_a_phantom() {
    let mut cfg = SimConfig::new(topology("sim-phantom.yaml"), 29, Workload::AppendScan, Faults::none());
    let r = run(cfg.clone()).expect("runs");
    assert!(r.ok(), "the seed passes with gap locks: {r}");
    assert!(r.scan_absent > 0, "its scans observed absent keys: {r}");
    cfg.no_gap_locks = true;
    let r = run(cfg).expect("runs");
    assert!(
        r.violations
            .iter()
            .any(|v| matches!(v, redt_sim::Violation::Anomaly(a) if a.contains("G-single") || a.contains("G2"))),
        "seed 29 catches the mutant by a dependency cycle: {r}"
    );
}

/// YCSB seeds 300140, 300429, 300662 and 300768 (`--seeds 1000 --from 300000`) and 200116
/// to 202850 (default.yaml, every fault): the index check found a key holding a row on a
/// replica whose tree lacked it. Cell locks are per lock group, so a YCSB update that wrote
/// zero bytes to one cell of a record holding no other row (a delete) and an update of
/// another cell held the record at once; the first's phase 2 took the key out of the tree,
/// and the second's, which found the key there in its phase 1, wrote its row without putting
/// the key back. A delete now leaves the key in the tree while another writer holds any of
/// the record's groups (`OrderedIndex::unlink`; `dc-executor/tests/deletes.rs`,
/// `a_delete_keeps_its_key_in_the_tree_while_a_writer_of_other_cells_holds_the_record`).
#[test]
fn a_delete_leaves_its_key_while_a_writer_of_other_cells_holds_the_record() {
    let seeds = [
        300140, 300429, 300662, 300768, 200116, 200120, 200154, 200290, 200735, 200887, 201017, 201021, 201621, 201697,
        202553, 202644, 202850,
    ];
    let failed: Vec<String> = seeds
        .iter()
        .map(|&seed| run(SimConfig::new(topology("default.yaml"), seed, Workload::Ycsb, Faults::all())).expect("runs"))
        .filter(|r| !r.ok())
        .map(|r| r.to_string())
        .collect();
    assert!(failed.is_empty(), "{} seeds failed:\n{}", failed.len(), failed.join("\n"));
}

/// A schedule of every fault with a DC and a node killed, the failover driven by the real
/// parts (`FailoverMode::Policy`): each node's failure detector on the simulated wire, the
/// leader's failover policy asking the voters and probing, its removals checked to be of
/// suspects down or cut off from a majority of the voters.
fn real_failover(name: &str, seed: u64, workload: Workload) -> SimConfig {
    let faults = Faults { remove_dc: true, remove_node: true, ..Faults::all() };
    let mut cfg = SimConfig::new(topology(name), seed, workload, faults);
    cfg.failover = FailoverMode::Policy;
    cfg
}

/// The failover policy and the failure detectors themselves remove and restore the killed DCs
/// and nodes (and the crashed ones that stay down past detection), and every check passes:
/// 15 seeds on each of three topologies and three workloads.
#[test]
fn real_failover_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let (mut dcs, mut nodes) = (0, 0);
    for name in ["default.yaml", "world-5dc.yaml", "sim-20dc.yaml"] {
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 2000..2015 {
                let r = run(real_failover(name, seed, workload)).expect("runs");
                dcs += r.dcs_removed;
                nodes += r.nodes_removed;
                if !r.ok() {
                    failed.push(format!("{name} {workload:?} {r}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{} runs failed:\n{}", failed.len(), failed.join("\n"));
    assert!(dcs > 0 && nodes > 0, "the policy removed DCs ({dcs}) and nodes ({nodes})");
}

/// A promise-table row held by a transaction that never got its fence entry: sim-20dc.yaml
/// seed 7032, churn, under the real failover policy. A recoverer PREPAREd three replicas whose
/// rings were full, so each kept its promise in the transaction's row of its promise table and
/// answered `NoVote`; it found the abort applied and decided, naming no entry there. Two of
/// those nodes are replicas of the five-replica partition of a later transaction whose id
/// hashes to the same row: they answered every PREPARE of it `Unknown`, its coordinator's DC
/// was removed, and the two answers left held only an abort vote and an abort record, no
/// majority. The recoverer's decision now reaches every DC that answered `NoVote` and frees
/// the row there; the mutant that keeps the rows
/// (`ExecutorMutations::decision_keeps_promise_rows`) leaves the later transaction undecided,
/// its locks held.
#[test]
fn a_recoverers_decision_frees_the_promise_rows_of_full_rings() {
    let cfg = || real_failover("sim-20dc.yaml", 7032, Workload::Churn);
    let r = run(cfg()).expect("runs");
    assert!(r.ok(), "passes as built: {r}");
    let mut mutant = cfg();
    mutant.executor_mutations.decision_keeps_promise_rows = true;
    let r = run(mutant).expect("runs");
    assert!(r.violations.iter().any(|v| matches!(v, Violation::Stuck(_))), "left undecided: {r}");
}

/// A leader that removes what its own detector suspects, without the voters' majority
/// (`FailoverMutations::confirm_alone`), removes a DC cut off from it alone: seed 3002 on
/// default.yaml (a partition between the leader's DC, dc#0, and dc#2 at 0.42 s), caught as an
/// unjustified removal; the same schedule passes with the real rule.
#[test]
fn a_mutant_confirming_removals_alone_is_caught() {
    let cfg = || real_failover("default.yaml", 3002, Workload::Bank);
    assert!(run(cfg()).expect("runs").ok(), "passes as built");
    let mut mutant = cfg();
    mutant.failover_mutations.confirm_alone = true;
    let r = run(mutant).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, Violation::UnjustifiedRemoval { .. })),
        "an unjustified removal: {r}"
    );
}

/// A transaction planned while a removed DC left its partitions two voters, one of which was
/// removed in turn before the transaction was decided: default.yaml seed 2131, churn, under
/// the real failover policy. Its epoch's majority never answers again, but the other
/// replica's abort vote or abort record rules out every commit, so the recoverer aborts it
/// without a majority (the recovery rule's rule 2). The mutant that waits for the majority
/// (`RecoveryMutations::abort_votes_need_a_majority`) leaves it undecided, its locks held.
#[test]
fn abort_votes_decide_a_transaction_whose_replicas_were_removed() {
    let cfg = || real_failover("default.yaml", 2131, Workload::Churn);
    let r = run(cfg()).expect("runs");
    assert!(r.ok(), "passes as built: {r}");
    let mut mutant = cfg();
    mutant.recovery_mutations.abort_votes_need_a_majority = true;
    let r = run(mutant).expect("runs");
    assert!(r.violations.iter().any(|v| matches!(v, Violation::Stuck(_))), "left undecided: {r}");
}

/// Seed 51086 (bank, world-5dc-n5.yaml, every fault, `remove` and `remove-node`, the real
/// failover policy): tokyo applied a commit through its catch-up, restarted, then got the
/// transaction's phase 1, held back 3 s, and ran it on the values the commit had written: a
/// second commit vote, reading versions at the commit's own timestamp. A recoverer of that
/// entry found the commit applied elsewhere, took the stale vote, the newest it saw, for the
/// up-to-date one, made tokyo the source and told singapore, whose vote the commit had
/// counted, to abort its redo; tokyo's values never apply (they read past the commit), so
/// singapore kept the loaded values of keys 0 and 10. A vote that read a version at or past
/// the commit's timestamp now counts as missing. The mutant that takes it for a vote
/// (`RecoveryMutations::stale_vote_as_source`) diverges on the same seed.
#[test]
fn a_phase_1_run_again_after_the_commit_is_never_the_catch_up_source() {
    let cfg = || real_failover("world-5dc-n5.yaml", 51086, Workload::Bank);
    let r = run(cfg()).expect("runs");
    assert!(r.ok(), "passes as built: {r}");
    let mut mutant = cfg();
    mutant.recovery_mutations.stale_vote_as_source = true;
    let r = run(mutant).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, Violation::Diverged { .. })),
        "the mutant that takes a stale vote for the source is not caught: {r}"
    );
}

/// `cfg` under decided-holder takeover (`redt sim --takeover`, docs/design.md §2).
fn takeover(mut cfg: SimConfig) -> SimConfig {
    cfg.options.takeover = true;
    cfg
}

/// Under decided-holder takeover (a coordinator holds a transaction behind its own undecided
/// conflicting one, then sends it carrying that decision), every check passes: 6 seeds of
/// each workload on local-fast (n = 3), default (n = 4 of 8 nodes) and world-5dc-n5 (n = 5),
/// every fault.
#[test]
fn takeover_seeds_pass_every_check() {
    let mut failed = Vec::new();
    for name in ["local-fast.yaml", "default.yaml", "world-5dc-n5.yaml"] {
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 0..6 {
                let r = run(takeover(SimConfig::new(topology(name), seed, workload, Faults::all()))).expect("runs");
                if !r.ok() {
                    failed.push(format!("{name} {workload:?} {r}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{} failed:\n{}", failed.len(), failed.join("\n"));
}

/// Seed 100 (bank, world-5dc-n5.yaml, every fault, takeover): commits whose phase 2 named a
/// catch-up for a DC left behind reached their source DC first on the phase 1 of the next
/// conflicting transaction. The carried phase 2 is applied with its catch-up; the mutant that
/// applies it without (`ExecutorMutations::carried_without_catch_up`) leaves the replicas
/// apart, since the phase 2 delivered after it is a repeat and ships nothing.
#[test]
fn a_carried_phase_2_ships_its_catch_up() {
    let cfg = || takeover(SimConfig::new(topology("world-5dc-n5.yaml"), 100, Workload::Bank, Faults::all()));
    let r = run(cfg()).expect("runs");
    assert!(r.ok(), "passes as built: {r}");
    let mut mutant = cfg();
    mutant.executor_mutations.carried_without_catch_up = true;
    let r = run(mutant).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, Violation::Diverged { .. })),
        "the mutant that drops a carried phase 2's catch-up is not caught: {r}"
    );
}

/// `cfg` under decided-holder takeover with batches of up to 16 transactions (docs/design.md,
/// "Batches of held transactions"), 8 clients per node, so that a node holds several
/// conflicting transactions at once.
fn batched(mut cfg: SimConfig) -> SimConfig {
    cfg.options.takeover = true;
    cfg.options.batch = redt_dc_executor::MAX_BATCH_MEMBERS;
    cfg.clients_per_node = 8;
    cfg
}

/// With batches, every check passes: 4 seeds of each workload on local-fast (n = 3), default
/// (n = 4 of 8 nodes) and world-5dc-n5 (n = 5), every fault, and 2 of each on default and
/// world-5dc-n5 with DC and node removals under the failover policy; and the batches form (the
/// runs take held transactions along).
#[test]
fn batch_seeds_pass_every_check() {
    let mut failed = Vec::new();
    let mut batched_total = 0;
    for name in ["local-fast.yaml", "default.yaml", "world-5dc-n5.yaml"] {
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 0..4 {
                let r = run(batched(SimConfig::new(topology(name), seed, workload, Faults::all()))).expect("runs");
                batched_total += r.batched;
                if !r.ok() {
                    failed.push(format!("{name} {workload:?} {r}"));
                }
            }
        }
    }
    // And with DC and node removals under the real failover policy: 2 seeds of each workload
    // on default and world-5dc-n5.
    for name in ["default.yaml", "world-5dc-n5.yaml"] {
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 0..2 {
                let faults = Faults { remove_dc: true, remove_node: true, ..Faults::all() };
                let mut cfg = batched(SimConfig::new(topology(name), seed, workload, faults));
                cfg.failover = FailoverMode::Policy;
                let r = run(cfg).expect("runs");
                batched_total += r.batched;
                if !r.ok() {
                    failed.push(format!("{name} {workload:?} removals {r}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{} failed:\n{}", failed.len(), failed.join("\n"));
    assert!(batched_total > 100, "the batches took only {batched_total} held transactions along");
}

/// Seed 2 (bank, default.yaml, no fault, 8 clients per node, batches): batches of transfers
/// that move money out of one account commit. Each member runs on what the members before it
/// wrote, so the total stays; the mutant whose members all run on the values read before the
/// batch (`ExecutorMutations::batch_without_overlay`) loses an update, and the total changes.
#[test]
fn a_batch_member_runs_on_what_the_members_before_it_wrote() {
    let cfg = || batched(SimConfig::new(topology("default.yaml"), 2, Workload::Bank, Faults::none()));
    let r = run(cfg()).expect("runs");
    assert!(r.ok(), "passes as built: {r}");
    assert!(r.batched > 0, "no batch formed: {r}");
    let mut mutant = cfg();
    mutant.executor_mutations.batch_without_overlay = true;
    let r = run(mutant).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, Violation::BankTotal { .. })),
        "the mutant whose batch members ignore each other's writes is not caught: {r}"
    );
}

/// Seed 2 (bank, default.yaml, no fault, 8 clients per node, batches): a batch whose members
/// add to one account writes back the last member's sum. The mutant that keeps the first
/// writer's value (`ExecutorMutations::batch_first_writer_wins`) loses the later members'
/// additions, and the total changes.
#[test]
fn a_batch_writes_back_its_last_writer() {
    let mut mutant = batched(SimConfig::new(topology("default.yaml"), 2, Workload::Bank, Faults::none()));
    mutant.executor_mutations.batch_first_writer_wins = true;
    let r = run(mutant).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, Violation::BankTotal { .. })),
        "the mutant that writes back a batch's first writer is not caught: {r}"
    );
}

/// Seed 1 (list-append, default.yaml, no fault, 8 clients per node, batches): every replica DC
/// runs a batch's members in the order its one message names. The mutant whose odd-numbered
/// DCs run them last to first (`ExecutorMutations::batch_order_by_dc`) appends in two orders,
/// and the replicas of a list disagree.
#[test]
fn every_dc_runs_a_batch_in_one_order() {
    let cfg = || batched(SimConfig::new(topology("default.yaml"), 1, Workload::Append, Faults::none()));
    let r = run(cfg()).expect("runs");
    assert!(r.ok(), "passes as built: {r}");
    let mut mutant = cfg();
    mutant.executor_mutations.batch_order_by_dc = true;
    let r = run(mutant).expect("runs");
    assert!(
        r.violations.iter().any(|v| matches!(v, Violation::Diverged { .. })),
        "the mutant whose DCs order a batch differently is not caught: {r}"
    );
}

/// `cfg` with every executor waiting up to `ms` for a lock it meets (docs/design.md §2,
/// "Waiting for a lock") instead of No-Wait.
fn lock_wait(mut cfg: SimConfig, ms: u64) -> SimConfig {
    cfg.options.lock_wait = redt_protocol::txn::LockWait::For(std::time::Duration::from_millis(ms));
    cfg
}

/// With the executors waiting for locks (40 ms, a WAN round trip), the schedules pass every
/// check too: 20 seeds of each workload on each of local-fast, default and world-5dc with
/// every fault, and 10 of each with DC removals under the real failover policy (210 runs).
#[test]
fn lock_wait_seeds_pass_every_check() {
    let mut failed = Vec::new();
    for name in ["local-fast.yaml", "default.yaml", "world-5dc.yaml"] {
        let t = topology(name);
        for workload in [Workload::Bank, Workload::Append, Workload::Ycsb] {
            for seed in 0..20 {
                let r = run(lock_wait(SimConfig::new(t.clone(), seed, workload, Faults::all()), 40)).expect("runs");
                if !r.ok() {
                    failed.push(format!("{name} {workload:?} {r}"));
                }
            }
        }
    }
    for workload in [Workload::Bank, Workload::Append, Workload::Churn] {
        for seed in 0..10 {
            let r = run(lock_wait(removal("default.yaml", seed, workload, 6), 40)).expect("runs");
            if !r.ok() {
                failed.push(format!("removal {workload:?} {r}"));
            }
        }
    }
    assert!(failed.is_empty(), "{} runs with lock waits failed:\n{}", failed.len(), failed.join("\n"));
}

/// A phase 1 that waited for a lock leaves its first try's entry aborted and unvoted beside the
/// commit-voted entry of the try that got the lock; a PREPARE must answer the commit vote. The
/// mutant that answers from the first try (`ExecutorMutations::prepare_reads_first_try`) is
/// caught by seed 34 (bank, local-fast.yaml, every fault, 40 ms lock wait): a recoverer of a
/// transaction whose coordinator, node#2, crashed at 774 ms counts an abort vote where the ring
/// holds a commit vote, and the transaction stays undecided with keys 12 and 16 locked. The
/// same schedule passes as built.
#[test]
fn a_mutant_whose_prepare_reads_a_waits_first_try_is_caught() {
    let cfg = || lock_wait(SimConfig::new(topology("local-fast.yaml"), 34, Workload::Bank, Faults::all()), 40);
    let r = run(cfg()).expect("runs");
    assert!(r.ok(), "passes as built: {r}");
    let mut mutant = cfg();
    mutant.executor_mutations.prepare_reads_first_try = true;
    let r = run(mutant).expect("runs");
    assert!(r.violations.iter().any(|v| matches!(v, Violation::Stuck(_))), "left undecided: {r}");
}

//! TEMPORARY seed hunt (not committed).
use redt_proto::Topology;
use redt_sim::{run, FailoverMode, Faults, SimConfig, SimReport, Violation, Workload};
use std::time::Duration;

fn topology(name: &str) -> Topology {
    let path = format!("{}/../configs/{name}", env!("CARGO_MANIFEST_DIR"));
    Topology::load(std::path::Path::new(&path)).expect("config loads")
}
fn oracle(mut cfg: SimConfig) -> SimConfig {
    cfg.failover = FailoverMode::Oracle;
    cfg
}
fn lossy(t: Topology, seed: u64, w: Workload) -> SimConfig {
    let faults = Faults { drop: 0.2, duplicate: 0.02, hold: 0.02, bursts: false, ..Faults::all() };
    let mut cfg = SimConfig::new(t, seed, w, faults);
    cfg.recovery_turn = Some(Duration::ZERO);
    cfg
}
fn removal(name: &str, seed: u64, w: Workload, s: u64) -> SimConfig {
    let mut cfg = SimConfig::new(topology(name), seed, w, Faults { remove_dc: true, ..Faults::all() });
    cfg.duration = Duration::from_secs(s);
    cfg
}
fn node_removal(name: &str, seed: u64, w: Workload, s: u64) -> SimConfig {
    let mut cfg = SimConfig::new(topology(name), seed, w, Faults { remove_node: true, ..Faults::all() });
    cfg.duration = Duration::from_secs(s);
    cfg
}
fn real_failover(name: &str, seed: u64, w: Workload) -> SimConfig {
    let mut cfg = SimConfig::new(topology(name), seed, w, Faults { remove_dc: true, remove_node: true, ..Faults::all() });
    cfg.failover = FailoverMode::Policy;
    cfg
}
fn lock_wait(mut cfg: SimConfig, ms: u64) -> SimConfig {
    cfg.options.lock_wait = redt_protocol::txn::LockWait::For(Duration::from_millis(ms));
    cfg
}
fn diverged(r: &SimReport) -> bool {
    r.violations.iter().any(|v| matches!(v, Violation::Diverged { .. }))
}
fn stuck(r: &SimReport) -> bool {
    r.violations.iter().any(|v| matches!(v, Violation::Stuck(_)))
}

type Cfg = Box<dyn Fn(u64) -> SimConfig + Sync>;
struct Case {
    cfg: Cfg,
    clean: fn(&SimReport) -> bool,
    mutate: fn(&mut SimConfig),
    caught: fn(&SimReport) -> bool,
    extra: Option<fn(&mut SimConfig)>, // a second mutant run that must pass (apply_stale_redo alone)
}

fn case(name: &str) -> Case {
    let ok: fn(&SimReport) -> bool = |r| r.ok();
    match name {
        "papers_rule" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("local-fast.yaml"), s, Workload::Bank, Faults::all())); c.recovery_turn = Some(Duration::ZERO); c }), clean: ok, mutate: |c| c.recovery_mutations.papers_rule = true, caught: diverged, extra: None },
        "votes_beat_records" => Case { cfg: Box::new(|s| oracle(lossy(topology("local-fast.yaml"), s, Workload::Bank))), clean: ok, mutate: |c| c.recovery_mutations.votes_beat_records = true, caught: diverged, extra: None },
        "act_before_recording" => Case { cfg: Box::new(|s| oracle(lossy(topology("default.yaml"), s, Workload::Bank))), clean: ok, mutate: |c| c.recovery_mutations.act_before_recording = true, caught: diverged, extra: None },
        "catch_up_after_applied" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("local-fast.yaml"), s, Workload::Bank, Faults::all())); c.recovery_turn = Some(Duration::ZERO); c.recovery_mutations.abort_unheard_without_catch_up = true; c }), clean: ok, mutate: |c| c.recovery_mutations.catch_up_after_applied = true, caught: diverged, extra: None },
        "no_catch_up_to_learners" => Case { cfg: Box::new(|s| oracle(removal("default.yaml", s, Workload::Bank, 6))), clean: ok, mutate: |c| c.executor_mutations.no_catch_up_to_learners = true, caught: diverged, extra: None },
        "no_fence_entries" => Case { cfg: Box::new(|s| oracle(removal("default.yaml", s, Workload::Ycsb, 6))), clean: ok, mutate: |c| c.executor_mutations.no_fence_entries = true, caught: stuck, extra: None },
        "no_fence_after_full_ring" => Case { cfg: Box::new(|s| oracle(removal("local-fast.yaml", s, Workload::Bank, 6))), clean: ok, mutate: |c| c.executor_mutations.no_fence_after_full_ring = true, caught: stuck, extra: None },
        "discard_across_the_dc" => Case { cfg: Box::new(|s| oracle(node_removal("default.yaml", s, Workload::Bank, 6))), clean: |r| r.ok() && r.nodes_removed == 1, mutate: |c| c.executor_mutations.discard_across_the_dc = true, caught: diverged, extra: None },
        "apply_stale_redo" => Case { cfg: Box::new(|s| oracle(removal("world-5dc-n5.yaml", s, Workload::Bank, 3))), clean: ok, mutate: |c| { c.executor_mutations.apply_stale_redo = true; c.executor_mutations.first_write_at_cts = true }, caught: diverged, extra: Some(|c| c.executor_mutations.apply_stale_redo = true) },
        "first_write_at_cts" => Case { cfg: Box::new(|s| oracle(removal("world-5dc-n5.yaml", s, Workload::Bank, 3))), clean: ok, mutate: |c| c.executor_mutations.first_write_at_cts = true, caught: diverged, extra: None },
        "ship_only_through_the_source" => Case { cfg: Box::new(|s| oracle(node_removal("default.yaml", s, Workload::Ycsb, 6))), clean: ok, mutate: |c| c.recovery_mutations.ship_only_through_the_source = true, caught: diverged, extra: None },
        "first_record_stays" => Case { cfg: Box::new(|s| oracle(removal("default.yaml", s, Workload::Ycsb, 6))), clean: ok, mutate: |c| c.executor_mutations.first_record_stays = true, caught: stuck, extra: None },
        "keep_unrefreshed" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("world-5dc-n5.yaml"), s, Workload::Churn, Faults { remove_dc: true, ..Faults::all() })); c.deleted_grace = Some(Duration::from_secs(1)); c.executor_mutations.reclaim_below_no_floor = true; c }), clean: |r| r.ok() && r.rebuild_rows_purged > 0, mutate: |c| c.executor_mutations.keep_unrefreshed = true, caught: diverged, extra: None },
        "reclaim_without_check" => Case { cfg: Box::new(|s| oracle(SimConfig::new(topology("world-5dc-n5.yaml"), s, Workload::Churn, Faults { remove_dc: true, ..Faults::all() }))), clean: |r| r.ok() && r.deleted_records_freed > 0, mutate: |c| c.executor_mutations.reclaim_without_check = true, caught: diverged, extra: None },
        "reclaim_below_no_floor" => Case { cfg: Box::new(|s| oracle(SimConfig::new(topology("sim-20dc.yaml"), s, Workload::Churn, Faults { remove_dc: true, ..Faults::all() }))), clean: |r| r.ok() && r.deleted_records_freed > 0, mutate: |c| c.executor_mutations.reclaim_below_no_floor = true, caught: diverged, extra: None },
        "abort_unheard_without_catch_up" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("sim-20dc.yaml"), s, Workload::Churn, Faults { remove_dc: true, ..Faults::all() })); c.executor_mutations.reclaim_below_no_floor = true; c }), clean: ok, mutate: |c| c.recovery_mutations.abort_unheard_without_catch_up = true, caught: diverged, extra: None },
        "free_deleted_without_horizon" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("world-5dc-n5.yaml"), s, Workload::Churn, Faults::all())); c.executor_mutations.reclaim_below_no_floor = true; c }), clean: |r| r.ok() && r.deleted_records_freed > 0, mutate: |c| c.executor_mutations.free_deleted_without_horizon = true, caught: diverged, extra: None },
        "prepare_reads_first_try" => Case { cfg: Box::new(|s| lock_wait(SimConfig::new(topology("local-fast.yaml"), s, Workload::Bank, Faults::all()), 40)), clean: ok, mutate: |c| c.executor_mutations.prepare_reads_first_try = true, caught: stuck, extra: None },
        "decision_keeps_promise_rows" => Case { cfg: Box::new(|s| real_failover("sim-20dc.yaml", s, Workload::Churn)), clean: ok, mutate: |c| c.executor_mutations.decision_keeps_promise_rows = true, caught: stuck, extra: None },
        "abort_votes_need_a_majority" => Case { cfg: Box::new(|s| real_failover("default.yaml", s, Workload::Churn)), clean: ok, mutate: |c| c.recovery_mutations.abort_votes_need_a_majority = true, caught: stuck, extra: None },
        "catch_up_after_applied_n5" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("world-5dc-n5.yaml"), s, Workload::Bank, Faults::all())); c.recovery_turn = Some(Duration::ZERO); c.recovery_mutations.abort_unheard_without_catch_up = true; c }), clean: ok, mutate: |c| c.recovery_mutations.catch_up_after_applied = true, caught: diverged, extra: None },
        "catch_up_after_applied_20dc" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("sim-20dc.yaml"), s, Workload::Bank, Faults::all())); c.recovery_turn = Some(Duration::ZERO); c.recovery_mutations.abort_unheard_without_catch_up = true; c }), clean: ok, mutate: |c| c.recovery_mutations.catch_up_after_applied = true, caught: diverged, extra: None },
        "catch_up_after_applied_default" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("default.yaml"), s, Workload::Bank, Faults::all())); c.recovery_turn = Some(Duration::ZERO); c.recovery_mutations.abort_unheard_without_catch_up = true; c }), clean: ok, mutate: |c| c.recovery_mutations.catch_up_after_applied = true, caught: diverged, extra: None },
        "catch_up_after_applied_ycsb" => Case { cfg: Box::new(|s| { let mut c = oracle(SimConfig::new(topology("local-fast.yaml"), s, Workload::Ycsb, Faults::all())); c.recovery_turn = Some(Duration::ZERO); c.recovery_mutations.abort_unheard_without_catch_up = true; c }), clean: ok, mutate: |c| c.recovery_mutations.catch_up_after_applied = true, caught: diverged, extra: None },
        "catch_up_after_applied_lossy" => Case { cfg: Box::new(|s| { let mut c = oracle(lossy(topology("local-fast.yaml"), s, Workload::Bank)); c.recovery_mutations.abort_unheard_without_catch_up = true; c }), clean: ok, mutate: |c| c.recovery_mutations.catch_up_after_applied = true, caught: diverged, extra: None },
        "no_fence_after_full_ring_default" => Case { cfg: Box::new(|s| oracle(removal("default.yaml", s, Workload::Bank, 6))), clean: ok, mutate: |c| c.executor_mutations.no_fence_after_full_ring = true, caught: stuck, extra: None },
        "no_fence_after_full_ring_20dc" => Case { cfg: Box::new(|s| oracle(removal("sim-20dc.yaml", s, Workload::Bank, 3))), clean: ok, mutate: |c| c.executor_mutations.no_fence_after_full_ring = true, caught: stuck, extra: None },
        "no_fence_after_full_ring_n5" => Case { cfg: Box::new(|s| oracle(removal("world-5dc-n5.yaml", s, Workload::Bank, 3))), clean: ok, mutate: |c| c.executor_mutations.no_fence_after_full_ring = true, caught: stuck, extra: None },
        "no_fence_after_full_ring_append" => Case { cfg: Box::new(|s| oracle(removal("local-fast.yaml", s, Workload::Append, 6))), clean: ok, mutate: |c| c.executor_mutations.no_fence_after_full_ring = true, caught: stuck, extra: None },
        "first_record_stays_bank" => Case { cfg: Box::new(|s| oracle(removal("default.yaml", s, Workload::Bank, 6))), clean: ok, mutate: |c| c.executor_mutations.first_record_stays = true, caught: stuck, extra: None },
        "first_record_stays_lf" => Case { cfg: Box::new(|s| oracle(removal("local-fast.yaml", s, Workload::Ycsb, 6))), clean: ok, mutate: |c| c.executor_mutations.first_record_stays = true, caught: stuck, extra: None },
        "first_record_stays_append" => Case { cfg: Box::new(|s| oracle(removal("default.yaml", s, Workload::Append, 6))), clean: ok, mutate: |c| c.executor_mutations.first_record_stays = true, caught: stuck, extra: None },
        "generic" => generic(),
        "apply_stale_redo_strict" => Case { cfg: Box::new(|s| oracle(removal("world-5dc-n5.yaml", s, Workload::Bank, 3))), clean: ok, mutate: |c| { c.executor_mutations.apply_stale_redo = true; c.executor_mutations.first_write_at_cts = true }, caught: diverged, extra: Some(|c| c.executor_mutations.apply_stale_redo = true) },
        other => panic!("unknown case {other}"),
    }
}

fn wait_cpu() {
    while std::path::Path::new("/tmp/hold-cpu").exists() {
        std::thread::sleep(Duration::from_secs(10));
    }
}

#[test]
fn hunt() {
    let env = |k: &str| std::env::var(k).ok();
    let Some(name) = env("HUNT") else { return };
    let from: u64 = env("FROM").and_then(|s| s.parse().ok()).unwrap_or(0);
    let n: u64 = env("N").and_then(|s| s.parse().ok()).unwrap_or(100);
    let want: usize = env("WANT").and_then(|s| s.parse().ok()).unwrap_or(1);
    let threads: u64 = env("THREADS").and_then(|s| s.parse().ok()).unwrap_or(2);
    let c = case(&name);
    let found = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicU64::new(from);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                if found.lock().unwrap().len() >= want {
                    return;
                }
                let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if seed >= from + n {
                    return;
                }
                wait_cpu();
                let mut m = (c.cfg)(seed);
                (c.mutate)(&mut m);
                let r = run(m).expect("runs");
                if std::env::var("VERBOSE").is_ok() {
                    eprint!("{seed}: {}", r.to_string().lines().next().unwrap_or_default());
                    eprintln!(" | {}", r.to_string().lines().find(|l| l.contains("recoveries")).unwrap_or_default());
                }
                if !(c.caught)(&r) {
                    continue;
                }
                let clean = run((c.cfg)(seed)).expect("runs");
                if !(c.clean)(&clean) {
                    eprintln!("{name} seed {seed}: caught but clean fails its precondition");
                    continue;
                }
                if let Some(extra) = c.extra {
                    let mut e = (c.cfg)(seed);
                    extra(&mut e);
                    if !run(e).expect("runs").ok() {
                        eprintln!("{name} seed {seed}: caught but the extra run fails");
                        continue;
                    }
                    if name == "apply_stale_redo_strict" {
                        let mut e = (c.cfg)(seed);
                        e.executor_mutations.first_write_at_cts = true;
                        if !run(e).expect("runs").ok() {
                            eprintln!("{name} seed {seed}: caught but first_write_at_cts alone fails too");
                            continue;
                        }
                    }
                }
                eprintln!("FOUND {name} seed {seed}");
                found.lock().unwrap().push(seed);
            });
        }
    });
    let mut f = found.into_inner().unwrap();
    f.sort();
    println!("HUNT {name} from {from} n {n}: found {f:?}");
}

#[test]
fn show() {
    let env = |k: &str| std::env::var(k).ok();
    let Some(name) = env("SHOW") else { return };
    let seed: u64 = env("SEED").and_then(|s| s.parse().ok()).unwrap();
    let c = case(&name);
    let clean = run((c.cfg)(seed)).expect("runs");
    println!("CLEAN {clean}");
    let mut m = (c.cfg)(seed);
    (c.mutate)(&mut m);
    let r = run(m).expect("runs");
    println!("MUTANT {r}");
}


/// A case from the environment: MUTANT, CONFIG, WORKLOAD, REMOVE (dc, node, both), DUR (s),
/// POLICY=1 (else oracle), TURN0=1, LOSSY=1, FLOORS_OFF=1, GRACE_MS, LOCKWAIT_MS, CLEAN (freed,
/// purged, node1).
fn generic() -> Case {
    let env = |k: &str| std::env::var(k).ok();
    let workload: Workload = env("WORKLOAD").unwrap_or("bank".into()).parse().unwrap();
    let config = env("CONFIG").unwrap_or("default.yaml".into());
    let mutate: fn(&mut SimConfig) = match env("MUTANT").unwrap().as_str() {
        "no_fence_after_full_ring" => |c| c.executor_mutations.no_fence_after_full_ring = true,
        "first_record_stays" => |c| c.executor_mutations.first_record_stays = true,
        "decision_keeps_promise_rows" => |c| c.executor_mutations.decision_keeps_promise_rows = true,
        "abort_unheard_without_catch_up" => |c| c.recovery_mutations.abort_unheard_without_catch_up = true,
        "no_fence_entries" => |c| c.executor_mutations.no_fence_entries = true,
        other => panic!("{other}"),
    };
    let caught: fn(&SimReport) -> bool = match env("CAUGHT").as_deref() {
        Some("diverged") => diverged,
        _ => stuck,
    };
    let clean: fn(&SimReport) -> bool = match env("CLEAN").as_deref() {
        Some("freed") => |r| r.ok() && r.deleted_records_freed > 0,
        _ => |r| r.ok(),
    };
    Case {
        cfg: Box::new(move |seed| {
            let env = |k: &str| std::env::var(k).ok();
            let remove = env("REMOVE").unwrap_or_default();
            let mut faults = Faults { remove_dc: remove == "dc" || remove == "both", remove_node: remove == "node" || remove == "both", ..Faults::all() };
            if env("LOSSY").is_some() {
                faults = Faults { drop: 0.2, duplicate: 0.02, hold: 0.02, bursts: false, ..faults };
            }
            let mut c = SimConfig::new(topology(&config), seed, workload, faults);
            if let Some(d) = env("DUR").and_then(|s| s.parse().ok()) {
                c.duration = Duration::from_secs(d);
            }
            c.failover = if env("POLICY").is_some() { FailoverMode::Policy } else { FailoverMode::Oracle };
            if env("TURN0").is_some() || env("LOSSY").is_some() {
                c.recovery_turn = Some(Duration::ZERO);
            }
            if env("FLOORS_OFF").is_some() {
                c.executor_mutations.reclaim_below_no_floor = true;
            }
            if let Some(g) = env("GRACE_MS").and_then(|s| s.parse().ok()) {
                c.deleted_grace = Some(Duration::from_millis(g));
            }
            if let Some(w) = env("LOCKWAIT_MS").and_then(|s| s.parse().ok()) {
                c.options.lock_wait = redt_protocol::txn::LockWait::For(Duration::from_millis(w));
            }
            c
        }),
        clean,
        mutate,
        caught,
        extra: None,
    }
}

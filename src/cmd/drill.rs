//! The failure drills of `redt bench ycsb --cluster` (`--kill`, `--cut`): what to inject and
//! heal, carried out here (process control, netem requests), measured by
//! `redt_bench::drill`.

use super::DrillArgs;
use anyhow::{bail, Context, Result};
use redt_bench::drill::{Drill, DrillReport, FaultAction};
use redt_coordinator::Client;
use redt_proto::wire::NetemSetRequest;
use redt_proto::{NodeId, Topology};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The drill `a` asks for on `topo`, or `None`.
///
/// # Errors
/// A drill without `--cluster`, an unknown node or DC, a fault that starts after the run ends,
/// a node `--run-dir` does not know.
pub fn plan(a: &DrillArgs, cluster: bool, topo: &Topology, certs: &Path, duration: Duration) -> Result<Option<Drill>> {
    if a.kill.is_none() && a.cut.is_none() {
        return Ok(None);
    }
    if !cluster {
        bail!("--kill and --cut drill a running cluster: add --cluster FILE (the topology `redt cluster up` used)");
    }
    if a.at >= duration {
        bail!(
            "--at {} is not within the measured run (--duration {})",
            humantime::format_duration(a.at),
            humantime::format_duration(duration)
        );
    }
    if let Some(name) = &a.kill {
        let node = topo.node_by_name(name).with_context(|| format!("--kill {name}: no node of that name"))?.id;
        let pid = a.run_dir.join("pids").join(format!("{name}.pid"));
        if !pid.exists() {
            bail!(
                "--kill {name}: {} does not exist; pass the run directory of `redt cluster up` with --run-dir",
                pid.display()
            );
        }
        let (kill_dir, start_dir) = (a.run_dir.clone(), a.run_dir.clone());
        let (kill_name, start_name) = (name.clone(), name.clone());
        let inject: FaultAction = Box::new(move || {
            let (dir, name) = (kill_dir.clone(), kill_name.clone());
            Box::pin(blocking(move || {
                let pid = crate::cmd::cluster::kill_node(&dir, &name)?;
                Ok(format!("killed {name} (pid {pid})"))
            }))
        });
        let heal: FaultAction = Box::new(move || {
            let (dir, name) = (start_dir.clone(), start_name.clone());
            Box::pin(blocking(move || {
                let pid = crate::cmd::cluster::start_node(&dir, &name)?;
                Ok(format!("started {name} again (pid {pid})"))
            }))
        });
        return Ok(Some(Drill {
            name: format!("kill {name}"),
            failed: vec![node],
            at: a.at,
            heal_after: a.restart_after,
            inject,
            heal,
        }));
    }
    let Some(dc_name) = a.cut.clone() else { return Ok(None) };
    let dc =
        topo.dcs.iter().find(|d| d.name == dc_name).with_context(|| format!("--cut {dc_name}: no DC of that name"))?;
    let failed: Vec<NodeId> = dc.nodes.clone();
    let others: Vec<String> = topo.dcs.iter().filter(|d| d.name != dc_name).map(|d| d.name.clone()).collect();
    let topo = Arc::new(topo.clone());
    let cut = |on: bool| -> FaultAction {
        let (topo, certs, dc, others) = (topo.clone(), certs.to_path_buf(), dc_name.clone(), others.clone());
        Box::new(move || Box::pin(partition(topo.clone(), certs.clone(), dc.clone(), others.clone(), on)))
    };
    Ok(Some(Drill {
        name: format!("cut {dc_name}"),
        failed,
        at: a.at,
        heal_after: a.cut_for,
        inject: cut(true),
        heal: cut(false),
    }))
}

/// Runs `f` on a blocking thread; its error as text.
async fn blocking(f: impl FnOnce() -> Result<String> + Send + 'static) -> std::result::Result<String, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| format!("{e:#}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Cuts (`on`) or heals every link between `dc` and `others`, both ways, on every node.
async fn partition(
    topo: Arc<Topology>,
    certs: PathBuf,
    dc: String,
    others: Vec<String>,
    on: bool,
) -> std::result::Result<String, String> {
    let client = Client::connect(topo, &certs, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    let mut failed = Vec::new();
    for other in &others {
        let req = NetemSetRequest {
            from: dc.clone(),
            to: other.clone(),
            rtt_us: -1,
            jitter_us: -1,
            loss_ppm: -1,
            rate_bits_per_s: -1,
            partitioned: Some(on),
            symmetric: true,
        };
        failed.extend(client.netem_set(req).await);
    }
    if !failed.is_empty() {
        // A node of the cut DC may not answer once it is cut; the others applied it.
        tracing::warn!("netem partition {on} not confirmed by {failed:?}");
    }
    Ok(format!("{} {dc} {} {}", if on { "cut" } else { "healed" }, if on { "off" } else { "with" }, others.join(", ")))
}

/// Prints a drill's figures and its timeline.
pub fn print(d: &DrillReport) {
    let ms = |v: Option<u64>| v.map_or_else(|| "not within the run".to_string(), |v| format!("{v} ms"));
    let n = |v: Option<u64>| v.map_or_else(|| "unknown (a node did not answer)".to_string(), |v| v.to_string());
    let ms_or = |v: Option<u64>, none: &str| v.map_or_else(|| none.to_string(), |v| format!("{v} ms"));
    let n_or = |v: Option<u64>, none: &str| v.map_or_else(|| none.to_string(), |v| v.to_string());
    println!(
        "  drill                      {} at {:.1} s, healed at {}",
        d.drill,
        d.fault_at_s,
        d.healed_at_s.map_or_else(|| "-".into(), |t| format!("{t:.1} s"))
    );
    println!(
        "  touched commits/s before   {:>10.1}   (transactions with a replica or coordinator on the failed nodes)",
        d.touched_per_s_before
    );
    println!(
        "  other commits/s            {:>10.1} before, {:.1} during (fewest in one second: {})",
        d.other_per_s_before,
        d.other_per_s_during,
        d.other_min_per_s_during.map_or_else(|| "-".into(), |v| v.to_string())
    );
    println!("  heal → touched at 50%      {}", ms(d.heal_to_half_rate_ms));
    println!(
        "  fault → in-flight decided  {} at the survivors, {} everywhere",
        ms(d.fault_to_decided_at_survivors_ms),
        ms(d.fault_to_decided_everywhere_ms)
    );
    println!(
        "  fault → suspected          {} by a first survivor, {} by every survivor (status polled every 100 ms)",
        ms_or(d.fault_to_first_suspected_ms, "not before the heal"),
        ms_or(d.fault_to_suspected_by_all_ms, "not before the heal")
    );
    println!("  heal → nothing suspected   {}", ms(d.heal_to_unsuspected_ms));
    println!(
        "  false suspicions           {} before the fault, {} after the heal (raised while no fault was active)",
        n_or(d.false_suspicions_before_fault, "unknown (a node did not answer)"),
        n_or(d.false_suspicions_after_heal, "unknown (not unsuspected within the run, or a node did not answer)")
    );
    println!(
        "  left after settling        {} lock words, {} undecided entries (settled in {} ms); recoveries {} started, {} committed, {} aborted",
        n(d.locks_left),
        n(d.undecided_left),
        d.settle_ms,
        d.recoveries[0],
        d.recoveries[1],
        d.recoveries[2]
    );
    println!("  timeline (commits per second: touched / other; aborted; unknown)");
    for s in &d.timeline {
        println!(
            "    {:>3} s  {:>6} / {:<6} {:>6} {:>6}  {}",
            s.t_s, s.touched, s.other, s.aborted, s.unknown, s.event
        );
    }
}

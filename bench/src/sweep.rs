//! `redt bench sweep`: one full embedded-cluster YCSB run per value of one parameter, one
//! after another, then a CSV of every report and an SVG and a PNG chart of throughput and
//! p50/p99 latency against the parameter (this machine's version of the RedT paper's
//! Figures 6–11). With several protocols ([`SweepConfig::protocols`]) the whole sweep runs
//! once per protocol — same seed, same topology, same points — into one CSV (its
//! `protocol` column tells the runs apart) and one chart with a curve per protocol.
//!
//! Parameters: `rtt` (every inter-DC link, e.g. `10ms`), `theta`, `write-ratio`,
//! `inter-dc-ratio`, `nodes-per-dc` (a generated topology: the base's DCs, k nodes each, one
//! partition per node, 3 replicas — [`crate::topo::grid`]), `partitions-per-txn`,
//! `dcs-per-txn`, `ops`, `clients-per-node` (the load, up to where the machine saturates).
//!
//! The chart's third panel is the CPU time per committed transaction when the runs measured
//! it. [`SweepConfig::overlays`] draws the curves of earlier sweeps' CSVs beside this one's
//! (another build's, say), each series named after its label.

use crate::chart::{write_charts, ChartPoint, ChartSeries, ChartSpec};
use crate::cluster::{run_cluster_ycsb, ClusterConfig, ClusterReport};
use crate::topo;
use redt_proto::{Protocol, Topology};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A swept parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Param {
    /// RTT of every inter-DC link.
    Rtt,
    /// Zipf θ.
    Theta,
    /// Write ratio.
    WriteRatio,
    /// Inter-DC transaction ratio.
    InterDcRatio,
    /// Nodes per DC (generated topology).
    NodesPerDc,
    /// Partitions per transaction.
    PartitionsPerTxn,
    /// DCs per inter-DC transaction.
    DcsPerTxn,
    /// Operations per transaction.
    Ops,
    /// Concurrent closed-loop clients per node (the load: where the machine saturates).
    ClientsPerNode,
}

impl Param {
    /// Every parameter, by name.
    pub const ALL: [(&'static str, Param); 9] = [
        ("rtt", Param::Rtt),
        ("theta", Param::Theta),
        ("write-ratio", Param::WriteRatio),
        ("inter-dc-ratio", Param::InterDcRatio),
        ("nodes-per-dc", Param::NodesPerDc),
        ("partitions-per-txn", Param::PartitionsPerTxn),
        ("dcs-per-txn", Param::DcsPerTxn),
        ("ops", Param::Ops),
        ("clients-per-node", Param::ClientsPerNode),
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        Param::ALL.iter().find(|(_, p)| *p == self).map(|(n, _)| *n).expect("every parameter is listed")
    }

    /// The chart's x axis label.
    pub fn axis(self) -> &'static str {
        match self {
            Param::Rtt => "inter-DC RTT (ms)",
            Param::Theta => "Zipf θ",
            Param::WriteRatio => "write ratio",
            Param::InterDcRatio => "inter-DC transaction ratio",
            Param::NodesPerDc => "nodes per DC",
            Param::PartitionsPerTxn => "partitions per transaction",
            Param::DcsPerTxn => "DCs per transaction",
            Param::Ops => "operations per transaction",
            Param::ClientsPerNode => "clients per node",
        }
    }

    /// Parses one value into its number on the x axis (ms for `rtt`).
    ///
    /// # Errors
    /// A value of the wrong form or out of range.
    pub fn value(self, s: &str) -> Result<f64, String> {
        let s = s.trim();
        let bad = |why: &str| format!("{} value `{s}`: {why}", self.name());
        match self {
            Param::Rtt => redt_proto::parse_duration(s).map(|d| d.as_secs_f64() * 1e3).map_err(|e| bad(&e)),
            Param::Theta => match s.parse::<f64>() {
                Ok(x) if x >= 0.0 && x.is_finite() => Ok(x),
                _ => Err(bad("a number ≥ 0")),
            },
            Param::WriteRatio | Param::InterDcRatio => match s.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
                _ => Err(bad("a number in [0, 1]")),
            },
            Param::NodesPerDc | Param::PartitionsPerTxn | Param::DcsPerTxn | Param::Ops | Param::ClientsPerNode => {
                match s.parse::<u32>() {
                    Ok(x) if x >= 1 => Ok(x as f64),
                    _ => Err(bad("an integer ≥ 1")),
                }
            }
        }
    }
}

/// Parses `NAME=V1,V2,…`.
///
/// # Errors
/// An unknown name, no values, a bad value.
pub fn parse_param(s: &str) -> Result<(Param, Vec<(String, f64)>), String> {
    let (name, values) = s.split_once('=').ok_or_else(|| format!("--param `{s}` must be NAME=V1,V2,…"))?;
    let name = name.trim().replace('_', "-");
    let p = Param::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p).ok_or_else(|| {
        format!(
            "unknown sweep parameter `{name}` (known: {})",
            Param::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        )
    })?;
    let vals: Vec<(String, f64)> = values
        .split(',')
        .filter(|v| !v.trim().is_empty())
        .map(|v| Ok((v.trim().to_string(), p.value(v)?)))
        .collect::<Result<_, String>>()?;
    if vals.is_empty() {
        return Err(format!("--param `{s}` has no values"));
    }
    Ok((p, vals))
}

/// Sets `param` to `x` in a copy of the base topology and run configuration.
///
/// # Errors
/// A topology that cannot be generated (nodes per DC).
pub fn apply(base: &Topology, cfg: &ClusterConfig, param: Param, x: f64) -> Result<(Topology, ClusterConfig), String> {
    let mut t = base.clone();
    let mut c = cfg.clone();
    let y = &mut c.ycsb;
    match param {
        Param::Rtt => topo::set_rtt(&mut t, Duration::from_secs_f64(x / 1e3)),
        Param::Theta => y.theta = x,
        Param::WriteRatio => y.write_ratio = x,
        Param::InterDcRatio => y.inter_dc_ratio = x,
        Param::NodesPerDc => t = topo::grid(base, x as usize)?,
        Param::PartitionsPerTxn => {
            y.partitions_per_txn = x as usize;
            y.dcs_per_txn = y.dcs_per_txn.min(y.partitions_per_txn);
            y.ops_per_txn = y.ops_per_txn.max(y.partitions_per_txn);
        }
        Param::DcsPerTxn => {
            y.dcs_per_txn = x as usize;
            y.partitions_per_txn = y.partitions_per_txn.max(y.dcs_per_txn);
            y.ops_per_txn = y.ops_per_txn.max(y.partitions_per_txn);
        }
        Param::Ops => {
            y.ops_per_txn = x as usize;
            y.partitions_per_txn = y.partitions_per_txn.min(y.ops_per_txn);
            y.dcs_per_txn = y.dcs_per_txn.min(y.partitions_per_txn);
        }
        Param::ClientsPerNode => c.clients_per_node = x as usize,
    }
    Ok((t, c))
}

/// One row of the sweep's CSV.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// The parameter swept.
    pub param: String,
    /// Its value as given.
    pub value: String,
    /// Its value on the x axis.
    pub x: f64,
    /// The run.
    #[serde(flatten)]
    pub report: ClusterReport,
}

/// A sweep.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// The parameter.
    pub param: Param,
    /// Its values, as given and as numbers.
    pub values: Vec<(String, f64)>,
    /// Every other setting (the same for every point).
    pub base: ClusterConfig,
    /// The protocols to run the sweep with, one after another; empty: only
    /// `base.options.protocol`.
    pub protocols: Vec<Protocol>,
    /// Output directory.
    pub out: PathBuf,
    /// File stem (`sweep-rtt` → `sweep-rtt.csv`, `.svg`, `.png`).
    pub name: String,
    /// Earlier sweeps of the same parameter to draw beside this one: `(label, CSV file)`,
    /// each protocol's curve named `label protocol` (see [`read_overlay`]).
    pub overlays: Vec<(String, PathBuf)>,
    /// The label of this sweep's own curves when there are overlays (`label protocol`);
    /// `None`: the protocol's name alone.
    pub label: Option<String>,
}

/// What a sweep wrote.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    /// The parameter.
    pub param: String,
    /// The protocols, in the order they ran.
    pub protocols: Vec<Protocol>,
    /// Every point, protocol by protocol.
    pub rows: Vec<SweepRow>,
    /// The CSV file.
    pub csv: String,
    /// The SVG chart (if drawn).
    pub svg: Option<String>,
    /// The PNG chart (if drawn).
    pub png: Option<String>,
    /// Why the charts were not drawn.
    pub chart_error: Option<String>,
}

/// Runs `f` to completion on a fresh multi-threaded tokio runtime, then shuts the runtime
/// down, dropping whatever tasks (phase 2) linger, so that the next run can bind the same
/// addresses and the MemStores are freed.
///
/// # Errors
/// A runtime that cannot be built.
pub(crate) fn in_fresh_runtime<F: std::future::Future>(f: F) -> Result<F::Output, String> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let out = rt.block_on(f);
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(out)
}

/// The protocols a sweep runs with: `cfg.protocols`, or the base's when empty.
pub fn protocols(cfg: &SweepConfig) -> Vec<Protocol> {
    if cfg.protocols.is_empty() {
        vec![cfg.base.options.protocol]
    } else {
        cfg.protocols.clone()
    }
}

/// Reads the overlays ([`SweepConfig::overlays`]), runs every point of the sweep (a fresh
/// tokio runtime and embedded cluster each) for each protocol in turn, then writes `<out>/<name>.csv` (replacing it), `.svg` and `.png`.
/// `progress(i, n, protocol, value)` is told about each point before it runs (`i` of `n`
/// points in all).
///
/// # Errors
/// An overlay that cannot be read ([`read_overlay`]), a point that fails (the runs before
/// it are lost), writing the CSV.
pub fn run_sweep(
    base: &Topology,
    cfg: &SweepConfig,
    progress: &mut dyn FnMut(usize, usize, Protocol, &str),
) -> Result<SweepReport, String> {
    let protocols = protocols(cfg);
    // The overlays first: a bad file is refused before the runs, not after them.
    let overlays: Vec<Vec<ChartSeries>> =
        cfg.overlays.iter().map(|(label, path)| read_overlay(path, label, cfg.param)).collect::<Result<_, _>>()?;
    let n = protocols.len() * cfg.values.len();
    let mut rows = Vec::new();
    for &protocol in &protocols {
        for (label, x) in &cfg.values {
            progress(rows.len(), n, protocol, label);
            let (t, mut c) = apply(base, &cfg.base, cfg.param, *x)?;
            c.options.protocol = protocol;
            let r = in_fresh_runtime(run_cluster_ycsb(t, &c))?
                .map_err(|e| format!("{protocol}, {}={label}: {e}", cfg.param.name()))?;
            rows.push(SweepRow { param: cfg.param.name().into(), value: label.clone(), x: *x, report: r });
        }
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| format!("{}: {e}", cfg.out.display()))?;
    let csv = cfg.out.join(format!("{}.csv", cfg.name));
    if csv.exists() {
        std::fs::remove_file(&csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    }
    for row in &rows {
        crate::csv::append_report(&csv, row)?;
    }
    let (svg, png) = (cfg.out.join(format!("{}.svg", cfg.name)), cfg.out.join(format!("{}.png", cfg.name)));
    let mut series = chart_series(&protocols, &rows);
    if let Some(label) = &cfg.label {
        for s in &mut series {
            s.name = format!("{label} {}", s.name);
        }
    }
    series.extend(overlays.into_iter().flatten());
    let chart = write_charts(&chart_spec(cfg, &protocols, &rows), &series, &svg, &png);
    let shown = |p: &Path| Some(p.display().to_string());
    Ok(SweepReport {
        param: cfg.param.name().into(),
        protocols,
        csv: csv.display().to_string(),
        svg: chart.as_ref().ok().and_then(|_| shown(&svg)),
        png: chart.as_ref().ok().and_then(|_| shown(&png)),
        chart_error: chart.err(),
        rows,
    })
}

/// One chart series per protocol, its rows' points in sweep order.
fn chart_series(protocols: &[Protocol], rows: &[SweepRow]) -> Vec<ChartSeries> {
    protocols
        .iter()
        .map(|&p| ChartSeries {
            name: p.name().into(),
            points: rows
                .iter()
                .filter(|r| r.report.protocol == p)
                .map(|r| ChartPoint {
                    x: r.x,
                    throughput: r.report.outcomes.committed_per_s,
                    p50_ms: r.report.outcomes.latency_ms.p50,
                    p99_ms: r.report.outcomes.latency_ms.p99,
                    cpu_us_per_committed: r.report.cpu.cpu_us_per_committed,
                    abort_rate: Some(r.report.outcomes.abort_rate),
                })
                .collect(),
        })
        .collect()
}

/// The curves of an earlier sweep's CSV (as [`run_sweep`] writes it) of the same
/// parameter: one series per protocol, named `label protocol`, its points in file order.
/// The CPU panel shows them when the file has a `cpu_us_per_committed` column, the abort-rate
/// panel when it has `abort_rate`.
///
/// # Errors
/// A file that cannot be read or parsed, lacks a needed column (`param`, `x`, `protocol`,
/// `committed_per_s`, `latency_ms.p50`, `latency_ms.p99`) or sweeps another parameter.
pub fn read_overlay(path: &Path, label: &str, param: Param) -> Result<Vec<ChartSeries>, String> {
    let at = |e: &dyn std::fmt::Display| format!("overlay {}: {e}", path.display());
    let mut reader = csv::Reader::from_path(path).map_err(|e| at(&e))?;
    let header = reader.headers().map_err(|e| at(&e))?.clone();
    let column = |name: &str| header.iter().position(|h| h == name);
    let need = |name: &str| column(name).ok_or_else(|| at(&format!("no `{name}` column (not a sweep's CSV?)")));
    let (c_param, c_x, c_protocol) = (need("param")?, need("x")?, need("protocol")?);
    let (c_tput, c_p50, c_p99) = (need("committed_per_s")?, need("latency_ms.p50")?, need("latency_ms.p99")?);
    let c_cpu = column("cpu_us_per_committed");
    let c_abort = column("abort_rate");
    let mut series: Vec<ChartSeries> = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| at(&e))?;
        let cell = |c: usize| record.get(c).unwrap_or("");
        let number =
            |c: usize| cell(c).parse::<f64>().map_err(|_| at(&format!("row {}: `{}` is not a number", i + 2, cell(c))));
        if cell(c_param) != param.name() {
            return Err(at(&format!("it sweeps `{}`, not `{}`", cell(c_param), param.name())));
        }
        let point = ChartPoint {
            x: number(c_x)?,
            throughput: number(c_tput)?,
            p50_ms: number(c_p50)?,
            p99_ms: number(c_p99)?,
            cpu_us_per_committed: c_cpu.and_then(|c| cell(c).parse().ok()),
            abort_rate: c_abort.and_then(|c| cell(c).parse().ok()),
        };
        let name = format!("{label} {}", cell(c_protocol));
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(point),
            None => series.push(ChartSeries { name, points: vec![point] }),
        }
    }
    if series.is_empty() {
        return Err(at(&"no rows"));
    }
    Ok(series)
}

fn chart_spec(cfg: &SweepConfig, protocols: &[Protocol], rows: &[SweepRow]) -> ChartSpec {
    let m = &cfg.base.ycsb;
    let first = rows.first().map(|r| &r.report);
    let mut sub = format!(
        "YCSB {} mix: {} ops/txn, θ {}, write ratio {}, inter-DC ratio {}, {} partitions in {} DCs per txn",
        m.workload.name(),
        m.ops_per_txn,
        m.theta,
        m.write_ratio,
        m.inter_dc_ratio,
        m.partitions_per_txn,
        m.dcs_per_txn
    );
    let names: Vec<&str> = protocols.iter().map(|p| p.name()).collect();
    if let Some(r) = first {
        sub.push_str(&format!(
            "\n{} ({} DCs × {} nodes), {} clients, {:.0} s measured per point, protocol{} {}",
            r.topology,
            r.dcs,
            r.nodes / r.dcs.max(1),
            if cfg.param == Param::ClientsPerNode { "varied".to_string() } else { r.clients.to_string() },
            r.duration_s,
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        ));
    }
    let what = if rows.iter().any(|r| r.report.cpu.cpu_us_per_committed.is_some()) {
        "throughput, abort rate, latency and CPU per transaction"
    } else {
        "throughput, abort rate and latency"
    };
    let title = if names.len() == 1 && cfg.overlays.is_empty() {
        format!("{}: {what} vs {}", names[0], cfg.param.axis())
    } else {
        format!("{what} vs {}, by protocol", cfg.param.axis())
    };
    ChartSpec { title, subtitle: sub, x_label: cfg.param.axis().into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_coordinator::RetryPolicy;

    #[test]
    fn parses_parameters() {
        let (p, v) = parse_param("rtt=10ms,20ms, 100ms").unwrap();
        assert_eq!(p, Param::Rtt);
        assert_eq!(v.iter().map(|x| x.1).collect::<Vec<_>>(), [10.0, 20.0, 100.0]);
        assert_eq!(parse_param("write_ratio=0,0.5").unwrap().0, Param::WriteRatio);
        assert!(parse_param("write-ratio=1.5").is_err());
        assert!(parse_param("nodes-per-dc=0").is_err());
        assert!(parse_param("colour=red").unwrap_err().contains("known:"));
        assert!(parse_param("rtt=").is_err());
        assert_eq!(
            parse_param("clients-per-node=4,16").unwrap().1.iter().map(|x| x.1).collect::<Vec<_>>(),
            [4.0, 16.0]
        );
        assert!(parse_param("clients-per-node=0").is_err());
    }

    #[test]
    fn reads_an_overlay_written_as_a_sweep_writes_its_csv() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("before.csv");
        let row = |protocol: &str, x: f64, tput: f64, cpu: Option<f64>| {
            vec![
                ("param".to_string(), "clients-per-node".to_string()),
                ("x".into(), x.to_string()),
                ("protocol".into(), protocol.into()),
                ("committed_per_s".into(), tput.to_string()),
                ("latency_ms.p50".into(), "41.5".into()),
                ("latency_ms.p99".into(), "90".into()),
                ("cpu_us_per_committed".into(), cpu.map(|c| c.to_string()).unwrap_or_default()),
            ]
        };
        for r in [
            row("redt", 4.0, 700.0, Some(1900.0)),
            row("redt", 16.0, 1400.0, None),
            row("2pc-paxos", 4.0, 300.0, Some(2500.0)),
        ] {
            crate::csv::append_row(&path, &r).unwrap();
        }
        let series = read_overlay(&path, "before", Param::ClientsPerNode).unwrap();
        assert_eq!(series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["before redt", "before 2pc-paxos"]);
        let redt = &series[0].points;
        assert_eq!((redt[0].x, redt[0].throughput, redt[0].p50_ms, redt[0].p99_ms), (4.0, 700.0, 41.5, 90.0));
        assert_eq!((redt[0].cpu_us_per_committed, redt[1].cpu_us_per_committed), (Some(1900.0), None));
        // Another parameter's sweep, or a file that is not a sweep's, is refused.
        assert!(read_overlay(&path, "before", Param::Rtt).unwrap_err().contains("sweeps `clients-per-node`"));
        let other = dir.path().join("other.csv");
        std::fs::write(&other, "a,b\n1,2\n").unwrap();
        assert!(read_overlay(&other, "x", Param::Rtt).unwrap_err().contains("no `param` column"));
        assert!(read_overlay(&dir.path().join("missing.csv"), "x", Param::Rtt).is_err());
    }

    #[test]
    fn applies_each_parameter() {
        let base = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).unwrap();
        let cfg = ClusterConfig {
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            clients_per_node: 1,
            records_per_partition: 10,
            ycsb: Default::default(),
            options: Default::default(),
            seed: 1,
            progress: false,
            interval: Default::default(),
            idle_window: Duration::ZERO,
            retry: RetryPolicy::none(),
        };
        let (t, _) = apply(&base, &cfg, Param::Rtt, 80.0).unwrap();
        assert_eq!(t.links[0][1].rtt, Duration::from_millis(80));
        assert_eq!(t.links[3][2].rtt, Duration::from_millis(80));
        let (t, _) = apply(&base, &cfg, Param::NodesPerDc, 3.0).unwrap();
        assert_eq!((t.nodes.len(), t.partitions.len()), (12, 12));
        let (_, c) = apply(&base, &cfg, Param::PartitionsPerTxn, 1.0).unwrap();
        assert_eq!((c.ycsb.partitions_per_txn, c.ycsb.dcs_per_txn), (1, 1));
        let (_, c) = apply(&base, &cfg, Param::Theta, 0.9).unwrap();
        assert_eq!(c.ycsb.theta, 0.9);
        let (_, c) = apply(&base, &cfg, Param::ClientsPerNode, 16.0).unwrap();
        assert_eq!(c.clients_per_node, 16);
    }
}

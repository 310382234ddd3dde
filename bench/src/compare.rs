//! `redt bench compare`: one workload under each commit protocol in turn, and one table.
//!
//! Every protocol gets a fresh embedded cluster of the same topology, the same seed, the
//! same clients and the same warm-up and measured time ([`run_compare`]). The table has a
//! row per protocol: committed transactions per second, abort rate, p50 and p99 latency,
//! and — for committed read-write inter-DC transactions (the `rw-inter` class) — inter-DC
//! round trips and inter-DC messages per transaction, each with its ratio to the reference
//! row (RedT's, or the first protocol's when RedT did not run), beside the RedT paper's
//! Table 2 figures for the protocol (RedT §6.2.2), and the CPU time per committed transaction
//! (the whole embedded process's: every node, client and replay thread). [`CompareReport::new`] and
//! [`CompareReport::table`] are pure functions over the runs' reports.

use crate::cluster::{run_cluster_ycsb, ClusterConfig, ClusterReport};
use crate::sweep::in_fresh_runtime;
use crate::tpcc::{run_tpcc, TpccConfig, TpccReport};
use redt_coordinator::ClassReport;
use redt_proto::{Protocol, Topology};
use serde::Serialize;

/// The RedT paper's Table 2 figures for one protocol: inter-DC round trips and inter-DC
/// messages ("communications") per committed non-read-only inter-DC transaction, averaged
/// and summed over the protocol's phases (Deneva, 4 DCs, 40 ms RTT, Zipf θ 0.2).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PaperFigures {
    /// Inter-DC round trips per transaction.
    pub round_trips: f64,
    /// Inter-DC messages per transaction.
    pub messages: f64,
}

/// The RedT paper's Table 2 figures for `protocol`: RedT 2 / 11.74, 2PC-Paxos 5.97 / 25.09,
/// EP-Paxos 5 / 23.19, TAPIR 3 / 21.68; `None` for RedT over TCP, which the table leaves
/// out.
pub fn paper_table2(protocol: Protocol) -> Option<PaperFigures> {
    let (round_trips, messages) = match protocol {
        Protocol::Redt => (2.0, 11.74),
        Protocol::TwoPcPaxos => (5.97, 25.09),
        Protocol::EpPaxos => (5.0, 23.19),
        Protocol::Tapir => (3.0, 21.68),
        Protocol::RedtTcp => return None,
    };
    Some(PaperFigures { round_trips, messages })
}

/// The workload of a comparison, with every setting but the protocol.
#[derive(Clone, Debug)]
pub enum CompareWorkload {
    /// YCSB on the embedded cluster, as `redt bench ycsb` runs it.
    Ycsb(ClusterConfig),
    /// TPC-C on the embedded cluster, as `redt bench tpcc` runs it (a TPC-C topology).
    Tpcc(TpccConfig),
}

impl CompareWorkload {
    fn seed(&self) -> u64 {
        match self {
            CompareWorkload::Ycsb(c) => c.seed,
            CompareWorkload::Tpcc(c) => c.seed,
        }
    }
}

/// A comparison: the protocols, in the order they run, and the workload.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// The protocols (at least one, no repeats).
    pub protocols: Vec<Protocol>,
    /// The workload; its coordinator options' protocol is replaced by each in turn.
    pub workload: CompareWorkload,
}

/// Checks a list of protocols to compare: at least one, none twice.
///
/// # Errors
/// An empty list, or a protocol listed twice, as text.
pub fn check_protocols(protocols: &[Protocol]) -> Result<(), String> {
    if protocols.is_empty() {
        return Err("no protocol to compare: list at least one (redt, 2pc-paxos, ep-paxos, tapir, redt-tcp)".into());
    }
    for (i, p) in protocols.iter().enumerate() {
        if protocols[..i].contains(p) {
            return Err(format!("protocol `{p}` is listed twice"));
        }
    }
    Ok(())
}

/// The full report of one protocol's run.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum RunReport {
    /// A YCSB run.
    Ycsb(ClusterReport),
    /// A TPC-C run.
    Tpcc(TpccReport),
}

impl RunReport {
    /// The protocol the run used.
    pub fn protocol(&self) -> Protocol {
        match self {
            RunReport::Ycsb(r) => r.protocol,
            RunReport::Tpcc(r) => r.protocol,
        }
    }

    fn classes(&self) -> &[(String, ClassReport)] {
        match self {
            RunReport::Ycsb(r) => &r.classes,
            RunReport::Tpcc(r) => &r.classes,
        }
    }

    /// The figures the comparison shows. For TPC-C: committed business transactions per
    /// second, the abort rate of attempts, New-Order's latency (retries included), and the CPU
    /// time per committed business transaction.
    pub fn figures(&self) -> Figures {
        let (committed_per_s, abort_rate, p50_ms, p99_ms, cpu) = match self {
            RunReport::Ycsb(r) => {
                let o = &r.outcomes;
                (o.committed_per_s, o.abort_rate, o.latency_ms.p50, o.latency_ms.p99, r.cpu)
            }
            RunReport::Tpcc(r) => {
                let no = r.types.iter().find(|t| t.name == "new-order").map(|t| t.latency_ms).unwrap_or_default();
                (r.committed_per_s, r.abort_rate, no.p50, no.p99, r.cpu)
            }
        };
        let rw = self.classes().iter().find(|(n, _)| n == "rw-inter").map(|(_, c)| *c).unwrap_or_default();
        let measured = |x: f64| (rw.committed > 0).then_some(x);
        Figures {
            committed_per_s,
            abort_rate,
            p50_ms,
            p99_ms,
            rw_inter_committed: rw.committed,
            round_trips_per_txn: measured(rw.inter_dc_round_trips_per_txn),
            messages_per_txn: measured(rw.inter_dc_messages_per_txn),
            cpu_us_per_committed: cpu.cpu_us_per_committed,
            cpu_cores: cpu.cpu_cores,
        }
    }
}

/// What one row of the comparison shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Committed transactions per second.
    pub committed_per_s: f64,
    /// aborted / (committed + aborted).
    pub abort_rate: f64,
    /// Median latency of committed transactions, ms.
    pub p50_ms: f64,
    /// 99th-percentile latency of committed transactions, ms.
    pub p99_ms: f64,
    /// Committed read-write inter-DC transactions (`rw-inter`) in the measured interval.
    pub rw_inter_committed: u64,
    /// Inter-DC round trips per committed `rw-inter` transaction (`None`: none committed).
    pub round_trips_per_txn: Option<f64>,
    /// Inter-DC messages per committed `rw-inter` transaction (`None`: none committed).
    pub messages_per_txn: Option<f64>,
    /// µs of the process's CPU time per committed transaction (`None`: none committed).
    pub cpu_us_per_committed: Option<f64>,
    /// CPU seconds per wall-clock second of the measured interval (cores busy).
    pub cpu_cores: Option<f64>,
}

/// Each figure of a row divided by the reference row's (`None` where either is missing or
/// the reference is 0 and the figure is not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Ratios {
    /// Of committed/s.
    pub committed_per_s: Option<f64>,
    /// Of the abort rate.
    pub abort_rate: Option<f64>,
    /// Of p50 latency.
    pub p50_ms: Option<f64>,
    /// Of p99 latency.
    pub p99_ms: Option<f64>,
    /// Of inter-DC round trips per `rw-inter` transaction.
    pub round_trips_per_txn: Option<f64>,
    /// Of inter-DC messages per `rw-inter` transaction.
    pub messages_per_txn: Option<f64>,
    /// Of CPU µs per committed transaction.
    pub cpu_us_per_committed: Option<f64>,
}

/// `x / reference`; 1 when both are 0 (the same), `None` when only the reference is 0.
pub fn ratio(x: f64, reference: f64) -> Option<f64> {
    if reference == 0.0 {
        return (x == 0.0).then_some(1.0);
    }
    Some(x / reference)
}

fn ratio_of(x: Option<f64>, reference: Option<f64>) -> Option<f64> {
    ratio(x?, reference?)
}

impl Ratios {
    /// The ratios of `f` to `reference`.
    pub fn new(f: &Figures, reference: &Figures) -> Self {
        Ratios {
            committed_per_s: ratio(f.committed_per_s, reference.committed_per_s),
            abort_rate: ratio(f.abort_rate, reference.abort_rate),
            p50_ms: ratio(f.p50_ms, reference.p50_ms),
            p99_ms: ratio(f.p99_ms, reference.p99_ms),
            round_trips_per_txn: ratio_of(f.round_trips_per_txn, reference.round_trips_per_txn),
            messages_per_txn: ratio_of(f.messages_per_txn, reference.messages_per_txn),
            cpu_us_per_committed: ratio_of(f.cpu_us_per_committed, reference.cpu_us_per_committed),
        }
    }
}

/// One protocol's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareRow {
    /// The protocol.
    pub protocol: Protocol,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// Its figures over the reference row's.
    pub ratios: Ratios,
    /// The RedT paper's Table 2 figures for it (`None`: not in the paper).
    pub paper: Option<PaperFigures>,
}

/// How the runs were set up (from the first run's report).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CompareSetup {
    /// `ycsb` or `tpcc`.
    pub workload: String,
    /// The YCSB mix (`paper`, `a`, …) or the TPC-C warehouses, in words.
    pub detail: String,
    /// Topology name.
    pub topology: String,
    /// DCs.
    pub dcs: usize,
    /// Nodes.
    pub nodes: usize,
    /// Inter-DC RTT of the first link, ms.
    pub rtt_ms: f64,
    /// Clients (YCSB) or terminals (TPC-C) in all.
    pub clients: usize,
    /// Measured seconds of the first run.
    pub duration_s: f64,
    /// Seed of every run.
    pub seed: u64,
}

/// A comparison's outcome: a row per protocol and every run's full report.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// The shared setup.
    pub setup: CompareSetup,
    /// The protocol the ratios are relative to: `redt` if it ran, else the first.
    pub reference: Protocol,
    /// What the latency columns measure.
    pub latency_of: String,
    /// A row per protocol, in run order.
    pub rows: Vec<CompareRow>,
    /// The full report of every run, in run order.
    pub reports: Vec<RunReport>,
}

/// One CSV row: the setup and reference, then the row (the paper's figures as two plain
/// columns, empty when the paper has none, so that every row has the same columns).
#[derive(Serialize)]
struct CsvRow<'a> {
    workload: &'a str,
    topology: &'a str,
    seed: u64,
    reference: Protocol,
    protocol: Protocol,
    #[serde(flatten)]
    figures: &'a Figures,
    ratios: &'a Ratios,
    paper_round_trips: Option<f64>,
    paper_messages: Option<f64>,
}

impl CompareReport {
    /// The comparison of `reports` (one per protocol, in run order) that all ran with
    /// `seed`.
    ///
    /// # Errors
    /// No report, or two of one protocol, as text.
    pub fn new(reports: Vec<RunReport>, seed: u64) -> Result<Self, String> {
        let protocols: Vec<Protocol> = reports.iter().map(RunReport::protocol).collect();
        check_protocols(&protocols)?;
        let reference = if protocols.contains(&Protocol::Redt) { Protocol::Redt } else { protocols[0] };
        let figures: Vec<Figures> = reports.iter().map(RunReport::figures).collect();
        let r = figures[protocols.iter().position(|&p| p == reference).expect("the reference ran")];
        let rows = protocols
            .iter()
            .zip(&figures)
            .map(|(&protocol, f)| CompareRow {
                protocol,
                figures: *f,
                ratios: Ratios::new(f, &r),
                paper: paper_table2(protocol),
            })
            .collect();
        let (setup, latency_of) = match &reports[0] {
            RunReport::Ycsb(c) => (
                CompareSetup {
                    workload: "ycsb".into(),
                    detail: format!("{} mix", c.mix.workload),
                    topology: c.topology.clone(),
                    dcs: c.dcs,
                    nodes: c.nodes,
                    rtt_ms: c.rtt_ms,
                    clients: c.clients,
                    duration_s: c.duration_s,
                    seed,
                },
                "every committed transaction",
            ),
            RunReport::Tpcc(t) => (
                CompareSetup {
                    workload: "tpcc".into(),
                    detail: format!("{} warehouses", t.warehouses),
                    topology: t.topology.clone(),
                    dcs: t.dcs,
                    nodes: t.nodes,
                    rtt_ms: t.rtt_ms,
                    clients: t.terminals,
                    duration_s: t.duration_s,
                    seed,
                },
                "New-Order, first attempt to commit",
            ),
        };
        Ok(CompareReport { setup, reference, latency_of: latency_of.into(), rows, reports })
    }

    /// The row of `protocol`, if it ran.
    pub fn row(&self, protocol: Protocol) -> Option<&CompareRow> {
        self.rows.iter().find(|r| r.protocol == protocol)
    }

    /// The human-readable table (lines ending in `\n`).
    pub fn table(&self) -> String {
        let s = &self.setup;
        let mut out = String::new();
        let mut line = |l: String| {
            out.push_str(&l);
            out.push('\n');
        };
        line(format!(
            "redt bench compare — {} ({}) on {} ({} DCs, {} nodes, {:.0} ms RTT), {} {}, {:.1} s per protocol, seed {}",
            s.workload,
            s.detail,
            s.topology,
            s.dcs,
            s.nodes,
            s.rtt_ms,
            s.clients,
            if s.workload == "tpcc" { "terminals" } else { "clients" },
            s.duration_s,
            s.seed
        ));
        let why = if self.reference == Protocol::Redt { "" } else { " (redt did not run: the first protocol listed)" };
        line(format!("  ratios (×) relative to {}{why}; latency of {}", self.reference, self.latency_of));
        line(
            "  inter-DC RTs and msgs: per committed read-write inter-DC transaction (rw-inter); paper: RedT Table 2"
                .into(),
        );
        line("  CPU µs/txn: the whole process's CPU time (every node and client) per committed transaction".into());
        line(format!(
            "  {:<10} {:>17} {:>16} {:>16} {:>16} {:>14} {:>15} {:>9} {:>10} {:>16}",
            "protocol",
            "committed/s",
            "abort rate",
            "p50 ms",
            "p99 ms",
            "inter-DC RTs",
            "inter-DC msgs",
            "paper RTs",
            "paper msgs",
            "CPU µs/txn"
        ));
        for r in &self.rows {
            let f = &r.figures;
            let q = &r.ratios;
            let (paper_rt, paper_msg) = match r.paper {
                Some(p) => (format_figure(p.round_trips), format!("{:.2}", p.messages)),
                None => ("–".to_string(), "–".to_string()),
            };
            line(format!(
                "  {:<10} {:>17} {:>16} {:>16} {:>16} {:>14} {:>15} {:>9} {:>10} {:>16}",
                r.protocol.name(),
                cell(Some(format!("{:.1}", f.committed_per_s)), q.committed_per_s),
                cell(Some(format!("{:.4}", f.abort_rate)), q.abort_rate),
                cell(Some(format!("{:.1}", f.p50_ms)), q.p50_ms),
                cell(Some(format!("{:.1}", f.p99_ms)), q.p99_ms),
                cell(f.round_trips_per_txn.map(|x| format!("{x:.2}")), q.round_trips_per_txn),
                cell(f.messages_per_txn.map(|x| format!("{x:.2}")), q.messages_per_txn),
                paper_rt,
                paper_msg,
                cell(f.cpu_us_per_committed.map(|x| format!("{x:.0}")), q.cpu_us_per_committed)
            ));
        }
        out
    }

    /// Appends a CSV row per protocol to `path` (header written when the file is new):
    /// workload, topology, seed, reference, then the row's figures, ratios and paper
    /// figures as dotted columns.
    ///
    /// # Errors
    /// As [`crate::csv::append_row`].
    pub fn append_csv(&self, path: &std::path::Path) -> Result<(), String> {
        for row in &self.rows {
            let r = CsvRow {
                workload: &self.setup.workload,
                topology: &self.setup.topology,
                seed: self.setup.seed,
                reference: self.reference,
                protocol: row.protocol,
                figures: &row.figures,
                ratios: &row.ratios,
                paper_round_trips: row.paper.map(|p| p.round_trips),
                paper_messages: row.paper.map(|p| p.messages),
            };
            crate::csv::append_report(path, &r)?;
        }
        Ok(())
    }
}

/// A whole number without decimals, else two.
fn format_figure(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// `value ratio×`, with `–` for a missing value or ratio.
fn cell(value: Option<String>, ratio: Option<f64>) -> String {
    let ratio = ratio.map(|x| format!("{x:.2}×")).unwrap_or_else(|| "–".into());
    format!("{} {ratio:>6}", value.unwrap_or_else(|| "–".into()))
}

/// Runs the workload once per protocol of `cfg`, in order, each on a fresh tokio runtime
/// and embedded cluster of `topo`, and compares the runs. `progress(i, n, protocol)` is
/// told before each run starts (`i` of `n`).
///
/// # Errors
/// An empty or repeated protocol list (before anything runs); a run that fails (the runs
/// before it are lost), as text naming its protocol.
pub fn run_compare(
    topo: &Topology,
    cfg: &CompareConfig,
    progress: &mut dyn FnMut(usize, usize, Protocol),
) -> Result<CompareReport, String> {
    check_protocols(&cfg.protocols)?;
    let n = cfg.protocols.len();
    let mut reports = Vec::with_capacity(n);
    for (i, &protocol) in cfg.protocols.iter().enumerate() {
        progress(i, n, protocol);
        let t = topo.clone();
        let r = match &cfg.workload {
            CompareWorkload::Ycsb(c) => {
                let mut c = c.clone();
                c.options.protocol = protocol;
                in_fresh_runtime(async move { run_cluster_ycsb(t, &c).await })?.map(RunReport::Ycsb)
            }
            CompareWorkload::Tpcc(c) => {
                let mut c = c.clone();
                c.options.protocol = protocol;
                in_fresh_runtime(async move { run_tpcc(t, &c).await })?.map(RunReport::Tpcc)
            }
        };
        reports.push(r.map_err(|e| format!("{protocol}: {e}"))?);
    }
    CompareReport::new(reports, cfg.workload.seed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CpuCost, Latency, Outcomes, VerbsPerTxn};
    use crate::ycsb::MixReport;

    /// A YCSB report of `protocol` with the given figures and `rw` as its rw-inter class, one
    /// core busy (so its CPU time per commit is a second over its throughput).
    fn report(protocol: Protocol, committed_per_s: f64, abort_rate: f64, p50: f64, rw: ClassReport) -> RunReport {
        RunReport::Ycsb(ClusterReport {
            workload: "ycsb".into(),
            protocol,
            mix: MixReport { workload: "paper".into(), ..Default::default() },
            topology: "default".into(),
            dcs: 4,
            nodes: 8,
            rtt_ms: 40.0,
            early_ack: true,
            clients: 32,
            duration_s: 30.0,
            outcomes: Outcomes {
                committed: (committed_per_s * 30.0) as u64,
                aborted: 0,
                unknown: 0,
                committed_per_s,
                abort_rate,
                latency_ms: Latency { p50, p99: 2.0 * p50, p999: 3.0 * p50, mean: p50 },
            },
            retries: Default::default(),
            cpu: CpuCost {
                cpu_us_per_committed: Some(1e6 / committed_per_s),
                cpu_cores: Some(1.0),
                idle_cpu_cores: Some(0.1),
            },
            inter_dc_round_trips_per_txn: rw.inter_dc_round_trips_per_txn,
            client_round_trips_per_txn: rw.client_round_trips_per_txn,
            inter_dc_messages_per_txn: rw.inter_dc_messages_per_txn,
            verbs_per_txn: VerbsPerTxn::default(),
            classes: vec![("rw-inter".into(), rw), ("rw-intra".into(), ClassReport::default())],
            records: 0,
            inserted: 0,
        })
    }

    fn rw(committed: u64, round_trips: f64, messages: f64) -> ClassReport {
        ClassReport {
            committed,
            inter_dc_round_trips_per_txn: round_trips,
            inter_dc_messages_per_txn: messages,
            ..Default::default()
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    /// RedT §6.2.2: the ratios are to RedT's row, whatever its place in the list, and the
    /// paper's Table 2 figures sit beside each protocol.
    #[test]
    fn ratios_are_relative_to_redt_and_paper_figures_follow_table_2() {
        let reports = vec![
            report(Protocol::TwoPcPaxos, 300.0, 0.10, 240.0, rw(900, 6.0, 26.0)),
            report(Protocol::Redt, 750.0, 0.05, 40.0, rw(2000, 2.0, 12.0)),
            report(Protocol::RedtTcp, 600.0, 0.0, 50.0, rw(0, 0.0, 0.0)),
        ];
        let c = CompareReport::new(reports, 42).unwrap();
        assert_eq!(c.reference, Protocol::Redt);
        assert_eq!(
            c.rows.iter().map(|r| r.protocol).collect::<Vec<_>>(),
            [Protocol::TwoPcPaxos, Protocol::Redt, Protocol::RedtTcp]
        );
        let redt = c.row(Protocol::Redt).unwrap();
        for x in [
            redt.ratios.committed_per_s,
            redt.ratios.abort_rate,
            redt.ratios.p50_ms,
            redt.ratios.p99_ms,
            redt.ratios.round_trips_per_txn,
            redt.ratios.messages_per_txn,
            redt.ratios.cpu_us_per_committed,
        ] {
            assert!(close(x, 1.0), "{x:?}");
        }
        let paxos = c.row(Protocol::TwoPcPaxos).unwrap();
        assert!(close(paxos.ratios.committed_per_s, 0.4));
        assert!(close(paxos.ratios.abort_rate, 2.0));
        assert!(close(paxos.ratios.p50_ms, 6.0));
        assert!(close(paxos.ratios.round_trips_per_txn, 3.0));
        assert!(close(paxos.ratios.messages_per_txn, 26.0 / 12.0));
        assert!(close(paxos.ratios.cpu_us_per_committed, 2.5), "300/s on one core against 750/s");
        assert_eq!(paxos.paper, Some(PaperFigures { round_trips: 5.97, messages: 25.09 }));
        assert_eq!(redt.paper, Some(PaperFigures { round_trips: 2.0, messages: 11.74 }));
        // RedT over TCP: no rw-inter commit, so no per-transaction figures, and not in the paper.
        let tcp = c.row(Protocol::RedtTcp).unwrap();
        assert_eq!((tcp.figures.round_trips_per_txn, tcp.ratios.round_trips_per_txn), (None, None));
        assert!(close(tcp.ratios.abort_rate, 0.0));
        assert_eq!(tcp.paper, None);

        let t = c.table();
        assert!(t.contains("relative to redt;"), "{t}");
        let line = |p: &str| t.lines().find(|l| l.starts_with(&format!("  {p} "))).unwrap().to_string();
        let l = line("2pc-paxos");
        for s in [
            "300.0  0.40×",
            "0.1000  2.00×",
            "240.0  6.00×",
            "6.00  3.00×",
            "26.00  2.17×",
            "5.97",
            "25.09",
            "3333  2.50×",
        ] {
            assert!(l.contains(s), "`{s}` in {l}");
        }
        let l = line("redt");
        assert!(l.contains("750.0  1.00×") && l.contains("11.74") && l.ends_with("1333  1.00×"), "{l}");
        let l = line("redt-tcp");
        assert!(l.ends_with("–          –      1667  1.25×"), "{l}");
    }

    #[test]
    fn without_redt_the_first_protocol_is_the_reference() {
        let reports = vec![
            report(Protocol::Tapir, 500.0, 0.0, 120.0, rw(10, 3.0, 22.0)),
            report(Protocol::EpPaxos, 250.0, 0.2, 200.0, rw(10, 5.0, 23.0)),
        ];
        let c = CompareReport::new(reports, 7).unwrap();
        assert_eq!(c.reference, Protocol::Tapir);
        assert!(close(c.rows[0].ratios.abort_rate, 1.0), "0 / 0 is the same: 1");
        assert_eq!(c.rows[1].ratios.abort_rate, None, "x / 0 has no ratio");
        assert!(close(c.rows[1].ratios.committed_per_s, 0.5));
        assert!(c.table().contains("relative to tapir (redt did not run: the first protocol listed)"));
        assert_eq!(c.rows[1].paper, Some(PaperFigures { round_trips: 5.0, messages: 23.19 }));
    }

    #[test]
    fn empty_and_repeated_protocol_lists_are_refused() {
        assert!(check_protocols(&[]).unwrap_err().contains("at least one"));
        let e = check_protocols(&[Protocol::Redt, Protocol::Tapir, Protocol::Redt]).unwrap_err();
        assert!(e.contains("`redt` is listed twice"), "{e}");
        assert!(check_protocols(&Protocol::ALL).is_ok());
        let twice = vec![report(Protocol::Tapir, 1.0, 0.0, 1.0, rw(1, 3.0, 20.0)); 2];
        assert!(CompareReport::new(twice, 1).is_err());
        assert!(CompareReport::new(Vec::new(), 1).is_err());
    }

    #[test]
    fn every_protocol_but_redt_tcp_has_paper_figures() {
        for p in Protocol::ALL {
            assert_eq!(paper_table2(p).is_some(), p != Protocol::RedtTcp, "{p}");
        }
    }

    #[test]
    fn json_and_csv_name_the_protocols() {
        let reports = vec![
            report(Protocol::Redt, 750.0, 0.05, 40.0, rw(2000, 2.0, 12.0)),
            report(Protocol::Tapir, 500.0, 0.05, 80.0, rw(1000, 3.0, 21.0)),
        ];
        let c = CompareReport::new(reports, 42).unwrap();
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["reference"], "redt");
        assert_eq!(json["rows"][1]["protocol"], "tapir");
        assert_eq!(json["rows"][1]["ratios"]["p50_ms"], 2.0);
        assert_eq!(json["reports"][1]["protocol"], "tapir");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("compare.csv");
        c.append_csv(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("workload,topology,seed,reference,protocol,committed_per_s,"), "{}", lines[0]);
        assert!(lines[0].contains("ratios.committed_per_s") && lines[0].ends_with("paper_round_trips,paper_messages"));
        assert!(lines[2].starts_with("ycsb,default,42,redt,tapir,500,"), "{}", lines[2]);
        // A protocol the paper leaves out has the same columns, its paper figures empty.
        let tcp = vec![report(Protocol::RedtTcp, 700.0, 0.05, 40.0, rw(10, 2.0, 12.0))];
        CompareReport::new(tcp, 42).unwrap().append_csv(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().nth(3).unwrap().ends_with(",,"), "{text}");
    }
}

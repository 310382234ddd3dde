//! `redt netem …`: change link conditions of a running cluster, print tc commands, measure
//! the emulation's accuracy.

use super::{load_topology, runtime};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use redt_coordinator::transport::OPERATOR_IDENTITY_NAME;
use redt_coordinator::Client;
use redt_proto::wire::NetemSetRequest;
use redt_proto::LinkConditions;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `redt netem` subcommands.
#[derive(Subcommand, Debug)]
pub enum NetemCmd {
    /// Changes one inter-DC link of a running cluster (every node applies it at once).
    Set(SetArgs),
    /// Prints the `tc qdisc … netem` commands equivalent to a topology's links, per host.
    TcScript {
        /// Topology file.
        #[arg(long)]
        config: PathBuf,
        /// Network device the commands name.
        #[arg(long, default_value = "eth0")]
        device: String,
    },
    /// Measures round trips over QUIC through the emulation at configured RTTs.
    Accuracy {
        /// RTTs to measure, comma-separated.
        #[arg(long, default_value = "10ms,40ms,100ms", value_delimiter = ',', value_parser = humantime::parse_duration)]
        rtt: Vec<Duration>,
        /// Ping-pongs per RTT.
        #[arg(long, default_value_t = 50)]
        samples: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `redt netem set`.
#[derive(Args, Debug)]
pub struct SetArgs {
    /// Source DC name.
    #[arg(long)]
    from: String,
    /// Destination DC name.
    #[arg(long)]
    to: String,
    /// Round-trip time, e.g. `80ms`; at most 60 s.
    #[arg(long, value_parser = redt_proto::parse_duration)]
    rtt: Option<Duration>,
    /// Jitter, e.g. `2ms`; at most half the RTT.
    #[arg(long, value_parser = redt_proto::parse_duration)]
    jitter: Option<Duration>,
    /// Loss, e.g. `1%`, from 0% to 100%.
    #[arg(long, value_parser = redt_proto::parse_loss)]
    loss: Option<f64>,
    /// Rate limit, e.g. `100mbit`, or `unlimited`.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<Rate>,
    /// Cut (`on`) or heal (`off`) the link.
    #[arg(long)]
    partition: Option<String>,
    /// Change only the from→to direction (default: both).
    #[arg(long)]
    one_way: bool,
    /// Topology file of the running cluster.
    #[arg(long, default_value = "configs/default.yaml")]
    cluster: PathBuf,
    /// Certificate directory (with the operator certificate).
    #[arg(long, default_value = "run/certs")]
    certs: PathBuf,
    /// The identity in the certificate directory to send the request with
    /// (`<NAME>.pem`/`.key`): the nodes serve `netem set` to an operator's only (`redt certs
    /// issue --role operator`).
    #[arg(long, value_name = "NAME", default_value = OPERATOR_IDENTITY_NAME)]
    identity: String,
}

/// A rate limit in bits per second; `None` is unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rate(Option<u64>);

/// Parses `--rate` as the topology file parses a link's `rate`.
fn parse_rate(s: &str) -> std::result::Result<Rate, String> {
    redt_proto::parse_rate(s).map(Rate)
}

/// Checks the values given as the topology file checks a link's ([`LinkConditions::check`]);
/// a value not given is checked by each node against the link's current one.
fn check_values(a: &SetArgs) -> Result<()> {
    let probe = LinkConditions {
        // Without --rtt, jitter is checked against the link's RTT by the nodes.
        rtt: a.rtt.unwrap_or(LinkConditions::MAX_RTT),
        jitter: a.jitter.unwrap_or_default(),
        loss: a.loss.unwrap_or_default(),
        rate_bits_per_s: a.rate.and_then(|r| r.0),
    };
    probe.check().map_err(|e| anyhow::anyhow!("--{}: {e}, as the topology file refuses too", e.key()))
}

/// Runs a `redt netem` subcommand.
pub fn run(cmd: &NetemCmd) -> Result<()> {
    match cmd {
        NetemCmd::Set(a) => {
            let topo = Arc::new(load_topology(Some(&a.cluster))?);
            for dc in [&a.from, &a.to] {
                if !topo.dcs.iter().any(|d| &d.name == dc) {
                    bail!("{}: no DC named `{dc}`", a.cluster.display());
                }
            }
            if a.from == a.to {
                bail!("--from and --to must name two different DCs (both are `{}`)", a.from);
            }
            if a.rtt.is_none() && a.jitter.is_none() && a.loss.is_none() && a.rate.is_none() && a.partition.is_none() {
                bail!("nothing to change: give at least one of --rtt, --jitter, --loss, --rate, --partition");
            }
            check_values(a)?;
            let partitioned = match a.partition.as_deref() {
                None => None,
                Some("on") => Some(true),
                Some("off") => Some(false),
                Some(x) => bail!("--partition takes on or off, not `{x}`"),
            };
            let req = NetemSetRequest {
                from: a.from.clone(),
                to: a.to.clone(),
                rtt_us: a.rtt.map_or(-1, |d| d.as_micros() as i64),
                jitter_us: a.jitter.map_or(-1, |d| d.as_micros() as i64),
                loss_ppm: a.loss.map_or(-1, |l| (l * 1e6).round() as i64),
                // 0 on the wire: unlimited.
                rate_bits_per_s: a.rate.map_or(-1, |r| r.0.map_or(0, |bits| i64::try_from(bits).unwrap_or(i64::MAX))),
                partitioned,
                symmetric: !a.one_way,
            };
            let rt = runtime()?;
            let failed = rt.block_on(async {
                let client = Client::connect_as(topo.clone(), &a.certs, &a.identity, Duration::from_secs(5))
                    .with_context(|| format!("the identity {} in {}", a.identity, a.certs.display()))?;
                anyhow::Ok(client.netem_set(req).await)
            })?;
            if failed.is_empty() {
                println!(
                    "netem: {} {} {} applied on all {} nodes",
                    a.from,
                    if a.one_way { "->" } else { "<->" },
                    a.to,
                    topo.nodes.len()
                );
                Ok(())
            } else {
                for (n, e) in &failed {
                    eprintln!("  {n}: {e}");
                }
                bail!("{} of {} nodes did not apply the change", failed.len(), topo.nodes.len())
            }
        }
        NetemCmd::TcScript { config, device } => {
            let mut topo = load_topology(Some(config))?;
            // tc filters match IP addresses: a node advertising a host name is resolved here
            // (on the operator's machine: it must resolve the names as the hosts do).
            for n in &mut topo.nodes {
                if n.advertise.ip().is_none() {
                    let addrs = n.advertise.resolve().with_context(|| {
                        format!("{}: the advertise address of {} (tc filters need its IP)", config.display(), n.name)
                    })?;
                    let first = addrs.iter().find(|a| a.is_ipv4()).or(addrs.first());
                    if let Some(addr) = first {
                        n.advertise.host = redt_proto::Host::Ip(addr.ip());
                    }
                }
            }
            print!("{}", redt_netem::tc_script_for_device(&topo, device));
            Ok(())
        }
        NetemCmd::Accuracy { rtt, samples, json } => {
            let rt = runtime()?;
            let mut rows = Vec::new();
            for &r in rtt {
                let rep = rt.block_on(redt_netem::measure_rtt(r, *samples))?;
                rows.push(rep);
            }
            if *json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|r| serde_json::json!({"configured_ms": r.configured_ms, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "mean_ms": r.mean_ms, "samples": r.samples}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "{:>14} {:>10} {:>10} {:>10} {:>8}",
                    "configured ms", "p50 ms", "p99 ms", "mean ms", "samples"
                );
                for r in rows {
                    println!(
                        "{:>14.1} {:>10.3} {:>10.3} {:>10.3} {:>8}",
                        r.configured_ms, r.p50_ms, r.p99_ms, r.mean_ms, r.samples
                    );
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: NetemCmd,
    }

    fn set(args: &[&str]) -> Result<SetArgs> {
        let argv = ["redt", "set", "--from", "dc1", "--to", "dc2"].iter().chain(args);
        match Cli::try_parse_from(argv)?.cmd {
            NetemCmd::Set(a) => Ok(a),
            _ => bail!("not a set"),
        }
    }

    /// `redt netem set` parses and checks values exactly as the topology file's links.
    #[test]
    fn values_are_parsed_and_checked_as_the_topology_file_does() {
        let a = set(&["--loss", "0.5%", "--rate", "100mbit", "--rtt", "80ms", "--jitter", "40ms"]).unwrap();
        assert_eq!((a.loss, a.rate), (Some(0.005), Some(Rate(Some(100_000_000)))));
        check_values(&a).unwrap();
        assert_eq!(set(&["--rate", "unlimited"]).unwrap().rate, Some(Rate(None)));
        assert_eq!(set(&["--rtt", "0"]).unwrap().rtt, Some(Duration::ZERO));
        for bad in [["--loss", "1"], ["--loss", "150%"], ["--rate", "fast"], ["--rate", "0bit"], ["--rtt", "soon"]] {
            assert!(set(&bad).is_err(), "{bad:?} is refused");
        }
        let text = |args: &[&str]| check_values(&set(args).unwrap()).unwrap_err().to_string();
        let huge = text(&["--rtt", "1000000h"]);
        assert!(huge.starts_with("--rtt: rtt ") && huge.contains("the largest allowed"), "{huge}");
        assert!(text(&["--rtt", "61s"]).contains("the largest allowed"));
        assert!(text(&["--rtt", "10ms", "--jitter", "6ms"]).contains("--jitter: jitter 6ms exceeds half the rtt"));
        assert!(text(&["--jitter", "31s"]).contains("exceeds half the rtt"));
    }
}

//! `redt netem …`: change link conditions of a running cluster, print tc commands, measure
//! the emulation's accuracy.

use super::{load_topology, runtime};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use redt_coordinator::transport::OPERATOR_IDENTITY_NAME;
use redt_coordinator::Client;
use redt_proto::wire::NetemSetRequest;
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
    /// Round-trip time, e.g. `80ms`.
    #[arg(long, value_parser = humantime::parse_duration)]
    rtt: Option<Duration>,
    /// Jitter, e.g. `2ms`.
    #[arg(long, value_parser = humantime::parse_duration)]
    jitter: Option<Duration>,
    /// Loss, e.g. `1%`.
    #[arg(long)]
    loss: Option<String>,
    /// Rate limit, e.g. `100mbit`, or `unlimited`.
    #[arg(long)]
    rate: Option<String>,
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

fn parse_loss(s: &str) -> Result<i64> {
    let p: f64 = s.strip_suffix('%').context("loss must end with %, e.g. 1%")?.trim().parse().context("loss")?;
    if !(0.0..=100.0).contains(&p) {
        bail!("loss must be between 0% and 100%");
    }
    Ok((p * 1e4).round() as i64)
}

fn parse_rate(s: &str) -> Result<i64> {
    if s == "unlimited" {
        return Ok(0);
    }
    let lower = s.to_ascii_lowercase();
    let (num, mult) = [("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.to_string(), *m)))
        .unwrap_or((lower.clone(), 1.0));
    let v: f64 = num.trim().parse().with_context(|| format!("rate `{s}` (e.g. 100mbit)"))?;
    if v <= 0.0 {
        bail!("rate must be positive (or `unlimited`)");
    }
    Ok((v * mult) as i64)
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
            if let Some(rtt) = a.rtt.filter(|&r| r > redt_coordinator::netem_admin::MAX_RTT) {
                bail!(
                    "--rtt {} is above the limit of {}",
                    humantime::format_duration(rtt),
                    humantime::format_duration(redt_coordinator::netem_admin::MAX_RTT)
                );
            }
            if let (Some(rtt), Some(jitter)) = (a.rtt, a.jitter) {
                if jitter > rtt / 2 {
                    bail!(
                        "--jitter {} exceeds half the rtt ({} / 2), as the topology file refuses too",
                        humantime::format_duration(jitter),
                        humantime::format_duration(rtt)
                    );
                }
            }
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
                loss_ppm: a.loss.as_deref().map(parse_loss).transpose()?.unwrap_or(-1),
                rate_bits_per_s: a.rate.as_deref().map(parse_rate).transpose()?.unwrap_or(-1),
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
            let topo = load_topology(Some(config))?;
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

    #[test]
    fn parses_loss_and_rate() {
        assert_eq!(parse_loss("1%").unwrap(), 10_000);
        assert_eq!(parse_loss("0.5%").unwrap(), 5_000);
        assert!(parse_loss("1").is_err());
        assert!(parse_loss("150%").is_err());
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("unlimited").unwrap(), 0);
        assert!(parse_rate("fast").is_err());
    }
}

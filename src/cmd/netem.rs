//! `redt netem …`: change link conditions of a running cluster, print tc commands, measure
//! the emulation's accuracy.

use super::{load_topology, runtime};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use redt_coordinator::Client;
use redt_proto::wire::NetemSetRequest;
use redt_proto::LinkConditions;
use redt_transport::OPERATOR_IDENTITY_NAME;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `redt netem` subcommands.
#[derive(Subcommand, Debug)]
pub enum NetemCmd {
    /// Changes one inter-DC link of a running cluster (every node applies it at once).
    Set(Box<SetArgs>),
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
        #[arg(long, default_value = "10ms,40ms,100ms", value_delimiter = ',', allow_hyphen_values = true, value_parser = super::duration::span)]
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
    /// Destination DC name (another DC than --from).
    #[arg(long)]
    to: String,
    /// Round-trip time, e.g. `80ms`; at most 60 s.
    #[arg(long, allow_hyphen_values = true, value_parser = super::duration::span, conflicts_with = "delay")]
    rtt: Option<Duration>,
    /// One-way delay, as tc netem's `delay`, e.g. `40ms`: each direction of the link holds a
    /// datagram this long, so it is `--rtt` of twice the value (at most 30 s).
    #[arg(long, allow_hyphen_values = true, value_parser = super::duration::span)]
    delay: Option<Duration>,
    /// Jitter, e.g. `2ms`, added to each one-way delay as tc's; at most half the RTT (the
    /// one-way delay).
    #[arg(long, allow_hyphen_values = true, value_parser = super::duration::span)]
    jitter: Option<Duration>,
    /// Loss, e.g. `1%`, from 0% to 100%.
    #[arg(long, allow_hyphen_values = true, value_parser = redt_proto::parse_loss)]
    loss: Option<f64>,
    /// Rate limit in bits per second as tc's, e.g. `100mbit`, or `unlimited`.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_rate)]
    rate: Option<Rate>,
    /// Cut (`on`) or heal (`off`) the link.
    #[arg(long, value_parser = ["on", "off"])]
    partition: Option<String>,
    /// Change only the from→to direction (default: both).
    #[arg(long)]
    one_way: bool,
    /// Topology file of the running cluster [default: the one `redt cluster up` recorded in
    /// the run directory].
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Run directory of a cluster started by `redt cluster up` (its topology and certificates
    /// are taken from there unless --cluster / --certs say otherwise).
    #[arg(long, default_value = "run")]
    run_dir: PathBuf,
    /// Certificate directory with the operator certificate [default: RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// The identity in the certificate directory to send the request with
    /// (`<NAME>.pem`/`.key`): the nodes serve `netem set` to an operator's only (`redt certs
    /// issue --role operator`).
    #[arg(long, value_name = "NAME", default_value = OPERATOR_IDENTITY_NAME)]
    identity: String,
}

impl SetArgs {
    /// The RTT asked for: `--rtt`, or twice `--delay`.
    fn rtt(&self) -> Option<Duration> {
        self.rtt.or(self.delay.map(|d| d.saturating_mul(2)))
    }

    /// The flag that gave the RTT, for errors.
    fn rtt_flag(&self) -> &'static str {
        if self.delay.is_some() {
            "--delay"
        } else {
            "--rtt"
        }
    }

    /// The topology file: `--cluster`, or the one `redt cluster up` recorded in the run
    /// directory.
    fn cluster(&self) -> Result<PathBuf> {
        if let Some(c) = &self.cluster {
            return Ok(c.clone());
        }
        let f = self.run_dir.join("config.path");
        let text = std::fs::read_to_string(&f).with_context(|| {
            format!(
                "{} is not the run directory of a `redt cluster up` cluster (no {}): pass --run-dir DIR, or --cluster FILE and --certs DIR",
                self.run_dir.display(),
                f.display()
            )
        })?;
        Ok(PathBuf::from(text.trim()))
    }

    /// What the request changes, as `rtt 80ms, loss 1%`.
    fn changes(&self) -> String {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        let mut v = Vec::new();
        if let Some(rtt) = self.rtt() {
            v.push(format!("rtt {}", d(rtt)));
        }
        if let Some(j) = self.jitter {
            v.push(format!("jitter {}", d(j)));
        }
        if let Some(l) = self.loss {
            v.push(format!("loss {}%", l * 100.0));
        }
        if let Some(Rate(r)) = self.rate {
            v.push(r.map_or_else(|| "rate unlimited".to_string(), |bits| format!("rate {bits} bit/s")));
        }
        match self.partition.as_deref() {
            Some("on") => v.push("cut".into()),
            Some("off") => v.push("healed".into()),
            _ => {}
        }
        v.join(", ")
    }
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
        rtt: a.rtt().unwrap_or(LinkConditions::MAX_RTT),
        jitter: a.jitter.unwrap_or_default(),
        loss: a.loss.unwrap_or_default(),
        rate_bits_per_s: a.rate.and_then(|r| r.0),
    };
    probe.check().map_err(|e| {
        let flag = if e.key() == "rtt" { a.rtt_flag().to_string() } else { format!("--{}", e.key()) };
        let one_way = if a.delay.is_some() { " (--delay is one-way: the rtt is twice it)" } else { "" };
        anyhow::anyhow!("{flag}: {e}{one_way}, as the topology file refuses too")
    })
}

/// Runs a `redt netem` subcommand.
pub fn run(cmd: &NetemCmd) -> Result<()> {
    match cmd {
        NetemCmd::Set(a) => {
            if a.from == a.to {
                bail!("--from and --to must name two different DCs (both are `{}`)", a.from);
            }
            if a.rtt().is_none() && a.jitter.is_none() && a.loss.is_none() && a.rate.is_none() && a.partition.is_none()
            {
                bail!(
                    "nothing to change: give at least one of --rtt (or --delay), --jitter, --loss, --rate, --partition"
                );
            }
            let cluster = a.cluster()?;
            let topo = Arc::new(load_topology(Some(&cluster))?);
            for dc in [&a.from, &a.to] {
                if !topo.dcs.iter().any(|d| &d.name == dc) {
                    let names: Vec<&str> = topo.dcs.iter().map(|d| d.name.as_str()).collect();
                    bail!("{}: no DC named `{dc}` (its DCs: {})", cluster.display(), names.join(", "));
                }
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
                rtt_us: a.rtt().map_or(-1, |d| d.as_micros() as i64),
                jitter_us: a.jitter.map_or(-1, |d| d.as_micros() as i64),
                loss_ppm: a.loss.map_or(-1, |l| (l * 1e6).round() as i64),
                // 0 on the wire: unlimited.
                rate_bits_per_s: a.rate.map_or(-1, |r| r.0.map_or(0, |bits| i64::try_from(bits).unwrap_or(i64::MAX))),
                partitioned,
                symmetric: !a.one_way,
            };
            let certs = a.certs.clone().unwrap_or_else(|| a.run_dir.join("certs"));
            let rt = runtime()?;
            let failed = rt.block_on(async {
                let client = Client::connect_as(topo.clone(), &certs, &a.identity, Duration::from_secs(5))
                    .with_context(|| format!("the identity {} in {}", a.identity, certs.display()))?;
                anyhow::Ok(client.netem_set(req).await)
            })?;
            if failed.is_empty() {
                println!(
                    "netem: {} {} {}: {} — applied on all {} nodes",
                    a.from,
                    if a.one_way { "->" } else { "<->" },
                    a.to,
                    a.changes(),
                    topo.nodes.len()
                );
                Ok(())
            } else {
                for (n, e) in &failed {
                    // A node's answer already starts with its name (`dc1-n1 answered: …`).
                    if e.starts_with(n.as_str()) {
                        eprintln!("  {e}");
                    } else {
                        eprintln!("  {n}: {e}");
                    }
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
            NetemCmd::Set(a) => Ok(*a),
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
        // tc's one-way delay: the RTT is twice it, and errors name the flag given.
        let a = set(&["--delay", "40ms", "--jitter", "40ms"]).unwrap();
        assert_eq!(a.rtt(), Some(Duration::from_millis(80)));
        check_values(&a).unwrap();
        let over = text(&["--delay", "10ms", "--jitter", "11ms"]);
        assert!(over.starts_with("--jitter: jitter 11ms exceeds half the rtt (20ms / 2)"), "{over}");
        let long = text(&["--delay", "31s"]);
        assert!(
            long.starts_with("--delay: rtt 1m 2s is more than 1m") && long.contains("--delay is one-way"),
            "{long}"
        );
        let both = set(&["--delay", "1ms", "--rtt", "2ms"]).unwrap_err().to_string();
        assert!(both.contains("'--delay <DELAY>' cannot be used with '--rtt <RTT>'"), "{both}");
    }

    /// Every duration flag of `netem set` goes through the one parser: a negative or
    /// malformed value is named and explained, not taken for a flag.
    #[test]
    fn bad_durations_and_values_are_explained() {
        let err = |args: &[&str]| set(args).unwrap_err().to_string();
        let neg = err(&["--rtt", "-5s"]);
        assert!(neg.contains("invalid value '-5s' for '--rtt <RTT>': invalid duration `-5s`: negative"), "{neg}");
        let neg = err(&["--delay", "-5ms"]);
        assert!(neg.contains("invalid duration `-5ms`: negative"), "{neg}");
        let junk = err(&["--jitter", "abc"]);
        assert!(junk.contains("invalid duration `abc`: not a number and a unit; write a number"), "{junk}");
        let rate = err(&["--rate", "100mb"]);
        assert!(rate.contains("invalid rate `100mb`") && rate.contains("e.g. 100mbit"), "{rate}");
        let loss = err(&["--loss", "-1%"]);
        assert!(loss.contains("invalid loss `-1%`"), "{loss}");
        let part = err(&["--partition", "yes"]);
        assert!(
            part.contains("invalid value 'yes' for '--partition <PARTITION>'") && part.contains("on, off"),
            "{part}"
        );
    }

    /// `netem set` refuses a request that names one DC twice or changes nothing before it
    /// reads any file, and says what it applied.
    #[test]
    fn one_dc_twice_and_nothing_to_change_are_refused() {
        let run_set = |args: &[&str]| run(&NetemCmd::Set(Box::new(set(args).unwrap()))).unwrap_err().to_string();
        let argv = |from: &str, to: &str, extra: &[&str]| {
            let mut v = vec!["redt", "set", "--from", from, "--to", to, "--run-dir", "/nonexistent-redt-run"];
            v.extend_from_slice(extra);
            match Cli::try_parse_from(v).unwrap().cmd {
                NetemCmd::Set(a) => *a,
                _ => unreachable!("a set"),
            }
        };
        let twice = run(&NetemCmd::Set(Box::new(argv("dc1", "dc1", &["--rtt", "10ms"])))).unwrap_err().to_string();
        assert_eq!(twice, "--from and --to must name two different DCs (both are `dc1`)");
        let nothing = run_set(&[]);
        assert!(nothing.starts_with("nothing to change: give at least one of --rtt (or --delay)"), "{nothing}");
        let no_run =
            format!("{:#}", run(&NetemCmd::Set(Box::new(argv("dc1", "dc2", &["--rtt", "10ms"])))).unwrap_err());
        assert!(
            no_run.starts_with("/nonexistent-redt-run is not the run directory of a `redt cluster up` cluster")
                && no_run.contains("pass --run-dir DIR, or --cluster FILE and --certs DIR"),
            "{no_run}"
        );
        let a = set(&["--delay", "20ms", "--loss", "1%", "--rate", "unlimited"]).unwrap();
        assert_eq!(a.changes(), "rtt 40ms, loss 1%, rate unlimited");
    }
}

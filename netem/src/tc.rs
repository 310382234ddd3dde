//! The Linux `tc` commands equivalent to the WAN model, for hosts whose kernel has `sch_netem`.
//!
//! Per node: a `prio` root qdisc with three default bands plus one band per destination DC,
//! a `netem` qdisc on each extra band with that link's delay, jitter, loss and rate, and
//! `u32` filters steering every node of that DC into its band (the shape of RedT's
//! `scripts/set_group_delay.sh`; docs/design.md §4). Pure string building: nothing is run.

use crate::model::WanModel;
use crate::socket::QUEUE_LIMIT_BYTES;
use redt_proto::{DcId, LinkConditions, Topology};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

/// Network device the commands shape when none is given.
pub const DEFAULT_DEVICE: &str = "eth0";

/// Bands of the `prio` qdisc that unfiltered traffic uses (the kernel's default priomap).
const DEFAULT_BANDS: usize = 3;

/// Most bands a `prio` qdisc can have (`TCQ_PRIO_BANDS`).
const MAX_BANDS: usize = 16;

/// `netem limit` in packets: the user-space delay line's byte bound over a 1500-byte MTU.
const NETEM_LIMIT_PACKETS: usize = QUEUE_LIMIT_BYTES / 1500;

/// Returns the `tc` commands reproducing `topology.links` on device [`DEFAULT_DEVICE`]; see
/// [`tc_script_for_device`].
pub fn tc_script(topology: &Topology) -> String {
    tc_script_for_device(topology, DEFAULT_DEVICE)
}

/// Returns a shell script of `tc` commands reproducing `topology.links` on `device`: one
/// block per node, headed `# node <name> (<ip>)`, to run as root on that node's host.
///
/// Each block replaces the root qdisc with `prio bands 3 + k` (k = DCs other than the node's
/// that have nodes, at most 13), adds `netem limit … delay <rtt/2>ms [<jitter>ms] [loss <x>%]
/// [rate <r>bit]` on bands 4, 5, … (one per destination DC, in DC order), and one
/// `u32 match ip dst <ip>/32` (`ip6 dst <ip>/128`) filter per distinct `advertise` IP of that
/// DC's nodes (a node advertising a host name gets a `# warning:` line instead: resolve the
/// names first, as `redt netem tc-script` does). Filters match IPs, not ports: nodes sharing an IP across DCs cannot be told apart,
/// which the script notes in a `# warning:` line.
pub fn tc_script_for_device(topology: &Topology, device: &str) -> String {
    render(topology, device, |from, to| {
        let conditions = topology.links.get(from.0 as usize).and_then(|row| row.get(to.0 as usize)).copied();
        (conditions.unwrap_or_default(), false)
    })
}

/// Like [`tc_script_for_device`], with the conditions currently in `model` (a partitioned
/// link becomes `loss 100%`); DCs of `topology` outside the model get zero conditions.
pub fn tc_script_for_model(topology: &Topology, model: &WanModel, device: &str) -> String {
    render(topology, device, |from, to| (model.link(from, to).unwrap_or_default(), model.is_partitioned(from, to)))
}

/// Builds the script; `link(from, to)` returns a link's conditions and whether it is
/// partitioned.
fn render(topology: &Topology, device: &str, link: impl Fn(DcId, DcId) -> (LinkConditions, bool)) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "#!/bin/sh");
    let _ = writeln!(
        out,
        "# tc netem commands equivalent to redt's user-space WAN emulation of topology `{}` ({}).",
        topology.name, topology.epoch
    );
    let _ = writeln!(out, "# Run each node's block as root on that node's host; device {device}.");

    // DCs per IP, to flag IPs that filters cannot attribute to one DC.
    let mut dcs_of_ip: HashMap<IpAddr, HashSet<DcId>> = HashMap::new();
    for node in &topology.nodes {
        if let Some(ip) = node.advertise.ip() {
            dcs_of_ip.entry(ip).or_default().insert(node.dc);
        }
    }
    let mut shared: Vec<IpAddr> = dcs_of_ip.iter().filter(|(_, dcs)| dcs.len() > 1).map(|(ip, _)| *ip).collect();
    shared.sort();
    for ip in shared {
        let _ = writeln!(out, "# warning: {ip} is used by nodes of several DCs; IP filters cannot tell them apart");
    }

    for node in &topology.nodes {
        let _ = writeln!(out);
        let _ = writeln!(out, "# node {} ({})", node.name, node.advertise.host);
        let _ = writeln!(out, "tc qdisc del dev {device} root 2>/dev/null || true");
        let mut targets: Vec<&redt_proto::Dc> =
            topology.dcs.iter().filter(|dc| dc.id != node.dc && !dc.nodes.is_empty()).collect();
        let max = MAX_BANDS - DEFAULT_BANDS;
        if targets.len() > max {
            let _ = writeln!(
                out,
                "# warning: prio has at most {MAX_BANDS} bands; links to the {} DCs after the first {max} are not shaped",
                targets.len() - max
            );
            targets.truncate(max);
        }
        if targets.is_empty() {
            continue;
        }
        let _ = writeln!(out, "tc qdisc add dev {device} root handle 1: prio bands {}", DEFAULT_BANDS + targets.len());
        for (k, dc) in targets.iter().enumerate() {
            let band = DEFAULT_BANDS + 1 + k;
            let (conditions, partitioned) = link(node.dc, dc.id);
            let _ = writeln!(out, "# to {}", dc.name);
            let _ = writeln!(
                out,
                "tc qdisc add dev {device} parent 1:{band} handle {band}0: netem {}",
                netem_args(&conditions, partitioned)
            );
            let mut seen = HashSet::new();
            for peer in &dc.nodes {
                let Some(peer) = topology.nodes.get(peer.0 as usize) else { continue };
                let Some(peer_ip) = peer.advertise.ip() else {
                    let _ = writeln!(
                        out,
                        "# warning: {} advertises the host name {}: resolve it (`redt netem tc-script` does) to filter its IP",
                        peer.name, peer.advertise.host
                    );
                    continue;
                };
                if !seen.insert(peer_ip) {
                    continue;
                }
                let (protocol, matcher) = match peer_ip {
                    IpAddr::V4(_) => ("ip", format!("ip dst {peer_ip}/32")),
                    IpAddr::V6(_) => ("ipv6", format!("ip6 dst {peer_ip}/128")),
                };
                let _ = writeln!(
                    out,
                    "tc filter add dev {device} protocol {protocol} parent 1:0 prio 1 u32 match {matcher} flowid 1:{band}"
                );
            }
        }
    }
    out
}

/// Returns the `netem` arguments of one link: `limit`, `delay` (with jitter if any), `loss`
/// if any, `rate` if limited.
fn netem_args(c: &LinkConditions, partitioned: bool) -> String {
    let mut args = format!("limit {NETEM_LIMIT_PACKETS} delay {}", fmt_ms(c.rtt / 2));
    if !c.jitter.is_zero() {
        let _ = write!(args, " {}", fmt_ms(c.jitter));
    }
    let loss = if partitioned {
        1.0
    } else if c.loss.is_nan() {
        0.0
    } else {
        c.loss.clamp(0.0, 1.0)
    };
    if loss > 0.0 {
        let _ = write!(args, " loss {}%", trim_decimal(format!("{:.4}", loss * 100.0)));
    }
    if let Some(rate) = c.rate_bits_per_s.filter(|r| *r > 0) {
        let _ = write!(args, " rate {rate}bit");
    }
    args
}

/// Formats `d` in milliseconds with microsecond precision (`20ms`, `0.25ms`), as `tc` reads.
fn fmt_ms(d: Duration) -> String {
    let us = d.as_micros();
    trim_decimal(format!("{}.{:03}", us / 1000, us % 1000)) + "ms"
}

/// Removes trailing zeros after a decimal point, and the point itself if nothing follows.
fn trim_decimal(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
name: tiny
epoch: 3
memstore: { size: 1MiB, index: 64KiB, ring: 64KiB }
dcs:
  - name: dc1
    nodes:
      - { name: dc1-n1, addr: "127.0.1.1:7100" }
      - { name: dc1-n2, addr: "127.0.1.2:7100" }
  - name: dc2
    nodes: [ { name: dc2-n1, addr: "127.0.2.1:7100" } ]
  - name: dc3
    nodes: [ { name: dc3-n1, addr: "[::1]:7100" } ]
links:
  default: { rtt: 40ms }
  overrides:
    - { from: dc1, to: dc2, rtt: 81ms, jitter: 500us, loss: 0.5%, rate: 100mbit, symmetric: false }
tables:
  - { name: t, id: 1, cells: [ { name: f, bytes: 8 } ] }
partitions:
  - { replicas: [dc1-n1, dc2-n1, dc3-n1] }
"#;

    fn topo() -> Topology {
        Topology::from_yaml("test", YAML).unwrap()
    }

    #[test]
    fn script_for_a_small_topology() {
        let s = tc_script_for_device(&topo(), "ens5");
        let expected_dc1_n1 = "\
# node dc1-n1 (127.0.1.1)
tc qdisc del dev ens5 root 2>/dev/null || true
tc qdisc add dev ens5 root handle 1: prio bands 5
# to dc2
tc qdisc add dev ens5 parent 1:4 handle 40: netem limit 44739 delay 40.5ms 0.5ms loss 0.5% rate 100000000bit
tc filter add dev ens5 protocol ip parent 1:0 prio 1 u32 match ip dst 127.0.2.1/32 flowid 1:4
# to dc3
tc qdisc add dev ens5 parent 1:5 handle 50: netem limit 44739 delay 20ms
tc filter add dev ens5 protocol ipv6 parent 1:0 prio 1 u32 match ip6 dst ::1/128 flowid 1:5
";
        assert!(s.contains(expected_dc1_n1), "{s}");
        let expected_dc2_n1 = "\
# node dc2-n1 (127.0.2.1)
tc qdisc del dev ens5 root 2>/dev/null || true
tc qdisc add dev ens5 root handle 1: prio bands 5
# to dc1
tc qdisc add dev ens5 parent 1:4 handle 40: netem limit 44739 delay 20ms
tc filter add dev ens5 protocol ip parent 1:0 prio 1 u32 match ip dst 127.0.1.1/32 flowid 1:4
tc filter add dev ens5 protocol ip parent 1:0 prio 1 u32 match ip dst 127.0.1.2/32 flowid 1:4
# to dc3
";
        assert!(s.contains(expected_dc2_n1), "{s}");
        assert!(s.starts_with("#!/bin/sh\n"));
        assert_eq!(s.matches("# node ").count(), 4);
        assert!(s.contains("# node dc3-n1 (::1)"));
        assert!(!s.contains("warning"));
        assert!(tc_script(&topo()).contains("dev eth0 root handle 1: prio bands 5"));
    }

    #[test]
    fn model_script_reflects_runtime_changes() {
        let t = topo();
        let mut m = WanModel::from_topology(&t);
        m.set_partitioned(DcId(0), DcId(2), true).unwrap();
        let lc = LinkConditions { rtt: Duration::from_micros(1500), ..Default::default() };
        m.set_link(DcId(1), DcId(0), lc).unwrap();
        let s = tc_script_for_model(&t, &m, "eth1");
        assert!(s.contains("handle 50: netem limit 44739 delay 20ms loss 100%\n"), "{s}");
        assert!(s.contains("# node dc2-n1 (127.0.2.1)\ntc qdisc del dev eth1 root 2>/dev/null || true\ntc qdisc add dev eth1 root handle 1: prio bands 5\n# to dc1\ntc qdisc add dev eth1 parent 1:4 handle 40: netem limit 44739 delay 0.75ms\n"), "{s}");
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(fmt_ms(Duration::ZERO), "0ms");
        assert_eq!(fmt_ms(Duration::from_micros(250)), "0.25ms");
        assert!(fmt_ms(Duration::MAX).ends_with("ms"));
        let c = LinkConditions { loss: f64::NAN, rate_bits_per_s: Some(0), ..Default::default() };
        assert_eq!(netem_args(&c, false), "limit 44739 delay 0ms");
        let c = LinkConditions { loss: 7.0, ..Default::default() };
        assert_eq!(netem_args(&c, false), "limit 44739 delay 0ms loss 100%");
    }
}

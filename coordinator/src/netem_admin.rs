//! `redt netem set` on a running node: a request naming two DCs and the link conditions to
//! change, applied to the node's WAN model (the one its QUIC socket applies to every datagram).
//! Pure: the caller holds the model's lock.

use redt_netem::WanModel;
use redt_proto::wire::NetemSetRequest;
use redt_proto::{LinkConditions, Topology};
use std::time::Duration;

/// The largest round-trip time `redt netem set` accepts, as the topology file does:
/// [`LinkConditions::MAX_RTT`] (60 s). Datagrams already queued behind a longer delay would
/// arrive long after the link is set back.
pub const MAX_RTT: Duration = LinkConditions::MAX_RTT;

/// Applies `req` to `wan`: for the link `from → to` (and `to → from` when `symmetric`), each
/// field of the request that is not negative replaces the link's value — RTT and jitter in µs,
/// loss in parts per million (clamped to 100%), rate in bits/s (0: unlimited) — and
/// `partitioned`, when given, cuts or heals the link.
///
/// # Errors
/// An unknown DC name, `from == to`, a request that changes nothing, a loss above 100%, or
/// resulting conditions the topology file would refuse ([`LinkConditions::check`]: an RTT
/// above [`MAX_RTT`], a jitter above half the RTT), or that the WAN model refuses (its
/// message). Nothing is changed then. A link changed starts afresh
/// ([`WanModel::set_link`]): set back from a long delay it carries new datagrams at once.
pub fn apply(topology: &Topology, wan: &mut WanModel, req: &NetemSetRequest) -> Result<(), String> {
    let dc = |name: &str| {
        topology.dcs.iter().find(|d| d.name == name).map(|d| d.id).ok_or_else(|| format!("unknown DC `{name}`"))
    };
    let (from, to) = (dc(&req.from)?, dc(&req.to)?);
    if from == to {
        return Err("--from and --to must differ".into());
    }
    if req.rtt_us < 0 && req.jitter_us < 0 && req.loss_ppm < 0 && req.rate_bits_per_s < 0 && req.partitioned.is_none() {
        return Err("nothing to change: give at least one of --rtt, --jitter, --loss, --rate, --partition".into());
    }
    if req.loss_ppm > 1_000_000 {
        return Err(format!("loss {} ppm is above 100%", req.loss_ppm));
    }
    let pairs = if req.symmetric { vec![(from, to), (to, from)] } else { vec![(from, to)] };
    // Every direction is checked before any is changed.
    let mut next = Vec::with_capacity(pairs.len());
    for &(a, b) in &pairs {
        let mut c: LinkConditions = wan.link(a, b).unwrap_or_default();
        if req.rtt_us >= 0 {
            c.rtt = Duration::from_micros(req.rtt_us as u64);
        }
        if req.jitter_us >= 0 {
            c.jitter = Duration::from_micros(req.jitter_us as u64);
        }
        if req.loss_ppm >= 0 {
            c.loss = (req.loss_ppm as f64 / 1e6).clamp(0.0, 1.0);
        }
        if req.rate_bits_per_s >= 0 {
            c.rate_bits_per_s = (req.rate_bits_per_s > 0).then_some(req.rate_bits_per_s as u64);
        }
        c.check().map_err(|e| {
            format!("{e} on {} -> {}", topology.dcs[a.0 as usize].name, topology.dcs[b.0 as usize].name)
        })?;
        next.push((a, b, c));
    }
    for (a, b, c) in next {
        wan.set_link(a, b, c).map_err(|e| e.to_string())?;
        if let Some(p) = req.partitioned {
            wan.set_partitioned(a, b, p).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::DcId;

    fn topology() -> Topology {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        Topology::load(std::path::Path::new(&path)).expect("config loads")
    }

    fn req(from: &str, to: &str) -> NetemSetRequest {
        NetemSetRequest {
            from: from.into(),
            to: to.into(),
            symmetric: true,
            rtt_us: -1,
            jitter_us: -1,
            loss_ppm: -1,
            rate_bits_per_s: -1,
            partitioned: None,
        }
    }

    #[test]
    fn changes_only_the_fields_given_on_both_directions() {
        let t = topology();
        let mut wan = WanModel::from_topology(&t);
        let before = wan.link(DcId(0), DcId(2)).unwrap_or_default();
        let r = NetemSetRequest { rtt_us: 40_000, ..req("dc1", "dc2") };
        apply(&t, &mut wan, &r).expect("applies");
        for (a, b) in [(DcId(0), DcId(1)), (DcId(1), DcId(0))] {
            let c = wan.link(a, b).expect("a link");
            assert_eq!(c.rtt, Duration::from_millis(40));
            assert_eq!(c.jitter, Duration::ZERO, "jitter untouched");
        }
        assert_eq!(wan.link(DcId(0), DcId(2)).unwrap_or_default(), before, "other links untouched");
    }

    #[test]
    fn refuses_unknown_and_identical_dcs() {
        let t = topology();
        let mut wan = WanModel::from_topology(&t);
        assert_eq!(apply(&t, &mut wan, &req("dc1", "dc9")), Err("unknown DC `dc9`".into()));
        assert_eq!(apply(&t, &mut wan, &req("dc1", "dc1")), Err("--from and --to must differ".into()));
    }

    /// `redt netem set` validates as the topology file does, and a refused request changes
    /// nothing (`--rtt 1000000h`, were it accepted, would cut the link for good).
    #[test]
    fn refuses_what_the_topology_file_would_and_changes_nothing() {
        let t = topology();
        let mut wan = WanModel::from_topology(&t);
        let before = wan.link(DcId(0), DcId(1)).unwrap_or_default();
        let refused = |r: NetemSetRequest, wan: &mut WanModel| apply(&t, wan, &r).expect_err("refused");
        assert!(refused(req("dc1", "dc2"), &mut wan).contains("nothing to change"));
        let huge = NetemSetRequest { rtt_us: 1_000_000 * 3_600 * 1_000_000, ..req("dc1", "dc2") };
        assert!(refused(huge, &mut wan).contains("the largest allowed"));
        let jitter = NetemSetRequest { rtt_us: 10_000, jitter_us: 6_000, ..req("dc1", "dc2") };
        assert!(refused(jitter, &mut wan).contains("exceeds half the rtt"));
        // Jitter alone is checked against the link's current RTT (local-fast: 2 ms).
        let jitter = NetemSetRequest { jitter_us: 1_500, ..req("dc1", "dc2") };
        assert!(refused(jitter, &mut wan).contains("exceeds half the rtt"));
        let loss = NetemSetRequest { loss_ppm: 2_000_000, ..req("dc1", "dc2") };
        assert!(refused(loss, &mut wan).contains("above 100%"));
        for (a, b) in [(DcId(0), DcId(1)), (DcId(1), DcId(0))] {
            assert_eq!(wan.link(a, b).unwrap_or_default(), before, "nothing changed on {a} -> {b}");
        }
        let ok = NetemSetRequest { rtt_us: 10_000, jitter_us: 5_000, ..req("dc1", "dc2") };
        apply(&t, &mut wan, &ok).expect("half the rtt is allowed");
    }
}

//! The commit protocols a node can run: RedT and the baselines it is measured against
//! (RedT §4.3 Table 1, §6).

use std::fmt;
use std::str::FromStr;

/// A commit protocol. Every node of a cluster must run the same one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// RedT: one sub-transaction per DC over one-sided verbs, ¾-quorum commit, 2 inter-DC
    /// round trips (RedT §4).
    #[default]
    Redt,
    /// Replicated two-phase commit: execution at the primaries, prepare with Paxos
    /// replication of each primary's redo and of the coordinator's decision, commit to the
    /// primaries, which replicate it (5–6 inter-DC round trips).
    #[serde(rename = "2pc-paxos")]
    TwoPcPaxos,
    /// Early Prepare with Paxos replication: prepare folded into execution (5 round trips).
    EpPaxos,
    /// TAPIR-style: the coordinator talks to every replica directly: execute, prepare
    /// with a fast quorum, commit (3 round trips).
    Tapir,
    /// RedT with in-DC accesses as two-sided RPCs over TCP instead of one-sided verbs
    /// (RedT §6.5).
    RedtTcp,
}

impl Protocol {
    /// Every protocol, RedT first.
    pub const ALL: [Protocol; 5] =
        [Protocol::Redt, Protocol::TwoPcPaxos, Protocol::EpPaxos, Protocol::Tapir, Protocol::RedtTcp];

    /// The name used on the command line and in reports: `redt`, `2pc-paxos`, `ep-paxos`,
    /// `tapir`, `redt-tcp`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Redt => "redt",
            Protocol::TwoPcPaxos => "2pc-paxos",
            Protocol::EpPaxos => "ep-paxos",
            Protocol::Tapir => "tapir",
            Protocol::RedtTcp => "redt-tcp",
        }
    }

    /// Whether this is RedT's own commit protocol (over verbs or over TCP).
    pub fn is_redt(self) -> bool {
        matches!(self, Protocol::Redt | Protocol::RedtTcp)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown protocol name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol `{0}` (expected one of: redt, 2pc-paxos, ep-paxos, tapir, redt-tcp)")]
pub struct UnknownProtocol(pub String);

impl FromStr for Protocol {
    type Err = UnknownProtocol;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Protocol::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| UnknownProtocol(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for p in Protocol::ALL {
            assert_eq!(p.name().parse::<Protocol>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        let e = "2pc".parse::<Protocol>().unwrap_err();
        assert!(e.to_string().contains("2pc-paxos"), "{e}");
        assert_eq!(serde_norway::to_string(&Protocol::TwoPcPaxos).unwrap().trim(), "2pc-paxos");
    }
}

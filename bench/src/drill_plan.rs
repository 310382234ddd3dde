//! The drill plan language of `redt drill` and `redt bench ycsb --drill`:
//! a list of scheduled faults, parsed against a [`Topology`], printed back
//! canonically, and expanded into timed inject and heal actions. Pure: no clock, no I/O; the
//! drill runner ([`crate::drill`]) carries the actions out at their times, and
//! [`FaultState`] turns each one into the process and netem changes it needs.
//!
//! # Syntax
//!
//! Events are separated by `;`; each is a fault, then `at T` (required) and an optional heal
//! (`D` after the inject), in any order:
//!
//! | fault | meaning | heal |
//! |---|---|---|
//! | `kill-dc DC` | SIGKILL every node of the DC | `restart-after D`: start them again |
//! | `kill-node NODE` | SIGKILL one node | `restart-after D` |
//! | `partition DCS\|DCS` | cut every link between the two sets of DCs (comma-separated, disjoint, non-empty), both ways; a DC in neither set keeps both | `heal-after D` |
//! | `slow-link A B rtt R` | set the RTT of both directions of the link between DCs A and B | `for D`: back to the topology file's RTT |
//!
//! `heal-after D` is accepted for every fault. Durations are humantime tokens without spaces
//! (`10s`, `1500ms`, `2m`); `at` may be `0s`, every other duration must be above zero. A
//! keyword may be written with a leading `--` (`--at 10s`). Example:
//!
//! ```text
//! kill-dc dc2 at 10s restart-after 30s; partition dc1|dc2,dc3,dc4 at 5s heal-after 10s;
//! kill-node dc3-n1 at 2s restart-after 3s; slow-link dc1 dc2 rtt 200ms at 1s for 5s
//! ```
//!
//! # Repeating faults
//!
//! `every P` repeats an event with period `P`: its first occurrence at `at T` (default: `at
//! P`), then at `T + P`, `T + 2P`, … for as long as the drill lasts
//! ([`DrillPlan::expand`] turns it into one event per occurrence whose heal comes before the
//! end). A repeating event needs a heal shorter than its period (a fault does not overlap
//! itself). The failover soak:
//!
//! ```text
//! kill-dc dc2 every 60s restart-after 30s
//! ```

use redt_proto::{DcId, NodeId, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// Why a plan does not parse. Every variant names the offending token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The plan holds no event.
    #[error("the drill plan is empty: give at least one event, e.g. `kill-node dc2-n1 at 10s restart-after 3s`")]
    Empty,
    /// An event starts with something other than a fault.
    #[error("`{token}`: not a fault (kill-dc DC, kill-node NODE, partition DCS|DCS, slow-link A B rtt R)")]
    UnknownFault {
        /// The token.
        token: String,
    },
    /// A DC name the topology does not have.
    #[error("`{token}`: no DC of that name (the topology has {known})")]
    UnknownDc {
        /// The token.
        token: String,
        /// The topology's DC names, comma-separated.
        known: String,
    },
    /// A node name the topology does not have.
    #[error("`{token}`: no node of that name (the topology has {known})")]
    UnknownNode {
        /// The token.
        token: String,
        /// The topology's node names, comma-separated.
        known: String,
    },
    /// Something an event needs is missing.
    #[error("`{event}`: missing {what}")]
    Missing {
        /// The event's text.
        event: String,
        /// What is missing (`at T`, a DC name, …).
        what: &'static str,
    },
    /// A duration that does not parse.
    #[error("`{token}` after `{keyword}`: {reason}")]
    BadDuration {
        /// The keyword it follows.
        keyword: String,
        /// The token.
        token: String,
        /// [`redt_proto::parse_duration`]'s complaint (with how to write one).
        reason: String,
    },
    /// A negative duration.
    #[error("`{token}` after `{keyword}`: durations cannot be negative")]
    NegativeDuration {
        /// The keyword it follows.
        keyword: String,
        /// The token.
        token: String,
    },
    /// A zero duration where only a positive one makes sense.
    #[error("`{token}` after `{keyword}`: must be above zero")]
    ZeroDuration {
        /// The keyword it follows.
        keyword: String,
        /// The token.
        token: String,
    },
    /// A keyword given twice in one event.
    #[error("`{keyword}` given twice in `{event}`")]
    Repeated {
        /// The keyword.
        keyword: String,
        /// The event's text.
        event: String,
    },
    /// A heal keyword that does not fit the fault.
    #[error("`{token}` does not apply to {fault}: use `{expected}` (or `heal-after`)")]
    WrongHeal {
        /// The keyword given.
        token: String,
        /// The fault's name.
        fault: &'static str,
        /// The keyword that fits.
        expected: &'static str,
    },
    /// A token left over after an event.
    #[error("`{token}`: unexpected in `{event}`")]
    Unexpected {
        /// The token.
        token: String,
        /// The event's text.
        event: String,
    },
    /// A partition not made of exactly two sets.
    #[error("`{token}`: a partition is two sets of DCs separated by one `|`, e.g. dc1|dc2,dc3")]
    NotTwoSets {
        /// The partition's text.
        token: String,
    },
    /// A partition with an empty side.
    #[error("`{token}`: each side of a partition needs at least one DC")]
    EmptySet {
        /// The partition's text.
        token: String,
    },
    /// A DC named twice in one partition (in one set or in both).
    #[error("`{token}`: DC `{dc}` appears twice (the two sets must be disjoint)")]
    Overlap {
        /// The partition's text.
        token: String,
        /// The DC.
        dc: String,
    },
    /// A slow link from a DC to itself.
    #[error("`{token}`: a slow link joins two different DCs")]
    SameDc {
        /// The DC.
        token: String,
    },
    /// A repeating event without a heal, or whose heal does not come before its next
    /// occurrence.
    #[error("`{event}`: a repeating fault needs a heal shorter than its period (`every P` with e.g. `restart-after D`, D < P)")]
    RepeatWithoutHeal {
        /// The event's text.
        event: String,
    },
    /// A repeating event none of whose occurrences ends within the drill.
    #[error("`{event}`: no occurrence ends within the drill's {within} (its first heal comes at {first_heal})")]
    NoOccurrence {
        /// The event, canonically.
        event: String,
        /// How long the drill lasts, humantime.
        within: String,
        /// When its first occurrence is healed, humantime.
        first_heal: String,
    },
}

/// A DC named in a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcRef {
    /// Its id.
    pub id: DcId,
    /// Its name in the topology.
    pub name: String,
}

/// A node named in a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRef {
    /// Its id.
    pub id: NodeId,
    /// Its name in the topology.
    pub name: String,
}

/// One fault of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL every node of a DC.
    KillDc {
        /// The DC.
        dc: DcRef,
        /// Its nodes, in topology order.
        nodes: Vec<NodeRef>,
    },
    /// SIGKILL one node.
    KillNode {
        /// The node.
        node: NodeRef,
    },
    /// Cut every link between a DC of `a` and a DC of `b`, both ways.
    Partition {
        /// One side, by DC id.
        a: Vec<DcRef>,
        /// The other side, by DC id.
        b: Vec<DcRef>,
    },
    /// Set the RTT of both directions of the link between `a` and `b`.
    SlowLink {
        /// One end.
        a: DcRef,
        /// The other end.
        b: DcRef,
        /// The RTT while it lasts.
        rtt: Duration,
    },
}

impl Fault {
    /// The fault's keyword (`kill-dc`, …).
    pub fn keyword(&self) -> &'static str {
        match self {
            Fault::KillDc { .. } => "kill-dc",
            Fault::KillNode { .. } => "kill-node",
            Fault::Partition { .. } => "partition",
            Fault::SlowLink { .. } => "slow-link",
        }
    }

    /// The keyword of its heal in canonical form.
    pub fn heal_keyword(&self) -> &'static str {
        match self {
            Fault::KillDc { .. } | Fault::KillNode { .. } => "restart-after",
            Fault::Partition { .. } => "heal-after",
            Fault::SlowLink { .. } => "for",
        }
    }

    /// The nodes it kills (none for link faults).
    pub fn killed(&self) -> Vec<NodeId> {
        match self {
            Fault::KillDc { nodes, .. } => nodes.iter().map(|n| n.id).collect(),
            Fault::KillNode { node } => vec![node.id],
            Fault::Partition { .. } | Fault::SlowLink { .. } => vec![],
        }
    }

    /// The unordered DC pairs `(low, high)` it cuts (none unless a partition).
    pub fn cut_pairs(&self) -> Vec<(DcId, DcId)> {
        match self {
            Fault::Partition { a, b } => {
                a.iter().flat_map(|x| b.iter().map(move |y| (x.id.min(y.id), x.id.max(y.id)))).collect()
            }
            _ => vec![],
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |s: &[DcRef]| s.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(",");
        match self {
            Fault::KillDc { dc, .. } => write!(f, "kill-dc {}", dc.name),
            Fault::KillNode { node } => write!(f, "kill-node {}", node.name),
            Fault::Partition { a, b } => write!(f, "partition {}|{}", set(a), set(b)),
            Fault::SlowLink { a, b, rtt } => write!(f, "slow-link {} {} rtt {}", a.name, b.name, Compact(*rtt)),
        }
    }
}

/// One scheduled fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What fails.
    pub fault: Fault,
    /// When, after the drill's start (the measured interval's start in a bench).
    pub at: Duration,
    /// How long until it is healed; `None`: never (within the drill).
    pub heal_after: Option<Duration>,
    /// The period of a repeating event (`every P`): it happens again at `at + P`, `at + 2P`, …
    /// ([`DrillPlan::expand`]); `None`: once.
    pub every: Option<Duration>,
}

impl Event {
    /// When it is healed, after the drill's start, if it is (the first occurrence's heal for
    /// a repeating event).
    pub fn heal_at(&self) -> Option<Duration> {
        self.heal_after.map(|d| self.at + d)
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.fault, Compact(self.at))?;
        if let Some(p) = self.every {
            write!(f, " every {}", Compact(p))?;
        }
        if let Some(d) = self.heal_after {
            write!(f, " {} {}", self.fault.heal_keyword(), Compact(d))?;
        }
        Ok(())
    }
}

/// A duration as one token without spaces: whole seconds as `10s`, else whole ms as
/// `1500ms`, else `µs` as `250us`, else `ns`.
#[derive(Clone, Copy, Debug)]
pub struct Compact(pub Duration);

impl fmt::Display for Compact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns % 1_000_000_000 == 0 {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns % 1_000_000 == 0 {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns % 1_000 == 0 {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

/// Inject or heal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// The fault starts.
    Inject,
    /// The fault ends.
    Heal,
}

/// One timed action of a plan: event `event` (its index) enters `phase` at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    /// When, after the drill's start.
    pub at: Duration,
    /// The event's index in [`DrillPlan::events`].
    pub event: usize,
    /// Inject or heal.
    pub phase: Phase,
}

/// A parsed drill plan: its events in the order written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrillPlan {
    /// The events.
    pub events: Vec<Event>,
}

impl fmt::Display for DrillPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Strips the optional `--` of a keyword.
fn keyword(token: &str) -> &str {
    token.strip_prefix("--").unwrap_or(token)
}

/// Whether `token` is a keyword that ends a partition's DC sets.
fn ends_sets(token: &str) -> bool {
    matches!(keyword(token), "at" | "heal-after" | "restart-after" | "for" | "rtt" | "every")
}

fn duration(kw: &str, token: Option<&str>, event: &str, zero_ok: bool) -> Result<Duration, PlanError> {
    let token = token.ok_or_else(|| PlanError::Missing {
        event: event.to_string(),
        what: match kw {
            "at" => "a time after `at`",
            "rtt" => "a duration after `rtt`",
            "every" => "a period after `every`",
            _ => "a duration after the heal keyword",
        },
    })?;
    if token.starts_with('-') {
        return Err(PlanError::NegativeDuration { keyword: kw.to_string(), token: token.to_string() });
    }
    let d = redt_proto::parse_duration(token).map_err(|reason| PlanError::BadDuration {
        keyword: kw.to_string(),
        token: token.to_string(),
        reason,
    })?;
    if d.is_zero() && !zero_ok {
        return Err(PlanError::ZeroDuration { keyword: kw.to_string(), token: token.to_string() });
    }
    Ok(d)
}

/// Name lookups against a topology, with the lists its errors show.
struct Names<'t> {
    topo: &'t Topology,
}

impl Names<'_> {
    fn dc(&self, token: &str) -> Result<DcRef, PlanError> {
        self.topo.dcs.iter().find(|d| d.name == token).map(|d| DcRef { id: d.id, name: d.name.clone() }).ok_or_else(
            || PlanError::UnknownDc {
                token: token.to_string(),
                known: self.topo.dcs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "),
            },
        )
    }

    fn node(&self, token: &str) -> Result<NodeRef, PlanError> {
        self.topo.node_by_name(token).map(|n| NodeRef { id: n.id, name: n.name.clone() }).ok_or_else(|| {
            PlanError::UnknownNode {
                token: token.to_string(),
                known: self.topo.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", "),
            }
        })
    }

    /// `a,b|c,d` (spaces already removed) as two disjoint sets, each sorted by DC id.
    fn sets(&self, text: &str) -> Result<(Vec<DcRef>, Vec<DcRef>), PlanError> {
        let sides: Vec<&str> = text.split('|').collect();
        if sides.len() != 2 {
            return Err(PlanError::NotTwoSets { token: text.to_string() });
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for side in sides {
            let names: Vec<&str> = side.split(',').filter(|s| !s.is_empty()).collect();
            if names.is_empty() {
                return Err(PlanError::EmptySet { token: text.to_string() });
            }
            let mut set = Vec::new();
            for n in names {
                let dc = self.dc(n)?;
                if !seen.insert(dc.id) {
                    return Err(PlanError::Overlap { token: text.to_string(), dc: dc.name });
                }
                set.push(dc);
            }
            set.sort_by_key(|d| d.id);
            out.push(set);
        }
        let b = out.pop().expect("two sides were parsed");
        let a = out.pop().expect("two sides were parsed");
        Ok((a, b))
    }
}

/// Parses one event (its text without `;`).
fn parse_event(text: &str, names: &Names<'_>) -> Result<Event, PlanError> {
    let event = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut i = 1;
    let missing = |what| PlanError::Missing { event: event.clone(), what };
    let fault = match tokens.first().map(|t| keyword(t)) {
        Some("kill-dc") => {
            let dc = names.dc(tokens.get(1).ok_or_else(|| missing("a DC name after `kill-dc`"))?)?;
            i = 2;
            let nodes = names.topo.dcs[dc.id.0 as usize]
                .nodes
                .iter()
                .map(|n| NodeRef { id: *n, name: names.topo.nodes[n.0 as usize].name.clone() })
                .collect();
            Fault::KillDc { dc, nodes }
        }
        Some("kill-node") => {
            let node = names.node(tokens.get(1).ok_or_else(|| missing("a node name after `kill-node`"))?)?;
            i = 2;
            Fault::KillNode { node }
        }
        Some("partition") => {
            let mut spec = String::new();
            while i < tokens.len() && !ends_sets(tokens[i]) {
                spec.push_str(tokens[i]);
                i += 1;
            }
            if spec.is_empty() {
                return Err(missing("two DC sets after `partition`, e.g. dc1|dc2,dc3"));
            }
            let (a, b) = names.sets(&spec)?;
            Fault::Partition { a, b }
        }
        Some("slow-link") => {
            let a = names.dc(tokens.get(1).ok_or_else(|| missing("two DC names after `slow-link`"))?)?;
            let b = names.dc(tokens.get(2).ok_or_else(|| missing("two DC names after `slow-link`"))?)?;
            if a.id == b.id {
                return Err(PlanError::SameDc { token: b.name });
            }
            i = 3;
            // The rtt is looked for among the options below; a placeholder until then.
            Fault::SlowLink { a, b, rtt: Duration::ZERO }
        }
        Some(t) => return Err(PlanError::UnknownFault { token: t.to_string() }),
        None => return Err(PlanError::Empty),
    };
    let mut at = None;
    let mut heal = None;
    let mut rtt = None;
    let mut every = None;
    while i < tokens.len() {
        let kw = keyword(tokens[i]);
        let value = tokens.get(i + 1).copied();
        let slot = match kw {
            "at" => &mut at,
            "heal-after" => &mut heal,
            "restart-after" | "for" => {
                let fits = matches!(
                    (kw, &fault),
                    ("restart-after", Fault::KillDc { .. } | Fault::KillNode { .. }) | ("for", Fault::SlowLink { .. })
                );
                if !fits {
                    return Err(PlanError::WrongHeal {
                        token: tokens[i].to_string(),
                        fault: fault.keyword(),
                        expected: fault.heal_keyword(),
                    });
                }
                &mut heal
            }
            "rtt" if matches!(fault, Fault::SlowLink { .. }) => &mut rtt,
            "every" => &mut every,
            _ => return Err(PlanError::Unexpected { token: tokens[i].to_string(), event }),
        };
        if slot.is_some() {
            let kw =
                if matches!(kw, "at" | "rtt" | "every") { kw.to_string() } else { fault.heal_keyword().to_string() };
            return Err(PlanError::Repeated { keyword: kw, event });
        }
        *slot = Some(duration(kw, value, &event, kw == "at")?);
        i += 2;
    }
    let fault = match fault {
        Fault::SlowLink { a, b, .. } => {
            Fault::SlowLink { a, b, rtt: rtt.ok_or_else(|| missing("`rtt R` (the link's RTT while slow)"))? }
        }
        f => f,
    };
    if let Some(p) = every {
        if heal.is_none_or(|h| h >= p) {
            return Err(PlanError::RepeatWithoutHeal { event });
        }
    }
    let at = at.or(every).ok_or_else(|| missing("`at T` (when the fault starts)"))?;
    Ok(Event { fault, at, heal_after: heal, every })
}

impl DrillPlan {
    /// Parses `text` (see the module docs), resolving DC and node names in `topo`.
    ///
    /// # Errors
    /// A [`PlanError`] naming the first offending token: an empty plan, an unknown fault, DC
    /// or node, a missing `at` or argument, a bad, negative or zero duration, overlapping or
    /// empty partition sets, a heal keyword that does not fit, a token left over.
    pub fn parse(text: &str, topo: &Topology) -> Result<DrillPlan, PlanError> {
        let names = Names { topo };
        let events = text
            .split(';')
            .filter(|e| !e.trim().is_empty())
            .map(|e| parse_event(e, &names))
            .collect::<Result<Vec<_>, _>>()?;
        if events.is_empty() {
            return Err(PlanError::Empty);
        }
        Ok(DrillPlan { events })
    }

    /// Whether an event repeats (`every P`): the plan must be [`DrillPlan::expand`]ed before
    /// it runs.
    pub fn repeats(&self) -> bool {
        self.events.iter().any(|e| e.every.is_some())
    }

    /// The plan for a drill lasting `within`: every repeating event replaced by one event per
    /// occurrence (at `at`, `at + P`, `at + 2P`, …) whose last action (its heal) comes before
    /// `within`, the others kept as they are, in the order written.
    ///
    /// # Errors
    /// [`PlanError::NoOccurrence`] for a repeating event whose first occurrence does not end
    /// within `within`.
    pub fn expand(&self, within: Duration) -> Result<DrillPlan, PlanError> {
        let mut events = Vec::new();
        for e in &self.events {
            let Some(period) = e.every else {
                events.push(e.clone());
                continue;
            };
            let heal = e.heal_after.unwrap_or_default();
            let before = events.len();
            let mut at = e.at;
            while at + heal < within {
                events.push(Event { every: None, at, ..e.clone() });
                at += period;
            }
            if events.len() == before {
                return Err(PlanError::NoOccurrence {
                    event: e.to_string(),
                    within: humantime::format_duration(within).to_string(),
                    first_heal: humantime::format_duration(e.at + heal).to_string(),
                });
            }
        }
        Ok(DrillPlan { events })
    }

    /// Every inject and heal, in time order (ties: by event, inject first); a repeating event
    /// counts its first occurrence only ([`DrillPlan::expand`] first).
    pub fn actions(&self) -> Vec<Action> {
        let mut all: Vec<Action> = self
            .events
            .iter()
            .enumerate()
            .flat_map(|(i, e)| {
                let heal = e.heal_at().map(|at| Action { at, event: i, phase: Phase::Heal });
                std::iter::once(Action { at: e.at, event: i, phase: Phase::Inject }).chain(heal)
            })
            .collect();
        all.sort_by_key(|a| (a.at, a.event, a.phase));
        all
    }

    /// When the last action happens, after the drill's start.
    pub fn last_action(&self) -> Duration {
        self.actions().last().map_or(Duration::ZERO, |a| a.at)
    }

    /// When the first fault is injected.
    pub fn first_inject(&self) -> Duration {
        self.events.iter().map(|e| e.at).min().unwrap_or(Duration::ZERO)
    }
}

/// One change to the cluster an action needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// SIGKILL the node's process.
    Kill(NodeId),
    /// Start the node's process again on its MemStore and wait until it serves.
    Start(NodeId),
    /// Cut (`on`) or heal every link between DCs `a` and `b`, both ways.
    Cut {
        /// One DC.
        a: DcId,
        /// The other.
        b: DcId,
        /// Cut or heal.
        on: bool,
    },
    /// Set the RTT of the one-way link `from → to`.
    SetRtt {
        /// Source DC.
        from: DcId,
        /// Destination DC.
        to: DcId,
        /// The RTT.
        rtt: Duration,
    },
}

/// What the active faults want the cluster to be.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Desired {
    down: BTreeSet<NodeId>,
    cut: BTreeSet<(DcId, DcId)>,
    /// RTTs other than the file's, per one-way link.
    rtt: BTreeMap<(DcId, DcId), Duration>,
}

/// The faults in force as a plan's actions come in, and the [`Effect`]s each action needs.
/// Faults overlap safely: a node stays down while any active kill names it, a link stays cut
/// while any active partition cuts it, a slow link takes the RTT of the latest active
/// slow-link over it and the topology file's once none is left. A node started again gets the
/// cuts and RTTs in force re-applied (it starts with the file's links).
#[derive(Clone, Debug)]
pub struct FaultState {
    events: Vec<Event>,
    /// The file's RTT of each one-way link, `[from][to]`.
    base_rtt: Vec<Vec<Duration>>,
    /// When each active event was injected (its index and order), for the latest slow-link.
    active: BTreeMap<usize, u64>,
    injected: u64,
}

impl FaultState {
    /// No fault in force, for `plan` on `topo`.
    pub fn new(topo: &Topology, plan: &DrillPlan) -> Self {
        FaultState {
            events: plan.events.clone(),
            base_rtt: topo.links.iter().map(|row| row.iter().map(|l| l.rtt).collect()).collect(),
            active: BTreeMap::new(),
            injected: 0,
        }
    }

    fn base(&self, from: DcId, to: DcId) -> Duration {
        self.base_rtt.get(from.0 as usize).and_then(|r| r.get(to.0 as usize)).copied().unwrap_or_default()
    }

    fn desired(&self) -> Desired {
        let mut d = Desired::default();
        let mut order: Vec<(u64, usize)> = self.active.iter().map(|(&e, &o)| (o, e)).collect();
        order.sort_unstable();
        for (_, e) in order {
            let fault = &self.events[e].fault;
            d.down.extend(fault.killed());
            d.cut.extend(fault.cut_pairs());
            if let Fault::SlowLink { a, b, rtt } = fault {
                d.rtt.insert((a.id, b.id), *rtt);
                d.rtt.insert((b.id, a.id), *rtt);
            }
        }
        d
    }

    /// The nodes the faults in force keep down.
    pub fn down(&self) -> BTreeSet<NodeId> {
        self.desired().down
    }

    /// Whether event `event` is in force.
    pub fn is_active(&self, event: usize) -> bool {
        self.active.contains_key(&event)
    }

    /// Takes `action` in and returns what to do, in order: kills, link changes, then starts
    /// followed by the links in force re-applied. An inject of an event already in force or a
    /// heal of one that is not changes nothing.
    pub fn handle(&mut self, action: Action) -> Vec<Effect> {
        let before = self.desired();
        match action.phase {
            Phase::Inject => {
                self.injected += 1;
                self.active.entry(action.event).or_insert(self.injected);
            }
            Phase::Heal => {
                self.active.remove(&action.event);
            }
        }
        let after = self.desired();
        let mut out: Vec<Effect> = after.down.difference(&before.down).map(|&n| Effect::Kill(n)).collect();
        out.extend(after.cut.difference(&before.cut).map(|&(a, b)| Effect::Cut { a, b, on: true }));
        out.extend(before.cut.difference(&after.cut).map(|&(a, b)| Effect::Cut { a, b, on: false }));
        let links: BTreeSet<(DcId, DcId)> = before.rtt.keys().chain(after.rtt.keys()).copied().collect();
        for (from, to) in links {
            let was = before.rtt.get(&(from, to)).copied().unwrap_or_else(|| self.base(from, to));
            let now = after.rtt.get(&(from, to)).copied().unwrap_or_else(|| self.base(from, to));
            if was != now {
                out.push(Effect::SetRtt { from, to, rtt: now });
            }
        }
        let started: Vec<NodeId> = before.down.difference(&after.down).copied().collect();
        if !started.is_empty() {
            out.extend(started.into_iter().map(Effect::Start));
            out.extend(after.cut.iter().map(|&(a, b)| Effect::Cut { a, b, on: true }));
            out.extend(after.rtt.iter().map(|(&(from, to), &rtt)| Effect::SetRtt { from, to, rtt }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn paper() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("default topology")
    }

    fn parse(text: &str) -> Result<DrillPlan, PlanError> {
        DrillPlan::parse(text, &paper())
    }

    const EXAMPLE: &str = "kill-dc dc2 at 10s restart-after 30s; partition dc1|dc2,dc3,dc4 at 5s heal-after 10s; \
                         kill-node dc3-n1 at 2s restart-after 3s; slow-link dc1 dc2 rtt 200ms at 1s for 5s";

    #[test]
    fn the_issues_example_parses_and_prints_back() {
        let p = parse(EXAMPLE).unwrap();
        assert_eq!(p.events.len(), 4);
        assert_eq!(p.to_string(), EXAMPLE.split_whitespace().collect::<Vec<_>>().join(" "));
        let Fault::KillDc { dc, nodes } = &p.events[0].fault else { panic!("kill-dc") };
        assert_eq!(dc.id, DcId(1));
        assert_eq!(nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["dc2-n1", "dc2-n2"]);
        assert_eq!(p.events[0].heal_at(), Some(Duration::from_secs(40)));
        let Fault::Partition { a, b } = &p.events[1].fault else { panic!("partition") };
        assert_eq!(a.iter().map(|d| d.id.0).collect::<Vec<_>>(), [0]);
        assert_eq!(b.iter().map(|d| d.id.0).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(p.events[1].fault.cut_pairs().len(), 3);
        assert_eq!(
            p.events[3].fault,
            Fault::SlowLink {
                a: DcRef { id: DcId(0), name: "dc1".into() },
                b: DcRef { id: DcId(1), name: "dc2".into() },
                rtt: Duration::from_millis(200)
            }
        );
        let times: Vec<(u64, usize, Phase)> = p.actions().iter().map(|a| (a.at.as_secs(), a.event, a.phase)).collect();
        assert_eq!(
            times,
            [
                (1, 3, Phase::Inject),
                (2, 2, Phase::Inject),
                (5, 1, Phase::Inject),
                (5, 2, Phase::Heal),
                (6, 3, Phase::Heal),
                (10, 0, Phase::Inject),
                (15, 1, Phase::Heal),
                (40, 0, Phase::Heal)
            ]
        );
        assert_eq!(p.last_action(), Duration::from_secs(40));
        assert_eq!(p.first_inject(), Duration::from_secs(1));
    }

    #[test]
    fn a_repeating_fault_expands_to_one_event_per_occurrence_within_the_drill() {
        let p = parse("kill-dc dc2 every 60s restart-after 30s").unwrap();
        assert!(p.repeats());
        assert_eq!(p.events[0].at, Duration::from_secs(60), "`at` defaults to the period");
        assert_eq!(p.to_string(), "kill-dc dc2 at 60s every 60s restart-after 30s");
        assert_eq!(parse(&p.to_string()).unwrap(), p, "the canonical form parses back");
        // 10 minutes: kills at 60, 120, …, 540 s (the one at 600 s would end after the drill).
        let x = p.expand(Duration::from_secs(600)).unwrap();
        assert!(!x.repeats());
        let ats: Vec<u64> = x.events.iter().map(|e| e.at.as_secs()).collect();
        assert_eq!(ats, [60, 120, 180, 240, 300, 360, 420, 480, 540]);
        assert!(x.events.iter().all(|e| e.heal_after == Some(Duration::from_secs(30))));
        assert_eq!(x.last_action(), Duration::from_secs(570));
        // An occurrence whose heal would reach the end is left out.
        let x = p.expand(Duration::from_secs(150)).unwrap();
        assert_eq!(x.events.iter().map(|e| e.at.as_secs()).collect::<Vec<_>>(), [60]);
        // With an explicit start, beside a one-off event kept as written.
        let p =
            parse("--partition dc1|dc3 --every 5s --at 1s --heal-after 2s; slow-link dc1 dc2 rtt 90ms at 3s").unwrap();
        let x = p.expand(Duration::from_secs(12)).unwrap();
        let ats: Vec<u64> = x.events.iter().map(|e| e.at.as_secs()).collect();
        assert_eq!(ats, [1, 6, 3], "occurrences at 1 and 6 s (11 s + 2 s is past 12 s), then the slow link");
    }

    #[test]
    fn a_repeating_fault_is_refused_without_a_heal_shorter_than_its_period_or_room_to_happen() {
        let e = |t: &str| parse(t).unwrap_err();
        assert!(matches!(e("kill-dc dc2 every 60s"), PlanError::RepeatWithoutHeal { .. }));
        assert!(matches!(e("kill-dc dc2 every 60s restart-after 60s"), PlanError::RepeatWithoutHeal { .. }));
        assert!(matches!(e("kill-dc dc2 every 0s restart-after 1s"), PlanError::ZeroDuration { .. }));
        assert!(matches!(e("kill-dc dc2 every 10s every 20s restart-after 1s"), PlanError::Repeated { .. }));
        assert!(matches!(e("kill-dc dc2 every restart-after 1s"), PlanError::BadDuration { .. }));
        let p = parse("kill-node dc2-n1 at 5s every 10s restart-after 3s").unwrap();
        let err = p.expand(Duration::from_secs(8)).unwrap_err();
        assert!(matches!(err, PlanError::NoOccurrence { .. }));
        assert!(err.to_string().contains("kill-node dc2-n1 at 5s every 10s restart-after 3s"), "{err}");
    }

    #[test]
    fn options_come_in_any_order_with_or_without_dashes_and_spaces_in_sets() {
        let p = parse("partition dc3, dc1 | dc2 heal-after 1500ms --at 0s ;; kill-node dc1-n2 --at 2s;").unwrap();
        assert_eq!(p.to_string(), "partition dc1,dc3|dc2 at 0s heal-after 1500ms; kill-node dc1-n2 at 2s");
        assert_eq!(p.events[1].heal_after, None, "no heal: the node stays down");
        assert_eq!(p.actions().len(), 3);
        let p = parse("slow-link dc4 dc1 for 2s rtt 1s at 3s; kill-dc dc1 at 1s heal-after 2s").unwrap();
        assert_eq!(p.to_string(), "slow-link dc4 dc1 rtt 1s at 3s for 2s; kill-dc dc1 at 1s restart-after 2s");
    }

    #[test]
    fn errors_name_the_token() {
        let err = |text: &str| parse(text).unwrap_err();
        assert_eq!(err(""), PlanError::Empty);
        assert_eq!(err(" ; ;"), PlanError::Empty);
        assert!(matches!(err("explode dc1 at 1s"), PlanError::UnknownFault { token } if token == "explode"));
        let e = err("kill-dc dc9 at 1s");
        assert!(matches!(&e, PlanError::UnknownDc { token, .. } if token == "dc9"));
        assert!(e.to_string().contains("dc1, dc2, dc3, dc4"), "{e}");
        assert!(matches!(err("kill-node dc1-n9 at 1s"), PlanError::UnknownNode { token, .. } if token == "dc1-n9"));
        assert!(matches!(err("kill-node dc1-n1"), PlanError::Missing { what, .. } if what.contains("at T")));
        assert!(matches!(err("kill-node dc1-n1 restart-after 2s"), PlanError::Missing { .. }));
        assert!(matches!(err("kill-node"), PlanError::Missing { what, .. } if what.contains("node name")));
        assert!(matches!(err("kill-node dc1-n1 at"), PlanError::Missing { what, .. } if what.contains("`at`")));
        assert!(
            matches!(err("kill-node dc1-n1 at soon"), PlanError::BadDuration { token, keyword, .. } if token == "soon" && keyword == "at")
        );
        assert!(matches!(err("kill-node dc1-n1 at 10"), PlanError::BadDuration { token, .. } if token == "10"));
        assert!(matches!(err("kill-node dc1-n1 at -5s"), PlanError::NegativeDuration { token, .. } if token == "-5s"));
        assert!(
            matches!(err("kill-node dc1-n1 at 1s restart-after 0s"), PlanError::ZeroDuration { keyword, .. } if keyword == "restart-after")
        );
        assert!(
            matches!(err("slow-link dc1 dc2 rtt 0ms at 1s"), PlanError::ZeroDuration { keyword, .. } if keyword == "rtt")
        );
        assert!(matches!(err("slow-link dc1 dc2 at 1s"), PlanError::Missing { what, .. } if what.contains("rtt")));
        assert!(matches!(err("slow-link dc1 dc1 rtt 1s at 1s"), PlanError::SameDc { token } if token == "dc1"));
        assert!(matches!(err("kill-node dc1-n1 at 1s at 2s"), PlanError::Repeated { keyword, .. } if keyword == "at"));
        assert!(
            matches!(err("kill-node dc1-n1 at 1s heal-after 1s restart-after 2s"), PlanError::Repeated { keyword, .. } if keyword == "restart-after")
        );
        assert!(
            matches!(err("partition dc1|dc2 at 1s restart-after 2s"), PlanError::WrongHeal { expected, .. } if expected == "heal-after")
        );
        assert!(matches!(err("kill-dc dc1 at 1s for 2s"), PlanError::WrongHeal { token, .. } if token == "for"));
        assert!(
            matches!(err("kill-dc dc1 at 1s restart-after 2s please"), PlanError::Unexpected { token, .. } if token == "please")
        );
        assert!(matches!(err("kill-dc dc1 dc2 at 1s"), PlanError::Unexpected { token, .. } if token == "dc2"));
        assert!(matches!(err("kill-dc dc1 at 1s rtt 2s"), PlanError::Unexpected { token, .. } if token == "rtt"));
        assert!(matches!(err("partition dc1,dc2 at 1s"), PlanError::NotTwoSets { .. }));
        assert!(matches!(err("partition dc1|dc2|dc3 at 1s"), PlanError::NotTwoSets { .. }));
        assert!(matches!(err("partition |dc2 at 1s"), PlanError::EmptySet { .. }));
        assert!(matches!(err("partition at 1s"), PlanError::Missing { .. }));
        assert!(matches!(err("partition dc1,dc2|dc2 at 1s"), PlanError::Overlap { dc, .. } if dc == "dc2"));
        assert!(matches!(err("partition dc1,dc1|dc2 at 1s"), PlanError::Overlap { dc, .. } if dc == "dc1"));
        // The second event's error, after a good first one.
        assert!(
            matches!(err("kill-dc dc1 at 1s; kill-dc dcx at 2s"), PlanError::UnknownDc { token, .. } if token == "dcx")
        );
    }

    fn dc(i: u16) -> DcId {
        DcId(i)
    }

    #[test]
    fn effects_follow_the_faults_in_force() {
        let topo = paper();
        let plan = parse(
            "kill-node dc2-n1 at 1s restart-after 5s; kill-dc dc2 at 2s restart-after 2s; \
             partition dc1|dc2,dc3 at 3s heal-after 4s; partition dc1|dc3 at 4s heal-after 1s; \
             slow-link dc1 dc4 rtt 300ms at 5s for 3s; slow-link dc4 dc1 rtt 500ms at 6s for 1s",
        )
        .unwrap();
        let mut s = FaultState::new(&topo, &plan);
        let n = |i| NodeId(i);
        let rtt = |ms| Duration::from_millis(ms);
        let mut steps = Vec::new();
        for a in plan.actions() {
            steps.push((a.at.as_secs(), a.event, a.phase, s.handle(a)));
        }
        let expect: Vec<(u64, usize, Phase, Vec<Effect>)> = vec![
            (1, 0, Phase::Inject, vec![Effect::Kill(n(2))]),
            (2, 1, Phase::Inject, vec![Effect::Kill(n(3))]),
            (
                3,
                2,
                Phase::Inject,
                vec![Effect::Cut { a: dc(0), b: dc(1), on: true }, Effect::Cut { a: dc(0), b: dc(2), on: true }],
            ),
            // dc2-n1 stays down (its own kill is in force); dc2-n2 starts and gets the cuts.
            (
                4,
                1,
                Phase::Heal,
                vec![
                    Effect::Start(n(3)),
                    Effect::Cut { a: dc(0), b: dc(1), on: true },
                    Effect::Cut { a: dc(0), b: dc(2), on: true },
                ],
            ),
            (4, 3, Phase::Inject, vec![]),
            (5, 3, Phase::Heal, vec![]),
            (
                5,
                4,
                Phase::Inject,
                vec![
                    Effect::SetRtt { from: dc(0), to: dc(3), rtt: rtt(300) },
                    Effect::SetRtt { from: dc(3), to: dc(0), rtt: rtt(300) },
                ],
            ),
            (
                6,
                0,
                Phase::Heal,
                vec![
                    Effect::Start(n(2)),
                    Effect::Cut { a: dc(0), b: dc(1), on: true },
                    Effect::Cut { a: dc(0), b: dc(2), on: true },
                    Effect::SetRtt { from: dc(0), to: dc(3), rtt: rtt(300) },
                    Effect::SetRtt { from: dc(3), to: dc(0), rtt: rtt(300) },
                ],
            ),
            (
                6,
                5,
                Phase::Inject,
                vec![
                    Effect::SetRtt { from: dc(0), to: dc(3), rtt: rtt(500) },
                    Effect::SetRtt { from: dc(3), to: dc(0), rtt: rtt(500) },
                ],
            ),
            (
                7,
                2,
                Phase::Heal,
                vec![Effect::Cut { a: dc(0), b: dc(1), on: false }, Effect::Cut { a: dc(0), b: dc(2), on: false }],
            ),
            // The earlier slow-link is still in force.
            (
                7,
                5,
                Phase::Heal,
                vec![
                    Effect::SetRtt { from: dc(0), to: dc(3), rtt: rtt(300) },
                    Effect::SetRtt { from: dc(3), to: dc(0), rtt: rtt(300) },
                ],
            ),
            // Back to the file's 40 ms.
            (
                8,
                4,
                Phase::Heal,
                vec![
                    Effect::SetRtt { from: dc(0), to: dc(3), rtt: rtt(40) },
                    Effect::SetRtt { from: dc(3), to: dc(0), rtt: rtt(40) },
                ],
            ),
        ];
        assert_eq!(steps, expect);
        assert!(s.down().is_empty());
        assert!(!s.is_active(0));
    }

    /// A random plan over the default topology's 4 DCs and 8 nodes.
    fn plan_strategy() -> impl Strategy<Value = String> {
        let dur = prop_oneof![
            (0u64..100).prop_map(|s| format!("{s}s")),
            (1u64..100_000).prop_map(|ms| format!("{ms}ms")),
            (1u64..1_000_000).prop_map(|us| format!("{us}us")),
        ];
        let pos =
            prop_oneof![(1u64..100).prop_map(|s| format!("{s}s")), (1u64..100_000).prop_map(|ms| format!("{ms}ms")),];
        let dcn = (1u8..=4).prop_map(|d| format!("dc{d}"));
        let node = (1u8..=4, 1u8..=2).prop_map(|(d, n)| format!("dc{d}-n{n}"));
        let sets = Just(()).prop_flat_map(|_| {
            (proptest::sample::subsequence(vec![1u8, 2, 3, 4], 2..=4), any::<proptest::sample::Index>()).prop_map(
                |(dcs, cut)| {
                    let k = 1 + cut.index(dcs.len() - 1);
                    let side = |s: &[u8]| s.iter().map(|d| format!("dc{d}")).collect::<Vec<_>>().join(",");
                    format!("{}|{}", side(&dcs[..k]), side(&dcs[k..]))
                },
            )
        });
        let fault = prop_oneof![
            dcn.clone().prop_map(|d| (format!("kill-dc {d}"), "restart-after")),
            node.prop_map(|n| (format!("kill-node {n}"), "restart-after")),
            sets.prop_map(|s| (format!("partition {s}"), "heal-after")),
            (dcn.clone(), dcn, pos.clone())
                .prop_filter("two DCs", |(a, b, _)| a != b)
                .prop_map(|(a, b, r)| (format!("slow-link {a} {b} rtt {r}"), "for")),
        ];
        let event = (fault, dur, proptest::option::of(pos)).prop_map(|((f, kw), at, heal)| match heal {
            Some(h) => format!("{f} at {at} {kw} {h}"),
            None => format!("{f} at {at}"),
        });
        proptest::collection::vec(event, 1..6).prop_map(|v| v.join("; "))
    }

    proptest! {
        /// Printing a parsed plan and parsing it again gives the same plan, and the canonical
        /// text is a fixed point.
        #[test]
        fn display_round_trips(text in plan_strategy()) {
            let topo = paper();
            let p = DrillPlan::parse(&text, &topo).unwrap();
            let shown = p.to_string();
            let again = DrillPlan::parse(&shown, &topo).unwrap();
            prop_assert_eq!(&again, &p);
            prop_assert_eq!(again.to_string(), shown);
            // Every event injects once and heals at most once, in time order.
            let actions = p.actions();
            prop_assert_eq!(actions.len(), p.events.len() + p.events.iter().filter(|e| e.heal_after.is_some()).count());
            prop_assert!(actions.windows(2).all(|w| w[0].at <= w[1].at));
        }

        /// Whatever the overlaps, once every healable event is healed only the unhealed ones
        /// remain: their nodes down, their links changed; and every kill is matched by a start.
        #[test]
        fn healing_everything_restores_the_cluster(text in plan_strategy()) {
            let topo = paper();
            let p = DrillPlan::parse(&text, &topo).unwrap();
            let mut s = FaultState::new(&topo, &p);
            let mut down = BTreeSet::new();
            for a in p.actions() {
                for e in s.handle(a) {
                    match e {
                        Effect::Kill(n) => prop_assert!(down.insert(n), "killed twice"),
                        Effect::Start(n) => prop_assert!(down.remove(&n), "started while up"),
                        _ => {}
                    }
                }
            }
            let unhealed: BTreeSet<NodeId> =
                p.events.iter().filter(|e| e.heal_after.is_none()).flat_map(|e| e.fault.killed()).collect();
            prop_assert_eq!(&down, &unhealed);
            prop_assert_eq!(s.down(), unhealed);
        }

        /// Arbitrary text never panics the parser.
        #[test]
        fn garbage_does_not_panic(text in "[a-z0-9|,; -]{0,60}") {
            let _ = DrillPlan::parse(&text, &paper());
        }
    }
}

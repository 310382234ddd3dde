//! Versioned reads: the read phase of an optimistic transaction (docs/design.md, "Optimistic
//! transactions: versioned reads and CHECK"). Pure routing and checks, and the read of one
//! DC's replicas ([`read_local`], on the executor's verbs, without locks).
//!
//! A node asked for cell 0 of some keys of a key/value table reads the keys whose partition
//! has a voting replica in its DC from that DC's replicas ([`redt_dc_executor::read_versions`]:
//! a consistent committed image, no lock taken), and forwards the others to a node of the
//! nearest DC holding their partition ([`route`]: one request per destination node, which
//! reads its own DC only). What it returns is a committed version of each key, as recent as
//! the replica read; a replica may lag (a replica a commit left behind, before its catch-up).
//! The versions are what a later CHECK of each key names (`kv_kind::CHECK`): the commit
//! validates them under its read locks at every replica that counts for the quorum.

use crate::limits::{Limit, OverLimit};
use redt_dc_executor::{read_versions, CellRead, DcHandle};
use redt_proto::{DcId, NodeId, TableId, Topology};
use std::collections::BTreeMap;

/// How many times a replica's cell found busy (held exclusively, or changing) is read again
/// before the next replica of the DC is tried.
pub const BUSY_TRIES: usize = 4;

/// One key's answer: a committed image of its cell 0 (wire: `VersionedItemMsg`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// The key.
    pub key: u64,
    /// The cell's raw version word (update counter << 48 | 48-bit commit timestamp); 0 for a
    /// key with no record or a cell never written. What a CHECK of the key names.
    pub version: u64,
    /// Cell 0's value without its trailing zero bytes, as a node answers it (the client
    /// library's `redt_coordinator::Client::read_versions` pads it back to the cell's width);
    /// empty when not `found`.
    pub value: Vec<u8>,
    /// Whether the key holds a value (a record whose cell 0 is not all zero bytes).
    pub found: bool,
}

/// Why a versioned read is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadRefused {
    /// An unknown table, or a table that is not key/value (one cell): `MALFORMED`.
    #[error("{0}")]
    Malformed(String),
    /// More keys than `limits.max_ops_per_txn`: `OVER_LIMIT`.
    #[error(transparent)]
    OverLimit(#[from] OverLimit),
    /// A key's cell was held exclusively (a commit being applied) on every replica of the DC,
    /// each read [`BUSY_TRIES`] times: `NOT_READY`, ask again.
    #[error("key {key} is busy (held exclusively by a writer) on every replica of {dc}: read it again later")]
    Busy {
        /// The key.
        key: u64,
        /// The DC read, by name.
        dc: String,
    },
    /// A key whose partition has no voting replica in the DC asked (another node's request
    /// under another placement): `NOT_READY`, ask again.
    #[error("key {key} has no replica in {dc} (placement {epoch}): ask a node of a DC holding it")]
    NotHeld {
        /// The key.
        key: u64,
        /// The DC asked, by name.
        dc: String,
        /// The placement's epoch.
        epoch: String,
    },
    /// The DC's memory could not be read: `INTERNAL`.
    #[error("{0}")]
    Internal(String),
}

impl ReadRefused {
    /// The error code it is answered with ([`redt_proto::error_code`]).
    pub fn code(&self) -> u32 {
        use redt_proto::error_code;
        match self {
            ReadRefused::Malformed(_) => error_code::MALFORMED,
            ReadRefused::OverLimit(_) => error_code::OVER_LIMIT,
            ReadRefused::Busy { .. } | ReadRefused::NotHeld { .. } => error_code::NOT_READY,
            ReadRefused::Internal(_) => error_code::INTERNAL,
        }
    }
}

/// Checks a versioned read of `keys` of table `table` against `topology`: a known table of one
/// cell (a key/value table: records whose cell 0 is the whole value, as the key/value
/// procedure uses them) and at most `limits.max_ops_per_txn` keys ([`Limit::ReadKeys`]).
/// Returns the table.
///
/// # Errors
/// [`ReadRefused::Malformed`], [`ReadRefused::OverLimit`].
pub fn check(topology: &Topology, table: u32, keys: &[u64]) -> Result<TableId, ReadRefused> {
    let max = topology.limits.max_ops_per_txn;
    if keys.len() as u64 > max {
        return Err(OverLimit { limit: Limit::ReadKeys, got: keys.len() as u64, max }.into());
    }
    let id = u16::try_from(table).map_err(|_| ReadRefused::Malformed(format!("table id {table} out of range")))?;
    let schema =
        topology.table(TableId(id)).ok_or_else(|| ReadRefused::Malformed(format!("unknown table id {table}")))?;
    if schema.cells.len() != 1 {
        return Err(ReadRefused::Malformed(format!(
            "a versioned read of table `{}`, which is not a key/value table (it has {} cells, not 1)",
            schema.name,
            schema.cells.len()
        )));
    }
    Ok(schema.id)
}

/// Where each key of a versioned read asked at a node of `own` is read: indexes into the keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// The keys whose partition has a voting replica in the node's own DC.
    pub local: Vec<usize>,
    /// The others, by the node they are forwarded to: a replica of their partition in the
    /// nearest DC holding one (the smallest link round trip from `own`; the lowest DC id on a
    /// tie).
    pub remote: BTreeMap<NodeId, Vec<usize>>,
}

/// Routes `keys` of `table` (checked with [`check`]) for a node of DC `own` under `topology`.
pub fn route(topology: &Topology, own: DcId, table: TableId, keys: &[u64]) -> Route {
    let mut r = Route::default();
    let Some(schema) = topology.table(table) else { return r };
    let rtt = |dc: DcId| {
        topology
            .links
            .get(own.0 as usize)
            .and_then(|l| l.get(dc.0 as usize))
            .map_or(std::time::Duration::MAX, |l| l.rtt)
    };
    for (i, &key) in keys.iter().enumerate() {
        let p = topology.partition_of(schema, key);
        let replicas = &topology.partitions[p.0 as usize].replicas;
        let dc_of = |n: NodeId| topology.nodes[n.0 as usize].dc;
        if replicas.iter().any(|&n| dc_of(n) == own) {
            r.local.push(i);
            continue;
        }
        if let Some(&to) = replicas.iter().min_by_key(|&&n| (rtt(dc_of(n)), dc_of(n).0)) {
            r.remote.entry(to).or_default().push(i);
        }
    }
    r
}

/// Reads `keys` of `table` (checked with [`check`]) from the voting replicas in DC `own` of
/// `topology`, through `dc`, without locks: per key, each replica of its partition in the DC
/// is read, a busy cell again up to [`BUSY_TRIES`] times, and the highest version among the
/// replicas that answered is taken. One answer per key, in order.
///
/// # Errors
/// [`ReadRefused::NotHeld`] for a key with no voting replica in `own`; [`ReadRefused::Busy`]
/// for a key busy on every replica; [`ReadRefused::Internal`] for a failed read.
pub fn read_local(
    dc: &DcHandle,
    topology: &Topology,
    own: DcId,
    table: TableId,
    keys: &[u64],
) -> Result<Vec<Versioned>, ReadRefused> {
    let dc_name = || topology.dc_name(own);
    let schema = topology.table(table).ok_or_else(|| ReadRefused::Malformed(format!("unknown table {table}")))?;
    // Per key, the replica nodes of its partition in this DC.
    let mut nodes_of: Vec<Vec<NodeId>> = Vec::with_capacity(keys.len());
    for &key in keys {
        let p = topology.partition_of(schema, key);
        let here: Vec<NodeId> = topology.partitions[p.0 as usize]
            .replicas
            .iter()
            .copied()
            .filter(|n| topology.nodes[n.0 as usize].dc == own)
            .collect();
        if here.is_empty() {
            return Err(ReadRefused::NotHeld { key, dc: dc_name(), epoch: topology.epoch.to_string() });
        }
        nodes_of.push(here);
    }
    // Per key, the best answer so far: the highest version among the replicas read.
    let mut best: Vec<Option<(u64, Vec<u8>)>> = vec![None; keys.len()];
    let mut answered = vec![false; keys.len()];
    let replicas = nodes_of.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..replicas {
        // The keys that have a `round`-th replica, grouped by that node.
        let mut by_node: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for (i, nodes) in nodes_of.iter().enumerate() {
            if let Some(&n) = nodes.get(round) {
                by_node.entry(n).or_default().push(i);
            }
        }
        for (node, mut pending) in by_node {
            for _ in 0..BUSY_TRIES {
                if pending.is_empty() {
                    break;
                }
                let ks: Vec<u64> = pending.iter().map(|&i| keys[i]).collect();
                let read = read_versions(dc, node, table, &ks).map_err(|e| ReadRefused::Internal(e.named(topology)))?;
                let mut busy = Vec::new();
                for (&i, r) in pending.iter().zip(read) {
                    let (version, value) = match r {
                        CellRead::Busy => {
                            busy.push(i);
                            continue;
                        }
                        CellRead::Missing => (0, Vec::new()),
                        CellRead::Found { version, value } => (version, value),
                    };
                    answered[i] = true;
                    if best[i].as_ref().is_none_or(|(v, _)| version > *v) {
                        best[i] = Some((version, value));
                    }
                }
                pending = busy;
            }
        }
    }
    keys.iter()
        .zip(best)
        .zip(answered)
        .map(|((&key, b), answered)| match (b, answered) {
            (Some((version, mut value)), true) => {
                let kept = value.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
                value.truncate(kept);
                Ok(Versioned { key, version, found: !value.is_empty(), value })
            }
            _ => Err(ReadRefused::Busy { key, dc: dc_name() }),
        })
        .collect()
}

/// Puts the answers of a routed read back in the keys' order: `parts` are `(indexes, items)`,
/// each item answering the key at the same position of its indexes. `None` when they do not
/// add up to one item per key of the right key (a malformed answer).
pub fn assemble(keys: &[u64], parts: Vec<(Vec<usize>, Vec<Versioned>)>) -> Option<Vec<Versioned>> {
    let mut out: Vec<Option<Versioned>> = vec![None; keys.len()];
    for (indexes, items) in parts {
        if indexes.len() != items.len() {
            return None;
        }
        for (i, item) in indexes.into_iter().zip(items) {
            if keys.get(i) != Some(&item.key) {
                return None;
            }
            *out.get_mut(i)? = Some(item);
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).unwrap()
    }

    #[test]
    fn only_a_known_key_value_table_within_the_limit_is_read() {
        let t = topo();
        assert_eq!(check(&t, 2, &[1, 2, 3]), Ok(TableId(2)));
        let e = check(&t, 1, &[1]).unwrap_err();
        assert!(matches!(e, ReadRefused::Malformed(_)) && e.to_string().contains("not a key/value table"), "{e}");
        assert_eq!(e.code(), redt_proto::error_code::MALFORMED);
        let e = check(&t, 9, &[1]).unwrap_err();
        assert!(e.to_string().contains("unknown table id 9"), "{e}");
        let e = check(&t, 1 << 20, &[1]).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        let many: Vec<u64> = (0..=t.limits.max_ops_per_txn).collect();
        let e = check(&t, 2, &many).unwrap_err();
        assert_eq!(e.code(), redt_proto::error_code::OVER_LIMIT);
        assert!(e.to_string().contains("limits.max_ops_per_txn"), "{e}");
    }

    #[test]
    fn keys_held_here_are_local_and_the_others_go_to_one_replica_of_the_nearest_dc() {
        let t = topo();
        let kv = TableId(2);
        let schema = t.table(kv).unwrap();
        let keys: Vec<u64> = (0..64).collect();
        for own in t.dcs.iter().map(|d| d.id) {
            let r = route(&t, own, kv, &keys);
            let mut seen: Vec<usize> = r.local.clone();
            for (to, idx) in &r.remote {
                for &i in idx {
                    let p = t.partition_of(schema, keys[i]);
                    let replicas = &t.partitions[p.0 as usize].replicas;
                    assert!(replicas.contains(to), "key {} sent to {to}, not a replica", keys[i]);
                    assert!(replicas.iter().all(|n| t.nodes[n.0 as usize].dc != own));
                }
                seen.extend(idx);
            }
            for &i in &r.local {
                let p = t.partition_of(schema, keys[i]);
                assert!(t.partitions[p.0 as usize].replicas.iter().any(|n| t.nodes[n.0 as usize].dc == own));
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..keys.len()).collect::<Vec<_>>(), "every key routed once");
            // n = 3 of 4 DCs: some keys are held elsewhere only.
            assert!(!r.remote.is_empty() && !r.local.is_empty());
        }
    }

    /// What one replica holds of the key a transaction read at version V1, when its CHECK
    /// arrives: the quorum model of docs/design.md, "Optimistic transactions".
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Replica {
        /// An older version (it lags: a commit left it behind).
        Behind,
        /// V1.
        Expected,
        /// A newer version: a writer's commit applied here since the read.
        Ahead,
        /// A writer holds the cell exclusively (its phase 2 not applied yet): No-Wait.
        Held,
        /// Its DC does not answer.
        Unreachable,
    }

    const ALL: [Replica; 5] = [Replica::Behind, Replica::Expected, Replica::Ahead, Replica::Held, Replica::Unreachable];

    /// The vote of a replica in `state` on a CHECK of V1: the executor's rule (commit only at
    /// the version expected, checked under the read lock), or with `checks` off the mutant's.
    fn vote(state: Replica, checks: bool) -> crate::decision::ReplicaVote {
        use crate::decision::{ItemKey, ReplicaVote};
        use redt_dc_executor::CellVersion;
        let at = |v: u64| ReplicaVote::Commit {
            versions: vec![(ItemKey::new(0, 0), CellVersion::new(0, redt_proto::Cts(v)))],
            hlc: redt_proto::Cts(1),
        };
        match state {
            Replica::Behind if checks => ReplicaVote::Abort,
            Replica::Behind => at(10),
            Replica::Expected => at(20),
            Replica::Ahead if checks => ReplicaVote::Abort,
            Replica::Ahead => at(30),
            Replica::Held => ReplicaVote::Abort,
            Replica::Unreachable => ReplicaVote::Missing,
        }
    }

    /// Every state of n = 1..5 replicas, with the decision rule itself
    /// (`crate::decision::decide`), final round or not: a commit needs `Q` replicas at the
    /// version read, so (`Q + Q > n`) no writer that committed a newer version (its `Q` voters
    /// hold it, hold its lock, or are out of reach) can have: a committed CHECK read the
    /// latest version. Enough fresh replicas commit past lagging ones. With the checks off
    /// (the mutant), a commit over a quorum holding a newer version is found.
    #[test]
    fn a_committed_check_saw_the_latest_version_in_every_replica_state() {
        use crate::decision::{decide, quorum, PartitionVotes, Ruling};
        let mut mutant_caught = false;
        let mut cases = 0u64;
        for n in 1..=5usize {
            let q = quorum(n);
            for code in 0..ALL.len().pow(n as u32) {
                let states: Vec<Replica> = (0..n).map(|i| ALL[code / ALL.len().pow(i as u32) % ALL.len()]).collect();
                let count = |f: &dyn Fn(Replica) -> bool| states.iter().filter(|&&s| f(s)).count();
                let expected = count(&|s| s == Replica::Expected);
                // The replicas a committed newer write could have had as its voters.
                let writer_could_commit =
                    count(&|s| matches!(s, Replica::Ahead | Replica::Held | Replica::Unreachable)) >= q
                        && count(&|s| matches!(s, Replica::Ahead | Replica::Held)) > 0;
                for final_round in [false, true] {
                    cases += 1;
                    let votes = |checks| PartitionVotes::new(states.iter().map(|&s| vote(s, checks)).collect());
                    let commits =
                        |r: Ruling| matches!(r, Ruling::Decide { decision: redt_proto::Decision::Commit(_), .. });
                    let checked = decide(&[votes(true)], final_round);
                    if commits(checked) {
                        assert!(expected >= q, "{states:?}: committed with {expected} replicas at the version read");
                        assert!(!writer_could_commit, "{states:?}: a newer write and the CHECK both committed");
                    }
                    if expected >= q && count(&|s| s == Replica::Behind) + expected == n {
                        assert!(commits(checked), "{states:?}: fresh replicas enough for Q, lagging ones aside");
                    }
                    let unchecked = decide(&[votes(false)], final_round);
                    mutant_caught |= commits(unchecked) && count(&|s| s == Replica::Ahead) >= q;
                }
            }
        }
        assert_eq!(cases, 2 * (5 + 25 + 125 + 625 + 3125));
        assert!(mutant_caught, "without the version checks a CHECK commits over a newer committed write");
    }

    #[test]
    fn answers_go_back_in_the_keys_order_and_a_mismatch_is_refused() {
        let v = |key| Versioned { key, version: key * 10, value: vec![], found: false };
        let keys = [5, 6, 7];
        let out = assemble(&keys, vec![(vec![1], vec![v(6)]), (vec![0, 2], vec![v(5), v(7)])]).unwrap();
        assert_eq!(out, vec![v(5), v(6), v(7)]);
        assert!(assemble(&keys, vec![(vec![0, 1], vec![v(5), v(6)])]).is_none(), "a key unanswered");
        assert!(assemble(&keys, vec![(vec![0, 1, 2], vec![v(5), v(7), v(6)])]).is_none(), "a key misplaced");
        assert!(assemble(&keys, vec![(vec![0, 1, 2], vec![v(5), v(6)])]).is_none());
    }
}

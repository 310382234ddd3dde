//! Votes and entry references on the wire ↔ the executor's types.

use crate::error::{Error, Result};
use redt_dc_executor::{
    ring, AbortReason, CellVersion, Decision, EntryRef, ItemVote, LockConflictKind, NodePromise, Promise, Vote,
    VoteCode,
};
use redt_proto::wire::{EntryRefMsg, ItemVoteMsg, PromiseMsg, VoteMsg};
use redt_proto::{Ballot, Cts, DcId, NodeId, TxnId};

/// The longest value a vote may pad back to: the largest cell a topology may declare,
/// 65,536 bytes.
const MAX_VALUE_BYTES: u64 = 65_536;

/// Encodes `vote` of `dc`, moving its read values into the message without their trailing
/// zero bytes (a cell holds its value zero-padded to the cell's size: a counter in a 2 KiB
/// cell travels as 8 bytes, an absent key's as none) and each value's length beside it; an
/// abort travels as its text and as its kind with the node and value it names, so the
/// coordinator gets the same [`AbortReason`] back.
pub fn vote_to_msg(dc: DcId, vote: Vote) -> VoteMsg {
    let (abort_kind, abort_node, abort_value) = vote.abort.as_ref().map_or((0, 0, 0), reason_to_wire);
    VoteMsg {
        txn: vote.txn.0,
        dc: dc.0 as u32,
        commit: vote.is_commit(),
        abort_reason: vote.abort.as_ref().map(reason_text).unwrap_or_default(),
        abort_kind,
        abort_node,
        abort_value,
        items: vote
            .items
            .into_iter()
            .map(|i| {
                let mut value_lens = Vec::with_capacity(i.values.len());
                let (read_cells, values) = i
                    .values
                    .into_iter()
                    .map(|(c, mut v)| {
                        value_lens.push(v.len() as u32);
                        let kept = v.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
                        v.truncate(kept);
                        (u32::from(c), v)
                    })
                    .unzip();
                ItemVoteMsg {
                    access: i.access as u32,
                    node: i.node.0 as u32,
                    cells: i.versions.iter().map(|(c, _)| u32::from(*c)).collect(),
                    versions: i.versions.iter().map(|(_, v)| v.0).collect(),
                    read_cells,
                    values,
                    value_lens,
                    absent: i.absent,
                    row: i.row,
                }
            })
            .collect(),
        hlc: vote.hlc.0,
        entries: entries_to_msg(&vote.entries),
        nested_messages: 0,
        nested_round_trips: 0,
    }
}

/// Decodes a vote received from `node`, moving its read values out of the message.
///
/// # Errors
/// [`Error::Remote`] when the message is inconsistent (parallel lists of different lengths,
/// out-of-range ids).
pub fn vote_from_msg(node: NodeId, mut m: VoteMsg) -> Result<Vote> {
    // Decoding has no topology at hand: the sender is named by its id.
    let bad = |what: &str| Error::Remote { node, name: node.to_string(), message: format!("malformed vote: {what}") };
    let mut items = Vec::with_capacity(m.items.len());
    for i in std::mem::take(&mut m.items) {
        if i.cells.len() != i.versions.len()
            || i.read_cells.len() != i.values.len()
            || !(i.value_lens.is_empty() || i.value_lens.len() == i.values.len())
        {
            return Err(bad("parallel lists differ in length"));
        }
        let mut values = i.values;
        for (v, &len) in values.iter_mut().zip(&i.value_lens) {
            if (len as usize) < v.len() || u64::from(len) > MAX_VALUE_BYTES {
                return Err(bad("a value longer than its length, or than a cell"));
            }
            v.resize(len as usize, 0);
        }
        let cell = |c: u32| u16::try_from(c).map_err(|_| bad("cell out of range"));
        items.push(ItemVote {
            access: i.access as usize,
            node: NodeId(u16::try_from(i.node).map_err(|_| bad("node out of range"))?),
            versions: i
                .cells
                .iter()
                .zip(&i.versions)
                .map(|(&c, &v)| Ok((cell(c)?, CellVersion(v))))
                .collect::<Result<Vec<_>>>()?,
            values: i.read_cells.iter().zip(values).map(|(&c, v)| Ok((cell(c)?, v))).collect::<Result<_>>()?,
            absent: i.absent,
            row: i.row,
        });
    }
    Ok(Vote {
        txn: TxnId(m.txn),
        abort: if m.commit { None } else { Some(reason_from_wire(&m)) },
        items,
        hlc: Cts::new(m.hlc),
        entries: entries_from_msg(&m.entries).map_err(|_| bad("entry node out of range"))?,
    })
}

/// Encodes entry references.
pub fn entries_to_msg(e: &[EntryRef]) -> Vec<EntryRefMsg> {
    e.iter().map(|e| EntryRefMsg { node: e.node.0 as u32, index: e.index, slots: e.slots }).collect()
}

/// Decodes entry references.
///
/// # Errors
/// `Err(())` if a node id is out of range.
pub fn entries_from_msg(e: &[EntryRefMsg]) -> std::result::Result<Vec<EntryRef>, ()> {
    e.iter()
        .map(|e| Ok(EntryRef { node: NodeId(u16::try_from(e.node).map_err(|_| ())?), index: e.index, slots: e.slots }))
        .collect()
}

/// An abort reason's `(abort_kind, abort_node, abort_value)` on the wire ([`VoteMsg`]).
fn reason_to_wire(r: &AbortReason) -> (u32, u32, u64) {
    match r {
        AbortReason::User(_) => (0, 0, 0),
        AbortReason::LockConflict { access, kind } => (1, kind.code(), *access as u64),
        AbortReason::NotFound { access } => (2, 0, *access as u64),
        AbortReason::RingFull(n) => (3, u32::from(n.0), 0),
        AbortReason::Fenced => (4, 0, 0),
        AbortReason::StaleEpoch { node, floor } => (5, u32::from(node.0), u64::from(floor.0)),
        AbortReason::HeapFull(n) => (6, u32::from(n.0), 0),
        AbortReason::IndexFull(n) => (7, u32::from(n.0), 0),
        AbortReason::Superseded { access } => (8, 0, *access as u64),
        AbortReason::StaleRead { access, node } => (9, u32::from(node.0), *access as u64),
    }
}

/// The abort reason of a vote message: its kind where the sender set one and its fields fit
/// their types, else the text alone ([`AbortReason::User`]).
fn reason_from_wire(m: &VoteMsg) -> AbortReason {
    let node = u16::try_from(m.abort_node).map(NodeId);
    let access = usize::try_from(m.abort_value);
    let text = || AbortReason::User(m.abort_reason.clone());
    match m.abort_kind {
        // The node slot carries the kind (0, unspecified, from a node that does not say).
        1 => access.map_or_else(
            |_| text(),
            |access| AbortReason::LockConflict { access, kind: LockConflictKind::from_code(m.abort_node) },
        ),
        2 => access.map_or_else(|_| text(), |access| AbortReason::NotFound { access }),
        3 => node.map_or_else(|_| text(), AbortReason::RingFull),
        4 => AbortReason::Fenced,
        5 => match (node, u32::try_from(m.abort_value)) {
            (Ok(node), Ok(floor)) => AbortReason::StaleEpoch { node, floor: redt_proto::Epoch(floor) },
            _ => text(),
        },
        6 => node.map_or_else(|_| text(), AbortReason::HeapFull),
        7 => node.map_or_else(|_| text(), AbortReason::IndexFull),
        8 => access.map_or_else(|_| text(), |access| AbortReason::Superseded { access }),
        9 => match (access, node) {
            (Ok(access), Ok(node)) => AbortReason::StaleRead { access, node },
            _ => text(),
        },
        _ => text(),
    }
}

/// A short text for an abort reason.
pub fn reason_text(r: &AbortReason) -> String {
    reason_with(r, |n| n.to_string())
}

/// [`reason_text`] naming nodes by their names in `topology` (`dc2-n1`, not `node#2`), as
/// the client's error text does.
pub fn reason_named(r: &AbortReason, topology: &redt_proto::Topology) -> String {
    reason_with(r, |n| topology.node_name(n))
}

/// How an abort's text names a lock conflict's kind.
fn kind_text(kind: LockConflictKind) -> &'static str {
    match kind {
        LockConflictKind::Exclusive => "held exclusively",
        LockConflictKind::Shared => "held by readers",
        LockConflictKind::Readers => "reader limit",
        LockConflictKind::Gap => "gap lock",
        LockConflictKind::Absence => "a reader holds the key's absence",
        LockConflictKind::Changed => "changed under the lock",
        LockConflictKind::Unspecified => "kind not reported",
    }
}

/// The text of `r`, with `name` naming its node.
fn reason_with(r: &AbortReason, name: impl Fn(NodeId) -> String) -> String {
    match r {
        AbortReason::LockConflict { access, kind } => {
            format!("lock conflict ({}) on access {access}", kind_text(*kind))
        }
        AbortReason::NotFound { access } => format!("record of access {access} not found"),
        AbortReason::User(s) => s.clone(),
        AbortReason::RingFull(n) => format!("redo ring of {} full", name(*n)),
        AbortReason::HeapFull(n) => format!("record heap of {} full: no room to create a record", name(*n)),
        AbortReason::IndexFull(n) => format!("hash index of {} full: no slot for a new record", name(*n)),
        AbortReason::Fenced => "fenced by a recoverer".into(),
        AbortReason::StaleEpoch { node, floor } => {
            format!("not in current epoch: {} takes no phase 1 before {floor}", name(*node))
        }
        AbortReason::Superseded { access } => {
            format!("access {access}: its key was deleted and freed after this transaction started")
        }
        AbortReason::StaleRead { access, node } => {
            format!("stale read: access {access} is not at the version its CHECK expects on {}", name(*node))
        }
    }
}

/// Encodes one replica's promise (a recoverer's PREPARE reply); the redo entry travels in the
/// ring's own entry format.
pub fn promise_to_msg(p: &NodePromise) -> PromiseMsg {
    let mut m = PromiseMsg { node: u32::from(p.node.0), ..PromiseMsg::default() };
    match &p.promise {
        Promise::Entry { entry, vote, recorded, redo } => {
            m.kind = 0;
            m.entry = entries_to_msg(std::slice::from_ref(entry)).pop();
            m.vote = *vote as u32;
            if let Some((d, b)) = recorded {
                m.recorded = *d as u32;
                m.ballot = b.0;
            }
            m.redo = ring::encode(redo, entry.index);
        }
        Promise::Applied(d) => {
            m.kind = 1;
            (m.commit, m.cts) = d.to_wire();
        }
        Promise::NoVote => m.kind = 2,
        Promise::Unknown => m.kind = 3,
        Promise::Refused { promised } => {
            m.kind = 4;
            m.ballot = promised.0;
        }
    }
    m
}

/// Decodes one replica's promise.
///
/// # Errors
/// A text naming what is malformed (unknown kind or vote code, a redo entry that does not
/// decode as the entry it names).
pub fn promise_from_msg(m: &PromiseMsg) -> std::result::Result<NodePromise, String> {
    let node = NodeId(u16::try_from(m.node).map_err(|_| format!("promise node {} out of range", m.node))?);
    let code = |v: u32| VoteCode::from_bits(u64::from(v)).ok_or_else(|| format!("unknown vote code {v}"));
    let promise = match m.kind {
        0 => {
            let entry = entries_from_msg(m.entry.as_slice())
                .map_err(|()| "promise entry node out of range".to_string())?
                .pop()
                .ok_or("an entry promise without its entry")?;
            let redo = ring::decode(entry.node, entry.index, &m.redo).map_err(|e| format!("promise redo: {e}"))?;
            let recorded = match code(m.recorded)? {
                VoteCode::None => None,
                d => Some((d, Ballot(m.ballot))),
            };
            Promise::Entry { entry, vote: code(m.vote)?, recorded, redo }
        }
        1 => Promise::Applied(Decision::from_wire(m.commit, m.cts)),
        2 => Promise::NoVote,
        3 => Promise::Unknown,
        4 => Promise::Refused { promised: Ballot(m.ballot) },
        k => return Err(format!("unknown promise kind {k}")),
    };
    Ok(NodePromise { node, promise })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vote_with(values: Vec<(u16, Vec<u8>)>) -> Vote {
        Vote {
            txn: TxnId(7),
            abort: None,
            items: vec![ItemVote {
                access: 0,
                node: NodeId(1),
                versions: values.iter().map(|(c, _)| (*c, CellVersion(3))).collect(),
                values,
                absent: false,
                row: None,
            }],
            hlc: Cts(5),
            entries: vec![],
        }
    }

    #[test]
    fn a_padded_value_travels_without_its_zeros_and_comes_back_whole() {
        let mut counter = vec![0u8; 2048];
        counter[..8].copy_from_slice(&42i64.to_le_bytes());
        let vote = vote_with(vec![(0, counter.clone()), (1, vec![0; 100]), (2, vec![])]);
        let msg = vote_to_msg(DcId(0), vote.clone());
        let sent: Vec<usize> = msg.items[0].values.iter().map(Vec::len).collect();
        assert_eq!(sent, vec![1, 0, 0], "42 is one byte, the rest zeros");
        assert_eq!(msg.items[0].value_lens, vec![2048, 100, 0]);
        assert_eq!(vote_from_msg(NodeId(1), msg).expect("decodes"), vote);
    }

    #[test]
    fn a_value_longer_than_its_length_or_a_cell_is_refused() {
        let mut msg = vote_to_msg(DcId(0), vote_with(vec![(0, vec![1, 2, 3])]));
        msg.items[0].value_lens = vec![2];
        assert!(vote_from_msg(NodeId(1), msg.clone()).is_err(), "3 bytes sent for a 2-byte value");
        msg.items[0].value_lens = vec![1 << 20];
        assert!(vote_from_msg(NodeId(1), msg.clone()).is_err(), "a 1 MiB value pads past any cell");
        msg.items[0].value_lens = vec![4, 4];
        assert!(vote_from_msg(NodeId(1), msg.clone()).is_err(), "lengths not parallel to values");
        msg.items[0].value_lens = vec![];
        let whole = vote_from_msg(NodeId(1), msg).expect("no lengths: the values are whole");
        assert_eq!(whole.items[0].values, vec![(0, vec![1, 2, 3])]);
    }

    proptest! {
        #[test]
        fn votes_round_trip(values in proptest::collection::vec(proptest::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..64), 0..6)) {
            let vote = vote_with(values.into_iter().enumerate().map(|(c, v)| (c as u16, v)).collect());
            prop_assert_eq!(vote_from_msg(NodeId(1), vote_to_msg(DcId(0), vote.clone())).expect("decodes"), vote);
        }
    }

    #[test]
    fn a_lock_conflict_keeps_its_kind_across_the_wire_and_an_old_vote_reads_as_unspecified() {
        for kind in LockConflictKind::ALL {
            let vote = Vote::aborted(TxnId(9), Cts(5), AbortReason::LockConflict { access: 3, kind });
            let back = vote_from_msg(NodeId(1), vote_to_msg(DcId(0), vote.clone())).unwrap();
            assert_eq!(back.abort, vote.abort);
        }
        let mut old = vote_to_msg(
            DcId(0),
            Vote::aborted(TxnId(9), Cts(5), AbortReason::LockConflict { access: 3, kind: LockConflictKind::Gap }),
        );
        old.abort_node = 0; // a node that does not report the kind
        let back = vote_from_msg(NodeId(1), old).unwrap();
        assert_eq!(back.abort, Some(AbortReason::LockConflict { access: 3, kind: LockConflictKind::Unspecified }));
    }
}

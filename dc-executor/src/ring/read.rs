//! Reading entries back with one-sided READs: one header, one whole entry, and the scan of
//! a ring for unfinished entries (recovery, the simulator, replay).

use super::codec::{check_frame, decode, decode_framed, word};
use super::entry::RedoEntry;
use super::layout::{head_offset, pieces, ring_slots, slot_offset, tail_offset};
use super::status::EntryStatus;
use super::vote::VoteWord;
use super::SLOT_BYTES;
use crate::error::{Error, Result};
use crate::memstore::Layout;
use crate::verbs::{DoorbellBatch, Verbs};
use redt_proto::{Cts, NodeId, Offset, TxnId};

/// What the 64-byte header of the entry at a ring index says, read with one READ: enough to
/// tell whether the slot still holds a given transaction's entry before a compare-and-swap
/// on its vote word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    /// The entry's transaction (header w0).
    pub txn: TxnId,
    /// Its status and commit timestamp (header w1).
    pub status: EntryStatus,
    /// The commit timestamp of the status word (0 unless committed).
    pub cts: Cts,
    /// Its vote word (header w2).
    pub vote: VoteWord,
    /// Its catch-up mask (bits 8..16 of the status word; zero: it owes no catch-up).
    pub owed: u8,
}

/// READs the header of the entry at ring index `index` of `node`'s ring (one 64-byte READ).
///
/// # Errors
/// [`Error::TornEntry`] when the slot does not hold an entry of this lap at `index` (never
/// written, released and reused, or a header not yet written) or its status word is
/// unknown; verbs errors.
pub fn read_header(verbs: &dyn Verbs, node: NodeId, layout: &Layout, index: u64) -> Result<EntryHeader> {
    let mut buf = [0u8; SLOT_BYTES as usize];
    verbs.read(node, Offset(slot_offset(layout, index)), &mut buf)?;
    check_frame(node, index, &buf)?;
    let (status, cts) =
        EntryStatus::from_word(word(&buf, 1)).ok_or(Error::TornEntry { node, index, why: "unknown status" })?;
    let owed = EntryStatus::owed_of(word(&buf, 1));
    Ok(EntryHeader { txn: TxnId(word(&buf, 0)), status, cts, vote: VoteWord(word(&buf, 2)), owed })
}

/// READs and decodes the entry at ring index `index` of `node`'s ring: one READ of the
/// header, then one or two READs of the body.
///
/// # Errors
/// [`Error::TornEntry`] when the entry is not (yet, or completely) written, belongs to
/// another lap, or changed between the READs (retry); verbs errors.
pub fn read_entry(verbs: &dyn Verbs, node: NodeId, layout: &Layout, index: u64) -> Result<RedoEntry> {
    let mut read = |off: u64, buf: &mut [u8]| Ok(verbs.read(node, Offset(off), buf)?);
    read_framed(layout, node, index, &mut read).map(|(e, _, _)| e)
}

/// Reads the entry at `index` whose reserved size `slots` is known (from the vote that
/// reported it) with one doorbell: one READ, or two where the entry wraps.
///
/// # Errors
/// Verbs errors; [`Error::TornEntry`] if the bytes do not decode as the entry at `index`.
pub fn read_entry_sized(verbs: &dyn Verbs, node: NodeId, layout: &Layout, index: u64, slots: u64) -> Result<RedoEntry> {
    if slots == 0 || slots > ring_slots(layout) {
        return Err(Error::TornEntry { node, index, why: "entry size outside the ring" });
    }
    let mut batch = DoorbellBatch::new();
    let parts = pieces(layout, index, 0, slots * SLOT_BYTES);
    let reads: Vec<usize> =
        parts.iter().filter(|p| p.2 > 0).map(|&(off, _, len)| batch.read(Offset(off), len as usize)).collect();
    verbs.post_batch(node, &mut batch)?;
    let mut bytes = Vec::with_capacity((slots * SLOT_BYTES) as usize);
    for r in reads {
        bytes.extend_from_slice(batch.read_result(r));
    }
    decode(node, index, &bytes)
}

/// Reads the entry at `index` through `read(offset, buf)`: the header, then the body.
/// Returns the entry, its slot count and its catch-up mask (read with the header).
pub(crate) fn read_framed(
    layout: &Layout,
    node: NodeId,
    index: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<(RedoEntry, u64, u8)> {
    let mut buf = vec![0u8; SLOT_BYTES as usize];
    read(slot_offset(layout, index), &mut buf)?;
    let frame = check_frame(node, index, &buf)?;
    if frame.slots > ring_slots(layout) {
        return Err(Error::TornEntry { node, index, why: "entry larger than the ring" });
    }
    buf.resize((SLOT_BYTES + frame.body_len) as usize, 0);
    for (off, at, len) in pieces(layout, index, SLOT_BYTES, frame.body_len) {
        if len > 0 {
            read(off, &mut buf[at as usize..(at + len) as usize])?;
        }
    }
    let owed = EntryStatus::owed_of(word(&buf, 1));
    decode_framed(node, index, &buf).map(|(e, slots)| (e, slots, owed))
}

/// The entries of `node`'s ring between its head and its tail that are not finished (status
/// `Intent` or `Logged`: their transaction is undecided here, and the locks they list may be
/// held), as `(ring index, entry)` in ring order. A slot that does not decode (a reservation
/// not yet written, a torn entry) is skipped one slot at a time. Read-only: the recovery
/// scan's and the simulator's view of what a crash left behind (docs/design.md §2).
///
/// # Errors
/// Verbs failures.
pub fn unfinished_entries(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<Vec<(u64, RedoEntry)>> {
    Ok(ring_scan(verbs, node, layout)?.unfinished)
}

/// The entries of `node`'s ring between its head and its tail that owe a catch-up (a non-zero
/// catch-up mask, [`EntryStatus::owed_of`]), in ring order. Read-only.
///
/// # Errors
/// Verbs failures.
pub fn owed_entries(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<Vec<OwedEntry>> {
    Ok(ring_scan(verbs, node, layout)?.owed)
}

/// Which of `records` (record offsets on `node`) an entry of `node`'s ring between its head
/// and its tail may still apply a change to: an `Intent`, `Logged` or `Committed` entry (not
/// yet flushed by replay) whose lock intents or changes name the record. Read-only; a
/// retirer of deleted records asks it after it marked them retired (`retire.rs`).
///
/// # Errors
/// Verbs failures.
pub fn pending_records(
    verbs: &dyn Verbs,
    node: NodeId,
    layout: &Layout,
    records: &std::collections::BTreeSet<Offset>,
) -> Result<std::collections::BTreeSet<Offset>> {
    let want = |h: &HeaderPeek| {
        matches!(
            EntryStatus::from_word(h.status_word),
            Some((EntryStatus::Intent | EntryStatus::Logged | EntryStatus::Committed, _))
        )
    };
    let mut named = std::collections::BTreeSet::new();
    for (_, _, _, entry) in ring_entries_where(verbs, node, layout, &want)? {
        let offsets = entry.locks.iter().map(|l| l.record).chain(entry.changes.iter().map(|c| c.record));
        named.extend(offsets.filter(|o| records.contains(o)));
    }
    Ok(named)
}

/// An entry that owes a catch-up: a catch-up source's redo whose shipments to the replicas its
/// commit left behind are not all acknowledged (docs/design.md §2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwedEntry {
    /// Ring index of its first slot.
    pub index: u64,
    /// Slots it covers.
    pub slots: u64,
    /// Its catch-up mask (never zero here).
    pub owed: u8,
    /// The entry (status `Committed`, `Aborted` or `Flushed`; `cts` is the commit's).
    pub entry: RedoEntry,
}

/// What one READ pass over a ring finds for the recovery scan: the unfinished entries (as
/// [`unfinished_entries`]) and the entries owing a catch-up (as [`owed_entries`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RingScan {
    /// `(ring index, entry)` of every `Intent` or `Logged` entry, in ring order.
    pub unfinished: Vec<(u64, RedoEntry)>,
    /// Every entry with a non-zero catch-up mask, in ring order.
    pub owed: Vec<OwedEntry>,
}

/// One pass over `node`'s ring from head to tail: see [`RingScan`]. Read-only.
///
/// # Errors
/// Verbs failures.
pub fn ring_scan(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<RingScan> {
    let mut out = RingScan::default();
    let want = |h: &HeaderPeek| h.unfinished() || h.owed() != 0;
    for (index, slots, owed, entry) in ring_entries_where(verbs, node, layout, &want)? {
        if owed != 0 {
            out.owed.push(OwedEntry { index, slots, owed, entry: entry.clone() });
        }
        if matches!(entry.status, EntryStatus::Intent | EntryStatus::Logged) {
            out.unfinished.push((index, entry));
        }
    }
    Ok(out)
}

/// Every entry of `node`'s ring between its head and its tail that decodes, finished or not,
/// as `(ring index, slots, entry)` in ring order (a slot that does not decode is skipped one
/// slot at a time). Read-only; a recoverer's scan (docs/design.md §2).
///
/// # Errors
/// Verbs failures.
pub fn ring_entries(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<Vec<(u64, u64, RedoEntry)>> {
    Ok(ring_entries_owed(verbs, node, layout)?.into_iter().map(|(i, n, _, e)| (i, n, e)).collect())
}

/// [`ring_entries`] with each entry's catch-up mask: `(ring index, slots, owed, entry)`.
fn ring_entries_owed(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<Vec<(u64, u64, u8, RedoEntry)>> {
    ring_entries_where(verbs, node, layout, &|_| true)
}

/// What the 64-byte header of an entry says before its body is read: enough to pass over an
/// entry a scan does not want.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeaderPeek {
    /// The transaction (header word 0; not covered by a checked checksum yet).
    pub(crate) txn: TxnId,
    /// The status word (header word 1): status, catch-up mask, commit timestamp.
    pub(crate) status_word: u64,
}

impl HeaderPeek {
    /// Whether the entry is unfinished (`Intent` or `Logged`), by its status word.
    pub(crate) fn unfinished(&self) -> bool {
        matches!(EntryStatus::from_word(self.status_word), Some((EntryStatus::Intent | EntryStatus::Logged, _)))
    }

    /// Its catch-up mask ([`EntryStatus::owed_of`]).
    pub(crate) fn owed(&self) -> u8 {
        EntryStatus::owed_of(self.status_word)
    }
}

/// The entries of `node`'s ring between its head and its tail for which `want` of their
/// header is true, decoded (and their checksums checked), as `(ring index, slots, owed,
/// entry)` in ring order. Each entry costs one 64-byte READ of its header; only the wanted
/// ones are read whole and decoded, so a scan for a few entries among many (one
/// transaction's; the unfinished ones) moves and decodes a few. A header whose framing does
/// not check, or an entry that does not decode (a reservation not yet written, a torn
/// entry), is passed over one slot at a time, as a full scan does, and the walk decodes every
/// candidate until one decodes again.
///
/// # Errors
/// Verbs failures.
pub(crate) fn ring_entries_where(
    verbs: &dyn Verbs,
    node: NodeId,
    layout: &Layout,
    want: &dyn Fn(&HeaderPeek) -> bool,
) -> Result<Vec<(u64, u64, u8, RedoEntry)>> {
    let (head, tail) = ring_bounds(verbs, node, layout)?;
    let end = tail.min(head.saturating_add(ring_slots(layout)));
    let mut out = Vec::new();
    let mut index = head;
    let mut header = [0u8; SLOT_BYTES as usize];
    let mut read = |off: u64, buf: &mut [u8]| Ok(verbs.read(node, Offset(off), buf)?);
    let fatal = |e: &Error| {
        use redt_verbs::Error as V;
        matches!(e, Error::Verbs(V::Backend(_) | V::OutOfBounds { .. } | V::UnknownNode(_)))
    };
    // Whether `index` is known to start an entry (the head, or the slot after an entry that
    // decoded): only then is an unwanted header's slot count trusted to pass over it. After
    // an entry that did not decode, the walk goes one slot at a time and decodes every
    // candidate, as a full scan does, until one decodes: a slot of a body may look like a
    // header.
    let mut synced = true;
    while index < end {
        read(slot_offset(layout, index), &mut header)?;
        let frame = match check_frame(node, index, &header) {
            Ok(frame) if frame.slots <= ring_slots(layout) => frame,
            _ => {
                index = index.saturating_add(1);
                continue;
            }
        };
        let peek = HeaderPeek { txn: TxnId(word(&header, 0)), status_word: word(&header, 1) };
        let wanted = want(&peek);
        if synced && !wanted {
            // Saturating: head and tail are words of shared memory, not trusted to be sane.
            index = index.saturating_add(frame.slots.max(1));
            continue;
        }
        match read_framed(layout, node, index, &mut read) {
            Ok((entry, slots, owed)) => {
                if wanted {
                    out.push((index, slots, owed, entry));
                }
                synced = true;
                index = index.saturating_add(slots.max(1));
            }
            Err(e) if fatal(&e) => return Err(e),
            Err(_) => {
                synced = false;
                index = index.saturating_add(1);
            }
        }
    }
    Ok(out)
}

/// The head and the tail of `node`'s ring (ring indices, in slots): replay has released
/// everything before the head, writers have reserved everything before the tail.
///
/// # Errors
/// Verbs failures.
pub fn ring_bounds(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<(u64, u64)> {
    let mut word = [0u8; 8];
    verbs.read(node, Offset(head_offset(layout)), &mut word)?;
    let head = u64::from_le_bytes(word);
    verbs.read(node, Offset(tail_offset(layout)), &mut word)?;
    Ok((head, u64::from_le_bytes(word)))
}

/// Slots at the head of a ring that hold no readable entry: `[from, to)` with `from` the
/// head and `to` the next slot that starts a readable entry, or the tail. A reservation
/// whose writer has not written it yet looks the same as one whose writer died, so a gap is
/// only a *candidate* for a filler (see "Writers that give up or die" in the module docs of
/// [`crate::ring`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// The head (ring index).
    pub from: u64,
    /// One past the gap's last slot (ring index).
    pub to: u64,
}

/// The gap at the head of `node`'s ring, if the slot at the head does not start a readable
/// entry (`None` when the ring is empty or the head entry decodes). Read-only.
///
/// # Errors
/// Verbs failures.
pub fn head_gap(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<Option<Gap>> {
    let (head, tail) = ring_bounds(verbs, node, layout)?;
    let end = tail.min(head.saturating_add(ring_slots(layout)));
    let mut read = |off: u64, buf: &mut [u8]| Ok(verbs.read(node, Offset(off), buf)?);
    let mut index = head;
    while index < end {
        match read_framed(layout, node, index, &mut read) {
            Ok(_) => break,
            Err(
                e @ Error::Verbs(
                    redt_verbs::Error::Backend(_)
                    | redt_verbs::Error::OutOfBounds { .. }
                    | redt_verbs::Error::UnknownNode(_),
                ),
            ) => return Err(e),
            Err(_) => index = index.saturating_add(1),
        }
    }
    Ok((index > head).then_some(Gap { from: head, to: index }))
}

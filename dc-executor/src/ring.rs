//! The redo ring of a node: the redo entry format and the executor-side, one-sided
//! operations on it (RedT §4.2, Algorithm 2 `WriteLog` / `CommitLog`; DESIGN.md §2–3).
//!
//! The node's own replay task (Algorithm 2 `ReplayLog`) lives in `replay.rs`.
//!
//! # Ring area
//!
//! ```text
//! ring_off + 0      head u64: first ring index not yet released by replay
//! ring_off + 8      tail u64: next ring index to reserve (fetch-and-add by executors)
//! ring_off + 16     zero padding up to 64 bytes
//! ring_off + 64     slot 0 … slot S-1, 64 bytes each (S = Layout::ring_slots())
//! ```
//!
//! `head` and `tail` are monotonic ring indices (slot numbers that never wrap); index `i`
//! lives in slot `i % S`. An entry covers consecutive indices and may wrap from slot `S-1`
//! to slot 0. Every slot outside `[head, tail)` is zero, and so is every reserved slot not
//! yet written: replay zeroes the slots it releases before it publishes the new head.
//!
//! # Entry format
//!
//! A 64-byte header, then the body, padded with zeros to whole 64-byte slots; every field
//! is fixed-width little-endian.
//!
//! ```text
//! w0  txn id
//! w1  status (bits 0..8) | cts << 16            the status word, rewritten by one WRITE
//! w2  vote word (VoteWord)                      CAS-able, phase 1 and recovery
//! w3  ring index of the entry                   tells the lap of the slot's contents
//! w4  slots u16 | epoch u32 << 16 | coordinator u16 << 48
//! w5  body length u32 | CRC-32 u32 << 32
//! w6  participants u16 | locks u24 << 16 | changes u24 << 40
//! w7  zero
//! body:
//!   participants   DcId u16 each
//!   locks          record u64, table u16, key u64, lock_bits u64, cells u64,
//!                  then one version u64 per set bit of cells (ascending)
//!   changes        record u64, table u16, key u64, cell u16, value length u32, value
//! ```
//!
//! The CRC-32 (`crc32fast`) covers w0, w3, w4, the low half of w5, w6, w7 and the body:
//! everything but the status word, the vote word and itself, which change in place. An
//! entry whose index word or checksum does not match is torn or not yet written
//! ([`Error::TornEntry`]).
//!
//! # Life of an entry
//!
//! An executor reserves slots with [`RingWriter::reserve`] (fetch-and-add on the tail, with
//! RedT's lazy head check), WRITEs the entry ([`push_write`]) with status
//! `Intent` (before it takes any lock, so every lock is traceable to its owner) or `Logged`,
//! may rewrite it in place once it knows the versions ([`push_write_body`], which
//! leaves the status and vote words alone), then sets `Committed` with the commit timestamp
//! or `Aborted` with one 8-byte WRITE ([`push_set_status`]). The node's replay
//! applies `Committed` entries, marks them `Flushed`, zeroes the released slots and moves the
//! head.
//!
//! # Writers that give up or die
//!
//! Replay can only release an entry it can read, so a reserved slot that is never written
//! stops the head for good. A [`RingWriter`] that gets [`Error::RingFull`] has nevertheless
//! consumed its reservation; it remembers it and writes a *filler* there (a header-only
//! `Aborted` entry with no participants, locks or changes that spans the reservation) as soon
//! as the space is free, on its next [`RingWriter::reserve`] or [`RingWriter::settle`]. The
//! same holds for a reservation the caller abandons ([`RingWriter::abandon`]).
//!
//! A writer *process* that dies between its fetch-and-add and its WRITE leaves a hole that
//! nobody fills: replay stops at it, the head stays there, and the ring eventually reports
//! `RingFull` to every writer. Recovery (a later issue) fills such a hole with a filler,
//! after it has fenced the dead writer (a late WRITE from a writer believed dead would
//! otherwise land in slots already reused).

use crate::error::{Error, Result};
use crate::memstore::{Layout, LINE};
use crate::verbs::{DoorbellBatch, Verbs};
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, Offset, TableId, TxnId};
use std::time::{Duration, Instant};

/// Bytes of one ring slot (and of an entry header).
pub const SLOT_BYTES: u64 = LINE;

/// The largest entry, in slots (the slot count is a u16 in the header); a ring may cap it
/// lower ([`Layout::ring_slots`]).
pub const MAX_ENTRY_SLOTS: u64 = u16::MAX as u64;

/// Byte offsets of the header words.
const W_STATUS: u64 = 8;
const W_VOTE: u64 = 16;
/// First header byte written by [`push_write_body`] after w0 (w3 onwards).
const W_INDEX: u64 = 24;

/// Encoded sizes of the fixed parts of the body items, in bytes.
const PARTICIPANT_BYTES: u64 = 2;
const LOCK_BYTES: u64 = 8 + 2 + 8 + 8 + 8;
const VERSION_BYTES: u64 = 8;
const CHANGE_BYTES: u64 = 8 + 2 + 8 + 2 + 4;

/// Largest lock and change counts the header can carry (24 bits each).
const MAX_ITEMS: u64 = (1 << 24) - 1;

/// Status of a redo entry, the low 8 bits of its status word (RedT Algorithm 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryStatus {
    /// `Inited` in the paper: a free or not yet written slot.
    Empty = 0,
    /// Locks are being taken: the entry lists what will be locked; written before any lock
    /// compare-and-swap so every held lock is traceable to its owner (DESIGN.md §2).
    Intent = 1,
    /// Pre-written in phase 1: versions and writes known, decision pending.
    Logged = 2,
    /// Decided commit; the status word carries the commit timestamp.
    Committed = 3,
    /// Decided abort (or a filler covering an abandoned reservation).
    Aborted = 4,
    /// Applied (or skipped, if aborted) by replay; released when the head passes it.
    Flushed = 5,
}

impl EntryStatus {
    /// The status with code `code`, or `None` for an unknown code.
    pub fn from_code(code: u8) -> Option<EntryStatus> {
        Some(match code {
            0 => EntryStatus::Empty,
            1 => EntryStatus::Intent,
            2 => EntryStatus::Logged,
            3 => EntryStatus::Committed,
            4 => EntryStatus::Aborted,
            5 => EntryStatus::Flushed,
            _ => return None,
        })
    }

    /// The status word (header w1) of an entry with this status and commit timestamp
    /// `cts` (truncated to 48 bits): `status | cts << 16`.
    pub fn word(self, cts: Cts) -> u64 {
        self as u64 | (cts.0 & Cts::MASK) << 16
    }

    /// Splits a status word into status and commit timestamp; `None` when the status code
    /// is unknown or the reserved bits 8..16 are set.
    pub fn from_word(word: u64) -> Option<(EntryStatus, Cts)> {
        if word & 0xff00 != 0 {
            return None;
        }
        Some((EntryStatus::from_code(word as u8)?, Cts(word >> 16)))
    }
}

/// One 2-bit field of a [`VoteWord`]: a replica's vote, or a recorded decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Verdict {
    /// Not voted / no decision recorded.
    #[default]
    None = 0,
    /// Commit.
    Commit = 1,
    /// Abort.
    Abort = 2,
}

impl Verdict {
    fn from_bits(bits: u64) -> Option<Verdict> {
        Some(match bits {
            0 => Verdict::None,
            1 => Verdict::Commit,
            2 => Verdict::Abort,
            _ => return None,
        })
    }
}

/// The unpacked fields of a [`VoteWord`] (DESIGN.md §2, recovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VoteState {
    /// The replica's phase-1 vote; set once by compare-and-swap from `None`.
    pub vote: Verdict,
    /// The decision recorded at this replica (`None` until a RECORD).
    pub decision: Verdict,
    /// Highest ballot promised to a recoverer (30 bits).
    pub promised: Ballot,
    /// Ballot of the recorded decision (30 bits).
    pub recorded: Ballot,
}

impl Default for VoteState {
    fn default() -> Self {
        VoteState { vote: Verdict::None, decision: Verdict::None, promised: Ballot(0), recorded: Ballot(0) }
    }
}

/// The 8-byte vote word of a redo entry (header w2): vote (bits 0..2), recorded decision
/// (bits 2..4), promised ballot (bits 4..34) and recorded ballot (bits 34..64). It is the
/// per-replica acceptor state of the per-transaction Paxos of DESIGN.md §2; phase 1 and
/// recoverers change it only by compare-and-swap at [`vote_offset`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VoteWord(pub u64);

impl VoteWord {
    /// No vote, no decision, ballots 0.
    pub const NONE: VoteWord = VoteWord(0);
    /// Bits of each ballot field.
    pub const BALLOT_BITS: u32 = 30;
    /// The largest ballot a vote word can hold.
    pub const MAX_BALLOT: Ballot = Ballot((1 << Self::BALLOT_BITS) - 1);

    /// Packs `state`; `None` when a ballot exceeds [`VoteWord::MAX_BALLOT`].
    pub fn pack(state: VoteState) -> Option<VoteWord> {
        if state.promised > Self::MAX_BALLOT || state.recorded > Self::MAX_BALLOT {
            return None;
        }
        Some(VoteWord(
            state.vote as u64
                | (state.decision as u64) << 2
                | (state.promised.0 as u64) << 4
                | (state.recorded.0 as u64) << (4 + Self::BALLOT_BITS),
        ))
    }

    /// Unpacks the word; `None` when a 2-bit field holds the unused code 3.
    pub fn unpack(self) -> Option<VoteState> {
        let mask = (1u64 << Self::BALLOT_BITS) - 1;
        Some(VoteState {
            vote: Verdict::from_bits(self.0 & 3)?,
            decision: Verdict::from_bits(self.0 >> 2 & 3)?,
            promised: Ballot((self.0 >> 4 & mask) as u32),
            recorded: Ballot((self.0 >> (4 + Self::BALLOT_BITS) & mask) as u32),
        })
    }

    /// This word with its vote field set to `vote` (the other fields kept): phase 1's
    /// compare-and-swap is `NONE` → `NONE.with_vote(Verdict::Commit)`.
    pub fn with_vote(self, vote: Verdict) -> VoteWord {
        VoteWord(self.0 & !3 | vote as u64)
    }
}

/// A lock an entry's transaction takes (or will take) on one record of this node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockIntent {
    /// Offset of the record in the node's MemStore.
    pub record: Offset,
    /// Table of the record.
    pub table: TableId,
    /// Key of the record.
    pub key: u64,
    /// The exact bits added to the record's lock word (so a cleaner can subtract them).
    pub lock_bits: u64,
    /// Mask of the cells touched (bit `c` = cell `c`).
    pub cells: u64,
    /// One version per set bit of `cells`, ascending cell order; zero until known.
    pub versions: Vec<u64>,
}

impl LockIntent {
    /// The version recorded for cell `cell` (the one its writer saw), or `None` if the
    /// cell is not in `cells` or its version is still zero.
    pub fn seen_version(&self, cell: u16) -> Option<u64> {
        let below = self.cells & ((1u64 << (cell % 64)) - 1);
        let held = cell < 64 && self.cells >> cell & 1 == 1;
        held.then(|| self.versions.get(below.count_ones() as usize).copied()).flatten().filter(|&v| v != 0)
    }
}

/// A new cell value to apply (Thomas write rule) when the entry commits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Change {
    /// Offset of the record in the node's MemStore.
    pub record: Offset,
    /// Table of the record.
    pub table: TableId,
    /// Key of the record.
    pub key: u64,
    /// Cell index in the record.
    pub cell: u16,
    /// The new value (the cell's full width, as the schema gives it).
    pub value: Vec<u8>,
}

/// A redo entry of a node's ring (RedT Algorithm 2 `ConstructEntry`, extended with the lock
/// intents, vote word and participants that recovery needs; DESIGN.md §2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RedoEntry {
    /// The transaction.
    pub txn: TxnId,
    /// Where the entry is in its life.
    pub status: EntryStatus,
    /// Commit timestamp (48 bits); meaningful once `Committed`.
    pub cts: Cts,
    /// This replica's vote word.
    pub vote: VoteWord,
    /// Topology epoch the entry was written in.
    pub epoch: Epoch,
    /// The transaction's coordinator node.
    pub coordinator: NodeId,
    /// Every DC the transaction involves.
    pub participants: Vec<DcId>,
    /// Locks on records of this node.
    pub locks: Vec<LockIntent>,
    /// Cell writes on records of this node.
    pub changes: Vec<Change>,
}

/// The counts an encoded entry's size depends on, known to an executor before it knows the
/// values (value widths come from the schema), so it can reserve slots first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EntryShape {
    /// Number of participant DCs.
    pub participants: u64,
    /// Number of lock intents.
    pub locks: u64,
    /// Total versions over all lock intents (the sum of `cells.count_ones()`).
    pub versions: u64,
    /// Number of changes.
    pub changes: u64,
    /// Total value bytes over all changes.
    pub value_bytes: u64,
}

impl EntryShape {
    /// Encoded body size in bytes (saturating).
    pub fn body_bytes(&self) -> u64 {
        [
            self.participants.saturating_mul(PARTICIPANT_BYTES),
            self.locks.saturating_mul(LOCK_BYTES),
            self.versions.saturating_mul(VERSION_BYTES),
            self.changes.saturating_mul(CHANGE_BYTES),
            self.value_bytes,
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add)
    }

    /// Encoded size of header and body, in bytes, before padding.
    pub fn bytes(&self) -> u64 {
        self.body_bytes().saturating_add(SLOT_BYTES)
    }

    /// Slots the entry occupies (at least 1).
    pub fn slots(&self) -> u64 {
        self.bytes().div_ceil(SLOT_BYTES)
    }
}

impl RedoEntry {
    /// A filler: an `Aborted` entry of transaction 0 with no participants, locks or changes,
    /// written over a reservation nobody will use so replay can pass it.
    pub fn filler() -> RedoEntry {
        RedoEntry {
            txn: TxnId(0),
            status: EntryStatus::Aborted,
            cts: Cts(0),
            vote: VoteWord::NONE,
            epoch: Epoch(0),
            coordinator: NodeId(0),
            participants: Vec::new(),
            locks: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// Whether this is a filler (see [`RedoEntry::filler`]): `Aborted` or `Flushed`, with no
    /// participants, locks or changes.
    pub fn is_filler(&self) -> bool {
        matches!(self.status, EntryStatus::Aborted | EntryStatus::Flushed)
            && self.participants.is_empty()
            && self.locks.is_empty()
            && self.changes.is_empty()
    }

    /// The counts that size this entry.
    pub fn shape(&self) -> EntryShape {
        EntryShape {
            participants: self.participants.len() as u64,
            locks: self.locks.len() as u64,
            versions: self.locks.iter().map(|l| l.cells.count_ones() as u64).sum(),
            changes: self.changes.len() as u64,
            value_bytes: self.changes.iter().map(|c| c.value.len() as u64).sum(),
        }
    }
}

/// Slots `entry` occupies when encoded: `entry.shape().slots()`.
pub fn encoded_slots(entry: &RedoEntry) -> u64 {
    entry.shape().slots()
}

/// Encodes `entry` for ring index `index`: `encoded_slots(entry) * 64` bytes, the header,
/// the body and zero padding (see the module docs for the format).
///
/// # Panics
/// If the entry exceeds [`MAX_ENTRY_SLOTS`] slots or 65 535 participants, or a lock's
/// `versions` does not hold one version per set bit of its `cells`: a caller sizes and
/// reserves with [`RingWriter::reserve`] first, which refuses oversized entries.
pub fn encode(entry: &RedoEntry, index: u64) -> Vec<u8> {
    encode_padded(entry, index, encoded_slots(entry))
}

/// Encodes `entry` for ring index `index` into a reservation of `slots` slots: like
/// [`encode`], but the slot count in the header (and the zero padding) covers
/// `max(slots, encoded_slots(entry))` slots. Used when the reservation was sized from an
/// upper bound (every declared cell at full width) and the final entry is smaller: the
/// rewrite keeps the reservation's slot count, so replay still steps over all of it.
///
/// # Panics
/// As [`encode`].
pub fn encode_padded(entry: &RedoEntry, index: u64, slots: u64) -> Vec<u8> {
    encode_framed(entry, index, slots)
}

/// Encodes a filler header for a reservation of `slots` slots at `index`: 64 bytes, to be
/// written at the reservation's first slot (the other slots of a reservation are zero).
///
/// # Panics
/// If `slots` is 0 or above [`MAX_ENTRY_SLOTS`].
pub fn encode_filler(index: u64, slots: u64) -> Vec<u8> {
    assert!(slots >= 1, "a filler covers at least one slot");
    let mut bytes = encode_framed(&RedoEntry::filler(), index, slots);
    bytes.truncate(SLOT_BYTES as usize);
    bytes
}

/// Decodes the entry at ring index `index` of `node`'s ring from `bytes` (the header and at
/// least the body; trailing padding is ignored). Never panics, whatever the bytes.
///
/// # Errors
/// [`Error::TornEntry`] when the bytes are short, the index word differs (a slot not yet
/// written, or from another lap), the lengths, counts or reserved bits are impossible, the
/// checksum fails, or the status or vote word holds an unknown code.
pub fn decode(node: NodeId, index: u64, bytes: &[u8]) -> Result<RedoEntry> {
    decode_framed(node, index, bytes).map(|(e, _)| e)
}

fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8-byte slice"))
}

fn checksum(header: &[u8], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[0..8]);
    h.update(&header[24..44]);
    h.update(&header[48..64]);
    h.update(body);
    h.finalize()
}

/// Encodes `e` for `index` into `slots` slots (at least the entry's own need).
fn encode_framed(e: &RedoEntry, index: u64, slots: u64) -> Vec<u8> {
    let shape = e.shape();
    let slots = slots.max(shape.slots());
    assert!(slots <= MAX_ENTRY_SLOTS, "redo entry of {slots} slots: callers reserve (and size-check) first");
    assert!(shape.participants <= u16::MAX as u64, "at most 65535 participant DCs");
    assert!(shape.locks <= MAX_ITEMS && shape.changes <= MAX_ITEMS, "implied by the slot limit");
    let mut body = Vec::with_capacity(shape.body_bytes() as usize);
    for p in &e.participants {
        body.extend_from_slice(&p.0.to_le_bytes());
    }
    for l in &e.locks {
        assert_eq!(
            l.versions.len(),
            l.cells.count_ones() as usize,
            "a lock intent carries one version per touched cell"
        );
        body.extend_from_slice(&l.record.0.to_le_bytes());
        body.extend_from_slice(&l.table.0.to_le_bytes());
        body.extend_from_slice(&l.key.to_le_bytes());
        body.extend_from_slice(&l.lock_bits.to_le_bytes());
        body.extend_from_slice(&l.cells.to_le_bytes());
        for v in &l.versions {
            body.extend_from_slice(&v.to_le_bytes());
        }
    }
    for c in &e.changes {
        body.extend_from_slice(&c.record.0.to_le_bytes());
        body.extend_from_slice(&c.table.0.to_le_bytes());
        body.extend_from_slice(&c.key.to_le_bytes());
        body.extend_from_slice(&c.cell.to_le_bytes());
        body.extend_from_slice(&(c.value.len() as u32).to_le_bytes());
        body.extend_from_slice(&c.value);
    }
    debug_assert_eq!(body.len() as u64, shape.body_bytes());
    let words = [
        e.txn.0,
        e.status.word(e.cts),
        e.vote.0,
        index,
        slots | (e.epoch.0 as u64) << 16 | (e.coordinator.0 as u64) << 48,
        body.len() as u64,
        shape.participants | shape.locks << 16 | shape.changes << 40,
        0,
    ];
    let total = slots * SLOT_BYTES;
    let mut out = Vec::with_capacity(total as usize);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let crc = checksum(&out, &body);
    out[44..48].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&body);
    out.resize(total as usize, 0);
    out
}

/// A bounds-checked little-endian reader over an untrusted body.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// What the header alone says about an entry: its slot count and body length.
pub(crate) struct Frame {
    pub(crate) slots: u64,
    pub(crate) body_len: u64,
}

/// Checks the framing words of a 64-byte header read at `index`.
pub(crate) fn check_frame(node: NodeId, index: u64, header: &[u8]) -> Result<Frame> {
    let torn = |why| Error::TornEntry { node, index, why };
    if header.len() < SLOT_BYTES as usize {
        return Err(torn("shorter than a header"));
    }
    if word(header, 3) != index {
        return Err(torn("index word differs: not yet written, or another lap"));
    }
    let slots = word(header, 4) & 0xffff;
    if slots == 0 {
        return Err(torn("zero slot count"));
    }
    let body_len = word(header, 5) & 0xffff_ffff;
    if body_len > (slots - 1) * SLOT_BYTES {
        return Err(torn("body longer than its slots"));
    }
    Ok(Frame { slots, body_len })
}

/// Decodes an entry and returns it with its slot count (which may exceed the entry's own
/// need, for a filler).
pub(crate) fn decode_framed(node: NodeId, index: u64, bytes: &[u8]) -> Result<(RedoEntry, u64)> {
    let torn = |why| Error::TornEntry { node, index, why };
    let Frame { slots, body_len } = check_frame(node, index, bytes)?;
    let header = &bytes[..SLOT_BYTES as usize];
    let body = bytes
        .get(SLOT_BYTES as usize..(SLOT_BYTES + body_len) as usize)
        .ok_or_else(|| torn("bytes end before the body does"))?;
    if (word(header, 5) >> 32) as u32 != checksum(header, body) {
        return Err(torn("checksum mismatch"));
    }
    if word(header, 7) != 0 {
        return Err(torn("reserved header word is not zero"));
    }
    let (status, cts) = EntryStatus::from_word(word(header, 1)).ok_or_else(|| torn("unknown status"))?;
    let vote = VoteWord(word(header, 2));
    vote.unpack().ok_or_else(|| torn("bad vote word"))?;
    let w4 = word(header, 4);
    let counts = word(header, 6);
    let (n_participants, n_locks, n_changes) = (counts & 0xffff, counts >> 16 & MAX_ITEMS, counts >> 40 & MAX_ITEMS);
    let short = || torn("body shorter than its counts");
    let mut cur = Cursor { bytes: body, pos: 0 };
    // Capacities are bounded by what the body can hold, never by the untrusted counts.
    let cap = |n: u64, min: u64| n.min(body_len / min) as usize;
    let mut participants = Vec::with_capacity(cap(n_participants, PARTICIPANT_BYTES));
    for _ in 0..n_participants {
        participants.push(DcId(cur.u16().ok_or_else(short)?));
    }
    let mut locks = Vec::with_capacity(cap(n_locks, LOCK_BYTES));
    for _ in 0..n_locks {
        let record = Offset(cur.u64().ok_or_else(short)?);
        let table = TableId(cur.u16().ok_or_else(short)?);
        let key = cur.u64().ok_or_else(short)?;
        let lock_bits = cur.u64().ok_or_else(short)?;
        let cells = cur.u64().ok_or_else(short)?;
        let mut versions = Vec::with_capacity(cells.count_ones() as usize);
        for _ in 0..cells.count_ones() {
            versions.push(cur.u64().ok_or_else(short)?);
        }
        locks.push(LockIntent { record, table, key, lock_bits, cells, versions });
    }
    let mut changes = Vec::with_capacity(cap(n_changes, CHANGE_BYTES));
    for _ in 0..n_changes {
        let record = Offset(cur.u64().ok_or_else(short)?);
        let table = TableId(cur.u16().ok_or_else(short)?);
        let key = cur.u64().ok_or_else(short)?;
        let cell = cur.u16().ok_or_else(short)?;
        let len = cur.u32().ok_or_else(short)?;
        let value = cur.take(len as usize).ok_or_else(short)?.to_vec();
        changes.push(Change { record, table, key, cell, value });
    }
    if cur.pos as u64 != body_len {
        return Err(torn("body longer than its counts"));
    }
    let entry = RedoEntry {
        txn: TxnId(word(header, 0)),
        status,
        cts,
        vote,
        epoch: Epoch((w4 >> 16) as u32),
        coordinator: NodeId((w4 >> 48) as u16),
        participants,
        locks,
        changes,
    };
    Ok((entry, slots))
}

/// Offset of the ring's head word.
pub(crate) fn head_offset(layout: &Layout) -> u64 {
    layout.ring_off
}

/// Offset of the ring's tail word.
pub(crate) fn tail_offset(layout: &Layout) -> u64 {
    layout.ring_off + 8
}

/// Number of ring slots.
///
/// # Panics
/// If the layout has no ring slot (configuration validation guarantees at least one).
pub(crate) fn ring_slots(layout: &Layout) -> u64 {
    let s = layout.ring_slots();
    assert!(s >= 1, "a validated layout has at least one ring slot");
    s
}

/// Offset of the slot holding ring index `index`.
pub(crate) fn slot_offset(layout: &Layout, index: u64) -> u64 {
    layout.ring_off + SLOT_BYTES + (index % ring_slots(layout)) * SLOT_BYTES
}

/// The physically contiguous pieces of entry bytes `[start, start + len)` of the entry at
/// `index`, as `(region offset, entry byte, length)`; the second piece has length 0 unless
/// the range wraps past the last slot. `start + len` must not exceed the ring.
pub(crate) fn pieces(layout: &Layout, index: u64, start: u64, len: u64) -> [(u64, u64, u64); 2] {
    let slots = ring_slots(layout);
    let base = layout.ring_off + SLOT_BYTES;
    let room = (slots - index % slots) * SLOT_BYTES;
    if start >= room {
        return [(base + (start - room), start, len), (base, start + len, 0)];
    }
    let first = len.min(room - start);
    [(slot_offset(layout, index) + start, start, first), (base, start + first, len - first)]
}

/// Reads the entry at `index` through `read(offset, buf)`: the header, then the body.
pub(crate) fn read_framed(
    layout: &Layout,
    node: NodeId,
    index: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<(RedoEntry, u64)> {
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
    decode_framed(node, index, &buf)
}

/// The entries of `node`'s ring between its head and its tail that are not finished (status
/// `Intent` or `Logged`: their transaction is undecided here, and the locks they list may be
/// held), as `(ring index, entry)` in ring order. A slot that does not decode (a reservation
/// not yet written, a torn entry) is skipped one slot at a time. Read-only: the recovery
/// scan's and the simulator's view of what a crash left behind (DESIGN.md §2).
///
/// # Errors
/// Verbs failures.
pub fn unfinished_entries(verbs: &dyn Verbs, node: NodeId, layout: &Layout) -> Result<Vec<(u64, RedoEntry)>> {
    let mut word = [0u8; 8];
    verbs.read(node, Offset(head_offset(layout)), &mut word)?;
    let head = u64::from_le_bytes(word);
    verbs.read(node, Offset(tail_offset(layout)), &mut word)?;
    let tail = u64::from_le_bytes(word);
    let end = tail.min(head.saturating_add(ring_slots(layout)));
    let mut out = Vec::new();
    let mut index = head;
    let mut read = |off: u64, buf: &mut [u8]| verbs.read(node, Offset(off), buf);
    while index < end {
        match read_framed(layout, node, index, &mut read) {
            Ok((entry, slots)) => {
                if matches!(entry.status, EntryStatus::Intent | EntryStatus::Logged) {
                    out.push((index, entry));
                }
                index += slots.max(1);
            }
            Err(e @ (Error::Backend(_) | Error::OutOfBounds { .. } | Error::UnknownNode(_))) => return Err(e),
            Err(_) => index += 1,
        }
    }
    Ok(out)
}

/// The executor side of one node's redo ring: one per (executor, target node), holding the
/// cached head of RedT's lazy head check (§4.2, Algorithm 2 lines 15–18) and the
/// reservations it still owes a filler. The stateless verb builders of `WriteLog` and
/// `CommitLog` are the free functions of this module ([`push_write`], [`push_set_status`],
/// …), usable by anyone (recovery too).
#[derive(Debug)]
pub struct RingWriter {
    layout: Layout,
    node: NodeId,
    cached_head: u64,
    owed: Vec<(u64, u64)>,
}

impl RingWriter {
    /// A writer to `node`'s ring laid out by `layout`; the cached head starts at 0 (a stale
    /// head is safe: it only makes the writer READ the head sooner).
    ///
    /// # Panics
    /// If `layout` has no ring slot.
    pub fn new(layout: Layout, node: NodeId) -> RingWriter {
        ring_slots(&layout);
        RingWriter { layout, node, cached_head: 0, owed: Vec::new() }
    }

    /// The target node.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The head this writer last READ (a lower bound of the real head).
    pub fn cached_head(&self) -> u64 {
        self.cached_head
    }

    /// Reservations `(index, slots)` this writer gave up and still has to cover with a
    /// filler (written by the next [`RingWriter::reserve`] or [`RingWriter::settle`]).
    pub fn owed_fillers(&self) -> &[(u64, u64)] {
        &self.owed
    }

    /// Reserves `slots` consecutive slots and returns the ring index of the first (Algorithm
    /// 2 lines 15–18): pays owed fillers first, then fetch-and-adds the tail by `slots`; if
    /// the reservation may overrun the head by a lap (`index + slots > cached head + S`), it
    /// re-READs the head, yielding the thread between READs, until the reservation fits.
    ///
    /// `patience` bounds each wait (for the new reservation, and for each owed filler); at
    /// least one head READ is made whatever its value. A reservation that runs out of
    /// patience stays consumed: this writer remembers it and covers it with a filler later
    /// (see the module docs).
    ///
    /// # Errors
    /// [`Error::EntryTooLarge`] (nothing reserved) when `slots` exceeds the ring or
    /// [`MAX_ENTRY_SLOTS`]; [`Error::RingFull`] when an owed filler (nothing new reserved) or
    /// the new reservation (consumed, filler owed) still does not fit after `patience`;
    /// verbs errors (a reservation already made is then owed a filler too).
    ///
    /// # Panics
    /// If `slots` is 0.
    pub fn reserve(&mut self, verbs: &dyn Verbs, slots: u64, patience: Duration) -> Result<u64> {
        assert!(slots >= 1, "an entry occupies at least one slot");
        let ring = ring_slots(&self.layout);
        if slots > ring.min(MAX_ENTRY_SLOTS) {
            return Err(Error::EntryTooLarge { bytes: slots * SLOT_BYTES, ring_bytes: ring * SLOT_BYTES });
        }
        self.settle(verbs, patience)?;
        let index = verbs.fetch_and_add(self.node, Offset(tail_offset(&self.layout)), slots)?;
        match self.wait_for_space(verbs, index, slots, patience) {
            Ok(true) => Ok(index),
            Ok(false) => {
                self.owed.push((index, slots));
                Err(Error::RingFull { node: self.node, head: self.cached_head, index })
            }
            Err(e) => {
                self.owed.push((index, slots));
                Err(e)
            }
        }
    }

    /// Writes a filler over every owed reservation, in index order, waiting up to
    /// `patience` for each to be free as [`RingWriter::reserve`] does. A driver calls it
    /// when idle, so replay is not held up by a writer that stopped writing.
    ///
    /// # Errors
    /// [`Error::RingFull`] naming the first owed reservation still not free after
    /// `patience`; verbs errors. Unpaid fillers stay owed.
    pub fn settle(&mut self, verbs: &dyn Verbs, patience: Duration) -> Result<()> {
        while let Some(&(index, slots)) = self.owed.first() {
            if !self.wait_for_space(verbs, index, slots, patience)? {
                return Err(Error::RingFull { node: self.node, head: self.cached_head, index });
            }
            let at = Offset(slot_offset(&self.layout, index));
            verbs.write(self.node, at, &encode_filler(index, slots))?;
            self.owed.remove(0);
        }
        Ok(())
    }

    /// Gives up a reservation `(index, slots)` returned by [`RingWriter::reserve`] that will
    /// not be written: WRITEs a filler over it at once (its slots are free).
    ///
    /// # Errors
    /// Verbs errors; the filler then stays owed.
    ///
    /// # Panics
    /// If `slots` is 0 or above [`MAX_ENTRY_SLOTS`].
    pub fn abandon(&mut self, verbs: &dyn Verbs, index: u64, slots: u64) -> Result<()> {
        let at = Offset(slot_offset(&self.layout, index));
        let r = verbs.write(self.node, at, &encode_filler(index, slots));
        if r.is_err() {
            let pos = self.owed.partition_point(|&(i, _)| i < index);
            self.owed.insert(pos, (index, slots));
        }
        r
    }

    /// Whether `[index, index + slots)` lies within one lap of the head, READing the head
    /// (at least once, then until `patience` has passed) when the cached head says no.
    /// The only clock read of the ring code, and only on this slow path.
    fn wait_for_space(&mut self, verbs: &dyn Verbs, index: u64, slots: u64, patience: Duration) -> Result<bool> {
        let ring = ring_slots(&self.layout);
        let end = index.saturating_add(slots);
        let fits = |head: u64| end <= head.saturating_add(ring);
        if fits(self.cached_head) {
            return Ok(true);
        }
        let start = Instant::now();
        let mut buf = [0u8; 8];
        loop {
            verbs.read(self.node, Offset(head_offset(&self.layout)), &mut buf)?;
            self.cached_head = self.cached_head.max(u64::from_le_bytes(buf));
            if fits(self.cached_head) {
                return Ok(true);
            }
            if start.elapsed() >= patience {
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }
}

/// Appends to `batch` the WRITE(s) of `bytes`, an encoded entry (or filler header) for ring
/// index `index` of the ring laid out by `layout`: one WRITE, or two where the entry wraps
/// past the last slot (Algorithm 2 line 20).
///
/// # Panics
/// If `bytes` is longer than the ring, or `layout` has no ring slot.
pub fn push_write(batch: &mut DoorbellBatch, layout: &Layout, index: u64, bytes: &[u8]) {
    push_range(batch, layout, index, bytes, 0);
}

/// Appends the WRITEs of `bytes`, an encoded entry, *except* its status word and vote word:
/// header w0, then w3 to the end (two or three WRITEs). For rewriting an entry in place
/// (same index and slot count, e.g. the `Intent` entry once the versions and writes are
/// known: see [`encode_padded`]) without undoing a concurrent compare-and-swap on the vote
/// word; set the status with [`push_set_status`]. A reader in between sees a checksum
/// mismatch, never a mix of the two versions.
///
/// # Panics
/// If `bytes` is shorter than a header or longer than the ring.
pub fn push_write_body(batch: &mut DoorbellBatch, layout: &Layout, index: u64, bytes: &[u8]) {
    assert!(bytes.len() >= SLOT_BYTES as usize, "an encoded entry starts with a 64-byte header");
    batch.write(Offset(slot_offset(layout, index)), bytes[..W_STATUS as usize].to_vec());
    push_range(batch, layout, index, bytes, W_INDEX);
}

/// Offset of the status word (header w1) of the entry at ring index `index`.
pub fn status_offset(layout: &Layout, index: u64) -> Offset {
    Offset(slot_offset(layout, index) + W_STATUS)
}

/// Offset of the vote word (header w2) of the entry at ring index `index`, for
/// compare-and-swap.
pub fn vote_offset(layout: &Layout, index: u64) -> Offset {
    Offset(slot_offset(layout, index) + W_VOTE)
}

/// Appends the one 8-byte WRITE that sets the entry at `index` to `status` with commit
/// timestamp `cts` (Algorithm 2 `CommitLog`, lines 23–25): `Committed` and its `cts` land
/// together, atomically.
pub fn push_set_status(batch: &mut DoorbellBatch, layout: &Layout, index: u64, status: EntryStatus, cts: Cts) {
    batch.write(status_offset(layout, index), status.word(cts).to_le_bytes().to_vec());
}

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
    Ok(EntryHeader { txn: TxnId(word(&buf, 0)), status, cts, vote: VoteWord(word(&buf, 2)) })
}

/// READs and decodes the entry at ring index `index` of `node`'s ring: one READ of the
/// header, then one or two READs of the body.
///
/// # Errors
/// [`Error::TornEntry`] when the entry is not (yet, or completely) written, belongs to
/// another lap, or changed between the READs (retry); verbs errors.
pub fn read_entry(verbs: &dyn Verbs, node: NodeId, layout: &Layout, index: u64) -> Result<RedoEntry> {
    let mut read = |off: u64, buf: &mut [u8]| verbs.read(node, Offset(off), buf);
    read_framed(layout, node, index, &mut read).map(|(e, _)| e)
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

/// Appends the WRITEs of `bytes[from..]` at entry byte `from` of the entry at `index`.
fn push_range(batch: &mut DoorbellBatch, layout: &Layout, index: u64, bytes: &[u8], from: u64) {
    let len = bytes.len() as u64;
    assert!(len <= ring_slots(layout) * SLOT_BYTES, "an entry never exceeds the ring");
    if len <= from {
        return;
    }
    for (off, at, n) in pieces(layout, index, from, len - from) {
        if n > 0 {
            batch.write(Offset(off), bytes[at as usize..(at + n) as usize].to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `seen_version` finds the version of a cell by its rank among the set bits of
    /// `cells`, and treats zero (not yet known) and cells outside the mask as unknown.
    #[test]
    fn seen_version_by_cell() {
        let l = LockIntent {
            record: Offset(0),
            table: TableId(1),
            key: 7,
            lock_bits: 0,
            cells: 0b1010_0100,
            versions: vec![11, 0, 13],
        };
        assert_eq!(l.seen_version(2), Some(11));
        assert_eq!(l.seen_version(5), None, "recorded as zero");
        assert_eq!(l.seen_version(7), Some(13));
        assert_eq!(l.seen_version(3), None, "not a touched cell");
        assert_eq!(l.seen_version(64), None);
        assert_eq!(l.seen_version(u16::MAX), None);
    }
    use proptest::prelude::*;

    fn verdict() -> impl Strategy<Value = Verdict> {
        prop_oneof![Just(Verdict::None), Just(Verdict::Commit), Just(Verdict::Abort)]
    }

    fn status() -> impl Strategy<Value = EntryStatus> {
        (0u8..6).prop_map(|c| EntryStatus::from_code(c).expect("codes 0..6 exist"))
    }

    fn lock() -> impl Strategy<Value = LockIntent> {
        (any::<u64>(), any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(record, table, key, lock_bits, cells, seed)| {
                // Keep entries small: at most 8 touched cells.
                let cells = cells & 0x0101_0101_0101_0101;
                let versions = (0..cells.count_ones() as u64).map(|i| seed.wrapping_mul(i + 1)).collect();
                LockIntent { record: Offset(record), table: TableId(table), key, lock_bits, cells, versions }
            },
        )
    }

    fn change() -> impl Strategy<Value = Change> {
        (any::<u64>(), any::<u16>(), any::<u64>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..100))
            .prop_map(|(record, table, key, cell, value)| Change {
                record: Offset(record),
                table: TableId(table),
                key,
                cell,
                value,
            })
    }

    prop_compose! {
        fn entry()(
            txn: u64, status in status(), cts in 0..=Cts::MASK,
            vote in (verdict(), verdict(), 0u32..1 << 30, 0u32..1 << 30),
            epoch: u32, coordinator: u16,
            participants in proptest::collection::vec(any::<u16>(), 0..6),
            locks in proptest::collection::vec(lock(), 0..4),
            changes in proptest::collection::vec(change(), 0..4),
        ) -> RedoEntry {
            let vote = VoteWord::pack(VoteState {
                vote: vote.0, decision: vote.1, promised: Ballot(vote.2), recorded: Ballot(vote.3),
            }).expect("30-bit ballots fit");
            RedoEntry {
                txn: TxnId(txn), status, cts: Cts(cts), vote, epoch: Epoch(epoch),
                coordinator: NodeId(coordinator),
                participants: participants.into_iter().map(DcId).collect(), locks, changes,
            }
        }
    }

    proptest! {
        #[test]
        fn encode_decode_round_trips(e in entry(), index: u64) {
            let bytes = encode(&e, index);
            prop_assert_eq!(bytes.len() as u64, encoded_slots(&e) * SLOT_BYTES);
            prop_assert_eq!(e.shape().bytes(), SLOT_BYTES + e.shape().body_bytes());
            let (back, slots) = decode_framed(NodeId(1), index, &bytes).unwrap();
            prop_assert_eq!(&back, &e);
            prop_assert_eq!(slots, encoded_slots(&e));
            // Wrong lap.
            let wrong = decode(NodeId(1), index.wrapping_add(16), &bytes);
            prop_assert!(matches!(wrong, Err(Error::TornEntry { .. })), "{:?}", wrong);
        }

        #[test]
        fn any_flipped_checksummed_byte_is_detected(e in entry(), index: u64, at: usize, bit in 0u8..8) {
            let mut bytes = encode(&e, index);
            let body_end = (SLOT_BYTES + e.shape().body_bytes()) as usize;
            // Every byte but the status word (w1) and vote word (w2) is covered, up to the
            // end of the body (the padding is not).
            let covered: Vec<usize> = (0..body_end).filter(|i| !(8..24).contains(i)).collect();
            let at = covered[at % covered.len()];
            bytes[at] ^= 1 << bit;
            let r = decode(NodeId(1), index, &bytes);
            prop_assert!(matches!(r, Err(Error::TornEntry { .. })), "byte {} bit {}: {:?}", at, bit, r);
        }

        #[test]
        fn decode_never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..600), index: u64) {
            let _ = decode(NodeId(0), index, &bytes);
        }

        #[test]
        fn decode_never_panics_on_framed_garbage(
            body in proptest::collection::vec(any::<u8>(), 0..400), w: [u64; 8], index in 0u64..4,
        ) {
            // A header whose index and checksum are right but whose counts, lengths and
            // status are arbitrary: exercises the body parser.
            let mut header = Vec::new();
            let body_len = body.len() as u64;
            let words = [w[0], w[1], w[2], index, (w[4] & !0xffff) | (body_len / 64 + 2), body_len, w[6], 0];
            for x in words {
                header.extend_from_slice(&x.to_le_bytes());
            }
            let crc = checksum(&header, &body);
            header[44..48].copy_from_slice(&crc.to_le_bytes());
            header.extend_from_slice(&body);
            let _ = decode(NodeId(0), index, &header);
        }

        #[test]
        fn vote_word_round_trips(v in verdict(), d in verdict(), p in 0u32..1 << 30, r in 0u32..1 << 30) {
            let s = VoteState { vote: v, decision: d, promised: Ballot(p), recorded: Ballot(r) };
            let w = VoteWord::pack(s).unwrap();
            prop_assert_eq!(w.unpack(), Some(s));
        }

        #[test]
        fn status_word_round_trips(s in status(), cts in 0..=Cts::MASK) {
            prop_assert_eq!(EntryStatus::from_word(s.word(Cts(cts))), Some((s, Cts(cts))));
        }
    }

    #[test]
    fn vote_word_rejects_big_ballots_and_code_three() {
        let s = VoteState { promised: Ballot(1 << 30), ..VoteState::default() };
        assert_eq!(VoteWord::pack(s), None);
        assert_eq!(VoteWord(3).unpack(), None);
        assert_eq!(VoteWord(3 << 2).unpack(), None);
        assert_eq!(VoteWord::NONE.unpack(), Some(VoteState::default()));
        assert_eq!(VoteWord::NONE.with_vote(Verdict::Commit).unpack().unwrap().vote, Verdict::Commit);
        let max = VoteState {
            vote: Verdict::Abort,
            decision: Verdict::Commit,
            promised: VoteWord::MAX_BALLOT,
            recorded: VoteWord::MAX_BALLOT,
        };
        assert_eq!(VoteWord::pack(max).unwrap().unpack(), Some(max));
        assert_eq!(EntryStatus::from_word(0x100), None);
        assert_eq!(EntryStatus::from_word(6), None);
    }

    #[test]
    fn filler_is_one_header_covering_its_slots() {
        let bytes = encode_filler(40, 3);
        assert_eq!(bytes.len(), 64);
        let (e, slots) = decode_framed(NodeId(0), 40, &bytes).unwrap();
        assert!(e.is_filler());
        assert_eq!(e.status, EntryStatus::Aborted);
        assert_eq!(slots, 3);
    }

    #[test]
    fn pieces_split_at_the_ring_end() {
        let layout =
            Layout { size: 4096, index_off: 64, index_bytes: 64, ring_off: 128, ring_bytes: 5 * 64, heap_off: 448 };
        assert_eq!(layout.ring_slots(), 4);
        let base = 128 + 64;
        // Index 6 is slot 2: two slots fit before the end.
        assert_eq!(pieces(&layout, 6, 0, 100), [(base + 128, 0, 100), (base, 100, 0)]);
        assert_eq!(pieces(&layout, 6, 0, 192), [(base + 128, 0, 128), (base, 128, 64)]);
        assert_eq!(pieces(&layout, 6, 64, 128), [(base + 192, 64, 64), (base, 128, 64)]);
        assert_eq!(pieces(&layout, 7, 64, 64), [(base, 64, 64), (base, 128, 0)]);
    }
}

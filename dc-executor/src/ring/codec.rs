//! Encoding and decoding of redo entries in the entry format of the `ring` module docs: a
//! 64-byte header of little-endian words, the body, zero padding to whole slots, and a CRC-32
//! over everything but the words that change in place.

use super::entry::{Change, LockIntent, RedoEntry};
use super::status::EntryStatus;
use super::vote::VoteWord;
use super::{MAX_ENTRY_SLOTS, SLOT_BYTES};
use crate::error::{Error, Result};
use redt_proto::{Cts, DcId, Epoch, NodeId, Offset, PartitionId, TableId, TxnId};

/// Encoded sizes of the fixed parts of the body items, in bytes.
const PARTICIPANT_BYTES: u64 = 2;
const PARTITION_BYTES: u64 = 4;
const LOCK_BYTES: u64 = 8 + 2 + 8 + 8 + 8;
const VERSION_BYTES: u64 = 8;
const CHANGE_BYTES: u64 = 8 + 2 + 8 + 2 + 4;

/// Largest lock and change counts the header can carry (24 bits each).
const MAX_ITEMS: u64 = (1 << 24) - 1;

/// The counts an encoded entry's size depends on, known to an executor before it knows the
/// values (value widths come from the schema), so it can reserve slots first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EntryShape {
    /// Number of participant DCs.
    pub participants: u64,
    /// Number of partitions the whole transaction touches.
    pub partitions: u64,
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
            self.partitions.saturating_mul(PARTITION_BYTES),
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
    /// The counts that size this entry.
    pub fn shape(&self) -> EntryShape {
        EntryShape {
            participants: self.participants.len() as u64,
            partitions: self.partitions.len() as u64,
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

/// Checks that `entry` can be encoded: at most 65,535 participants and partitions (u16
/// counts in the header), at most 2^24 − 1 lock intents and changes, one version per touched
/// cell of each lock intent, values that fit a u32 length, and at most [`MAX_ENTRY_SLOTS`]
/// slots. A writer calls it before it reserves ring space for the entry, so an entry built
/// from a request that is too large is refused with nothing reserved (a reservation never
/// written would stop replay until filled).
///
/// # Errors
/// [`Error::EntryTooLarge`] for more slots than an entry may have; [`Error::Unencodable`]
/// naming the count or field that does not fit.
pub fn check_encodable(entry: &RedoEntry) -> Result<()> {
    let shape = entry.shape();
    let refuse = |why: String| Err(Error::Unencodable { txn: entry.txn, why });
    if shape.participants > u64::from(u16::MAX) {
        return refuse(format!("{} participant DCs; an entry holds at most {}", shape.participants, u16::MAX));
    }
    if shape.partitions > u64::from(u16::MAX) {
        return refuse(format!("{} partitions; an entry holds at most {}", shape.partitions, u16::MAX));
    }
    if shape.locks > MAX_ITEMS || shape.changes > MAX_ITEMS {
        return refuse(format!(
            "{} lock intents and {} changes; an entry holds at most {MAX_ITEMS} of each",
            shape.locks, shape.changes
        ));
    }
    if let Some(l) = entry.locks.iter().find(|l| l.versions.len() != l.cells.count_ones() as usize) {
        return refuse(format!(
            "the lock intent of {} key {} has {} versions for {} cells",
            l.table,
            l.key,
            l.versions.len(),
            l.cells.count_ones()
        ));
    }
    if let Some(c) = entry.changes.iter().find(|c| u32::try_from(c.value.len()).is_err()) {
        return refuse(format!("a {}-byte value does not fit a 32-bit length", c.value.len()));
    }
    if shape.slots() > MAX_ENTRY_SLOTS {
        return Err(Error::EntryTooLarge { bytes: shape.bytes(), ring_bytes: MAX_ENTRY_SLOTS * SLOT_BYTES });
    }
    Ok(())
}

/// Encodes `entry` for ring index `index`: `encoded_slots(entry) * 64` bytes, the header,
/// the body and zero padding (see the module docs for the format).
///
/// # Panics
/// If [`check_encodable`] refuses the entry (more than [`MAX_ENTRY_SLOTS`] slots or 65,535
/// participants, a lock whose `versions` does not hold one version per set bit of its
/// `cells`, …): a writer checks the entry with it and reserves with
/// [`RingWriter::reserve`] first, which refuses oversized reservations.
///
/// [`RingWriter::reserve`]: super::RingWriter::reserve
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

pub(super) fn word(bytes: &[u8], i: usize) -> u64 {
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
    assert!(shape.partitions <= u16::MAX as u64, "at most 65535 partitions per transaction");
    assert!(shape.locks <= MAX_ITEMS && shape.changes <= MAX_ITEMS, "implied by the slot limit");
    let mut body = Vec::with_capacity(shape.body_bytes() as usize);
    for p in &e.participants {
        body.extend_from_slice(&p.0.to_le_bytes());
    }
    for p in &e.partitions {
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
        (e.start.0 & Cts::MASK) | shape.partitions << 48,
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
pub(super) struct Frame {
    pub(super) slots: u64,
    pub(super) body_len: u64,
}

/// Checks the framing words of a 64-byte header read at `index`.
pub(super) fn check_frame(node: NodeId, index: u64, header: &[u8]) -> Result<Frame> {
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
pub(super) fn decode_framed(node: NodeId, index: u64, bytes: &[u8]) -> Result<(RedoEntry, u64)> {
    let torn = |why| Error::TornEntry { node, index, why };
    let Frame { slots, body_len } = check_frame(node, index, bytes)?;
    let header = &bytes[..SLOT_BYTES as usize];
    let body = bytes
        .get(SLOT_BYTES as usize..(SLOT_BYTES + body_len) as usize)
        .ok_or_else(|| torn("bytes end before the body does"))?;
    if (word(header, 5) >> 32) as u32 != checksum(header, body) {
        return Err(torn("checksum mismatch"));
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
    let (start, n_partitions) = (Cts(word(header, 7) & Cts::MASK), word(header, 7) >> 48);
    let mut partitions = Vec::with_capacity(cap(n_partitions, PARTITION_BYTES));
    for _ in 0..n_partitions {
        partitions.push(PartitionId(cur.u32().ok_or_else(short)?));
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
        start,
        participants,
        partitions,
        locks,
        changes,
    };
    Ok((entry, slots))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::strategies::entry;
    use proptest::prelude::*;

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
            let words = [w[0], w[1], w[2], index, (w[4] & !0xffff) | (body_len / 64 + 2), body_len, w[6], w[7]];
            for x in words {
                header.extend_from_slice(&x.to_le_bytes());
            }
            let crc = checksum(&header, &body);
            header[44..48].copy_from_slice(&crc.to_le_bytes());
            header.extend_from_slice(&body);
            let _ = decode(NodeId(0), index, &header);
        }
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
}

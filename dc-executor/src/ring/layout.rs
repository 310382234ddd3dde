//! Where the ring's words and an entry's bytes lie in the node's region (the ring area of the
//! `ring` module docs), and the WRITEs that put an entry there (RedT Algorithm 2 `WriteLog`,
//! `CommitLog`).

use super::status::EntryStatus;
use super::SLOT_BYTES;
use crate::memstore::Layout;
use crate::verbs::DoorbellBatch;
use redt_proto::{Cts, Offset};

/// Byte offsets of the header words.
pub(crate) const W_STATUS: u64 = 8;
pub(crate) const W_VOTE: u64 = 16;
/// First header byte written by [`push_write_body`] after w0 (w3 onwards).
///
/// [`push_write_body`]: super::push_write_body
pub(crate) const W_INDEX: u64 = 24;

/// Offset of the ring's head word.
pub(crate) fn head_offset(layout: &Layout) -> u64 {
    layout.ring_off
}

/// Offset of the ring's tail word.
pub(crate) fn tail_offset(layout: &Layout) -> u64 {
    layout.ring_off + 8
}

/// Offset of the ring's durable head word (`durability: disk`): a head the disk image
/// holds every applied change below, written and synced by replay before it publishes the
/// head itself (`replay.rs`), so slots are never reused before the image knows they are
/// free. Zero (unused) under `durability: memory`.
pub fn durable_head_offset(layout: &Layout) -> u64 {
    layout.ring_off + 16
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
///
/// [`encode_padded`]: super::encode_padded
pub fn push_write_body(batch: &mut DoorbellBatch, layout: &Layout, index: u64, bytes: &[u8]) {
    assert!(bytes.len() >= SLOT_BYTES as usize, "an encoded entry starts with a 64-byte header");
    batch.write(Offset(slot_offset(layout, index)), bytes[..W_STATUS as usize].to_vec());
    push_range(batch, layout, index, bytes, W_INDEX);
}

/// Offset of the status word (header w1) of the entry at ring index `index`.
pub fn status_offset(layout: &Layout, index: u64) -> Offset {
    Offset(slot_offset(layout, index) + W_STATUS)
}

/// Appends the one 8-byte WRITE that sets the entry at `index` to `status` with commit
/// timestamp `cts` (Algorithm 2 `CommitLog`, lines 23–25): `Committed` and its `cts` land
/// together, atomically.
pub fn push_set_status(batch: &mut DoorbellBatch, layout: &Layout, index: u64, status: EntryStatus, cts: Cts) {
    batch.write(status_offset(layout, index), status.word(cts).to_le_bytes().to_vec());
}

/// [`push_set_status`] for a catch-up source: the status word also carries the catch-up mask
/// `owed` (see [`EntryStatus::owed_of`]), set in the same 8-byte WRITE as the decision so the
/// entry is never decided without it.
pub fn push_set_status_owed(
    batch: &mut DoorbellBatch,
    layout: &Layout,
    index: u64,
    status: EntryStatus,
    cts: Cts,
    owed: u8,
) {
    batch.write(status_offset(layout, index), status.word_owed(cts, owed).to_le_bytes().to_vec());
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

    #[test]
    fn pieces_split_at_the_ring_end() {
        let layout = Layout {
            size: 4096,
            index_off: 64,
            index_bytes: 64,
            ring_off: 128,
            ring_bytes: 5 * 64,
            log_off: 448,
            log_bytes: 64,
            absent_off: 512,
            absent_bytes: 0,
            promise_off: 512,
            promise_bytes: 0,
            heap_off: 512,
        };
        assert_eq!(layout.ring_slots(), 4);
        let base = 128 + 64;
        // Index 6 is slot 2: two slots fit before the end.
        assert_eq!(pieces(&layout, 6, 0, 100), [(base + 128, 0, 100), (base, 100, 0)]);
        assert_eq!(pieces(&layout, 6, 0, 192), [(base + 128, 0, 128), (base, 128, 64)]);
        assert_eq!(pieces(&layout, 6, 64, 128), [(base + 192, 64, 64), (base, 128, 64)]);
        assert_eq!(pieces(&layout, 7, 64, 64), [(base, 64, 64), (base, 128, 0)]);
    }
}

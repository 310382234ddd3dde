//! The redo ring of a node: the redo entry format and the executor-side, one-sided
//! operations on it (RedT §4.2, Algorithm 2 `WriteLog` / `CommitLog`; docs/design.md §2–3).
//!
//! The node's own replay task (Algorithm 2 `ReplayLog`) lives in `replay.rs`.
//!
//! # Ring area
//!
//! ```text
//! ring_off + 0      head u64: first ring index not yet released by replay
//! ring_off + 8      tail u64: next ring index to reserve (fetch-and-add by executors)
//! ring_off + 16     durable head u64 (`durability: disk` only; `replay.rs`)
//! ring_off + 24     zero padding up to 64 bytes
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
//! w1  status (bits 0..8) | owed << 8 | cts << 16  the status word, rewritten by one WRITE
//! w2  vote word (VoteWord)                      CAS-able, phase 1 and recovery
//! w3  ring index of the entry                   tells the lap of the slot's contents
//! w4  slots u16 | epoch u32 << 16 | coordinator u16 << 48
//! w5  body length u32 | CRC-32 u32 << 32
//! w6  participants u16 | locks u24 << 16 | changes u24 << 40
//! w7  start (48 bits) | partitions u16 << 48  the coordinator's HLC at start
//! body:
//!   participants   DcId u16 each
//!   partitions     PartitionId u32 each        every partition the transaction touches
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
//! A catch-up source's entry carries a non-zero *catch-up mask* (`owed`, bits 8..16 of the
//! status word, [`OWED_SHIFT`]) from its decision until every replica its commit left behind
//! acknowledged the shipment ([`push_set_status_owed`], cleared by compare-and-swap). Replay
//! applies and flushes it as any other, keeping the mask, but the head stops before it, so the
//! redo it ships stays in the ring across a crash of its shipper (docs/design.md §2).
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
//! its own writer never fills: replay stops at it, the head stays there, and the ring
//! eventually reports `RingFull` to every writer. The ring's owner fills such a hole with a
//! filler (`gap.rs`; docs/design.md, "Recovery", gaps at the head of a ring), only once
//! every node of the DC has said it holds no reservation there (a late WRITE from a writer
//! believed dead would otherwise land in slots already reused).
//!
//! # Time
//!
//! The ring code reads no clock. How long a writer waits for replay to free
//! space is the caller's `patience`, measured on the caller's `now` function, both passed to
//! [`RingWriter::reserve`] and [`RingWriter::settle`]; `now` is read only when the cached head
//! says the space may not be free. The executor passes the real monotonic clock
//! (`Instant::now`); in-process tests and simulations may pass a clock that stands still with
//! zero patience, which means one head READ, then give up: the reservation that does not fit
//! stays consumed and is owed a filler, as above.
//!
//! [`Error::TornEntry`]: crate::Error::TornEntry
//! [`Error::RingFull`]: crate::Error::RingFull

// One idea per file: the entry and its parts (entry.rs), its bytes (codec.rs), its vote word
// (vote.rs), ring offsets and the WRITE builders (layout.rs), READing entries back (read.rs),
// the writer's reservations (writer.rs) and the largest entry a topology admits (capacity.rs).
mod capacity;
pub(crate) mod codec;
mod entry;
pub(crate) mod layout;
mod read;
mod status;
#[cfg(test)]
mod strategies;
mod vote;
mod writer;

pub use capacity::{check_limits_fit_ring, entry_capacity, largest_entry, op_shape, LargestEntry};
pub use codec::{check_encodable, decode, encode, encode_filler, encode_padded, encoded_slots, EntryShape};
pub use entry::{Change, LockIntent, RedoEntry};
pub use layout::{
    durable_head_offset, push_set_status, push_set_status_owed, push_write, push_write_body, status_offset,
};
pub(crate) use layout::{head_offset, pieces, ring_slots, slot_offset, tail_offset};
pub use read::{
    head_gap, owed_entries, pending_records, read_entry, read_entry_sized, read_header, ring_bounds, ring_entries,
    ring_scan, unfinished_entries, EntryHeader, Gap, OwedEntry, RingScan,
};
pub(crate) use read::{read_framed, ring_entries_where, HeaderPeek};
pub use status::{EntryStatus, OWED_SHIFT};
pub use vote::{vote_offset, VoteCode, VoteState, VoteWord};
pub use writer::RingWriter;

use crate::memstore::LINE;

/// Bytes of one ring slot (and of an entry header).
pub const SLOT_BYTES: u64 = LINE;

/// The largest entry, in slots (the slot count is a u16 in the header); a ring may cap it
/// lower ([`Layout::ring_slots`](crate::Layout::ring_slots)).
pub const MAX_ENTRY_SLOTS: u64 = u16::MAX as u64;

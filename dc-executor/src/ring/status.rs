//! The status word of a redo entry: its status (RedT Algorithm 2), its commit timestamp, and
//! the catch-up mask of a source whose shipments are not all acknowledged.

use redt_proto::Cts;

/// Status of a redo entry, the low 8 bits of its status word (RedT Algorithm 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryStatus {
    /// `Inited` in the paper: a free or not yet written slot.
    Empty = 0,
    /// Locks are being taken: the entry lists what will be locked; written before any lock
    /// compare-and-swap so every held lock is traceable to its owner (docs/design.md §2).
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
    /// `cts` (truncated to 48 bits), owing no catch-up: `status | cts << 16`.
    pub fn word(self, cts: Cts) -> u64 {
        self as u64 | (cts.0 & Cts::MASK) << 16
    }

    /// The status word of an entry with this status and commit timestamp `cts` whose
    /// catch-up mask is `owed` (bits 8..16; see [`OWED_SHIFT`]): `status | owed << 8 | cts << 16`.
    pub fn word_owed(self, cts: Cts, owed: u8) -> u64 {
        self.word(cts) | u64::from(owed) << OWED_SHIFT
    }

    /// Splits a status word into status and commit timestamp, whatever its catch-up mask
    /// ([`EntryStatus::owed_of`]); `None` when the status code is unknown.
    pub fn from_word(word: u64) -> Option<(EntryStatus, Cts)> {
        Some((EntryStatus::from_code(word as u8)?, Cts(word >> 16)))
    }

    /// The catch-up mask of a status word (bits 8..16): zero when the entry owes no
    /// catch-up. Bit `i < 7` stands for the partition at position `i` of the entry's
    /// `partitions` list, bit 7 for every position from 7 on (docs/design.md §2, "a catch-up
    /// outlives its source"; `redt_coordinator::catch_up`).
    pub fn owed_of(word: u64) -> u8 {
        (word >> OWED_SHIFT) as u8
    }
}

/// Where the catch-up mask sits in the status word (bits 8..16). An entry whose mask is not
/// zero is a catch-up source whose shipments to the replicas its commit left behind are not
/// all acknowledged yet: replay applies and flushes it as usual, but the ring's head does not
/// pass it until the mask is cleared, so the redo that the catch-up ships stays readable
/// across a crash of the process that was shipping it.
pub const OWED_SHIFT: u32 = 8;

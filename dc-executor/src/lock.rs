//! No-Wait shared/exclusive cell locks in one 8-byte lock word (docs/design.md §3; CREST §4.2
//! with RedT's held read locks).
//!
//! The word holds [`GROUPS`] lock groups of 4 bits: bits 0–2 count readers (at most
//! [`MAX_READERS`]), bit 3 is the exclusive bit. A record's locks are taken with one
//! masked compare-and-swap over every group the sub-transaction touches — expected value
//! 0 for groups to lock exclusively, the current reader count for groups to share — and
//! released with one fetch-and-add of the two's complement of what was added, which never
//! borrows across groups because every group released holds at least what it gives back.
//!
//! This module is pure arithmetic: it says which CAS to issue and what its old value means.

/// Lock groups per lock word.
pub const GROUPS: usize = 16;
/// Most readers one group admits; one more is a conflict (No-Wait).
pub const MAX_READERS: u64 = 7;
/// Masked-CAS attempts a sub-transaction makes when only reader counts moved under it.
pub const SHARED_RETRIES: u32 = 4;

const NIBBLE: u64 = 0xF;
const X: u64 = 0x8;

/// Bits of the 4-bit fields of `groups` (bit g of `groups` = group g).
pub fn fields(groups: u16) -> u64 {
    spread(groups, NIBBLE)
}

/// Exclusive bits of `groups`.
pub fn exclusive_bits(groups: u16) -> u64 {
    spread(groups, X)
}

/// One reader in each of `groups`.
pub fn reader_bits(groups: u16) -> u64 {
    spread(groups, 1)
}

fn spread(groups: u16, pattern: u64) -> u64 {
    (0..GROUPS).filter(|g| groups >> g & 1 == 1).fold(0, |acc, g| acc | pattern << (4 * g))
}

/// The masked compare-and-swap that takes a record's locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockCas {
    /// Expected bits (compared under `mask`).
    pub compare: u64,
    /// New bits (swapped under `mask`).
    pub swap: u64,
    /// Fields of every group involved (both compare and swap mask).
    pub mask: u64,
    /// What the CAS adds to the word when it succeeds; release subtracts exactly this.
    pub added: u64,
}

/// What the old value returned by a [`LockCas`] means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOutcome {
    /// The CAS succeeded: the locks are held.
    Acquired,
    /// A group is held in a conflicting mode (or has [`MAX_READERS`] readers): abort.
    Conflict,
    /// Only reader counts differed from the guess: retry with this new guess.
    Retry(u64),
}

/// Plans the CAS taking `exclusive` groups exclusively and `shared` groups (minus the
/// exclusive ones) shared, assuming the lock word currently is `guess` (0 on the first
/// try). Returns `None` when `guess` already shows a conflict.
pub fn plan(shared: u16, exclusive: u16, guess: u64) -> Option<LockCas> {
    let shared = shared & !exclusive;
    let mask = fields(shared | exclusive);
    let mut compare = 0;
    for g in 0..GROUPS {
        if shared >> g & 1 == 1 {
            let f = guess >> (4 * g) & NIBBLE;
            if f & X != 0 || f >= MAX_READERS {
                return None;
            }
            compare |= f << (4 * g);
        }
    }
    let added = exclusive_bits(exclusive) | reader_bits(shared);
    Some(LockCas { compare, swap: compare + added, mask, added })
}

/// Which lock a No-Wait conflict met, for abort counts by kind (the vote's
/// `AbortReason::LockConflict`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockConflictKind {
    /// A cell the sub-transaction reads or writes is held exclusively (by a writer).
    Exclusive,
    /// A cell it writes is held shared (by readers).
    Shared,
    /// A cell it reads already has the [`MAX_READERS`] readers a lock group admits.
    Readers,
    /// A gap lock: a range read's next-key lock or an insert's (`crate::ordered`).
    Gap,
    /// A reader holds the absence of a key the sub-transaction creates.
    Absence,
    /// Under its locks, something it read had changed: a record retired and reused for
    /// another key, a key published or taken out of an index or a range meanwhile.
    Changed,
    /// Not said: a vote from a node that does not report the kind.
    Unspecified,
}

impl LockConflictKind {
    /// Every kind, in report order.
    pub const ALL: [LockConflictKind; 7] = [
        LockConflictKind::Exclusive,
        LockConflictKind::Shared,
        LockConflictKind::Readers,
        LockConflictKind::Gap,
        LockConflictKind::Absence,
        LockConflictKind::Changed,
        LockConflictKind::Unspecified,
    ];

    /// Its code on the wire (1 to 6; 0 for [`LockConflictKind::Unspecified`]).
    pub fn code(self) -> u32 {
        match self {
            LockConflictKind::Unspecified => 0,
            LockConflictKind::Exclusive => 1,
            LockConflictKind::Shared => 2,
            LockConflictKind::Readers => 3,
            LockConflictKind::Gap => 4,
            LockConflictKind::Absence => 5,
            LockConflictKind::Changed => 6,
        }
    }

    /// The kind of wire code `code`; an unknown code is [`LockConflictKind::Unspecified`].
    pub fn from_code(code: u32) -> LockConflictKind {
        LockConflictKind::ALL.into_iter().find(|k| k.code() == code).unwrap_or(LockConflictKind::Unspecified)
    }
}

/// Which lock of the word `old` refused the groups a sub-transaction takes (`shared` shared,
/// `exclusive` exclusively); `gap_group` is the group that gap locks use. A word whose wanted
/// groups show no conflict (a retired record's marker) counts as [`LockConflictKind::Changed`].
pub fn conflict_kind(shared: u16, exclusive: u16, old: u64, gap_group: usize) -> LockConflictKind {
    let shared = shared & !exclusive;
    let mut found = None;
    for g in (0..GROUPS).filter(|g| (shared | exclusive) >> g & 1 == 1) {
        let f = old >> (4 * g) & NIBBLE;
        let kind = if f & X != 0 {
            LockConflictKind::Exclusive
        } else if exclusive >> g & 1 == 1 && f != 0 {
            LockConflictKind::Shared
        } else if shared >> g & 1 == 1 && f >= MAX_READERS {
            LockConflictKind::Readers
        } else {
            continue;
        };
        if g == gap_group {
            return LockConflictKind::Gap;
        }
        found.get_or_insert(kind);
    }
    found.unwrap_or(LockConflictKind::Changed)
}

/// Interprets the old value `old` returned by `cas`.
pub fn outcome(cas: &LockCas, old: u64) -> LockOutcome {
    if old & cas.mask == cas.compare {
        return LockOutcome::Acquired;
    }
    let exclusive = cas.added & spread(u16::MAX, X);
    let excl_fields = exclusive | exclusive >> 1 | exclusive >> 2 | exclusive >> 3;
    if old & excl_fields != 0 {
        return LockOutcome::Conflict;
    }
    let shared_groups = (0..GROUPS).filter(|g| cas.added >> (4 * g) & 1 == 1);
    for g in shared_groups {
        let f = old >> (4 * g) & NIBBLE;
        if f & X != 0 || f >= MAX_READERS {
            return LockOutcome::Conflict;
        }
    }
    LockOutcome::Retry(old)
}

/// The fetch-and-add operand releasing what a successful `cas` added.
pub fn release_operand(added: u64) -> u64 {
    added.wrapping_neg()
}

/// Whether `word` has any lock held in any group of `groups`.
pub fn any_held(word: u64, groups: u16) -> bool {
    word & fields(groups) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Applies a masked CAS like the verbs do.
    fn mcas(word: u64, c: &LockCas) -> u64 {
        if word & c.mask == c.compare & c.mask {
            (word & !c.mask) | (c.swap & c.mask)
        } else {
            word
        }
    }

    #[test]
    fn a_conflict_names_the_lock_that_refused_it() {
        let gap = GROUPS - 1;
        let w = mcas(0, &plan(0, 0b1, 0).unwrap());
        let r = mcas(0, &plan(0b1, 0, 0).unwrap());
        assert_eq!(conflict_kind(0b1, 0, w, gap), LockConflictKind::Exclusive);
        assert_eq!(conflict_kind(0, 0b1, w, gap), LockConflictKind::Exclusive);
        assert_eq!(conflict_kind(0, 0b1, r, gap), LockConflictKind::Shared);
        let full = (0..MAX_READERS).fold(0, |word, _| mcas(word, &plan(0b10, 0, word).unwrap()));
        assert_eq!(plan(0b10, 0, full), None);
        assert_eq!(conflict_kind(0b10, 0, full, gap), LockConflictKind::Readers);
        let g = mcas(0, &plan(0, 1 << gap, 0).unwrap());
        assert_eq!(conflict_kind(0b1, 1 << gap, g, gap), LockConflictKind::Gap);
        assert_eq!(conflict_kind(0b1, 0, g, gap), LockConflictKind::Changed, "no wanted group is held");
        for k in LockConflictKind::ALL {
            assert_eq!(LockConflictKind::from_code(k.code()), k);
        }
        assert_eq!(LockConflictKind::from_code(99), LockConflictKind::Unspecified);
    }

    #[test]
    fn read_and_write_of_one_cell_conflict() {
        let w = plan(0, 0b1, 0).unwrap();
        let word = mcas(0, &w);
        let r = plan(0b1, 0, 0).unwrap();
        assert_eq!(outcome(&r, word), LockOutcome::Conflict);
        // And the other way round.
        let word = mcas(0, &r);
        assert_eq!(outcome(&w, word), LockOutcome::Conflict);
    }

    #[test]
    fn writes_of_different_cells_do_not_conflict() {
        let a = plan(0, 0b01, 0).unwrap();
        let b = plan(0, 0b10, 0).unwrap();
        let word = mcas(0, &a);
        assert_eq!(outcome(&b, word), LockOutcome::Acquired);
    }

    #[test]
    fn readers_share_up_to_the_limit() {
        let mut word = 0;
        for _ in 0..MAX_READERS {
            let mut guess = 0;
            loop {
                let c = plan(0b100, 0, guess).unwrap();
                let old = word;
                word = mcas(word, &c);
                match outcome(&c, old) {
                    LockOutcome::Acquired => break,
                    LockOutcome::Retry(g) => guess = g,
                    LockOutcome::Conflict => panic!("readers must share"),
                }
            }
        }
        assert!(plan(0b100, 0, word).is_none(), "an eighth reader is refused");
    }

    proptest! {
        /// Any interleaving of acquire/release keeps the word equal to the sum of what the
        /// holders added, never lets a writer share a group, and never exceeds the reader limit.
        #[test]
        fn lock_word_model(ops in proptest::collection::vec((any::<u16>(), any::<u16>(), any::<bool>()), 1..200)) {
            let mut word = 0u64;
            let mut held: Vec<(u64, u16, u16)> = Vec::new();
            for (shared, exclusive, release) in ops {
                if release && !held.is_empty() {
                    let (added, _, _) = held.remove(shared as usize % held.len());
                    word = word.wrapping_add(release_operand(added));
                    continue;
                }
                let mut guess = 0;
                for _ in 0..=SHARED_RETRIES {
                    let Some(c) = plan(shared, exclusive, guess) else { break };
                    let old = word;
                    word = mcas(word, &c);
                    match outcome(&c, old) {
                        LockOutcome::Acquired => { held.push((c.added, shared & !exclusive, exclusive)); break }
                        LockOutcome::Retry(g) => guess = g,
                        LockOutcome::Conflict => { prop_assert_eq!(word, old); break }
                    }
                }
                let sum = held.iter().fold(0u64, |a, h| a + h.0);
                prop_assert_eq!(word, sum);
                for g in 0..GROUPS {
                    let writers = held.iter().filter(|h| h.2 >> g & 1 == 1).count();
                    let readers = held.iter().filter(|h| h.1 >> g & 1 == 1).count();
                    prop_assert!(writers <= 1);
                    prop_assert!(writers == 0 || readers == 0);
                    prop_assert!(readers as u64 <= MAX_READERS);
                }
            }
        }
    }
}

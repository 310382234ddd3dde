//! The promise table of a node: ballots its replica promised to recoverers while it held no
//! redo entry of the transaction to promise in (docs/design.md §2, recovery; `prepare.rs`).
//!
//! A PREPARE that finds no unfinished entry of a transaction on a replica gives the replica
//! a fence entry, and from then on the fence entry's vote word is the replica's acceptor
//! state. Two things happen before that entry exists, and both must hold a promise:
//!
//! - the ring has no room for the fence entry, so the replica answers `NoVote`: the ballot it
//!   so promised must outlive the executor that answered (a restart) and bind the other
//!   executors of the DC, which PREPARE the same ring;
//! - two executors of the DC PREPARE the same replica at once and each finds no entry: the
//!   one with the lower ballot must not write a fence entry that accepts its RECORD after the
//!   higher ballot was promised.
//!
//! So a PREPARE that would write a fence entry first raises the transaction's row here to
//! its ballot (refused if the row holds a higher one), then scans the ring again, then writes
//! the fence entry, then reads the row again and, if another PREPARE raised it meanwhile,
//! promises that ballot in its fence entry and answers `Refused`. Any two such PREPAREs
//! raise the same row, so the later raise is seen by the other's second scan or by its read
//! after the write ([`crate::Executor::prepare`]).
//!
//! ```text
//! promise_off + 16·i    row i: txn u64 (0: free) | ballot u64 (Ballot.0; 0: none)
//! ```
//!
//! A transaction has one row, `hash(txn) mod rows`, claimed by compare-and-swap of its txn
//! word (`0 → txn`); its ballot only grows (compare-and-swap). One row and no probing, so two
//! PREPAREs of one transaction can never claim two rows. The node's replay frees a
//! transaction's row when it flushes the transaction's fence entry, and a PREPARE frees it
//! when it finds the replica's decision applied or its fence entry finished: the finished
//! entry or the decision-log row then answers every later PREPARE and forbids a second fence
//! entry. A row whose transaction never gets a fence entry (its ring stayed full until the
//! transaction was decided) is freed by the recoverer's decision, which reaches every DC that
//! answered `NoVote` ([`crate::Executor::release_promises`]); without that it would answer
//! `Unknown` for good to every transaction hashed to it. A freed row's ballot word is left as
//! it was and a new owner starts from it: a row may promise more than its owner asked, never
//! less. So the read after a fence entry's write reads the row's ballot whoever holds it
//! ([`ballot`]): a row freed and claimed again since the raise still holds the higher ballot.
//! When the row is held by another transaction the PREPARE makes no promise at all and answers
//! `Unknown` (the recoverer counts the replica as unreachable and asks again later).

use crate::error::Result;
use crate::memstore::Layout;
use crate::verbs::Verbs;
use redt_proto::{Ballot, NodeId, Offset, TxnId};
use redt_verbs::region::Region;

/// Bytes of one row.
pub const ROW_BYTES: u64 = 16;

/// What [`raise`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raise {
    /// The row now holds the ballot (or a higher one it already held: `Refused`).
    /// `before` is the ballot the row held before, if it had one.
    Promised {
        /// The transaction's ballot before this raise, if its row existed.
        before: Option<Ballot>,
    },
    /// The row holds a higher ballot.
    Refused(Ballot),
    /// The transaction's row is held by another transaction: nothing promised.
    Full,
}

/// Number of rows of `layout`'s promise table.
pub fn rows(layout: &Layout) -> u64 {
    layout.promise_bytes / ROW_BYTES
}

/// The one row `txn` may hold; `None` without a table (or for the null id).
fn row_of(layout: &Layout, txn: TxnId) -> Option<u64> {
    (rows(layout) > 0 && txn.0 != 0).then(|| row_at(layout, txn))
}

/// The one row `txn` hashes to (a table with rows).
fn row_at(layout: &Layout, txn: TxnId) -> u64 {
    // Every bit of the id moves every bit of the hash (the SplitMix64 finalizer): ids of
    // different coordinators differ in their top 16 bits only, and often share the
    // sequence number in the low 48.
    let mut h = txn.0;
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    layout.promise_off + (h % rows(layout)) * ROW_BYTES
}

/// The ballot a row's ballot word holds (`None`: none was ever raised there).
fn ballot_in(word: u64) -> Option<Ballot> {
    (word != 0).then(|| u32::try_from(word).map(Ballot).unwrap_or(Ballot(u32::MAX)))
}

fn read_word(verbs: &dyn Verbs, node: NodeId, at: u64) -> Result<u64> {
    let mut b = [0u8; 8];
    verbs.read(node, Offset(at), &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// `txn`'s row on `node`, claimed if free and `claim` is set; `None` if another
/// transaction holds it (or it is free and `claim` is not set).
fn find(verbs: &dyn Verbs, node: NodeId, layout: &Layout, txn: TxnId, claim: bool) -> Result<Option<u64>> {
    let Some(at) = row_of(layout, txn) else { return Ok(None) };
    let owner = match read_word(verbs, node, at)? {
        0 if claim => verbs.compare_and_swap(node, Offset(at), 0, txn.0)?,
        w => w,
    };
    Ok((owner == txn.0 || (claim && owner == 0)).then_some(at))
}

/// Raises `txn`'s row on `node` to `ballot` (claiming one if it has none).
///
/// # Errors
/// Verbs failures.
pub fn raise(verbs: &dyn Verbs, node: NodeId, layout: &Layout, txn: TxnId, ballot: Ballot) -> Result<Raise> {
    let Some(at) = find(verbs, node, layout, txn, true)? else { return Ok(Raise::Full) };
    let word = Offset(at + 8);
    let mut cur = read_word(verbs, node, at + 8)?;
    loop {
        let before = ballot_in(cur);
        if let Some(held) = before.filter(|&held| held > ballot) {
            return Ok(Raise::Refused(held));
        }
        if cur == u64::from(ballot.0) {
            return Ok(Raise::Promised { before });
        }
        match verbs.compare_and_swap(node, word, cur, u64::from(ballot.0))? {
            w if w == cur => return Ok(Raise::Promised { before }),
            w => cur = w,
        }
    }
}

/// The ballot `txn`'s row on `node` holds, if it has a row.
///
/// # Errors
/// Verbs failures.
pub fn promised(verbs: &dyn Verbs, node: NodeId, layout: &Layout, txn: TxnId) -> Result<Option<Ballot>> {
    let Some(at) = find(verbs, node, layout, txn, false)? else { return Ok(None) };
    Ok(ballot_in(read_word(verbs, node, at + 8)?))
}

/// The ballot of the row `txn` may hold on `node`, whoever holds it now (`None`: none was
/// ever raised there). A fence entry's read after its write uses this: the row may have been
/// freed since this PREPARE raised it (a recoverer's decision, or replay flushing another
/// executor's fence entry) and claimed again, and its ballot word still holds every ballot
/// raised in it, since a freed row keeps its ballot and a new owner's only grows.
///
/// # Errors
/// Verbs failures.
pub fn ballot(verbs: &dyn Verbs, node: NodeId, layout: &Layout, txn: TxnId) -> Result<Option<Ballot>> {
    let Some(at) = row_of(layout, txn) else { return Ok(None) };
    Ok(ballot_in(read_word(verbs, node, at + 8)?))
}

/// Frees `txn`'s row on `node` if it has one (a PREPARE that found the replica's decision
/// applied or its fence entry finished; see the module docs). Its ballot word is left as it is.
///
/// # Errors
/// Verbs failures.
pub fn release(verbs: &dyn Verbs, node: NodeId, layout: &Layout, txn: TxnId) -> Result<()> {
    let Some(at) = row_of(layout, txn) else { return Ok(()) };
    if read_word(verbs, node, at)? == txn.0 {
        verbs.compare_and_swap(node, Offset(at), txn.0, 0)?;
    }
    Ok(())
}

/// Frees `txn`'s row in the node's own `region` (its replay, once the transaction's fence
/// entry is flushed; see the module docs). Its ballot word is left as it is.
pub fn free(layout: &Layout, region: &Region, txn: TxnId) {
    if let Some(at) = row_of(layout, txn) {
        region.compare_and_swap(at, txn.0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::LocalVerbs;
    use redt_proto::MemStoreConfig;
    use std::sync::Arc;

    fn setup() -> (Layout, Arc<Region>, LocalVerbs) {
        let layout =
            Layout::from_config(&MemStoreConfig { size_bytes: 1 << 16, index_bytes: 64, ring_bytes: 129 * 64 });
        let verbs = LocalVerbs::in_process([NodeId(0)], layout.size);
        let region = verbs.region(NodeId(0)).expect("node 0").clone();
        layout.format(&region);
        (layout, region, verbs)
    }

    #[test]
    fn a_row_only_grows_and_refuses_lower_ballots() {
        let (layout, _region, verbs) = setup();
        let (n, t) = (NodeId(0), TxnId(7));
        assert_eq!(promised(&verbs, n, &layout, t).unwrap(), None);
        assert_eq!(raise(&verbs, n, &layout, t, Ballot(5)).unwrap(), Raise::Promised { before: None });
        assert_eq!(raise(&verbs, n, &layout, t, Ballot(3)).unwrap(), Raise::Refused(Ballot(5)));
        assert_eq!(raise(&verbs, n, &layout, t, Ballot(5)).unwrap(), Raise::Promised { before: Some(Ballot(5)) });
        assert_eq!(raise(&verbs, n, &layout, t, Ballot(9)).unwrap(), Raise::Promised { before: Some(Ballot(5)) });
        assert_eq!(promised(&verbs, n, &layout, t).unwrap(), Some(Ballot(9)));
        assert_eq!(promised(&verbs, n, &layout, TxnId(8)).unwrap(), None);
    }

    #[test]
    fn ids_that_differ_only_in_their_coordinator_or_low_bits_spread_over_the_rows() {
        // 1,024 rows: 64 ids collide about twice by chance.
        let layout =
            Layout::from_config(&MemStoreConfig { size_bytes: 1 << 20, index_bytes: 64, ring_bytes: 4097 * 64 });
        assert_eq!(super::rows(&layout), 1024);
        for ids in [
            (0..64u64).map(|c| TxnId(c << 48 | 268_435_480)).collect::<Vec<_>>(),
            (0..64u64).map(|q| TxnId(3 << 48 | q)).collect::<Vec<_>>(),
        ] {
            let rows: std::collections::BTreeSet<u64> = ids.iter().map(|&t| row_at(&layout, t)).collect();
            assert!(rows.len() >= 56, "64 ids on {} of {} rows", rows.len(), super::rows(&layout));
        }
    }

    #[test]
    fn a_row_held_by_another_transaction_promises_nothing_until_it_is_freed() {
        let (layout, region, verbs) = setup();
        let n = NodeId(0);
        let target = TxnId(1 << 48 | 1);
        let other =
            (2u64..).map(|t| TxnId(1 << 48 | t)).find(|&t| row_at(&layout, t) == row_at(&layout, target)).unwrap();
        assert_eq!(raise(&verbs, n, &layout, other, Ballot(4)).unwrap(), Raise::Promised { before: None });
        assert_eq!(raise(&verbs, n, &layout, target, Ballot(2)).unwrap(), Raise::Full);
        assert_eq!(promised(&verbs, n, &layout, target).unwrap(), None);
        // Freeing another transaction's row is a no-op.
        free(&layout, &region, target);
        assert_eq!(promised(&verbs, n, &layout, other).unwrap(), Some(Ballot(4)));
        // Once freed, the target gets the row and starts from its ballot (a promise may be
        // more than asked, never less).
        free(&layout, &region, other);
        assert_eq!(promised(&verbs, n, &layout, other).unwrap(), None);
        assert_eq!(raise(&verbs, n, &layout, target, Ballot(2)).unwrap(), Raise::Refused(Ballot(4)));
        assert_eq!(raise(&verbs, n, &layout, target, Ballot(6)).unwrap(), Raise::Promised { before: Some(Ballot(4)) });
    }

    #[test]
    fn a_rows_ballot_outlives_its_owner_for_a_fences_read_after_its_write() {
        let (layout, region, verbs) = setup();
        let n = NodeId(0);
        let target = TxnId(1 << 48 | 1);
        let other =
            (2u64..).map(|t| TxnId(1 << 48 | t)).find(|&t| row_at(&layout, t) == row_at(&layout, target)).unwrap();
        assert_eq!(ballot(&verbs, n, &layout, target).unwrap(), None);
        assert_eq!(raise(&verbs, n, &layout, target, Ballot(5)).unwrap(), Raise::Promised { before: None });
        // The row is freed (a recoverer's decision) and claimed by another transaction, which
        // raises it: the target's row is gone, its ballot is not.
        release(&verbs, n, &layout, target).unwrap();
        assert_eq!(ballot(&verbs, n, &layout, target).unwrap(), Some(Ballot(5)));
        assert_eq!(raise(&verbs, n, &layout, other, Ballot(9)).unwrap(), Raise::Promised { before: Some(Ballot(5)) });
        assert_eq!(promised(&verbs, n, &layout, target).unwrap(), None);
        assert_eq!(ballot(&verbs, n, &layout, target).unwrap(), Some(Ballot(9)));
        free(&layout, &region, other);
        assert_eq!(ballot(&verbs, n, &layout, target).unwrap(), Some(Ballot(9)));
    }
}

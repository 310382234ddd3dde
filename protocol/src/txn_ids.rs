//! Transaction ids that never repeat, across a node's restarts too (docs/design.md,
//! "Recovery", point 4).
//!
//! A [`TxnId`] holds its coordinator node in the top 16 bits and a 48-bit sequence below. A
//! node splits its sequence into its *incarnation* (high [`TxnIds::INCARNATION_BITS`] = 20
//! bits) and a counter of the ids it issued in that incarnation (low
//! [`TxnIds::COUNTER_BITS`] = 28 bits):
//!
//! ```text
//! bit 63       48 47                 28 27                    0
//!     [ node 16 ][ incarnation 20      ][ counter 28           ]
//! ```
//!
//! The incarnation is the count of the node's starts, kept in its MemStore
//! (`redt_dc_executor::Layout::next_incarnation`): a process that starts again on the same
//! MemStore takes the next one before it issues any id, so it cannot reuse an id its previous
//! life left in a ring, a fence or the decision log (recovery knows transactions by id). An
//! incarnation whose 2^28 ids are used up is not wrapped: the node takes a fresh incarnation
//! from its MemStore the same way. 2^20 incarnations of 2^28 ids each cover every 48-bit
//! sequence once.
//!
//! [`TxnIds`] is the pure allocator; [`TxnIds::start`] and [`TxnIds::issue`] are the thin
//! wrappers that read and bump the counter in the MemStore.

use crate::error::{Error, Result};
use redt_dc_executor::DcHandle;
use redt_proto::{NodeId, TxnId};

/// The transaction ids one node issues: its incarnation and the counter within it (see the
/// module docs for the bit split).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnIds {
    node: NodeId,
    incarnation: u64,
    /// The counter of the next id.
    counter: u64,
    /// Ids per incarnation ([`TxnIds::PER_INCARNATION`]; smaller in tests, to reach the end).
    limit: u64,
}

impl TxnIds {
    /// Bits of the counter within one incarnation (the low bits of the sequence).
    pub const COUNTER_BITS: u32 = 28;
    /// Bits of the incarnation (the high bits of the 48-bit sequence).
    pub const INCARNATION_BITS: u32 = 48 - Self::COUNTER_BITS;
    /// Ids one incarnation issues: 2^28 (268,435,456).
    pub const PER_INCARNATION: u64 = 1 << Self::COUNTER_BITS;
    /// The last incarnation an id can carry: 2^20 − 1 (1,048,575). Incarnation 0 is never
    /// used: a freshly formatted MemStore counts 0 starts.
    pub const MAX_INCARNATION: u64 = (1 << Self::INCARNATION_BITS) - 1;

    /// The allocator of `node`'s ids in `incarnation` (1 to [`TxnIds::MAX_INCARNATION`]),
    /// starting at counter 0.
    ///
    /// # Errors
    /// [`Error::TxnIdsExhausted`] if `incarnation` is 0 or above [`TxnIds::MAX_INCARNATION`]
    /// (the node's ids would repeat).
    pub fn new(node: NodeId, incarnation: u64) -> Result<TxnIds> {
        check(node, incarnation)?;
        Ok(TxnIds { node, incarnation, counter: 0, limit: Self::PER_INCARNATION })
    }

    /// The node whose ids these are.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The current incarnation.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The incarnation an id of this scheme carries (bits 28..48 of the id).
    pub fn incarnation_of(txn: TxnId) -> u64 {
        (txn.0 >> Self::COUNTER_BITS) & Self::MAX_INCARNATION
    }

    /// The next id of the current incarnation, or `None` when its counter is used up: the
    /// caller then takes a fresh incarnation and calls [`TxnIds::renew`] (ids never wrap).
    pub fn next_id(&mut self) -> Option<TxnId> {
        if self.counter >= self.limit {
            return None;
        }
        let seq = (self.incarnation << Self::COUNTER_BITS) | self.counter;
        self.counter += 1;
        Some(TxnId::new(self.node, seq))
    }

    /// Moves to `incarnation` (newer than the current one), its counter at 0.
    ///
    /// # Errors
    /// [`Error::TxnIdsExhausted`] if `incarnation` is above [`TxnIds::MAX_INCARNATION`];
    /// [`Error::IncarnationWentBack`] if it is not newer than the current one (ids could
    /// repeat). The allocator is unchanged then.
    pub fn renew(&mut self, incarnation: u64) -> Result<()> {
        check(self.node, incarnation)?;
        if incarnation <= self.incarnation {
            return Err(Error::IncarnationWentBack { node: self.node, current: self.incarnation, got: incarnation });
        }
        self.incarnation = incarnation;
        self.counter = 0;
        Ok(())
    }

    /// Starts a new incarnation of `node` on its MemStore in `dc` (one fetch-and-add on its
    /// incarnation counter, `redt_dc_executor::Layout::next_incarnation`) and returns its
    /// allocator. A node calls it once at start, before it issues any id.
    ///
    /// # Errors
    /// Verbs errors ([`Error::DataPath`]); [`Error::TxnIdsExhausted`] once the node started
    /// [`TxnIds::MAX_INCARNATION`] times.
    pub fn start(dc: &DcHandle, node: NodeId) -> Result<TxnIds> {
        let incarnation = dc.layout.next_incarnation(dc.verbs.as_ref(), node)?;
        TxnIds::new(node, incarnation)
    }

    /// The next id; when the current incarnation is used up, first takes a fresh incarnation
    /// from the node's MemStore in `dc` (as [`TxnIds::start`] does).
    ///
    /// # Errors
    /// As [`TxnIds::start`] and [`TxnIds::renew`]; the allocator issues nothing then.
    pub fn issue(&mut self, dc: &DcHandle) -> Result<TxnId> {
        if let Some(id) = self.next_id() {
            return Ok(id);
        }
        let incarnation = dc.layout.next_incarnation(dc.verbs.as_ref(), self.node)?;
        self.renew(incarnation)?;
        self.next_id().ok_or(Error::TxnIdsExhausted { node: self.node, incarnation, max: Self::MAX_INCARNATION })
    }

    /// The same allocator issuing only `limit` ids per incarnation (tests reach the end of an
    /// incarnation with it).
    #[cfg(test)]
    fn with_limit(mut self, limit: u64) -> TxnIds {
        self.limit = limit.clamp(1, Self::PER_INCARNATION);
        self
    }
}

fn check(node: NodeId, incarnation: u64) -> Result<()> {
    if incarnation == 0 || incarnation > TxnIds::MAX_INCARNATION {
        return Err(Error::TxnIdsExhausted { node, incarnation, max: TxnIds::MAX_INCARNATION });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use redt_dc_executor::{LocalVerbs, Verbs};
    use redt_proto::{MemStoreConfig, Topology};
    use std::sync::Arc;

    const NODE: NodeId = NodeId(3);

    /// A DC of one node, `NODE`, its MemStore freshly formatted.
    fn dc() -> DcHandle {
        let mut topology = Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml"))
            .expect("default.yaml is valid");
        topology.memstore = MemStoreConfig { size_bytes: 1 << 20, index_bytes: 4096, ring_bytes: 8192 };
        let layout = redt_dc_executor::Layout::from_config(&topology.memstore);
        let verbs = LocalVerbs::in_process([NODE], layout.size);
        layout.format(verbs.region(NODE).expect("the node's region"));
        let verbs: Arc<dyn Verbs> = Arc::new(verbs);
        DcHandle::new(&topology, verbs)
    }

    #[test]
    fn the_sequence_is_the_incarnation_over_the_counter() {
        let mut ids = TxnIds::new(NODE, 5).unwrap();
        let a = ids.next_id().unwrap();
        let b = ids.next_id().unwrap();
        assert_eq!(a, TxnId::new(NODE, 5 << 28));
        assert_eq!(b, TxnId::new(NODE, (5 << 28) | 1));
        assert_eq!(a.coordinator(), NODE);
        assert_eq!(TxnIds::incarnation_of(b), 5);
        let mut last = TxnIds::new(NODE, TxnIds::MAX_INCARNATION).unwrap();
        let top = last.next_id().unwrap();
        assert_eq!(top.coordinator(), NODE, "the last incarnation stays clear of the node bits");
        assert_eq!(TxnIds::incarnation_of(top), TxnIds::MAX_INCARNATION);
    }

    #[test]
    fn incarnation_zero_and_past_the_last_are_refused() {
        assert!(matches!(TxnIds::new(NODE, 0), Err(Error::TxnIdsExhausted { incarnation: 0, .. })));
        let past = TxnIds::MAX_INCARNATION + 1;
        assert!(matches!(TxnIds::new(NODE, past), Err(Error::TxnIdsExhausted { .. })));
        let mut ids = TxnIds::new(NODE, 2).unwrap();
        assert!(
            matches!(ids.renew(2), Err(Error::IncarnationWentBack { current: 2, got: 2, .. })),
            "the same incarnation again would repeat ids"
        );
        assert!(ids.renew(1).is_err(), "an older one too");
        assert!(ids.renew(past).is_err());
        assert_eq!(ids.incarnation(), 2, "a refused renewal changes nothing");
        ids.renew(3).unwrap();
        assert_eq!(ids.next_id(), Some(TxnId::new(NODE, 3 << 28)));
    }

    #[test]
    fn an_incarnation_ends_without_wrapping() {
        let mut ids = TxnIds::new(NODE, 1).unwrap().with_limit(3);
        let got: Vec<TxnId> = std::iter::from_fn(|| ids.next_id()).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(ids.next_id(), None, "used up: no id until a fresh incarnation");
        ids.renew(2).unwrap();
        let after = ids.next_id().unwrap();
        assert!(got.iter().all(|&id| id < after));
    }

    #[test]
    fn the_real_counter_has_two_to_the_28_ids() {
        let mut ids = TxnIds::new(NODE, 1).unwrap();
        ids.counter = TxnIds::PER_INCARNATION - 1;
        assert_eq!(ids.next_id(), Some(TxnId::new(NODE, (2 << 28) - 1)), "the last id of incarnation 1");
        assert_eq!(ids.next_id(), None, "never incarnation 2's first id by carry");
    }

    #[test]
    fn exhaustion_takes_a_fresh_incarnation_from_the_memstore() {
        let dc = dc();
        let mut ids = TxnIds::start(&dc, NODE).unwrap().with_limit(2);
        assert_eq!(ids.incarnation(), 1, "a fresh MemStore's first start uses incarnation 1");
        let first: Vec<TxnId> = (0..5).map(|_| ids.issue(&dc).unwrap()).collect();
        assert_eq!(ids.incarnation(), 3, "two more incarnations taken for ids 3 to 5");
        assert!(first.windows(2).all(|w| w[0] < w[1]), "{first:?}");
        // The renewals were persisted: the next start goes past them.
        let again = TxnIds::start(&dc, NODE).unwrap();
        assert_eq!(again.incarnation(), 4);
    }

    #[test]
    fn starting_twice_on_one_memstore_gives_disjoint_increasing_ids() {
        let dc = dc();
        let a: Vec<TxnId> = {
            let mut life1 = TxnIds::start(&dc, NODE).unwrap();
            (0..100).map(|_| life1.issue(&dc).unwrap()).collect()
        };
        // A crash lost the allocator; the MemStore keeps the count.
        let mut life2 = TxnIds::start(&dc, NODE).unwrap();
        let b: Vec<TxnId> = (0..100).map(|_| life2.issue(&dc).unwrap()).collect();
        assert_eq!(TxnIds::incarnation_of(a[0]), 1);
        assert_eq!(TxnIds::incarnation_of(b[0]), 2);
        assert!(a.iter().max() < b.iter().min(), "every id of the second life is above the first's");
    }

    #[test]
    fn a_used_up_memstore_counter_refuses_to_start() {
        let dc = dc();
        let at = dc.layout.incarnation_offset();
        dc.verbs.write(NODE, at, &TxnIds::MAX_INCARNATION.to_le_bytes()).unwrap();
        let err = TxnIds::start(&dc, NODE).unwrap_err();
        assert!(matches!(err, Error::TxnIdsExhausted { .. }), "{err:?}");
        assert!(err.to_string().contains("incarnation"), "{err}");
    }

    proptest! {
        /// Whatever the pattern of ids issued and restarts (a crash loses the allocator, the
        /// MemStore keeps its count), with incarnations small enough to run out, every id is
        /// above every id issued before it.
        #[test]
        fn ids_strictly_increase_across_restarts(
            limit in 1u64..5,
            lives in proptest::collection::vec(0usize..12, 1..8),
        ) {
            let dc = dc();
            let mut last: Option<TxnId> = None;
            for issued in lives {
                let mut ids = TxnIds::start(&dc, NODE).unwrap().with_limit(limit);
                for _ in 0..issued {
                    let id = ids.issue(&dc).unwrap();
                    prop_assert_eq!(id.coordinator(), NODE);
                    if let Some(prev) = last {
                        prop_assert!(prev < id, "{} then {}", prev, id);
                    }
                    last = Some(id);
                }
            }
        }
    }
}

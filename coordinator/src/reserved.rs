//! Transaction ids a coordinator reserved for its clients (issue 13): a client asks for an id
//! first ([`redt_proto::wire::ReserveTxnRequest`]) and submits with it, so it knows which
//! transaction to ask about if the coordinator dies before answering.
//!
//! An id is taken from the node's [`crate::TxnIds`] (it is never issued again, across restarts
//! too) and can be used once, within [`ReservedIds::VALID_FOR`] of its reservation on the
//! coordinator's hybrid logical clock: that bounds the transaction's start, hence its phase-1
//! deadline, so an outcome query can tell a transaction that never ran and can no longer run
//! ([`crate::outcome`], rule 3). Pure: the caller passes the clock readings.

use redt_proto::TxnId;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Why a submission with a reserved id is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReserved {
    /// This coordinator (in its current life) never reserved the id, or it was used already, or
    /// forgotten among more than [`ReservedIds::KEPT`] newer reservations.
    #[error(
        "transaction id {0} is not reserved at this coordinator (never reserved here, already used, or forgotten)"
    )]
    Unknown(TxnId),
    /// The submission came too late: its start would be more than `valid_for_ms` after the
    /// reservation. The id is used up.
    #[error("the reservation of transaction id {txn} expired: {late_ms} ms past its {valid_for_ms} ms")]
    Expired {
        /// The id.
        txn: TxnId,
        /// How long it was valid for.
        valid_for_ms: u64,
        /// How far past that the submission came.
        late_ms: u64,
    },
}

/// The ids a coordinator reserved and that were not used yet, with when (ms since the HLC
/// origin, the physical part of the coordinator's clock at the reservation).
#[derive(Debug, Default)]
pub struct ReservedIds {
    at_ms: HashMap<TxnId, u64>,
    /// Every id reserved, oldest first, the used ones too (each id is reserved once, so this
    /// bounds the map without a search on every use).
    order: VecDeque<TxnId>,
}

impl ReservedIds {
    /// How long a reservation holds: 2 s of the coordinator's clock (a client submits right
    /// after it reserves). It adds to how long an outcome query must wait before it can say
    /// that a transaction of which no entry is found never ran.
    pub const VALID_FOR: Duration = Duration::from_secs(2);
    /// The most reservations kept; the oldest is forgotten first (its id can no longer be
    /// used).
    pub const KEPT: usize = 100_000;

    /// Records that `txn` was reserved at `at_ms`.
    pub fn reserve(&mut self, txn: TxnId, at_ms: u64) {
        if self.at_ms.insert(txn, at_ms).is_none() {
            self.order.push_back(txn);
        }
        while self.order.len() > Self::KEPT {
            if let Some(old) = self.order.pop_front() {
                self.at_ms.remove(&old);
            }
        }
    }

    /// Uses `txn` for a transaction starting at `start_ms` (ms since the HLC origin, the
    /// physical part of its start timestamp): it can never be used again.
    ///
    /// # Errors
    /// [`NotReserved::Unknown`] if it is not reserved (or used already);
    /// [`NotReserved::Expired`] if `start_ms` is more than [`ReservedIds::VALID_FOR`] after
    /// its reservation (it is used up all the same).
    pub fn take(&mut self, txn: TxnId, start_ms: u64) -> Result<(), NotReserved> {
        let at = self.at_ms.remove(&txn).ok_or(NotReserved::Unknown(txn))?;
        let valid_for_ms = Self::VALID_FOR.as_millis() as u64;
        let late_ms = start_ms.saturating_sub(at + valid_for_ms);
        if late_ms > 0 {
            return Err(NotReserved::Expired { txn, valid_for_ms, late_ms });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_used_once_and_only_in_time() {
        let mut r = ReservedIds::default();
        let (a, b, c) = (TxnId(1), TxnId(2), TxnId(3));
        r.reserve(a, 100);
        r.reserve(b, 100);
        assert_eq!(r.take(a, 100 + 2_000), Ok(()));
        assert_eq!(r.take(a, 200), Err(NotReserved::Unknown(a)), "used once");
        assert_eq!(r.take(c, 200), Err(NotReserved::Unknown(c)), "never reserved");
        assert!(matches!(r.take(b, 100 + 2_001), Err(NotReserved::Expired { late_ms: 1, .. })));
        assert_eq!(r.take(b, 100), Err(NotReserved::Unknown(b)), "an expired id is used up");
        assert!(NotReserved::Unknown(c).to_string().contains("not reserved"));
    }

    #[test]
    fn the_oldest_reservations_are_forgotten_first() {
        let mut r = ReservedIds::default();
        for i in 0..=ReservedIds::KEPT as u64 {
            r.reserve(TxnId(i), 0);
        }
        assert_eq!(r.take(TxnId(0), 0), Err(NotReserved::Unknown(TxnId(0))));
        assert_eq!(r.take(TxnId(1), 0), Ok(()));
    }
}

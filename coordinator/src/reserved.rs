//! Transaction ids a coordinator reserved for its clients: a client asks for an id
//! first ([`redt_proto::wire::ReserveTxnRequest`]) and submits with it, so it knows which
//! transaction to ask about if the coordinator dies before answering.
//!
//! An id is taken from the node's [`crate::TxnIds`] (it is never issued again, across restarts
//! too) and can be used once, within [`ReservedIds::VALID_FOR`] of its reservation on the
//! coordinator's hybrid logical clock: that bounds the transaction's start, hence its phase-1
//! deadline, so an outcome query can tell a transaction that never ran and can no longer run
//! ([`redt_protocol::outcome`], rule 3). Pure: the caller passes the clock readings.
//!
//! # Owners
//!
//! Each reservation belongs to the caller that made it: the authenticated [`Caller`] the
//! transport gives the request, whose client or operator identity is the
//! [`redt_transport::Principal`] of its certificate's identity URI — and, since many
//! clients may share one certificate, to whoever holds the reservation's **token**, a random
//! 64-bit secret only the reply to the reservation carries. Only that caller, showing that
//! token, may submit under the id ([`ReservedIds::take`]; another one is refused with
//! [`NotReserved::OtherOwner`] and the reservation stays its owner's) or be waited for by an
//! outcome query at this coordinator ([`ReservedIds::holds`]; the node refuses other
//! identities' queries there, and answers the same identity without the token after one
//! lookup round, as any other node would).
//!
//! The ids stay the node's structured, sequential ones (node, incarnation, counter:
//! [`crate::TxnIds`]) rather than random: that structure is what keeps an id unique across
//! restarts, recovery and the decision logs find transactions by it, and its 28-bit counter
//! has no room for enough randomness to make a guess hopeless anyway. Binding the id to its
//! owner and its token is what suffices: a submission under an id is accepted only by the coordinator that
//! reserved it (any other answers [`NotReserved::Unknown`]), and that coordinator checks the
//! owner, so knowing or guessing an id gains another client nothing there. Other nodes answer
//! outcome queries without knowing the owner (redo entries do not carry it): such an answer
//! tells only whether the transaction committed and when, never what it read or wrote, and
//! changes nothing.

use redt_proto::TxnId;
use redt_transport::Caller;
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
    /// Another caller reserved the id, or the caller did not show the reservation's token:
    /// only the holder of the reservation may use it. The reservation is left as it was
    /// (still its owner's to use).
    #[error(
        "transaction id {0} was reserved by another identity, or under another token: only the holder of the \
         reservation (the certificate identity that made it, with the token it was given) may submit under it"
    )]
    OtherOwner(TxnId),
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

/// The ids a coordinator reserved, with when (ms since the HLC origin, the physical part of the
/// coordinator's clock at the reservation), by whom, and whether they were used.
#[derive(Debug, Default)]
pub struct ReservedIds {
    kept: HashMap<TxnId, Kept>,
    /// Every id reserved, oldest first, the used ones too (each id is reserved once, so this
    /// bounds the map without a search on every use).
    order: VecDeque<TxnId>,
}

/// One reservation.
#[derive(Clone, Copy, Debug)]
struct Kept {
    at_ms: u64,
    owner: Caller,
    token: u64,
    used: bool,
}

impl ReservedIds {
    /// How long a reservation holds: 2 s of the coordinator's clock (a client submits right
    /// after it reserves). It adds to how long an outcome query must wait before it can say
    /// that a transaction of which no entry is found never ran.
    pub const VALID_FOR: Duration = Duration::from_secs(2);
    /// The most reservations kept, used or not; the oldest is forgotten first (its id can no
    /// longer be used, and its owner is no longer known).
    pub const KEPT: usize = 100_000;

    /// Records that `owner` reserved `txn` at `at_ms`, and was given `token` (a random secret
    /// its submission and outcome queries must show).
    pub fn reserve(&mut self, txn: TxnId, at_ms: u64, owner: Caller, token: u64) {
        if self.kept.insert(txn, Kept { at_ms, owner, token, used: false }).is_none() {
            self.order.push_back(txn);
        }
        while self.order.len() > Self::KEPT {
            if let Some(old) = self.order.pop_front() {
                self.kept.remove(&old);
            }
        }
    }

    /// Uses `txn` for a transaction of `caller`, who shows `token`, starting at `start_ms` (ms
    /// since the HLC origin, the physical part of its start timestamp): it can never be used
    /// again.
    ///
    /// # Errors
    /// [`NotReserved::Unknown`] if it is not reserved (or used already);
    /// [`NotReserved::OtherOwner`] if `caller` is not the one that reserved it, or shows
    /// another token (nothing changes); [`NotReserved::Expired`] if `start_ms` is more than
    /// [`ReservedIds::VALID_FOR`] after its reservation (it is used up all the same).
    pub fn take(&mut self, txn: TxnId, start_ms: u64, caller: Caller, token: u64) -> Result<(), NotReserved> {
        let kept = self.kept.get_mut(&txn).filter(|k| !k.used).ok_or(NotReserved::Unknown(txn))?;
        if kept.owner != caller || kept.token != token {
            return Err(NotReserved::OtherOwner(txn));
        }
        kept.used = true;
        let valid_for_ms = Self::VALID_FOR.as_millis() as u64;
        let late_ms = start_ms.saturating_sub(kept.at_ms + valid_for_ms);
        if late_ms > 0 {
            return Err(NotReserved::Expired { txn, valid_for_ms, late_ms });
        }
        Ok(())
    }

    /// Who reserved `txn`, used or not: `None` if this coordinator (in its current life) did
    /// not, or forgot it among more than [`ReservedIds::KEPT`] newer reservations.
    pub fn owner(&self, txn: TxnId) -> Option<Caller> {
        self.kept.get(&txn).map(|k| k.owner)
    }

    /// Whether `caller`, showing `token`, is the one that reserved `txn` (used or not).
    pub fn holds(&self, txn: TxnId, caller: Caller, token: u64) -> bool {
        self.kept.get(&txn).is_some_and(|k| k.owner == caller && k.token == token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_transport::Principal;

    fn alice() -> Caller {
        Caller::Client(Principal::of_identity("redt://client/alice"))
    }

    #[test]
    fn an_id_is_used_once_and_only_in_time() {
        let mut r = ReservedIds::default();
        let (a, b, c) = (TxnId(1), TxnId(2), TxnId(3));
        r.reserve(a, 100, alice(), 42);
        r.reserve(b, 100, alice(), 43);
        assert_eq!(r.take(a, 100 + 2_000, alice(), 42), Ok(()));
        assert_eq!(r.take(a, 200, alice(), 42), Err(NotReserved::Unknown(a)), "used once");
        assert_eq!(r.take(c, 200, alice(), 42), Err(NotReserved::Unknown(c)), "never reserved");
        assert!(matches!(r.take(b, 100 + 2_001, alice(), 43), Err(NotReserved::Expired { late_ms: 1, .. })));
        assert_eq!(r.take(b, 100, alice(), 43), Err(NotReserved::Unknown(b)), "an expired id is used up");
        assert!(NotReserved::Unknown(c).to_string().contains("not reserved"));
    }

    /// Another identity (another client, the same name as an operator, or a node) can neither
    /// use an id nor use it up; the owner still can, and stays known after.
    #[test]
    fn only_the_owner_uses_an_id() {
        let mut r = ReservedIds::default();
        let a = TxnId(7);
        r.reserve(a, 100, alice(), 42);
        let others = [
            Caller::Client(Principal::of_identity("redt://client/mallory")),
            Caller::Operator(Principal::of_identity("redt://client/alice")),
            Caller::Operator(Principal::of_identity("redt://operator/alice")),
            Caller::Node(redt_proto::NodeId(0)),
        ];
        for thief in others {
            assert_eq!(r.take(a, 100, thief, 42), Err(NotReserved::OtherOwner(a)), "{thief:?}");
            assert!(!r.holds(a, thief, 42));
            assert_eq!(r.owner(a), Some(alice()));
        }
        // The same identity without the token: another client sharing alice's certificate.
        for token in [0, 41, 43] {
            assert_eq!(r.take(a, 100, alice(), token), Err(NotReserved::OtherOwner(a)), "token {token}");
            assert!(!r.holds(a, alice(), token));
        }
        assert!(NotReserved::OtherOwner(a)
            .to_string()
            .contains("reserved by another identity, or under another token"));
        assert!(r.holds(a, alice(), 42));
        assert_eq!(r.take(a, 100, alice(), 42), Ok(()), "the refusals left it reserved");
        assert_eq!(r.owner(a), Some(alice()), "a used id keeps its owner, for outcome queries");
        assert_eq!(r.take(a, 100, alice(), 42), Err(NotReserved::Unknown(a)));
        assert_eq!(r.owner(TxnId(8)), None);
    }

    #[test]
    fn the_oldest_reservations_are_forgotten_first() {
        let mut r = ReservedIds::default();
        for i in 0..=ReservedIds::KEPT as u64 {
            r.reserve(TxnId(i), 0, alice(), i);
        }
        assert_eq!(r.take(TxnId(0), 0, alice(), 0), Err(NotReserved::Unknown(TxnId(0))));
        assert_eq!(r.owner(TxnId(0)), None);
        assert_eq!(r.take(TxnId(1), 0, alice(), 1), Ok(()));
    }
}

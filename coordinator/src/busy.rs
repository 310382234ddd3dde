//! The transactions a node is working on, as their coordinator or as a recoverer, each
//! claimed until its task ends, so the recovery scan never starts a second machine for one.

use redt_proto::TxnId;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The transactions a node is working on, as their coordinator or as a recoverer: the scan
/// starts no recoverer for one of them (a second machine for one transaction on one node
/// would only compete with the first).
#[derive(Debug, Default)]
pub(crate) struct Busy(Mutex<HashSet<TxnId>>);

impl Busy {
    /// Claims `txn` until the returned [`Claim`] is dropped; `None` if it is already claimed.
    pub(crate) fn claim(self: &Arc<Self>, txn: TxnId) -> Option<Claim> {
        let fresh = self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(txn);
        fresh.then(|| Claim { busy: self.clone(), txn })
    }

    /// Whether `txn` is claimed.
    #[cfg(test)]
    pub(crate) fn contains(&self, txn: TxnId) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).contains(&txn)
    }
}

/// A transaction claimed in [`Busy`], released when dropped (however its task ends).
#[derive(Debug)]
pub(crate) struct Claim {
    busy: Arc<Busy>,
    txn: TxnId,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.busy.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.txn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::NodeId;

    #[test]
    fn a_claim_excludes_a_second_one_until_it_is_dropped() {
        let busy = Arc::new(Busy::default());
        let txn = TxnId::new(NodeId(1), 5);
        let first = busy.claim(txn).expect("a fresh transaction can be claimed");
        assert!(busy.claim(txn).is_none(), "a claimed transaction cannot be claimed again");
        assert!(busy.claim(TxnId::new(NodeId(1), 6)).is_some(), "another transaction can");
        drop(first);
        assert!(!busy.contains(txn));
        assert!(busy.claim(txn).is_some(), "released with its claim");
    }
}

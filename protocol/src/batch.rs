//! The coordinator's side of batches (docs/design.md, "Batches of held transactions"): the
//! call a batch runs as, each member's share of its answer, and when its members run alone
//! instead. The batch itself is [`redt_dc_executor::BatchProcedure`]; which held transactions
//! join one is [`crate::takeover::Takeover::batch`].

use crate::machine::{TxnAnswer, TxnStatus};
use crate::stats::AbortCause;
use redt_proto::wire::{BatchCall, ProcedureCall, ProcedureKind};

/// The call of a batch of `calls`, run in that order.
pub fn call(calls: Vec<ProcedureCall>) -> ProcedureCall {
    ProcedureCall { kind: Some(ProcedureKind::Batch(BatchCall { calls })) }
}

/// Whether the members of a batch answered `answer` run alone instead: the batch aborted on a
/// member's own abort (a procedure's [`crate::stats::AbortCause::User`]), or was refused
/// before it ran (no cause: it could not be built as one batch). Any other abort is theirs
/// too, as it would have been alone (a conflict, a timeout), and the clients may retry.
pub fn runs_alone(answer: &TxnAnswer) -> bool {
    matches!(answer.status, TxnStatus::Aborted(_)) && matches!(answer.cause, Some(AbortCause::User) | None)
}

/// A batch's reads ([`crate::txn::reads`]: each key/value member's, in order) split per call
/// of `calls`: a key/value call's one per operation; nothing for another kind. All empty when
/// they do not add up (the reads were not known).
pub fn split_reads(calls: &[ProcedureCall], reads: Vec<Option<Vec<u8>>>) -> Vec<Vec<Option<Vec<u8>>>> {
    let lens: Vec<usize> = calls
        .iter()
        .map(|c| match &c.kind {
            Some(ProcedureKind::Kv(kv)) => kv.ops.len(),
            _ => 0,
        })
        .collect();
    if lens.iter().sum::<usize>() != reads.len() {
        return vec![Vec::new(); calls.len()];
    }
    let mut rest = reads.into_iter();
    lens.into_iter().map(|n| rest.by_ref().take(n).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::kv_call;
    use redt_dc_executor::KvOp;
    use redt_proto::{TableId, TxnId};

    #[test]
    fn each_key_value_member_gets_its_own_reads_in_order() {
        let calls = vec![
            kv_call(TableId(1), &[KvOp::Read(1), KvOp::Add(2, 1)]),
            redt_tpcc::procedures::call(1, vec![]),
            kv_call(TableId(1), &[KvOp::Read(2)]),
        ];
        let v = |b: u8| Some(vec![b]);
        let split = split_reads(&calls, vec![v(1), None, v(3)]);
        assert_eq!(split, vec![vec![v(1), None], vec![], vec![v(3)]]);
        // Reads that do not add up are not handed out.
        assert_eq!(split_reads(&calls, vec![v(1)]), vec![Vec::<Option<Vec<u8>>>::new(); 3]);
    }

    #[test]
    fn members_run_alone_after_a_members_own_abort_or_a_refusal_only() {
        let answer = |status, cause| TxnAnswer { txn: TxnId(1), status, cause, reads: vec![] };
        let aborted = || TxnStatus::Aborted("x".into());
        assert!(runs_alone(&answer(aborted(), Some(AbortCause::User))));
        assert!(runs_alone(&answer(aborted(), None)));
        assert!(!runs_alone(&answer(aborted(), Some(AbortCause::Timeout))));
        assert!(!runs_alone(&answer(TxnStatus::Committed, None)));
    }
}

//! The one shape of a node's per-transaction protocol state machines (in the manner of
//! quinn-proto's `Connection`): a coordinator's transaction under any commit protocol
//! (RedT's [`crate::txn::CoordinatorTxn`], the baselines' [`crate::baseline::BaselineTxn`]) and a
//! baseline primary's part of one request ([`crate::baseline::PrimaryTxn`]).
//!
//! A [`TxnMachine`] sends nothing, reads no clock and never sleeps. Its driver (the node's one
//! driver loop, `Node::drive`; the simulator's event loop) calls it in this order:
//!
//! 1. drain [`TxnMachine::poll_action`] and carry out every [`Action`]: each
//!    [`Action::Send`] is one attempt whose fate — exactly one reply or one failure — comes
//!    back through [`TxnMachine::handle_reply`] or [`TxnMachine::handle_failure`];
//! 2. stop once [`TxnMachine::is_done`] (attempts still in flight may be left to finish
//!    unheard);
//! 3. otherwise wait for the first of: an attempt's fate, or the deadline
//!    [`TxnMachine::poll_timeout`] returned (then [`TxnMachine::handle_timeout`]); feed it with
//!    the current time and go back to 1.

use crate::cost::Cost;
use crate::message::{Reply, Request};
use crate::stats::{AbortCause, Class, TxnCost};
use redt_proto::{NodeId, Outcome, TxnId};
use std::time::Instant;

/// How a transaction ended, as told to its client: its [`Outcome`] and, when it did not
/// commit, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// Committed.
    Committed,
    /// Certainly not committed.
    Aborted(String),
    /// The outcome is not known (the abort could not be recorded at a majority yet).
    Unknown(String),
}

impl TxnStatus {
    /// Its kind, without the why.
    pub fn outcome(&self) -> Outcome {
        match self {
            TxnStatus::Committed => Outcome::Committed,
            TxnStatus::Aborted(_) => Outcome::Aborted,
            TxnStatus::Unknown(_) => Outcome::Unknown,
        }
    }
}

/// The answer to a client: the transaction, its status, why it aborted and what it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnAnswer {
    /// The transaction id.
    pub txn: TxnId,
    /// Its status.
    pub status: TxnStatus,
    /// For an abort ([`TxnStatus::Aborted`]) decided by a coordinator: why, as a label
    /// ([`AbortCause::is_retryable`] tells a client whether running the call again may
    /// commit). `None` for a commit, an unknown outcome, and an abort no coordinator decided
    /// (a call refused before it ran: over a limit, malformed, an unusable reservation, no
    /// coordinator reachable; or the answer of an older node, which sends no cause).
    pub cause: Option<AbortCause>,
    /// For a committed key/value call: per operation, the value read (`None` for writes).
    pub reads: Vec<Option<Vec<u8>>>,
}

impl TxnAnswer {
    /// An abort of `txn` no coordinator decided (a call refused before it ran), saying `why`:
    /// no cause, nothing read.
    pub fn refused(txn: TxnId, why: impl Into<String>) -> TxnAnswer {
        TxnAnswer { txn, status: TxnStatus::Aborted(why.into()), cause: None, reads: vec![] }
    }

    /// An unknown outcome of `txn`, saying `why`: nothing read.
    pub fn unknown(txn: TxnId, why: impl Into<String>) -> TxnAnswer {
        TxnAnswer { txn, status: TxnStatus::Unknown(why.into()), cause: None, reads: vec![] }
    }
}

/// Identifies one request a machine asked its driver to send (unique per machine).
pub type AttemptId = u64;

/// What the driver must do next for a transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send `request` to `to` (the machine's own node included: the driver hands it to the
    /// node's own request handler, without the network) and report its fate under `attempt`.
    Send {
        /// Identifies the attempt in [`TxnMachine::handle_reply`] / `handle_failure`.
        attempt: AttemptId,
        /// The receiving node.
        to: NodeId,
        /// The request.
        request: Request,
    },
    /// Answer the client (once per transaction; coordinators only).
    Answer {
        /// What the client is told; for an abort, its [`TxnAnswer::cause`] labels the abort
        /// counters too.
        answer: TxnAnswer,
        /// The transaction's class.
        class: Class,
        /// For a commit: its inter-DC cost as counted at the answer (RedT Table 2).
        cost: Option<TxnCost>,
    },
    /// Answer the node whose request this machine serves (once; a baseline primary's part,
    /// [`crate::baseline::PrimaryTxn`]; a coordinator never yields it).
    Reply {
        /// The reply.
        reply: Reply,
    },
    /// Everything is done (phase 2 delivered or given up): its inter-DC cost, counted after
    /// the answer when the answer came first (early ack).
    Finished {
        /// The transaction's class.
        class: Class,
        /// Phase 2's cost when it was not already part of the answer's.
        after_answer: Option<Cost>,
    },
}

/// A per-transaction protocol state machine: inputs `handle_*` with the current time, outputs
/// `poll_*` (see the module docs for the calling order). Implemented by every commit protocol's
/// coordinator (RedT, 2PC-Paxos, EP-Paxos, TAPIR; RedT §4.2 and §4.3 Table 1) and by the
/// baselines' primary side.
pub trait TxnMachine {
    /// The transaction id.
    fn txn(&self) -> TxnId;

    /// Whether the machine has nothing left to do: answered, its last messages delivered or
    /// given up. The driver stops driving it then.
    fn is_done(&self) -> bool;

    /// Handles the reply to `attempt` received at `now`. A [`Reply::Error`] counts as a
    /// failure; a reply to an unknown or already-settled attempt is ignored.
    fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant);

    /// Handles the failure of `attempt` at `now` (unreachable peer, call deadline, an error
    /// answer); `error` says why, for the logs.
    fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant);

    /// Handles the timer set by [`TxnMachine::poll_timeout`] firing at `now` (a late or
    /// early call is harmless: only deadlines at or before `now` act).
    fn handle_timeout(&mut self, now: Instant);

    /// The next action for the driver, if any.
    fn poll_action(&mut self) -> Option<Action>;

    /// When the driver must call [`TxnMachine::handle_timeout`] next (`None`: no timer).
    fn poll_timeout(&self) -> Option<Instant>;

    /// Once a coordinator has decided, the phase 2 it sends each DC, for its later
    /// conflicting transactions to carry ([`crate::takeover`]); `None` before, and for every
    /// machine that is not a RedT coordinator.
    fn phase2(&self) -> Option<std::collections::BTreeMap<redt_proto::DcId, crate::message::Decide>> {
        None
    }
}

/// The earliest of some optional deadlines (`None` when there is none).
pub(crate) fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines.into_iter().flatten().min()
}

//! How a transaction ended, as a plain kind: committed, aborted, or not known. The one
//! three-way answer every layer counts and checks by (a node's answer counters, the
//! simulator's and the harness's histories, Elle's checker, the drill's acknowledged writes).

/// How a transaction ended, as its client was told (or as a history records it), without the
/// why: the kind of `redt_protocol::TxnStatus`, and Jepsen's `ok` / `fail` / `info`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Committed (Jepsen's `ok`).
    Committed,
    /// Certainly not committed, and never will be (Jepsen's `fail`).
    Aborted,
    /// Not known: it may or may not have committed (Jepsen's `info`).
    Unknown,
}

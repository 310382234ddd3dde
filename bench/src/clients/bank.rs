//! The bank's closed-loop clients: each draws transfers and read-alls
//! ([`redt_workload::bank::draw`]) from its own seeded generator, submits them (again after a
//! retryable abort, as [`BankClients::retry`] says) and hands every transaction's last answer
//! to the runner. A transfer is applied at most once: only an abort, which certainly did not
//! commit, is submitted again.

use super::{ids, retry_rng, ClientId, OnAnswer, Submit, NO_ROUTE_PAUSE, UNKNOWN_PAUSE};
use rand::SeedableRng;
use redt_coordinator::{RetryPolicy, TxnStatus};
use redt_proto::{TableId, Topology};
use redt_protocol::call;
use redt_workload::bank::{self, BankTxn};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What the bank's clients submit, and how many of them run.
#[derive(Clone, Debug)]
pub struct BankClients {
    /// The key/value table of the accounts.
    pub table: TableId,
    /// The accounts' keys (at least 2).
    pub accounts: Arc<Vec<u64>>,
    /// Largest amount of one transfer (at least 1 is drawn).
    pub max_transfer: i64,
    /// Fraction of transactions that read every account (0: transfers only, drawn as
    /// [`bank::draw_transfer`] draws them).
    pub read_ratio: f64,
    /// Closed-loop clients per node.
    pub per_node: usize,
    /// Seed of the clients' generators: client `c` of node `n` draws from
    /// `seed ^ (n << 32 | c)`.
    pub seed: u64,
    /// How a transaction that aborted for a retryable cause is retried.
    pub retry: RetryPolicy,
}

impl BankClients {
    /// Spawns [`BankClients::per_node`] clients on every node of `topo`, submitting through
    /// `submit` and telling `on_answer` of every answer, until `stop` is set.
    pub fn spawn(
        &self,
        topo: &Topology,
        submit: &Submit,
        stop: &Arc<AtomicBool>,
        on_answer: OnAnswer<BankTxn>,
    ) -> tokio::task::JoinSet<()> {
        let mut tasks = tokio::task::JoinSet::new();
        for id in ids(topo, self.per_node) {
            tasks.spawn(self.clone().client(id, submit.clone(), stop.clone(), on_answer.clone()));
        }
        tasks
    }

    async fn client(self, id: ClientId, submit: Submit, stop: Arc<AtomicBool>, on_answer: OnAnswer<BankTxn>) {
        let seed = self.seed ^ ((id.home.0 as u64) << 32 | id.on_node as u64);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut pauses = retry_rng(seed);
        while !stop.load(Ordering::Relaxed) {
            // A client whose node a drill stopped goes on through the nearest node up.
            let Some(node) = submit.route(id.home) else {
                tokio::time::sleep(NO_ROUTE_PAUSE).await;
                continue;
            };
            let txn = bank::draw(&mut rng, &self.accounts, self.max_transfer, self.read_ratio);
            let submitted = Instant::now();
            let call = call::kv_call(self.table, txn.ops());
            let out = node.submit_retrying(call, &self.retry, &mut pauses, &stop).await;
            on_answer(&txn, submitted, &out);
            if matches!(out.answer().status, TxnStatus::Unknown(_)) {
                tokio::time::sleep(UNKNOWN_PAUSE).await;
            }
        }
    }
}

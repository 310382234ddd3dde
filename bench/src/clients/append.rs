//! The list-append clients: each draws transactions of appends and reads
//! ([`redt_workload::append::draw`]) on the active keys the clients share, from its own seeded
//! generator; submits each (again after a retryable abort, as [`AppendClients::retry`] says);
//! records each one's invocation and completion in the history, the completion its last
//! attempt's outcome (Jepsen's processes: a client whose outcome stayed unknown goes on as a
//! new process); and hands every transaction's last answer to the runner.

use super::{ids, retry_rng, ClientId, OnAnswer, Submit, NO_ROUTE_PAUSE, UNKNOWN_PAUSE};
use rand::SeedableRng;
use redt_checkers::history::{Event, EventType, HistoryWriter, Mop};
use redt_coordinator::{RetryPolicy, TxnStatus};
use redt_proto::{TableId, Topology};
use redt_protocol::call;
use redt_workload::append::{fill, kv_ops, Keys};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the list-append clients submit, and how many of them run.
#[derive(Clone, Debug)]
pub struct AppendClients {
    /// The key/value table of the lists.
    pub table: TableId,
    /// The first key; the clients take fresh keys from it on.
    pub first_key: u64,
    /// Active keys at any time.
    pub keys: usize,
    /// Appends after which a key is retired for a fresh one.
    pub max_writes_per_key: u32,
    /// Most micro-operations per transaction (at least 1).
    pub max_txn_len: usize,
    /// Fraction of micro-operations that are reads.
    pub read_ratio: f64,
    /// Closed-loop clients per node.
    pub per_node: usize,
    /// Seed of the clients' generators: process `i` (the `i`-th client,
    /// [`super::ClientId::index`]) draws from `seed ^ i·0x9e3779b97f4a7c15`.
    pub seed: u64,
    /// How a transaction that aborted for a retryable cause is retried.
    pub retry: RetryPolicy,
    /// Where each client submits.
    pub routing: crate::append::Routing,
}

/// What the clients share.
struct Shared {
    table: TableId,
    /// With [`crate::append::Routing::KeyOwner`], the topology the owners are taken from.
    owners: Option<Arc<Topology>>,
    max_txn_len: usize,
    read_ratio: f64,
    retry: RetryPolicy,
    /// Clients in all (a new process number is the old one plus this).
    clients: u64,
    keys: Mutex<Keys>,
    /// The next value appended (unique, increasing from 1).
    values: AtomicU64,
    history: Mutex<HistoryWriter>,
    /// The first error writing the history.
    error: Mutex<Option<String>>,
}

impl Shared {
    fn record(&self, kind: EventType, process: u64, mops: &[Mop], err: Option<String>) {
        if let Err(e) = self.history.lock().expect("history").record(kind, process, mops, err) {
            self.error.lock().expect("error slot").get_or_insert(e);
        }
    }
}

/// The list-append clients while they run ([`AppendClients::spawn`]).
pub struct Appending {
    shared: Arc<Shared>,
    first_key: u64,
    tasks: tokio::task::JoinSet<()>,
}

/// What the clients did: the history, and the keys they used.
pub struct AppendHistory {
    /// Every invocation and completion, in order.
    pub events: Vec<Event>,
    /// The keys used (active and retired).
    pub keys: Range<u64>,
}

impl AppendClients {
    /// Restarts `history`'s clock and spawns [`AppendClients::per_node`] clients on every node
    /// of `topo`, recording into `history`, submitting through `submit` and telling
    /// `on_answer` of every answer, until `stop` is set.
    pub fn spawn(
        &self,
        topo: &Topology,
        submit: &Submit,
        stop: &Arc<AtomicBool>,
        mut history: HistoryWriter,
        on_answer: OnAnswer<[Mop]>,
    ) -> Appending {
        history.restart_clock();
        let owners = (self.routing == crate::append::Routing::KeyOwner).then(|| Arc::new(topo.clone()));
        let shared = Arc::new(Shared {
            table: self.table,
            owners,
            max_txn_len: self.max_txn_len,
            read_ratio: self.read_ratio,
            retry: self.retry,
            clients: (self.per_node * topo.nodes.len()) as u64,
            keys: Mutex::new(Keys::new(self.first_key, self.keys, self.max_writes_per_key)),
            values: AtomicU64::new(1),
            history: Mutex::new(history),
            error: Mutex::new(None),
        });
        let mut tasks = tokio::task::JoinSet::new();
        for id in ids(topo, self.per_node) {
            let seed = self.seed ^ id.index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            tasks.spawn(client(shared.clone(), id, seed, submit.clone(), stop.clone(), on_answer.clone()));
        }
        Appending { shared, first_key: self.first_key, tasks }
    }
}

impl Appending {
    /// Waits for the clients to end (set their `stop` first) and returns what they did.
    ///
    /// # Errors
    /// Writing the history.
    pub async fn finish(mut self) -> Result<AppendHistory, String> {
        while self.tasks.join_next().await.is_some() {}
        let shared = Arc::try_unwrap(self.shared).map_err(|_| "history still shared")?;
        if let Some(e) = shared.error.into_inner().map_err(|e| e.to_string())? {
            return Err(format!("writing the history: {e}"));
        }
        let end = shared.keys.into_inner().map_err(|e| e.to_string())?.end();
        let events = shared.history.into_inner().map_err(|e| e.to_string())?.finish()?;
        Ok(AppendHistory { events, keys: self.first_key..end })
    }
}

/// The node of the primary replica of the first key `mops` appends to, else of the first
/// key it reads (`None` for a table `topo` does not have).
fn key_owner(topo: &Topology, table: TableId, mops: &[Mop]) -> Option<redt_proto::NodeId> {
    let key = mops
        .iter()
        .find_map(|m| match m {
            Mop::Append(k, _) => Some(*k),
            Mop::Read(..) => None,
        })
        .or_else(|| {
            mops.first().map(|m| match m {
                Mop::Append(k, _) | Mop::Read(k, _) => *k,
            })
        })?;
    let p = topo.partition_of(topo.table(table)?, key);
    topo.partitions.get(p.0 as usize)?.replicas.first().copied()
}

async fn client(
    sh: Arc<Shared>,
    id: ClientId,
    seed: u64,
    submit: Submit,
    stop: Arc<AtomicBool>,
    on_answer: OnAnswer<[Mop]>,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut pauses = retry_rng(seed);
    let mut process = id.index;
    while !stop.load(Ordering::Relaxed) {
        // A client whose node a drill stopped goes on through the nearest node up.
        let Some(mut node) = submit.route(id.home) else {
            tokio::time::sleep(NO_ROUTE_PAUSE).await;
            continue;
        };
        let mops = {
            let mut keys = sh.keys.lock().unwrap_or_else(|p| p.into_inner());
            redt_workload::append::draw(&mut keys, sh.max_txn_len, sh.read_ratio, &mut rng, || {
                sh.values.fetch_add(1, Ordering::Relaxed)
            })
        };
        if let Some(owner) = sh.owners.as_ref().and_then(|t| key_owner(t, sh.table, &mops)) {
            if let Some(routed) = submit.route(owner) {
                node = routed;
            }
        }
        // One invocation and one completion per transaction, however many attempts it took:
        // an aborted attempt certainly did not commit, so only the last one's outcome is
        // recorded (a `fail` still means certainly not committed).
        sh.record(EventType::Invoke, process, &mops, None);
        let submitted = Instant::now();
        let call = call::kv_call(sh.table, &kv_ops(&mops));
        let retried = node.submit_retrying(call, &sh.retry, &mut pauses, &stop).await;
        on_answer(&mops, submitted, &retried);
        let out = retried.last;
        match out.status {
            TxnStatus::Committed => sh.record(EventType::Ok, process, &fill(&mops, &out.reads), None),
            TxnStatus::Aborted(e) => sh.record(EventType::Fail, process, &mops, Some(e)),
            TxnStatus::Unknown(e) => {
                sh.record(EventType::Info, process, &mops, Some(e));
                // Jepsen: a process whose operation is indeterminate is gone.
                process += sh.clients;
                tokio::time::sleep(UNKNOWN_PAUSE).await;
            }
        }
    }
}

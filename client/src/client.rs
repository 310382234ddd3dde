//! [`Client`]: connections to every node's gRPC endpoint, transactions with bounded retries,
//! failover, and outcome queries after a lost answer.

use crate::error::{classify, Error, Failure};
use crate::interactive::Transaction;
use crate::txn::{Outcome, Txn};
use redt_api::v1 as api;
use redt_api::v1::transactions_client::TransactionsClient;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// How a [`Client`] retries and waits.
#[derive(Clone, Debug)]
pub struct Options {
    /// Attempts of one transaction (retryable aborts and failovers), at least 1. Default 8.
    pub attempts: u32,
    /// The first backoff after a retryable abort; each next one doubles, up to
    /// `backoff_cap`, and the wait is drawn uniformly below it (full jitter). Default 10 ms.
    pub backoff: Duration,
    /// The longest backoff. Default 1 s.
    pub backoff_cap: Duration,
    /// The deadline of one call. Default 10 s.
    pub deadline: Duration,
    /// How long to keep asking the outcome of a transaction whose answer was lost before
    /// giving up with [`Error::OutcomeUnknown`]. Default 60 s.
    pub outcome_patience: Duration,
    /// How long a node that failed a call is passed over. Default 2 s.
    pub down_for: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            attempts: 8,
            backoff: Duration::from_millis(10),
            backoff_cap: Duration::from_secs(1),
            deadline: Duration::from_secs(10),
            outcome_patience: Duration::from_secs(60),
            down_for: Duration::from_secs(2),
        }
    }
}

/// The client certificate and the CA of a cluster, PEM.
#[derive(Clone, Debug)]
pub struct Tls {
    /// The cluster CA's certificate (`ca.pem`).
    pub ca: Vec<u8>,
    /// The client's certificate chain (`<name>.pem`).
    pub cert: Vec<u8>,
    /// The client's private key (`<name>.key`).
    pub key: Vec<u8>,
}

impl Tls {
    /// Reads `ca.pem`, `<identity>.pem` and `<identity>.key` from a cluster's certificate
    /// directory (`redt certs init`; `redt certs issue --role client NAME` adds identities).
    ///
    /// # Errors
    /// [`Error::Config`] naming a file that cannot be read.
    pub fn from_dir(dir: &Path, identity: &str) -> Result<Tls, Error> {
        let read = |f: String| {
            let p = dir.join(&f);
            std::fs::read(&p).map_err(|e| Error::Config(format!("{}: {e}", p.display())))
        };
        Ok(Tls {
            ca: read("ca.pem".into())?,
            cert: read(format!("{identity}.pem"))?,
            key: read(format!("{identity}.key"))?,
        })
    }
}

/// One node's endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// The node's name: its certificate is valid for it (the TLS server name).
    pub node: String,
    /// `IP:PORT` (or `host:port`) of its gRPC endpoint.
    pub addr: String,
}

/// A client of a cluster's gRPC endpoints. Cheap to share (`&Client` from many tasks); its
/// connections are opened on first use and reopened after a failure.
pub struct Client {
    nodes: Vec<(String, TransactionsClient<Channel>)>,
    options: Options,
    down: Mutex<HashMap<usize, Instant>>,
}

impl Client {
    /// A client of the nodes `endpoints` (the first is preferred), presenting `tls`.
    ///
    /// # Errors
    /// [`Error::Config`]: no endpoint, a malformed address, or certificates tonic refuses.
    pub fn connect(endpoints: &[NodeEndpoint], tls: &Tls, options: Options) -> Result<Client, Error> {
        if endpoints.is_empty() {
            return Err(Error::Config("no endpoint to connect to".into()));
        }
        let mut nodes = Vec::with_capacity(endpoints.len());
        for e in endpoints {
            let config = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&tls.ca))
                .identity(Identity::from_pem(&tls.cert, &tls.key))
                .domain_name(e.node.clone());
            let bad = |what: tonic::transport::Error| {
                Error::Config(format!("the endpoint of {} ({}): {what}", e.node, e.addr))
            };
            let channel = Endpoint::from_shared(format!("https://{}", e.addr))
                .map_err(bad)?
                .tls_config(config)
                .map_err(bad)?
                .connect_timeout(options.deadline.min(Duration::from_secs(5)))
                .tcp_nodelay(true)
                .connect_lazy();
            nodes.push((e.node.clone(), TransactionsClient::new(channel)));
        }
        Ok(Client { nodes, options, down: Mutex::new(HashMap::new()) })
    }

    /// A client of the cluster `redt cluster up --run-dir RUN_DIR --grpc-port PORT` started:
    /// its endpoints from `RUN_DIR/grpc-endpoints.json`, the identity `identity` (e.g.
    /// `redt-client`) from `RUN_DIR/certs`.
    ///
    /// # Errors
    /// [`Error::Config`]: a file missing or malformed.
    pub fn from_run_dir(run_dir: &Path, identity: &str, options: Options) -> Result<Client, Error> {
        let file = run_dir.join("grpc-endpoints.json");
        let text = std::fs::read_to_string(&file)
            .map_err(|e| Error::Config(format!("{}: {e} (is the cluster up with --grpc-port?)", file.display())))?;
        let list: Vec<serde_json::Value> =
            serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", file.display())))?;
        let endpoints = list
            .iter()
            .map(|v| match (v["node"].as_str(), v["addr"].as_str()) {
                (Some(node), Some(addr)) => Ok(NodeEndpoint { node: node.into(), addr: addr.into() }),
                _ => Err(Error::Config(format!("{}: an entry without node and addr: {v}", file.display()))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Client::connect(&endpoints, &Tls::from_dir(&run_dir.join("certs"), identity)?, options)
    }

    /// The nodes' names, in the order given.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|(n, _)| n.as_str())
    }

    /// The options in use.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The nodes to try, from `prefer` on, those not passed over first.
    fn order(&self, prefer: usize) -> Vec<usize> {
        let n = self.nodes.len();
        let now = Instant::now();
        let down = self.down.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let all: Vec<usize> = (0..n).map(|i| (prefer + i) % n).collect();
        let (up, passed): (Vec<usize>, Vec<usize>) =
            all.into_iter().partition(|i| down.get(i).is_none_or(|t| *t <= now));
        up.into_iter().chain(passed).collect()
    }

    fn mark_down(&self, i: usize) {
        let mut down = self.down.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        down.insert(i, Instant::now() + self.options.down_for);
    }

    fn stub(&self, i: usize) -> TransactionsClient<Channel> {
        self.nodes[i].1.clone()
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.options.deadline);
        r
    }

    /// Waits the backoff before attempt `attempt` (0-based; none before the first).
    pub async fn backoff(&self, attempt: u32) {
        if attempt == 0 {
            return;
        }
        let exp = self.options.backoff.saturating_mul(1u32 << (attempt - 1).min(20));
        let cap = exp.min(self.options.backoff_cap);
        let wait = cap.mul_f64(rand::random::<f64>());
        tokio::time::sleep(wait).await;
    }

    /// Runs `txn` as one transaction, at node `prefer` first (an index into the endpoints),
    /// and answers what it read.
    ///
    /// Each attempt runs under a transaction id reserved at the node it is sent to. A
    /// retryable abort is retried after a backoff, up to `attempts`; a lost answer (a node
    /// that died, a deadline, a broken connection) is resolved by asking the transaction's
    /// outcome, at that node and then at the others, and it is run again only if found
    /// aborted.
    ///
    /// # Errors
    /// [`Error::Aborted`] for an abort that is not retryable or the last attempt's;
    /// [`Error::OutcomeUnknown`] when asking found no final outcome within
    /// `outcome_patience`; [`Error::Refused`] for a request refused before it ran;
    /// [`Error::Unavailable`] when no node could be reached.
    pub async fn run(&self, txn: &Txn, prefer: usize) -> Result<Outcome, Error> {
        self.run_request(txn.request(), prefer).await
    }

    /// [`Client::run`] for any request (a registered procedure's too).
    ///
    /// # Errors
    /// As [`Client::run`].
    pub async fn run_request(&self, mut req: api::RunRequest, prefer: usize) -> Result<Outcome, Error> {
        let mut last = None;
        for attempt in 0..self.options.attempts.max(1) {
            self.backoff(attempt).await;
            let mut sent = false;
            for i in self.order(prefer + attempt as usize) {
                let mut stub = self.stub(i);
                let res = match stub.reserve(self.request(api::ReserveRequest {})).await {
                    Ok(r) => r.into_inner(),
                    Err(s) => {
                        self.mark_down(i);
                        last = Some(Error::Unavailable(format!("{}: {}", self.nodes[i].0, s.message())));
                        continue;
                    }
                };
                req.reservation = Some(res);
                sent = true;
                match stub.run(self.request(req.clone())).await {
                    Ok(r) => {
                        let r = r.into_inner();
                        return Ok(Outcome { txn: r.txn, results: r.results, reads_lost: false });
                    }
                    Err(s) => match classify(s, res.txn) {
                        Failure::Aborted(e) if e.is_retryable() => {
                            last = Some(e);
                            break;
                        }
                        Failure::Aborted(e) | Failure::Refused(e) => return Err(e),
                        Failure::Unknown(_) => {
                            self.mark_down(i);
                            let o = self.outcome(&res, i).await?;
                            if o.state == api::outcome_response::State::Committed as i32 {
                                return Ok(Outcome { txn: o.txn, results: Vec::new(), reads_lost: true });
                            }
                            last = Some(Error::Aborted {
                                txn: res.txn,
                                cause: "answer_lost".into(),
                                retryable: true,
                                message: o.detail,
                            });
                            break;
                        }
                    },
                }
            }
            if !sent && last.is_none() {
                last = Some(Error::Unavailable("no node to send to".into()));
            }
        }
        Err(last.unwrap_or_else(|| Error::Unavailable("no attempt made".into())))
    }

    /// Runs `txn` once at node `node` (an index into the endpoints), without a reservation
    /// and without retries: one call. For measurements, and callers that settle a lost answer
    /// their own way — an unknown outcome cannot be asked about afterwards.
    ///
    /// # Errors
    /// [`Error::Aborted`], [`Error::Refused`]; [`Error::OutcomeUnknown`] (transaction id 0
    /// when the node did not say it) for anything else.
    pub async fn run_once(&self, txn: &Txn, node: usize) -> Result<Outcome, Error> {
        let i = node % self.nodes.len();
        match self.stub(i).run(self.request(txn.request())).await {
            Ok(r) => {
                let r = r.into_inner();
                Ok(Outcome { txn: r.txn, results: r.results, reads_lost: false })
            }
            Err(s) => match classify(s, 0) {
                Failure::Aborted(e) | Failure::Refused(e) => Err(e),
                Failure::Unknown(s) => {
                    let (_, meta) = crate::error::info(&s);
                    let txn = meta.get("txn").and_then(|t| t.parse().ok()).unwrap_or(0);
                    Err(Error::OutcomeUnknown { txn, message: s.message().to_string() })
                }
            },
        }
    }

    /// Asks the outcome of the transaction reserved as `res`, at node `first` and then the
    /// others, until it is final (committed or aborted).
    ///
    /// # Errors
    /// [`Error::OutcomeUnknown`] after `outcome_patience` without a final answer.
    pub async fn outcome(&self, res: &api::Reservation, first: usize) -> Result<api::OutcomeResponse, Error> {
        use api::outcome_response::State;
        let end = Instant::now() + self.options.outcome_patience;
        let mut last = String::from("no node answered");
        while Instant::now() < end {
            for i in self.order(first) {
                let q = api::OutcomeRequest { reservation: Some(*res), wait_ms: 2_000 };
                match self.stub(i).outcome(self.request(q)).await {
                    Ok(o) => {
                        let o = o.into_inner();
                        if o.state == State::Committed as i32 || o.state == State::Aborted as i32 {
                            return Ok(o);
                        }
                        last = o.detail;
                    }
                    Err(s) => {
                        self.mark_down(i);
                        last = s.message().to_string();
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(Error::OutcomeUnknown { txn: res.txn, message: last })
    }

    /// Reads `keys` of `table` without locks, each with its version (the read phase of an
    /// optimistic transaction; [`Client::begin`] keeps the versions for the commit).
    ///
    /// A key a writer holds while its commit is applied is read again after a backoff
    /// (`NOT_READY`), up to `attempts` times; a node that does not answer is passed over.
    ///
    /// # Errors
    /// [`Error::Refused`] for a malformed request (an unknown table, too many keys);
    /// [`Error::Unavailable`] when no node answered, or a key stayed busy.
    pub async fn read(&self, table: &str, keys: &[u64], prefer: usize) -> Result<Vec<api::VersionedValue>, Error> {
        let mut last = String::from("no node to ask");
        for attempt in 0..self.options.attempts.max(1) {
            self.backoff(attempt).await;
            for i in self.order(prefer) {
                let q = api::ReadRequest { table: table.into(), keys: keys.to_vec() };
                match self.stub(i).read(self.request(q)).await {
                    Ok(r) => return Ok(r.into_inner().values),
                    Err(s) => {
                        let busy = crate::error::info(&s).0 == crate::error::NOT_READY;
                        match classify(s, 0) {
                            Failure::Refused(e) | Failure::Aborted(e) => return Err(e),
                            Failure::Unknown(s) => {
                                last = format!("{}: {}", self.nodes[i].0, s.message());
                                if busy {
                                    break;
                                }
                                self.mark_down(i);
                            }
                        }
                    }
                }
            }
        }
        Err(Error::Unavailable(last))
    }

    /// Node `node`'s status (`count_locks` needs an operator certificate).
    ///
    /// # Errors
    /// [`Error::Refused`] (`FORBIDDEN` for `count_locks` with a client certificate);
    /// [`Error::Unavailable`] when the node does not answer.
    pub async fn status(&self, node: usize, count_locks: bool) -> Result<api::StatusResponse, Error> {
        let i = node % self.nodes.len();
        match self.stub(i).status(self.request(api::StatusRequest { count_locks })).await {
            Ok(s) => Ok(s.into_inner()),
            Err(s) => match classify(s, 0) {
                Failure::Refused(e) | Failure::Aborted(e) => Err(e),
                Failure::Unknown(s) => Err(Error::Unavailable(format!("{}: {}", self.nodes[i].0, s.message()))),
            },
        }
    }

    /// Begins an optimistic transaction on `table`, sent to node `prefer` first: its reads
    /// take no locks, and its commit checks that nothing it read changed.
    pub fn begin(&self, table: &str, prefer: usize) -> Transaction<'_> {
        Transaction::new(self, table, prefer)
    }
}

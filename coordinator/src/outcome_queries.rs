//! What keeps outcome queries (`Body::OutcomeQuery`, `Node::outcome_query`) cheap and
//! bounded on a node: how many one connection may have in flight, the lookup rounds
//! concurrent queries share, and the final lookups the node remembers.
//!
//! One lookup round costs a `TxnLookup` request to one node of every other DC and a read of
//! the node's own DC on its executor thread. So:
//!
//! - a connection has at most [`MAX_IN_FLIGHT`] queries in flight; one more is refused at
//!   once (`OVER_LIMIT`, the text naming the cap: [`OverCap`]);
//! - queries for the same transaction and start share one round while it runs, and use its
//!   findings for [`ROUND_FRESH_FOR`] after it ended (judged again, by each query's own
//!   reservation and clock);
//! - a final lookup (committed or aborted) is remembered, the last [`FINALS_KEPT`] of them,
//!   so asking again costs no round. It is remembered under the query's transaction id and
//!   reservation (`start_after`, `valid_for_ms`): a lookup saying the transaction never ran
//!   rests on the reservation the query gave, so a query with another (made-up) reservation
//!   neither reads nor writes it.

use redt_proto::{Cts, TxnId};
use redt_protocol::outcome::{Finding, OutcomeLookup};
use redt_transport::Caller;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// The most outcome queries one QUIC connection may have in flight at one node (a query not
/// served over a connection — in place, or a handler called directly — counts against its
/// caller identity instead). One more is refused at once with `error_code::OVER_LIMIT`;
/// [`crate::Client::outcome`] asks again 200 ms later.
pub const MAX_IN_FLIGHT: usize = 4;

/// How many final lookups (committed or aborted) a node remembers, oldest forgotten first.
pub const FINALS_KEPT: usize = 10_000;

/// How long after a lookup round ended a query for the same transaction and start uses its
/// findings instead of running a round of its own.
pub const ROUND_FRESH_FOR: Duration = Duration::from_millis(200);

/// Past this many rounds kept, the ended ones no query waits for are dropped.
const ROUNDS_PRUNED_OVER: usize = 1024;

/// Whom an outcome query's in-flight cap ([`MAX_IN_FLIGHT`]) counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Asker {
    /// A QUIC connection, by its id ([`redt_transport::current_connection`]).
    Connection(usize),
    /// A caller identity, for a query not served over a connection.
    Caller(Caller),
}

/// A query refused because its asker has [`MAX_IN_FLIGHT`] queries in flight already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverCap {
    /// The cap.
    pub cap: usize,
}

impl fmt::Display for OverCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "at most {} outcome queries may be in flight per connection (outcome_queries::MAX_IN_FLIGHT): \
             ask again once one is answered",
            self.cap
        )
    }
}

impl std::error::Error for OverCap {}

/// What a node's outcome queries cost and saved since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutcomeQueryCounts {
    /// Queries admitted (answered, or cancelled while waiting).
    pub admitted: u64,
    /// Queries refused over [`MAX_IN_FLIGHT`].
    pub refused: u64,
    /// Lookup rounds this node ran (each: one `TxnLookup` per other DC and one read of its
    /// own DC).
    pub rounds: u64,
    /// Rounds a query took from another query's round, running or ended less than
    /// [`ROUND_FRESH_FOR`] ago, instead of running its own.
    pub shared: u64,
    /// Queries answered from a remembered final lookup, with no round.
    pub remembered: u64,
    /// `TxnLookup` requests this node served to other nodes' rounds.
    pub lookups_served: u64,
}

/// The outcome-query state of one node.
#[derive(Debug, Default)]
pub struct OutcomeQueries {
    in_flight: Mutex<HashMap<Asker, usize>>,
    rounds: Mutex<HashMap<RoundKey, Arc<Round>>>,
    finals: Mutex<Finals>,
    admitted: AtomicU64,
    refused: AtomicU64,
    rounds_run: AtomicU64,
    shared: AtomicU64,
    remembered: AtomicU64,
    lookups_served: AtomicU64,
}

/// What a lookup round is of: a transaction, and the start its decision-log lookups use.
type RoundKey = (TxnId, Option<Cts>);

/// One lookup round: set once it ends, to when and what it found. A round whose runner was
/// cancelled before it ended is run by the next query that waits for it.
#[derive(Debug, Default)]
struct Round {
    done: OnceCell<(Instant, Arc<Vec<Finding>>)>,
}

impl Round {
    /// Running, or ended less than [`ROUND_FRESH_FOR`] ago.
    fn is_fresh(&self) -> bool {
        self.done.get().is_none_or(|(at, _)| at.elapsed() < ROUND_FRESH_FOR)
    }
}

/// The final lookups remembered, by query, and the order they came in.
#[derive(Debug, Default)]
struct Finals {
    lookups: HashMap<QueryKey, OutcomeLookup>,
    order: VecDeque<QueryKey>,
}

/// A query's transaction and reservation: what a final lookup is remembered under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct QueryKey {
    txn: TxnId,
    start_after: Option<Cts>,
    valid_for_ms: u64,
}

/// A query's place in its asker's [`MAX_IN_FLIGHT`], held until it is dropped.
#[derive(Debug)]
pub struct InFlight<'a> {
    queries: &'a OutcomeQueries,
    asker: Asker,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut in_flight = lock(&self.queries.in_flight);
        if let Some(n) = in_flight.get_mut(&self.asker) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.asker);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OutcomeQueries {
    /// Admits one query of `asker`: its place, held until the returned guard is dropped.
    ///
    /// # Errors
    /// [`OverCap`] when `asker` holds [`MAX_IN_FLIGHT`] places already (counted as refused).
    pub fn admit(&self, asker: Asker) -> Result<InFlight<'_>, OverCap> {
        let mut in_flight = lock(&self.in_flight);
        let n = in_flight.entry(asker).or_insert(0);
        if *n >= MAX_IN_FLIGHT {
            self.refused.fetch_add(1, Relaxed);
            return Err(OverCap { cap: MAX_IN_FLIGHT });
        }
        *n += 1;
        self.admitted.fetch_add(1, Relaxed);
        Ok(InFlight { queries: self, asker })
    }

    /// The final lookup remembered for a query of `txn` with this reservation (counted as
    /// answered from memory), if any.
    pub fn remembered(&self, txn: TxnId, start_after: Option<Cts>, valid_for_ms: u64) -> Option<OutcomeLookup> {
        let key = QueryKey { txn, start_after, valid_for_ms };
        let found = lock(&self.finals).lookups.get(&key).cloned();
        if found.is_some() {
            self.remembered.fetch_add(1, Relaxed);
        }
        found
    }

    /// Remembers `lookup` for queries of `txn` with this reservation if it is final; the
    /// oldest of [`FINALS_KEPT`] is forgotten to make room.
    pub fn remember(&self, txn: TxnId, start_after: Option<Cts>, valid_for_ms: u64, lookup: &OutcomeLookup) {
        if !lookup.is_final() {
            return;
        }
        let key = QueryKey { txn, start_after, valid_for_ms };
        let mut finals = lock(&self.finals);
        if finals.lookups.insert(key, lookup.clone()).is_some() {
            return;
        }
        finals.order.push_back(key);
        while finals.order.len() > FINALS_KEPT {
            if let Some(old) = finals.order.pop_front() {
                finals.lookups.remove(&old);
            }
        }
    }

    /// The findings of a lookup round of `txn` from `start`: the round running now or ended
    /// less than [`ROUND_FRESH_FOR`] ago for the same transaction and start, else one `run`
    /// runs now (and the queries that come meanwhile share it).
    pub async fn findings<F, Fut>(&self, txn: TxnId, start: Option<Cts>, run: F) -> Arc<Vec<Finding>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Vec<Finding>>,
    {
        let round = {
            let mut rounds = lock(&self.rounds);
            match rounds.get(&(txn, start)) {
                Some(r) if r.is_fresh() => r.clone(),
                _ => {
                    if rounds.len() >= ROUNDS_PRUNED_OVER {
                        // A running round is held by the query running it.
                        rounds.retain(|_, r| Arc::strong_count(r) > 1 || (r.done.get().is_some() && r.is_fresh()));
                    }
                    let r = Arc::new(Round::default());
                    rounds.insert((txn, start), r.clone());
                    r
                }
            }
        };
        let mut ran = false;
        let (_, findings) = round
            .done
            .get_or_init(|| {
                ran = true;
                async move {
                    let found = run().await;
                    (Instant::now(), Arc::new(found))
                }
            })
            .await;
        if ran {
            self.rounds_run.fetch_add(1, Relaxed);
        } else {
            self.shared.fetch_add(1, Relaxed);
        }
        findings.clone()
    }

    /// Counts one `TxnLookup` request served to another node.
    pub fn lookup_served(&self) {
        self.lookups_served.fetch_add(1, Relaxed);
    }

    /// The counts so far.
    pub fn counts(&self) -> OutcomeQueryCounts {
        OutcomeQueryCounts {
            admitted: self.admitted.load(Relaxed),
            refused: self.refused.load(Relaxed),
            rounds: self.rounds_run.load(Relaxed),
            shared: self.shared.load(Relaxed),
            remembered: self.remembered.load(Relaxed),
            lookups_served: self.lookups_served.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::NodeId;

    const T: TxnId = TxnId(9);

    #[test]
    fn one_asker_gets_at_most_the_cap_and_a_place_comes_back_when_dropped() {
        let q = OutcomeQueries::default();
        let a = Asker::Connection(1);
        let held: Vec<InFlight<'_>> = (0..MAX_IN_FLIGHT).map(|_| q.admit(a).expect("under the cap")).collect();
        let over = q.admit(a).expect_err("over the cap");
        assert!(over.to_string().contains(&format!("at most {MAX_IN_FLIGHT} outcome queries")), "{over}");
        assert!(q.admit(Asker::Connection(2)).is_ok(), "another connection has its own places");
        drop(held);
        assert!(q.admit(a).is_ok(), "places come back");
        assert_eq!(q.counts().refused, 1);
        assert!(lock(&q.in_flight).is_empty(), "no asker is kept without a query in flight");
    }

    #[test]
    fn only_final_lookups_are_remembered_and_only_the_last_ones() {
        let q = OutcomeQueries::default();
        q.remember(T, None, 2000, &OutcomeLookup::Unknown("x".into()));
        assert_eq!(q.remembered(T, None, 2000), None);
        q.remember(T, None, 2000, &OutcomeLookup::Committed(Cts(5)));
        assert_eq!(q.remembered(T, None, 2000), Some(OutcomeLookup::Committed(Cts(5))));
        assert_eq!(q.remembered(T, Some(Cts(1)), 2000), None, "another reservation");
        for i in 0..FINALS_KEPT as u64 {
            q.remember(TxnId(1000 + i), None, 2000, &OutcomeLookup::Aborted("y".into()));
        }
        assert_eq!(q.remembered(T, None, 2000), None, "the oldest is forgotten");
        assert_eq!(lock(&q.finals).lookups.len(), FINALS_KEPT);
        assert_eq!(q.counts().remembered, 1);
    }

    #[tokio::test]
    async fn concurrent_queries_share_one_round_and_a_fresh_one() {
        let q = Arc::new(OutcomeQueries::default());
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let runs = Arc::new(AtomicU64::new(0));
        let first = {
            let (q, runs) = (q.clone(), runs.clone());
            tokio::spawn(async move {
                q.findings(T, None, || async move {
                    runs.fetch_add(1, Relaxed);
                    let _ = wait.await;
                    vec![Finding { node: NodeId(1), kind: redt_protocol::outcome::FindingKind::Nothing }]
                })
                .await
            })
        };
        while lock(&q.rounds).is_empty() {
            tokio::task::yield_now().await;
        }
        let second = {
            let (q, runs) = (q.clone(), runs.clone());
            tokio::spawn(async move {
                q.findings(T, None, || async move {
                    runs.fetch_add(1, Relaxed);
                    vec![]
                })
                .await
            })
        };
        tokio::task::yield_now().await;
        let _ = go.send(());
        let (a, b) = (first.await.expect("runs"), second.await.expect("runs"));
        assert_eq!((a.len(), b.len()), (1, 1), "the second query got the first one's findings");
        let fresh = q.findings(T, None, || async { vec![] }).await;
        assert_eq!(fresh.len(), 1, "a round that just ended is used again");
        assert_eq!(runs.load(Relaxed), 1);
        assert_eq!((q.counts().rounds, q.counts().shared), (1, 2));
        let other = q.findings(T, Some(Cts(3)), || async { vec![] }).await;
        assert!(other.is_empty(), "another start is another round");
    }
}

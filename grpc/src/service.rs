//! The `redt.v1.Transactions` service of one node: each call is turned into the node's own
//! request and served by the handler its QUIC transport serves ([`Handler`]), as the
//! caller its client certificate identifies ([`Transport::identify`]) — so the roles,
//! the per-client limits and shares, and the reservations are the QUIC side's.

use crate::convert;
use crate::errors::{self, reason};
use redt_api::v1 as api;
use redt_api::v1::transactions_server::Transactions;
use redt_proto::wire::{Body, Envelope, OutcomeQueryRequest, ReserveTxnRequest, StatusRequest, VersionedReadRequest};
use redt_proto::Topology;
use redt_transport::{Caller, Handler, Transport};
use std::sync::Arc;
use std::time::Duration;
use tonic::{Code, Request, Response, Status};

/// The service of one node.
pub struct TransactionsService {
    handler: Arc<dyn Handler>,
    transport: Transport,
    topology: Arc<Topology>,
    handler_timeout: Duration,
}

impl TransactionsService {
    /// The service of the node whose QUIC transport is `transport` and whose request
    /// handler is `handler`, under `topology` (tables and names by its file); a call is
    /// served for at most `handler_timeout` (`transport.handler_timeout`), or the caller's
    /// deadline if shorter.
    pub fn new(
        handler: Arc<dyn Handler>,
        transport: Transport,
        topology: Arc<Topology>,
        handler_timeout: Duration,
    ) -> TransactionsService {
        TransactionsService { handler, transport, topology, handler_timeout }
    }

    /// Who sent `req` (the identity of its client certificate), and how long it may be
    /// served: its deadline or `handler_timeout`, whichever is shorter.
    fn caller<T>(&self, req: &Request<T>) -> Result<(Caller, Duration), Status> {
        let certs = req.peer_certs().filter(|c| !c.is_empty()).ok_or_else(|| {
            errors::status(
                Code::Unauthenticated,
                "no client certificate: connect with a certificate of the cluster CA",
                reason::FORBIDDEN,
                &[],
            )
        })?;
        let deadline = deadline(req).map_or(self.handler_timeout, |d| d.min(self.handler_timeout));
        Ok((self.transport.identify(&certs[0]), deadline))
    }

    /// Serves `body` as `caller` within `deadline`; `txn` names the transaction in a
    /// timeout's detail when it is known.
    async fn serve(
        &self,
        (caller, deadline): (Caller, Duration),
        body: Body,
        txn: Option<u64>,
    ) -> Result<Body, Status> {
        let env = Envelope { epoch: self.topology.epoch.0, from: u32::MAX, body: Some(body) };
        match tokio::time::timeout(deadline, self.handler.handle(caller, env)).await {
            Ok(reply) => match reply.body {
                Some(Body::Error(e)) => Err(errors::from_error_reply(&e)),
                Some(b) => Ok(b),
                None => Err(errors::status(Code::Internal, "an empty answer", reason::INTERNAL, &[])),
            },
            Err(_) => {
                let mut meta = vec![("deadline_ms", deadline.as_millis().to_string())];
                if let Some(t) = txn {
                    meta.push(("txn", t.to_string()));
                }
                Err(errors::status(
                    Code::DeadlineExceeded,
                    format!(
                        "not served within {} (the call's deadline or transport.handler_timeout); a transaction's \
                         outcome is unknown",
                        humantime::format_duration(deadline)
                    ),
                    reason::TIMEOUT,
                    &meta,
                ))
            }
        }
    }

    fn dc_names(&self, ids: &[u32]) -> Vec<String> {
        ids.iter()
            .map(|&d| self.topology.dcs.get(d as usize).map_or_else(|| format!("dc#{d}"), |dc| dc.name.clone()))
            .collect()
    }
}

/// An unexpected kind of answer.
fn unexpected(what: &str) -> Status {
    errors::status(
        Code::Internal,
        format!("the node answered {what} with an unexpected message"),
        reason::INTERNAL,
        &[],
    )
}

/// The call's deadline (its `grpc-timeout` header: digits and a unit, `H`, `M`, `S`, `m`,
/// `u` or `n`); `None` without one or with a malformed one.
fn deadline<T>(req: &Request<T>) -> Option<Duration> {
    let v = req.metadata().get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[tonic::async_trait]
impl Transactions for TransactionsService {
    async fn run(&self, req: Request<api::RunRequest>) -> Result<Response<api::RunResponse>, Status> {
        let caller = self.caller(&req)?;
        let req = req.into_inner();
        let txn = req.reservation.as_ref().map(|r| r.txn);
        let (submit, answers) = convert::submission(&self.topology, req)?;
        match self.serve(caller, Body::Submit(submit), txn).await? {
            Body::Outcome(o) => convert::response(o, &answers).map(Response::new),
            _ => Err(unexpected("a transaction")),
        }
    }

    async fn read(&self, req: Request<api::ReadRequest>) -> Result<Response<api::ReadResponse>, Status> {
        let caller = self.caller(&req)?;
        let req = req.into_inner();
        let table = u32::from(convert::table_id(&self.topology, &req.table)?.0);
        let keys = req.keys;
        if keys.is_empty() {
            return Err(errors::malformed("a ReadRequest without keys"));
        }
        match self.serve(caller, Body::VersionedRead(VersionedReadRequest { table, keys }), None).await? {
            Body::VersionedValues(r) => Ok(Response::new(api::ReadResponse {
                values: r
                    .items
                    .into_iter()
                    .map(|i| api::VersionedValue { key: i.key, value: i.value, version: i.version, found: i.found })
                    .collect(),
            })),
            _ => Err(unexpected("a versioned read")),
        }
    }

    async fn reserve(&self, req: Request<api::ReserveRequest>) -> Result<Response<api::Reservation>, Status> {
        let caller = self.caller(&req)?;
        match self.serve(caller, Body::ReserveTxn(ReserveTxnRequest {}), None).await? {
            Body::TxnReserved(r) => Ok(Response::new(api::Reservation {
                txn: r.txn,
                start_after: r.start_after,
                valid_for_ms: r.valid_for_ms,
                token: r.token,
            })),
            _ => Err(unexpected("a reservation")),
        }
    }

    async fn outcome(&self, req: Request<api::OutcomeRequest>) -> Result<Response<api::OutcomeResponse>, Status> {
        let caller = self.caller(&req)?;
        let Some(r) = req.get_ref().reservation else {
            return Err(errors::malformed("an OutcomeRequest without its reservation"));
        };
        let q = OutcomeQueryRequest {
            txn: r.txn,
            start_after: Some(r.start_after),
            valid_for_ms: r.valid_for_ms,
            wait_ms: req.get_ref().wait_ms,
            token: r.token,
        };
        match self.serve(caller, Body::OutcomeQuery(q), Some(r.txn)).await? {
            Body::TxnOutcome(o) => {
                use api::outcome_response::State;
                let state = match o.state {
                    0 => State::Committed,
                    1 => State::Aborted,
                    2 => State::Undecided,
                    _ => State::Unknown,
                };
                Ok(Response::new(api::OutcomeResponse {
                    txn: o.txn,
                    state: state as i32,
                    commit_ts: o.cts,
                    detail: o.detail,
                }))
            }
            _ => Err(unexpected("an outcome query")),
        }
    }

    async fn status(&self, req: Request<api::StatusRequest>) -> Result<Response<api::StatusResponse>, Status> {
        let caller = self.caller(&req)?;
        let count_locks = req.get_ref().count_locks;
        match self.serve(caller, Body::Status(StatusRequest { count_locks }), None).await? {
            Body::NodeStatus(s) => {
                let node = self.topology.nodes.get(s.node as usize);
                let dc = node.and_then(|n| self.topology.dcs.get(n.dc.0 as usize));
                Ok(Response::new(api::StatusResponse {
                    api_version: api::API_VERSION.into(),
                    node: node.map_or_else(|| format!("node#{}", s.node), |n| n.name.clone()),
                    dc: dc.map_or_else(String::new, |d| d.name.clone()),
                    epoch: s.epoch,
                    uptime_ms: s.uptime_ms,
                    committed: s.committed,
                    aborted: s.aborted,
                    unknown: s.unknown,
                    suspected_dcs: self.dc_names(&s.suspected_dcs),
                    removed_dcs: self.dc_names(&s.removed_dcs),
                    locks_held: s.locks_held,
                }))
            }
            _ => Err(unexpected("a status request")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_read_from_grpc_timeout() {
        let with = |v: &str| {
            let mut r = Request::new(());
            r.metadata_mut().insert("grpc-timeout", v.parse().expect("ascii"));
            deadline(&r)
        };
        assert_eq!(with("5S"), Some(Duration::from_secs(5)));
        assert_eq!(with("250m"), Some(Duration::from_millis(250)));
        assert_eq!(with("7u"), Some(Duration::from_micros(7)));
        assert_eq!(with("2M"), Some(Duration::from_secs(120)));
        assert_eq!(with("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(with("9n"), Some(Duration::from_nanos(9)));
        for bad in ["", "S", "5", "5x", "-5S", "五S"] {
            assert_eq!(with(bad), None, "{bad:?}");
        }
        assert_eq!(deadline(&Request::new(())), None);
    }
}

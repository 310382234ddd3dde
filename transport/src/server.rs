//! The serving side: accept loop, connection caps, caller identification, one task per RPC
//! stream with a deadline on its handler and on its response write.

use super::admission::Refusal;
use super::counters::TransportCounters;
use super::frame::{self, FrameError, ReadFailure, StreamCode};
use super::links;
use super::shared::Shared;
use super::{Caller, Handler};
use quinn::{Connection, Endpoint, Incoming, RecvStream, SendStream, VarInt};
use rustls_pki_types::CertificateDer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tracing::{debug, warn};

/// Connection close code for a connection that presented no usable client certificate.
const CLOSE_NO_IDENTITY: u32 = 1;

/// Connection close code for a connection over a cap; the reason names the cap
/// ([`Refusal`]).
pub(crate) const CLOSE_OVER_LIMIT: u32 = 2;

/// Connections over a cap that are taken through their handshake at once, only to be closed
/// with a reason that names the cap; past these, one more is refused before its handshake
/// (QUIC's `CONNECTION_REFUSED`, no reason), so a flood costs no handshakes.
const REFUSALS_WITH_REASON: usize = 16;

tokio::task_local! {
    /// The id of the connection (`quinn::Connection::stable_id`) whose request the running
    /// handler serves: set around each [`Handler::handle`] call of [`serve_stream`].
    static CONNECTION: usize;
}

/// The id of the QUIC connection whose request the calling task's handler is serving: unique
/// among this endpoint's open connections (a closed one's id may be given again), stable for
/// the connection's life. `None` outside a handler the transport called (a request served in
/// place, a test calling a handler directly).
pub fn current_connection() -> Option<usize> {
    CONNECTION.try_with(|c| *c).ok()
}

/// Accepts connections until the endpoint closes; one task per connection admitted.
pub(crate) async fn accept_loop(endpoint: Endpoint, shared: Arc<Shared>, handler: Arc<dyn Handler>) {
    let explaining = Arc::new(AtomicUsize::new(0));
    while let Some(incoming) = endpoint.accept().await {
        let remote = incoming.remote_address();
        // Over half a cap, an address not yet validated is sent a Retry (RFC 9000 §8.1.2)
        // before it may count against one: its real client comes back with the token.
        if !incoming.remote_address_validated()
            && incoming.may_retry()
            && shared.admission.wants_validation(remote.ip())
        {
            TransportCounters::add(&shared.counters.retries_sent, 1);
            if incoming.retry().is_err() {
                debug!(%remote, "a Retry could not be sent; the connection attempt is dropped");
            }
            continue;
        }
        match shared.admission.admit(remote.ip()) {
            Ok(admitted) => {
                tokio::spawn(serve_connection(incoming, admitted, shared.clone(), handler.clone()));
            }
            Err(refusal) => {
                let counter = match refusal {
                    Refusal::Total { .. } => &shared.counters.refused_connections_total,
                    Refusal::PerPeer { .. } => &shared.counters.refused_connections_per_peer,
                };
                TransportCounters::add(counter, 1);
                if let Some(unlogged) = shared.refusal_warnings.handle_event(Instant::now()) {
                    warn!(%remote, unlogged, "refused an incoming QUIC connection: {refusal}");
                }
                if explaining.fetch_add(1, Ordering::AcqRel) < REFUSALS_WITH_REASON {
                    tokio::spawn(refuse_with_reason(incoming, refusal, explaining.clone()));
                } else {
                    explaining.fetch_sub(1, Ordering::AcqRel);
                    incoming.refuse();
                }
            }
        }
    }
    debug!("endpoint closed; accept loop ends");
}

/// Completes the handshake of a connection over a cap only to close it with the cap's text
/// (a reason sent before the handshake ends would be cleared, RFC 9000 §10.2.3).
async fn refuse_with_reason(incoming: Incoming, refusal: Refusal, explaining: Arc<AtomicUsize>) {
    if let Ok(conn) = incoming.await {
        conn.close(VarInt::from_u32(CLOSE_OVER_LIMIT), refusal.to_string().as_bytes());
    }
    explaining.fetch_sub(1, Ordering::AcqRel);
}

/// Completes the handshake, identifies the caller, then serves its streams; holds the
/// connection's place (`_admitted`) until it ends.
async fn serve_connection(
    incoming: Incoming,
    _admitted: super::admission::Admitted,
    shared: Arc<Shared>,
    handler: Arc<dyn Handler>,
) {
    let remote = incoming.remote_address();
    let conn = match incoming.await {
        Ok(conn) => conn,
        Err(e) => {
            TransportCounters::add(&shared.counters.refused_handshakes, 1);
            warn!(%remote, error = %e, "refused an incoming connection: handshake failed");
            return;
        }
    };
    let Some(cert) = client_certificate(&conn) else {
        // The verifier requires a client certificate, so this is not expected to happen.
        TransportCounters::add(&shared.counters.refused_handshakes, 1);
        warn!(%remote, "refused an incoming connection: no client certificate");
        conn.close(VarInt::from_u32(CLOSE_NO_IDENTITY), b"no client certificate");
        return;
    };
    let caller = shared.peers.identify(&cert);
    let who: Arc<str> = shared.peers.describe(caller).into();
    debug!(%remote, caller = %who, "accepted a connection");
    if let Caller::Node(id) = caller {
        // A node's connection also carries heartbeats, both ways (`links`).
        shared.links.add(id, conn.clone());
        let counting = shared.clone();
        let count = move || counting.counters.received_from(id, links::HEARTBEAT.len());
        tokio::spawn(links::read_heartbeats(shared.links.clone(), id, conn.clone(), count));
    }
    loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                let id = conn.stable_id();
                tokio::spawn(serve_stream(send, recv, caller, id, who.clone(), shared.clone(), handler.clone()));
            }
            Err(e) => {
                debug!(%remote, caller = %who, error = %e, "connection ended");
                return;
            }
        }
    }
}

/// The verified end-entity certificate the peer presented.
fn client_certificate(conn: &Connection) -> Option<CertificateDer<'static>> {
    let chain = conn.peer_identity()?.downcast::<Vec<CertificateDer<'static>>>().ok()?;
    chain.into_iter().next()
}

/// One RPC: read the request frame, call the handler (on behalf of `caller`, over the
/// connection of id `connection`: [`current_connection`]), write the response frame, finish.
async fn serve_stream(
    mut send: SendStream,
    mut recv: RecvStream,
    caller: Caller,
    connection: usize,
    who: Arc<str>,
    shared: Arc<Shared>,
    handler: Arc<dyn Handler>,
) {
    let counters = &shared.counters;
    let read = tokio::time::timeout(shared.request_timeout, frame::read_frame(&mut recv, shared.max_frame_bytes));
    let request = match read.await {
        Ok(Ok((request, bytes))) => {
            TransportCounters::add(&counters.bytes_received, bytes as u64);
            if let Caller::Node(id) = caller {
                counters.received_from(id, bytes);
                shared.links.heard(id);
            }
            request
        }
        Ok(Err(ReadFailure::Frame(e))) => {
            let counter = match e {
                FrameError::Oversized { .. } => &counters.oversized_frames,
                FrameError::Truncated { .. } | FrameError::Decode(_) => &counters.malformed_frames,
            };
            TransportCounters::add(counter, 1);
            warn!(caller = %who, error = %e, "refused a request frame");
            refuse(&mut send, &mut recv, StreamCode::for_frame_error(&e));
            return;
        }
        Ok(Err(ReadFailure::Stream(e))) => {
            debug!(caller = %who, error = %e, "request stream failed");
            return;
        }
        Err(_) => {
            debug!(caller = %who, "no request frame within the deadline");
            refuse(&mut send, &mut recv, StreamCode::RequestTimeout);
            return;
        }
    };
    let handled = CONNECTION.scope(connection, handler.handle(caller, request));
    let reply = match tokio::time::timeout(shared.handler_timeout, handled).await {
        Ok(reply) => reply,
        Err(_) => {
            TransportCounters::add(&counters.handler_timeouts, 1);
            if let Some(unlogged) = shared.handler_warnings.handle_event(Instant::now()) {
                warn!(
                    caller = %who,
                    unlogged,
                    after = ?shared.handler_timeout,
                    "cancelled a request's handler past its deadline (transport.handler_timeout)"
                );
            }
            handler.timed_out(caller, shared.handler_timeout)
        }
    };
    let response = match frame::encode_frame(&reply, shared.max_frame_bytes) {
        Ok(response) => response,
        Err(e) => {
            warn!(caller = %who, error = %e, "the handler's response cannot be framed");
            refuse(&mut send, &mut recv, StreamCode::ResponseTooLarge);
            return;
        }
    };
    match tokio::time::timeout(shared.write_timeout, frame::write_frame(&mut send, &response)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            debug!(caller = %who, error = %e, "could not write a response");
            return;
        }
        Err(_) => {
            TransportCounters::add(&counters.write_timeouts, 1);
            if let Some(unlogged) = shared.write_warnings.handle_event(Instant::now()) {
                warn!(
                    caller = %who,
                    unlogged,
                    after = ?shared.write_timeout,
                    "reset a response stream not written within its deadline (transport.write_timeout)"
                );
            }
            refuse(&mut send, &mut recv, StreamCode::WriteTimeout);
            return;
        }
    }
    // Finishing fails only if the caller stopped the stream meanwhile.
    let _ = send.finish();
    TransportCounters::add(&counters.rpcs_served, 1);
    TransportCounters::add(&counters.bytes_sent, response.len() as u64);
    if let Caller::Node(id) = caller {
        counters.sent_to(id, response.len());
        shared.links.sent(id);
    }
}

/// Stops reading and resets writing on a stream, with `code` both ways.
fn refuse(send: &mut SendStream, recv: &mut RecvStream, code: StreamCode) {
    let _ = recv.stop(code.var_int());
    let _ = send.reset(code.var_int());
}

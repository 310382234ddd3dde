//! The optional `transport:` section of a topology file: caps and deadlines of every node's
//! QUIC transport. Its raw shape and the checks of each value; a key left out keeps
//! its [`QuicConfig`] default.

use super::{parse_size, Res, Resolver, Text};
use crate::topology::QuicConfig;
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTransport {
    max_connections: Option<u64>,
    max_connections_per_peer: Option<u64>,
    max_streams_per_connection: Option<u64>,
    stream_receive_window: Option<Text>,
    connection_receive_window: Option<Text>,
    max_calls_in_flight: Option<u64>,
    call_slot_timeout: Option<Text>,
    handler_timeout: Option<Text>,
    write_timeout: Option<Text>,
}

impl Resolver<'_> {
    /// Parses and checks the `transport` section: every count set is from 1 to its ceiling,
    /// every window a size from [`QuicConfig::MIN_WINDOW_BYTES`] to
    /// [`QuicConfig::MAX_WINDOW_BYTES`] (the connection's at least the stream's, defaults
    /// filled in), every duration above zero and at most the largest timeout.
    pub(super) fn transport(&self, raw: &RawTransport) -> Res<QuicConfig> {
        let d = QuicConfig::default();
        let cfg = QuicConfig {
            max_connections: self.count(
                "max_connections",
                raw.max_connections,
                d.max_connections,
                QuicConfig::MAX_CONNECTIONS_CEILING,
            )?,
            max_connections_per_peer: self.count(
                "max_connections_per_peer",
                raw.max_connections_per_peer,
                d.max_connections_per_peer,
                QuicConfig::MAX_CONNECTIONS_CEILING,
            )?,
            max_streams_per_connection: self.count(
                "max_streams_per_connection",
                raw.max_streams_per_connection,
                d.max_streams_per_connection,
                QuicConfig::MAX_STREAMS_CEILING,
            )?,
            stream_receive_window_bytes: self.window(
                "stream_receive_window",
                &raw.stream_receive_window,
                d.stream_receive_window_bytes,
            )?,
            connection_receive_window_bytes: self.window(
                "connection_receive_window",
                &raw.connection_receive_window,
                d.connection_receive_window_bytes,
            )?,
            max_calls_in_flight: self.count(
                "max_calls_in_flight",
                raw.max_calls_in_flight,
                d.max_calls_in_flight,
                QuicConfig::MAX_CALLS_IN_FLIGHT_CEILING,
            )?,
            call_slot_timeout: self.deadline("call_slot_timeout", &raw.call_slot_timeout, d.call_slot_timeout)?,
            handler_timeout: self.deadline("handler_timeout", &raw.handler_timeout, d.handler_timeout)?,
            write_timeout: self.deadline("write_timeout", &raw.write_timeout, d.write_timeout)?,
        };
        if cfg.connection_receive_window_bytes < cfg.stream_receive_window_bytes {
            return Err(self.invalid(
                "transport.connection_receive_window",
                format!(
                    "{} bytes is less than the stream_receive_window of {} bytes",
                    cfg.connection_receive_window_bytes, cfg.stream_receive_window_bytes
                ),
            ));
        }
        Ok(cfg)
    }

    /// One count at `transport.{key}`: `default` if unset, else 1 to `ceiling`.
    fn count(&self, key: &str, raw: Option<u64>, default: u64, ceiling: u64) -> Res<u64> {
        match raw {
            None => Ok(default),
            Some(0) => Err(self.invalid(format!("transport.{key}"), "must be at least 1")),
            Some(n) if n > ceiling => {
                Err(self
                    .invalid(format!("transport.{key}"), format!("{n} is more than {ceiling}, the largest allowed")))
            }
            Some(n) => Ok(n),
        }
    }

    /// One receive window at `transport.{key}`: `default` if unset, else a size within the
    /// window bounds.
    fn window(&self, key: &str, raw: &Option<Text>, default: u64) -> Res<u64> {
        let Some(text) = raw else { return Ok(default) };
        let field = || format!("transport.{key}");
        let v = self.at(field, parse_size(&text.0))?;
        if !(QuicConfig::MIN_WINDOW_BYTES..=QuicConfig::MAX_WINDOW_BYTES).contains(&v) {
            return Err(self.invalid(
                field(),
                format!(
                    "{v} bytes is outside {} to {} bytes",
                    QuicConfig::MIN_WINDOW_BYTES,
                    QuicConfig::MAX_WINDOW_BYTES
                ),
            ));
        }
        Ok(v)
    }

    /// One deadline at `transport.{key}`: `default` if unset, else above zero and at most the
    /// largest timeout.
    fn deadline(&self, key: &str, raw: &Option<Text>, default: Duration) -> Res<Duration> {
        Ok(self.bounded_duration(&format!("transport.{key}"), raw, false)?.unwrap_or(default))
    }
}

//! The optional `metrics:` section of a topology file — the port every node serves its
//! Prometheus metrics on, and the limits of every node's metrics endpoint — and a node's own
//! `metrics: IP:PORT` address. Their raw shape and their checks.

use super::{Res, Resolver, Text};
use crate::topology::{Dc, MetricsConfig, NodeEntry};
use serde::Deserialize;
use std::net::SocketAddr;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    #[serde(default)]
    port: Option<u64>,
    #[serde(default)]
    max_connections: Option<u64>,
    #[serde(default)]
    max_connections_per_peer: Option<u64>,
    #[serde(default)]
    idle_timeout: Option<Text>,
    #[serde(default)]
    write_timeout: Option<Text>,
    #[serde(default)]
    tls: Option<bool>,
}

impl Resolver<'_> {
    /// Parses and checks the `metrics` section against the resolved `nodes` (of `dcs`): the
    /// port is in 1..=65535; each limit set is 1 to its ceiling or a timeout above zero and at
    /// most the largest timeout (`idle_timeout`, `write_timeout`); `tls` is a boolean; and no two nodes of one host ([`NodeEntry::same_host`]) would
    /// serve metrics at the same port on the same IP address (or either on the unspecified
    /// one), nor one at a port where a node of its host listens for QUIC on such an address
    /// (that node's verbs server takes the port on TCP). A node's own `metrics` address counts
    /// instead of the section's port.
    pub(super) fn metrics(&self, raw: &Option<RawMetrics>, dcs: &[Dc], nodes: &[NodeEntry]) -> Res<MetricsConfig> {
        let d = MetricsConfig::default();
        let config = match raw {
            None => d,
            Some(raw) => MetricsConfig {
                port: match raw.port {
                    None => None,
                    Some(p) => match u16::try_from(p) {
                        Ok(0) | Err(_) => {
                            return Err(
                                self.invalid("metrics.port", format!("{p} is not a TCP port: expected 1 to 65535"))
                            )
                        }
                        Ok(p) => Some(p),
                    },
                },
                max_connections: self.metrics_count("max_connections", raw.max_connections, d.max_connections)?,
                max_connections_per_peer: self.metrics_count(
                    "max_connections_per_peer",
                    raw.max_connections_per_peer,
                    d.max_connections_per_peer,
                )?,
                idle_timeout: self
                    .bounded_duration("metrics.idle_timeout", &raw.idle_timeout, false)?
                    .unwrap_or(d.idle_timeout),
                write_timeout: self
                    .bounded_duration("metrics.write_timeout", &raw.write_timeout, false)?
                    .unwrap_or(d.write_timeout),
                tls: raw.tls.unwrap_or(d.tls),
            },
        };
        // Each node's metrics address and the key that set it.
        let field = |n: &NodeEntry| match n.metrics {
            Some(_) => {
                let dc = &dcs[n.dc.0 as usize];
                let i = dc.nodes.iter().position(|&m| m == n.id).unwrap_or(0);
                format!("dcs[{}].nodes[{i}].metrics", n.dc.0)
            }
            None => "metrics.port".to_string(),
        };
        let addr = |n: &NodeEntry| n.metrics.or_else(|| Some(SocketAddr::new(n.listen.ip(), config.port?)));
        let overlap = |a: &SocketAddr, b: &SocketAddr| {
            a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
        };
        for (k, n) in nodes.iter().enumerate() {
            let Some(mine) = addr(n) else { continue };
            if let Some(other) =
                nodes[..k].iter().find(|o| o.same_host(n) && addr(o).is_some_and(|a| overlap(&a, &mine)))
            {
                let theirs = addr(other).unwrap_or(mine);
                return Err(self.invalid(
                    field(n),
                    format!(
                        "nodes {} and {} are on one host and would serve metrics at {theirs} and {mine}, so they \
                         cannot both bind port {}",
                        other.name,
                        n.name,
                        mine.port()
                    ),
                ));
            }
            if let Some(quic) = nodes.iter().find(|o| o.same_host(n) && overlap(&o.listen, &mine)) {
                return Err(self.invalid(
                    field(n),
                    format!(
                        "{} is the QUIC port of {} ({}), where its verbs server listens on TCP",
                        mine.port(),
                        quic.name,
                        quic.listen
                    ),
                ));
            }
        }
        Ok(config)
    }

    /// A node's own `metrics` address at the YAML path `path`: an IP socket address with a
    /// port from 1 to 65535 (a scraper must know it, so not 0).
    pub(super) fn metrics_listen(&self, path: &str, raw: &Text) -> Res<SocketAddr> {
        let text = raw.0.trim();
        let addr: SocketAddr = text.parse().map_err(|e| {
            self.invalid(path, format!("invalid socket address `{text}` (expected IP:PORT, e.g. 127.0.0.1:9464): {e}"))
        })?;
        if addr.port() == 0 {
            return Err(self.invalid(path, format!("{addr} has no port: expected 1 to 65535")));
        }
        Ok(addr)
    }

    /// One count at `metrics.{key}`: `default` if unset, else 1 to
    /// [`MetricsConfig::MAX_CONNECTIONS_CEILING`].
    fn metrics_count(&self, key: &str, raw: Option<u64>, default: u64) -> Res<u64> {
        let ceiling = MetricsConfig::MAX_CONNECTIONS_CEILING;
        match raw {
            None => Ok(default),
            Some(0) => Err(self.invalid(format!("metrics.{key}"), "must be at least 1")),
            Some(n) if n > ceiling => {
                Err(self.invalid(format!("metrics.{key}"), format!("{n} is more than {ceiling}, the largest allowed")))
            }
            Some(n) => Ok(n),
        }
    }
}

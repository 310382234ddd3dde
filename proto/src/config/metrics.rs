//! The optional `metrics:` section of a topology file: the port every node serves its
//! Prometheus metrics on (issue 16). Its raw shape and its checks.

use super::{Res, Resolver};
use crate::topology::{MetricsConfig, Node};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    port: u64,
}

impl Resolver<'_> {
    /// Parses and checks the `metrics` section against the resolved `nodes`: the port is in
    /// 1..=65535, no two nodes of one host ([`Node::same_host`]) listen on the same IP address
    /// or either on the unspecified one (each would need the port there), and it is no node's
    /// QUIC port (its verbs server listens on that TCP port).
    pub(super) fn metrics(&self, raw: &Option<RawMetrics>, nodes: &[Node]) -> Res<MetricsConfig> {
        let Some(raw) = raw else { return Ok(MetricsConfig::default()) };
        let port = match u16::try_from(raw.port) {
            Ok(0) | Err(_) => {
                return Err(self.invalid("metrics.port", format!("{} is not a TCP port: expected 1 to 65535", raw.port)))
            }
            Ok(p) => p,
        };
        for (k, n) in nodes.iter().enumerate() {
            let shares = |o: &&Node| {
                o.same_host(n)
                    && (o.listen.ip() == n.listen.ip()
                        || o.listen.ip().is_unspecified()
                        || n.listen.ip().is_unspecified())
            };
            if let Some(other) = nodes[..k].iter().find(shares) {
                return Err(self.invalid(
                    "metrics.port",
                    format!(
                        "nodes {} and {} are on one host and listen at {} and {}, so they cannot both serve \
                         metrics on port {port}",
                        other.name,
                        n.name,
                        other.listen.ip(),
                        n.listen.ip()
                    ),
                ));
            }
            if n.listen.port() == port {
                return Err(self.invalid(
                    "metrics.port",
                    format!(
                        "{port} is the QUIC port of {} ({}), where its verbs server listens on TCP",
                        n.name, n.listen
                    ),
                ));
            }
        }
        Ok(MetricsConfig { port: Some(port) })
    }
}

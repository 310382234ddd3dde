//! The optional `metrics:` section of a topology file: the port every node serves its
//! Prometheus metrics on (issue 16). Its raw shape and its checks.

use super::{Res, Resolver};
use crate::topology::{MetricsConfig, Node};
use serde::Deserialize;
use std::collections::HashMap;
use std::net::IpAddr;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    port: u64,
}

impl Resolver<'_> {
    /// Parses and checks the `metrics` section against the resolved `nodes`: the port is in
    /// 1..=65535, no two nodes share an IP address (each would need the port there), and it
    /// is no node's QUIC port on that node's IP (the `redt-tcp` verbs server listens on that
    /// TCP port).
    pub(super) fn metrics(&self, raw: &Option<RawMetrics>, nodes: &[Node]) -> Res<MetricsConfig> {
        let Some(raw) = raw else { return Ok(MetricsConfig::default()) };
        let port = match u16::try_from(raw.port) {
            Ok(0) | Err(_) => {
                return Err(self.invalid("metrics.port", format!("{} is not a TCP port: expected 1 to 65535", raw.port)))
            }
            Ok(p) => p,
        };
        let mut by_ip: HashMap<IpAddr, &Node> = HashMap::new();
        for n in nodes {
            if let Some(other) = by_ip.insert(n.addr.ip(), n) {
                return Err(self.invalid(
                    "metrics.port",
                    format!(
                        "nodes {} and {} share the IP address {}, so they cannot both serve metrics on port {port}",
                        other.name,
                        n.name,
                        n.addr.ip()
                    ),
                ));
            }
            if n.addr.port() == port {
                return Err(self.invalid(
                    "metrics.port",
                    format!(
                        "{port} is the QUIC port of {} ({}), where redt-tcp's verbs server listens on TCP",
                        n.name, n.addr
                    ),
                ));
            }
        }
        Ok(MetricsConfig { port: Some(port) })
    }
}

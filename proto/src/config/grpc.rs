//! The optional `grpc:` section of a topology file — the port every node serves the gRPC
//! client API on — and a node's own `grpc: IP:PORT` address. Their raw shape and their
//! checks.

use super::{Res, Resolver};
use crate::topology::{Dc, GrpcConfig, MetricsConfig, NodeEntry};
use serde::Deserialize;
use std::net::SocketAddr;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGrpc {
    #[serde(default)]
    port: Option<u64>,
}

impl Resolver<'_> {
    /// Parses and checks the `grpc` section against the resolved `nodes` (of `dcs`): the port
    /// is in 1..=65535, and no node's gRPC address (its own `grpc` address, else its `listen`
    /// IP at the port) is taken on its host by another node's gRPC address, by a node's QUIC
    /// port (its verbs server takes the port on TCP), or by a node's metrics address
    /// (`metrics`).
    pub(super) fn grpc(
        &self,
        raw: &Option<RawGrpc>,
        dcs: &[Dc],
        nodes: &[NodeEntry],
        metrics: &MetricsConfig,
    ) -> Res<GrpcConfig> {
        let config = match raw.as_ref().and_then(|r| r.port) {
            None => GrpcConfig { port: None },
            Some(p) => match u16::try_from(p) {
                Ok(0) | Err(_) => {
                    return Err(self.invalid("grpc.port", format!("{p} is not a TCP port: expected 1 to 65535")))
                }
                Ok(p) => GrpcConfig { port: Some(p) },
            },
        };
        let field = |n: &NodeEntry| match n.grpc {
            Some(_) => {
                let dc = &dcs[n.dc.0 as usize];
                let i = dc.nodes.iter().position(|&m| m == n.id).unwrap_or(0);
                format!("dcs[{}].nodes[{i}].grpc", n.dc.0)
            }
            None => "grpc.port".to_string(),
        };
        let addr = |n: &NodeEntry| n.grpc.or_else(|| Some(SocketAddr::new(n.listen.ip(), config.port?)));
        let metrics_addr = |n: &NodeEntry| n.metrics.or_else(|| Some(SocketAddr::new(n.listen.ip(), metrics.port?)));
        let overlap = |a: &SocketAddr, b: &SocketAddr| {
            a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
        };
        for (k, n) in nodes.iter().enumerate() {
            let Some(mine) = addr(n) else { continue };
            let taken = |what: String| self.invalid(field(n), format!("{} would serve gRPC at {mine}, {what}", n.name));
            if let Some(o) = nodes[..k].iter().find(|o| o.same_host(n) && addr(o).is_some_and(|a| overlap(&a, &mine))) {
                return Err(taken(format!("where {} of the same host serves gRPC too", o.name)));
            }
            if let Some(o) = nodes.iter().find(|o| o.same_host(n) && overlap(&o.listen, &mine)) {
                return Err(taken(format!(
                    "the QUIC port of {} ({}), where its verbs server listens on TCP",
                    o.name, o.listen
                )));
            }
            if let Some(o) =
                nodes.iter().find(|o| o.same_host(n) && metrics_addr(o).is_some_and(|a| overlap(&a, &mine)))
            {
                return Err(taken(format!("where {} of the same host serves its metrics", o.name)));
            }
        }
        Ok(config)
    }
}

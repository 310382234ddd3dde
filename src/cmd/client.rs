//! `redt client --jsonl`: one transaction per line of standard input in the Jepsen/Elle
//! micro-op format, one answer per line on standard output.

use super::{load_topology, runtime};
use anyhow::{bail, Context, Result};
use clap::Args;
use redt_bench::jepsen;
use redt_coordinator::{call, Client, CoordinatorOptions, EmbeddedCluster, TxnOutcome, TxnStatus};
use redt_dc_executor::KvOp;
use redt_proto::wire::ProcedureCall;
use redt_proto::NodeId;
use serde_json::json;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `redt client`.
#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Read transactions as JSON lines (the only mode).
    #[arg(long)]
    jsonl: bool,
    /// Topology file of a running cluster (default: start the embedded default cluster).
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Certificate directory of the running cluster.
    #[arg(long, default_value = "run/certs")]
    certs: PathBuf,
    /// Coordinator node name (default: the first node).
    #[arg(long)]
    node: Option<String>,
    /// Table the keys live in (one cell per key).
    #[arg(long, default_value = "kv")]
    table: String,
}

enum Target {
    Embedded(Box<EmbeddedCluster>, NodeId),
    Remote(Client, NodeId),
}

impl Target {
    /// Runs `c`; returns its outcome and whether its reads were lost (a commit learned from
    /// the outcome query after the coordinator's answer was lost).
    async fn submit(&self, c: ProcedureCall) -> (TxnOutcome, bool) {
        match self {
            Target::Embedded(cl, n) => (cl.node(*n).submit(c).await, false),
            // A dead coordinator (its DC lost) is passed over for a live one, and a lost
            // answer is asked about, never resubmitted blindly (issue 13).
            Target::Remote(cl, n) => {
                let r = cl.submit_asking(*n, c).await;
                (r.outcome, r.reads_lost)
            }
        }
    }
}

/// Runs `redt client`.
pub fn run(a: &ClientArgs) -> Result<()> {
    if !a.jsonl {
        bail!("only `--jsonl` mode exists: one transaction per line on standard input");
    }
    let topo = Arc::new(load_topology(a.cluster.as_deref())?);
    let table = topo
        .table_by_name(&a.table)
        .with_context(|| format!("the topology has no table `{}` (use --table)", a.table))?
        .clone();
    let node = match &a.node {
        Some(n) => topo.node_by_name(n).with_context(|| format!("no node named `{n}`"))?.id,
        None => NodeId(0),
    };
    let rt = runtime()?;
    rt.block_on(async {
        let target = match &a.cluster {
            Some(_) => Target::Remote(Client::connect(topo.clone(), &a.certs, Duration::from_secs(10))?, node),
            None => Target::Embedded(
                Box::new(EmbeddedCluster::start((*topo).clone(), CoordinatorOptions::default()).await?),
                node,
            ),
        };
        let stdin = std::io::stdin();
        let mut out = std::io::stdout().lock();
        for line in stdin.lock().lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let reply = match jepsen::parse_line(&line).and_then(|ops| jepsen::to_kv_ops(&ops).map(|kv| (ops, kv))) {
                Err(e) => json!({"type": "fail", "error": e}),
                Ok((ops, kv)) => {
                    let (o, reads_lost) = target.submit(call::kv_call(table.id, &kv)).await;
                    let reads = kv.iter().any(|op| matches!(op, KvOp::Read(_)));
                    match o.status {
                        // Committed, but the values read were in the lost answer: the history
                        // cannot use it as an ok with reads.
                        TxnStatus::Committed if reads_lost && reads => json!({"type": "info", "error": format!(
                            "{}: committed (learned from the outcome query); the values read are not available",
                            o.txn
                        )}),
                        TxnStatus::Committed => json!({"type": "ok", "value": jepsen::fill_reads(&ops, &o.reads)}),
                        TxnStatus::Aborted(e) => json!({"type": "fail", "error": e}),
                        TxnStatus::Unknown(e) => json!({"type": "info", "error": e}),
                    }
                }
            };
            writeln!(out, "{reply}")?;
            out.flush()?;
        }
        if let Target::Embedded(c, _) = &target {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c.shutdown();
        }
        anyhow::Ok(())
    })
}

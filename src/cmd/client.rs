//! `redt client --jsonl`: one transaction per line of standard input in the Jepsen/Elle
//! micro-op format, one answer per line on standard output. A transaction that aborts for a
//! retryable cause is run again (`--retries`, pauses of 5–10 ms doubling up to 80–160 ms)
//! and answered once, with its last attempt's outcome; a `fail` names the abort's cause when
//! the coordinator gave one (`"cause": "lock_conflict"`) and the attempts when there were
//! several (`"attempts": 11`). A line longer than the topology's
//! `limits.max_jsonl_line_bytes` is answered with a failure naming the limit and skipped,
//! without being held in memory; the transactions themselves are bounded by the coordinator
//! (`limits.max_ops_per_txn`, `limits.max_bytes_per_txn`).

use super::{load_topology, runtime};
use anyhow::{bail, Context, Result};
use clap::Args;
use rand::rngs::StdRng;
use rand::SeedableRng;
use redt_bench::jepsen;
use redt_coordinator::{
    retrying, AbortCause, Client, CoordinatorOptions, EmbeddedCluster, RetryPolicy, TxnAnswer, TxnStatus,
};
use redt_dc_executor::KvOp;
use redt_proto::wire::ProcedureCall;
use redt_proto::NodeId;
use redt_protocol::call;
use redt_protocol::limits::{Limit, OverLimit};
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
    /// Run directory of a cluster started by `redt cluster up` (its certificates are taken
    /// from there unless --certs says otherwise).
    #[arg(long, default_value = "run")]
    run_dir: PathBuf,
    /// Certificate directory of the running cluster [default: RUN_DIR/certs].
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Coordinator node name (default: the first node).
    #[arg(long)]
    node: Option<String>,
    /// Table the keys live in (one cell per key).
    #[arg(long, default_value = "kv")]
    table: String,
    /// Retries of a transaction that aborted for a retryable cause (a lock conflict, a
    /// timeout, a stale epoch, …; not the procedure's own abort, a missing record or a full
    /// store), after pauses of 5–10 ms doubling up to 80–160 ms; 0: every transaction is
    /// attempted once. An aborted attempt certainly did not commit, so the line is answered
    /// once, with the last attempt's outcome; an unknown outcome is asked about (at the nodes)
    /// and never submitted again.
    #[arg(long, value_name = "N", default_value_t = RetryPolicy::DEFAULT_RETRIES)]
    retries: u32,
}

enum Target {
    Embedded(Box<EmbeddedCluster>, NodeId),
    Remote(Client, NodeId),
}

impl Target {
    /// Runs `c` under `policy` (pauses drawn from `rng`); returns its last answer, whether its
    /// reads were lost (a commit learned from the outcome query after the coordinator's answer
    /// was lost) and the attempts made.
    async fn submit(&self, c: ProcedureCall, policy: &RetryPolicy, rng: &mut StdRng) -> (TxnAnswer, bool, u32) {
        match self {
            Target::Embedded(cl, n) => {
                let node = cl.node(*n);
                let r = retrying(policy, rng, None, || node.submit(c.clone())).await;
                (r.last, false, r.attempts)
            }
            // A dead coordinator (its DC lost) is passed over for a live one, and a lost
            // answer is asked about, never resubmitted blindly.
            Target::Remote(cl, n) => {
                let r = cl.submit_retrying(*n, c, policy, rng).await;
                (r.last.answer, r.last.reads_lost, r.attempts)
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
        Some(n) => {
            topo.node_by_name(n)
                .with_context(|| format!("no node named `{n}` (its nodes: {})", super::node_names(&topo)))?
                .id
        }
        None => NodeId(0),
    };
    let rt = runtime()?;
    rt.block_on(async {
        let target = match &a.cluster {
            Some(_) => Target::Remote(
                Client::connect(
                    topo.clone(),
                    &a.certs.clone().unwrap_or_else(|| a.run_dir.join("certs")),
                    Duration::from_secs(10),
                )?,
                node,
            ),
            None => Target::Embedded(
                Box::new(EmbeddedCluster::start((*topo).clone(), CoordinatorOptions::default()).await?),
                node,
            ),
        };
        let policy = RetryPolicy::with_retries(a.retries);
        let mut rng = StdRng::from_entropy();
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut out = std::io::stdout().lock();
        let max_line = usize::try_from(topo.limits.max_jsonl_line_bytes).unwrap_or(usize::MAX);
        let mut buf = Vec::new();
        loop {
            let line = match read_line(&mut input, max_line, &mut buf)? {
                Line::End => break,
                Line::TooLong(got) => {
                    let over = OverLimit { limit: Limit::JsonlLineBytes, got, max: max_line as u64 };
                    writeln!(out, "{}", json!({"type": "fail", "error": over.to_string()}))?;
                    out.flush()?;
                    continue;
                }
                Line::Text => match std::str::from_utf8(&buf) {
                    Ok(text) => text,
                    Err(e) => {
                        writeln!(out, "{}", json!({"type": "fail", "error": format!("the line is not UTF-8: {e}")}))?;
                        out.flush()?;
                        continue;
                    }
                },
            };
            if line.trim().is_empty() {
                continue;
            }
            let reply = match jepsen::parse_line(line).and_then(|ops| jepsen::to_kv_ops(&ops).map(|kv| (ops, kv))) {
                Err(e) => json!({"type": "fail", "error": e}),
                Ok((ops, kv)) => {
                    let (o, reads_lost, attempts) =
                        target.submit(call::kv_call(table.id, &kv), &policy, &mut rng).await;
                    let reads = kv.iter().any(|op| matches!(op, KvOp::Read(_)));
                    match o.status {
                        // Committed, but the values read were in the lost answer: the history
                        // cannot use it as an ok with reads.
                        TxnStatus::Committed if reads_lost && reads => json!({"type": "info", "error": format!(
                            "{}: committed (learned from the outcome query); the values read are not available",
                            o.txn
                        )}),
                        TxnStatus::Committed => json!({"type": "ok", "value": jepsen::fill_reads(&ops, &o.reads)}),
                        TxnStatus::Aborted(e) => fail_reply(e, o.cause, attempts),
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

/// The answer to a transaction given up: `{"type": "fail", "error": …}`, with the abort's
/// `cause` when the coordinator named one and the `attempts` when there were several.
fn fail_reply(error: String, cause: Option<AbortCause>, attempts: u32) -> serde_json::Value {
    let mut reply = json!({"type": "fail", "error": error});
    if let Some(c) = cause {
        reply["cause"] = json!(c.name());
    }
    if attempts > 1 {
        reply["attempts"] = json!(attempts);
    }
    reply
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A whole line is in the buffer (newline and a carriage return before it removed).
    Text,
    /// The line was longer than the limit: it was read to its end and dropped; the number is
    /// the bytes it had (newline excluded).
    TooLong(u64),
    /// No more input.
    End,
}

/// Reads the next line of `input` into `buf`, keeping at most `max` bytes of it: a longer
/// line is consumed to its newline (or the end of input) without being stored, and reported
/// as [`Line::TooLong`].
///
/// # Errors
/// Read errors of `input`.
fn read_line(input: &mut impl BufRead, max: usize, buf: &mut Vec<u8>) -> std::io::Result<Line> {
    buf.clear();
    let (mut len, mut any) = (0u64, false);
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        len += part.len() as u64;
        if len <= max as u64 + 1 {
            // One byte over the limit may be a carriage return before the newline.
            buf.extend_from_slice(part);
        }
        let used = part.len() + usize::from(newline);
        input.consume(used);
        if newline {
            break;
        }
    }
    if !any {
        return Ok(Line::End);
    }
    if buf.last() == Some(&b'\r') && len <= max as u64 + 1 {
        buf.pop();
        len -= 1;
    }
    if len > max as u64 {
        buf.clear();
        return Ok(Line::TooLong(len));
    }
    Ok(Line::Text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8], max: usize) -> Vec<Result<String, u64>> {
        let mut input = std::io::BufReader::with_capacity(4, text);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line(&mut input, max, &mut buf).unwrap() {
                Line::End => return out,
                Line::Text => out.push(Ok(String::from_utf8(buf.clone()).unwrap())),
                Line::TooLong(n) => out.push(Err(n)),
            }
        }
    }

    #[test]
    fn a_fail_names_its_cause_and_its_attempts_when_it_has_them() {
        assert_eq!(fail_reply("refused".into(), None, 1), json!({"type": "fail", "error": "refused"}));
        assert_eq!(
            fail_reply("dc2 voted abort: lock conflict".into(), Some(AbortCause::LockConflict), 11),
            json!({"type": "fail", "error": "dc2 voted abort: lock conflict", "cause": "lock_conflict", "attempts": 11})
        );
        assert_eq!(
            fail_reply("not a list".into(), Some(AbortCause::User), 1),
            json!({"type": "fail", "error": "not a list", "cause": "user"})
        );
    }

    #[test]
    fn a_line_over_the_limit_is_skipped_and_the_next_one_read() {
        assert_eq!(lines(b"abc\n", 3), vec![Ok("abc".into())]);
        assert_eq!(lines(b"abcd\nxy\n", 3), vec![Err(4), Ok("xy".into())]);
        assert_eq!(lines(b"abc\r\nxyz", 3), vec![Ok("abc".into()), Ok("xyz".into())]);
        assert_eq!(lines(b"\n\n", 3), vec![Ok(String::new()), Ok(String::new())]);
        let long = [b'x'; 10_000];
        let mut text = long.to_vec();
        text.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&text, 100), vec![Err(10_000), Ok("ok".into())]);
        assert_eq!(lines(&long, 100), vec![Err(10_000)], "a last line without a newline too");
    }
}

//! Bank transfers through the gRPC API, from several tasks at once, then a check that the
//! total is what it was.
//!
//! ```text
//! redt cluster up --config configs/local-fast.yaml --run-dir run --grpc-port 7300
//! cargo run --release -p redt-client --example bank -- run [--interactive]
//! ```
//!
//! By default a transfer is one transaction of two `add`s (no reads, so it never conflicts
//! on what it read). With `--interactive` it is an optimistic transaction: read both
//! balances, refuse to overdraw, write both new balances; a `stale_read` abort is retried
//! from the reads.

use redt_client::{Client, Error, Options, Txn};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ACCOUNTS: u64 = 8;
const FIRST: u64 = 2_000_000;
const INITIAL: i64 = 1_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run_dir = args.first().map_or("run", String::as_str);
    let interactive = args.iter().any(|a| a == "--interactive");
    let client = Arc::new(Client::from_run_dir(run_dir.as_ref(), "redt-client", Options::default())?);
    let mut load = Txn::new("kv");
    for k in FIRST..FIRST + ACCOUNTS {
        load = load.put(k, INITIAL.to_le_bytes());
    }
    client.run(&load, 0).await?;

    let committed = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs(10);
    let mut tasks = Vec::new();
    for t in 0..4usize {
        let (client, committed) = (client.clone(), committed.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = t as u64;
            while Instant::now() < stop {
                n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let from = FIRST + (n >> 33) % ACCOUNTS;
                let to = FIRST + (from - FIRST + 1 + (n >> 40) % (ACCOUNTS - 1)) % ACCOUNTS;
                let amount = (n >> 50) as i64 % 50 + 1;
                let done = if interactive {
                    transfer_interactive(&client, t, from, to, amount).await
                } else {
                    client.run(&Txn::new("kv").add(from, -amount).add(to, amount), t).await.map(|_| ())
                };
                match done {
                    Ok(()) => {
                        committed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.is_retryable() => {}
                    Err(e) => eprintln!("transfer failed: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let mut audit = Txn::new("kv");
    for k in FIRST..FIRST + ACCOUNTS {
        audit = audit.get(k);
    }
    let got = client.run(&audit, 0).await?;
    let total: i64 = (0..ACCOUNTS as usize).map(|i| got.number(i).unwrap_or(0)).sum();
    println!(
        "{} transfers committed; total {total} (expected {})",
        committed.load(Ordering::Relaxed),
        INITIAL * ACCOUNTS as i64
    );
    anyhow::ensure!(total == INITIAL * ACCOUNTS as i64, "the total changed");
    Ok(())
}

/// Moves `amount` from `from` to `to` unless `from` would go below zero: read, decide,
/// write, retried from the reads when a balance changed in between.
async fn transfer_interactive(client: &Client, prefer: usize, from: u64, to: u64, amount: i64) -> Result<(), Error> {
    let mut attempt = 0;
    loop {
        client.backoff(attempt).await;
        let mut tx = client.begin("kv", prefer);
        let (a, b) = (tx.get_i64(from).await?, tx.get_i64(to).await?);
        if a < amount {
            return Ok(()); // nothing to move; a read-only transaction commits nothing
        }
        tx.put(from, (a - amount).to_le_bytes());
        tx.put(to, (b + amount).to_le_bytes());
        match tx.commit().await {
            Err(e) if e.is_retryable() && attempt + 1 < client.options().attempts => attempt += 1,
            other => return other.map(|_| ()),
        }
    }
}

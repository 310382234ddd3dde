//! Read-modify-write with retry: tasks increment one counter through optimistic
//! transactions (read it without locks, write it plus one, commit only if it did not change),
//! and the counter ends at exactly the number of commits.
//!
//! ```text
//! redt cluster up --config configs/local-fast.yaml --run-dir run --grpc-port 7300
//! cargo run --release -p redt-client --example read_modify_write -- run
//! ```

use redt_client::{Client, Error, Options, Txn};
use std::sync::Arc;

const COUNTER: u64 = 3_000_000;

/// Adds one to the counter; retried from the read after a `stale_read` abort.
async fn increment(client: &Client, prefer: usize) -> Result<u32, Error> {
    let mut attempt = 0;
    loop {
        client.backoff(attempt).await;
        let mut tx = client.begin("kv", prefer);
        let n = tx.get_i64(COUNTER).await?;
        tx.put(COUNTER, (n + 1).to_le_bytes());
        match tx.commit().await {
            Ok(_) => return Ok(attempt + 1),
            Err(e) if e.is_retryable() && attempt + 1 < 50 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let run_dir = std::env::args().nth(1).unwrap_or_else(|| "run".into());
    let client = Arc::new(Client::from_run_dir(run_dir.as_ref(), "redt-client", Options::default())?);
    client.run(&Txn::new("kv").put(COUNTER, 0i64.to_le_bytes()), 0).await?;
    let mut tasks = Vec::new();
    for t in 0..4usize {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut attempts = 0;
            for _ in 0..25 {
                attempts += increment(&client, t).await?;
            }
            Ok::<u32, Error>(attempts)
        }));
    }
    let mut attempts = 0;
    for t in tasks {
        attempts += t.await??;
    }
    let n = client.run(&Txn::new("kv").get(COUNTER), 0).await?.number(0).unwrap_or(-1);
    println!("counter {n} after 100 increments in {attempts} attempts");
    anyhow::ensure!(n == 100, "lost or doubled increments");
    Ok(())
}

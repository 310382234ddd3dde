//! Failover: one transaction every 100 ms, each preferring the first node; kill that node
//! (`redt cluster kill --run-dir run --node dc1-n1`) or its whole DC while it runs, and the
//! client goes on through the others — a transaction whose answer was lost is asked about,
//! never run twice.
//!
//! ```text
//! redt cluster up --config configs/local-fast.yaml --run-dir run --grpc-port 7300
//! cargo run --release -p redt-client --example failover -- run [SECONDS, at most 25: the list holds 255 items]
//! ```

use redt_client::{Client, Options, Txn};
use std::time::{Duration, Instant};

const KEY: u64 = 4_000_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let run_dir = args.next().unwrap_or_else(|| "run".into());
    let seconds: u64 = args.next().map_or(Ok(20), |s| s.parse())?;
    let client = Client::from_run_dir(run_dir.as_ref(), "redt-client", Options::default())?;
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut appended = 0u64;
    while Instant::now() < end {
        let t0 = Instant::now();
        match client.run(&Txn::new("kv").append(KEY, appended), 0).await {
            Ok(o) => {
                appended += 1;
                println!(
                    "txn {:#x} committed in {:?}{}",
                    o.txn,
                    t0.elapsed(),
                    if o.reads_lost { " (learned by asking)" } else { "" }
                );
            }
            Err(e) => println!("failed after {:?}: {e}", t0.elapsed()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = client.run(&Txn::new("kv").get(KEY), 0).await?;
    let items = got.items(0).unwrap_or(&[]);
    println!("{appended} appends committed; the list holds {}", items.len());
    anyhow::ensure!(items.iter().copied().eq(0..appended), "the list is not 0..{appended}: {items:?}");
    Ok(())
}

//! The Rust client of redt's gRPC API (`redt.v1`, `api/proto/redt/v1/redt.proto`).
//!
//! ```no_run
//! use redt_client::{Client, Options, Txn};
//! # async fn demo() -> Result<(), redt_client::Error> {
//! let client = Client::from_run_dir("run".as_ref(), "redt-client", Options::default())?;
//! // One transaction, every operation named up front.
//! client.run(&Txn::new("kv").put(1, "hello").add(2, 10), 0).await?;
//! let got = client.run(&Txn::new("kv").get(1).get(2), 0).await?;
//! assert_eq!(got.value(0), Some(&b"hello"[..]));
//! assert_eq!(got.number(1), Some(10));
//! // Read, decide, write: an optimistic transaction.
//! let mut tx = client.begin("kv", 0);
//! let n = tx.get_i64(2).await?;
//! tx.put(2, (n * 2).to_le_bytes());
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! - [`Client`]: connections to every node, failover, bounded retries with backoff and
//!   jitter; a transaction whose answer was lost is never run again before its outcome was
//!   asked and found aborted.
//! - [`Txn`], [`Outcome`]: a transaction's operations and what it read.
//! - [`Transaction`]: optimistic read-decide-write transactions (versioned reads without
//!   locks, a check of every version at commit).
//! - [`Error`]: the API's error model.
//!
//! The examples (`cargo run -p redt-client --example bank -- RUN_DIR`) run against a cluster
//! started with `redt cluster up --grpc-port PORT`.

#![forbid(unsafe_code)]

mod client;
mod error;
mod interactive;
mod txn;

pub use client::{Client, NodeEndpoint, Options, Tls};
pub use error::Error;
pub use interactive::Transaction;
pub use redt_api::v1 as api;
pub use txn::{Outcome, Txn};

//! Optimistic transactions ([`Transaction`]): read, decide, write, without holding locks
//! across the application's think time.
//!
//! Reads are versioned reads without locks ([`Client::read`]); writes are buffered. The
//! commit is one transaction of the writes and a `check` of every version read: each DC's
//! executor takes its locks as for any transaction and votes abort (cause `stale_read`) if
//! a key read has changed since. A committed optimistic transaction is therefore
//! serializable — its reads and writes take effect at its commit, all at once — and,
//! because the check runs inside the commit, strictly so. An aborted one may have read
//! values that never coexisted (no opacity): decide nothing irrevocable on them.

use crate::client::Client;
use crate::error::Error;
use crate::txn::{Outcome, Txn};
use redt_api::v1 as api;
use redt_api::v1::operation::Op;
use std::collections::BTreeMap;

/// An optimistic transaction on one table ([`Client::begin`]).
pub struct Transaction<'c> {
    client: &'c Client,
    prefer: usize,
    /// Every key read: its version and value.
    read: BTreeMap<u64, (u64, Vec<u8>)>,
    writes: Txn,
}

impl<'c> Transaction<'c> {
    pub(crate) fn new(client: &'c Client, table: &str, prefer: usize) -> Transaction<'c> {
        Transaction { client, prefer, read: BTreeMap::new(), writes: Txn::new(table) }
    }

    /// `key`'s value (trailing zero bytes dropped; empty for a missing key), read without
    /// locks the first time and remembered with its version.
    ///
    /// # Errors
    /// As [`Client::read`].
    pub async fn get(&mut self, key: u64) -> Result<Vec<u8>, Error> {
        if let Some((_, v)) = self.read.get(&key) {
            return Ok(v.clone());
        }
        let got = self.client.read(&self.writes.table, &[key], self.prefer).await?;
        let v = got.into_iter().next().ok_or_else(|| Error::Unavailable("a read answered no value".into()))?;
        self.read.insert(key, (v.version, v.value.clone()));
        Ok(v.value)
    }

    /// Reads `key` as a little-endian `i64` (0 for a missing key).
    ///
    /// # Errors
    /// As [`Transaction::get`].
    pub async fn get_i64(&mut self, key: u64) -> Result<i64, Error> {
        let v = self.get(key).await?;
        let mut b = [0u8; 8];
        let n = v.len().min(8);
        b[..n].copy_from_slice(&v[..n]);
        Ok(i64::from_le_bytes(b))
    }

    /// Overwrites `key` at commit.
    pub fn put(&mut self, key: u64, value: impl Into<Vec<u8>>) {
        self.writes.push(Op::Put(api::Put { key, value: value.into() }));
    }

    /// Appends `item` to `key`'s list at commit.
    pub fn append(&mut self, key: u64, item: u64) {
        self.writes.push(Op::Append(api::Append { key, item }));
    }

    /// Deletes `key` at commit.
    pub fn delete(&mut self, key: u64) {
        self.writes.push(Op::Delete(api::Delete { key }));
    }

    /// The one transaction the commit runs: a check of every version read, then the writes.
    pub fn commit_txn(&self) -> Txn {
        let mut t = Txn::new(self.writes.table.clone());
        for (&key, &(version, _)) in &self.read {
            t = t.check(key, version);
        }
        t.ops.extend(self.writes.ops.iter().cloned());
        t
    }

    /// Commits: runs [`Transaction::commit_txn`] ([`Client::run`], which retries only what
    /// cannot have changed the outcome: a lost answer is asked, never rerun blindly). A
    /// transaction that read nothing and writes nothing commits without a call.
    ///
    /// # Errors
    /// [`Error::Aborted`] with cause `stale_read` when a key read changed: begin again, read
    /// again, decide again ([`Error::is_retryable`]); the others as [`Client::run`].
    pub async fn commit(self) -> Result<Outcome, Error> {
        let t = self.commit_txn();
        if t.is_empty() {
            return Ok(Outcome { txn: 0, results: Vec::new(), reads_lost: false });
        }
        self.client.run(&t, self.prefer).await
    }
}

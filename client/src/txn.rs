//! Building a transaction's operations ([`Txn`]) and reading its results.

use redt_api::v1 as api;
use redt_api::v1::operation::Op;
use redt_api::v1::operation_result::Result as R;

/// The operations of one key/value transaction, run in order ([`crate::Client::run`]):
/// `Txn::new("kv").get(1).put(2, b"x")`.
#[derive(Clone, Debug, PartialEq)]
pub struct Txn {
    pub(crate) table: String,
    pub(crate) ops: Vec<api::Operation>,
}

impl Txn {
    /// A transaction on the table `table` (its name in the topology file).
    pub fn new(table: impl Into<String>) -> Txn {
        Txn { table: table.into(), ops: Vec::new() }
    }

    fn op(mut self, op: Op) -> Txn {
        self.push(op);
        self
    }

    /// Adds `op` at the end.
    pub(crate) fn push(&mut self, op: Op) {
        self.ops.push(api::Operation { op: Some(op) });
    }

    /// Reads `key`'s value ([`Outcome::value`] of its index).
    pub fn get(self, key: u64) -> Txn {
        self.op(Op::Get(api::Get { key }))
    }

    /// Overwrites `key`'s value (at most the table's cell width in bytes).
    pub fn put(self, key: u64, value: impl Into<Vec<u8>>) -> Txn {
        self.op(Op::Put(api::Put { key, value: value.into() }))
    }

    /// Deletes `key`.
    pub fn delete(self, key: u64) -> Txn {
        self.op(Op::Delete(api::Delete { key }))
    }

    /// Adds `delta` to `key`'s value, read as a little-endian `i64`.
    pub fn add(self, key: u64, delta: i64) -> Txn {
        self.op(Op::Add(api::Add { key, delta }))
    }

    /// Appends `item` to `key`'s list of `u64`s.
    pub fn append(self, key: u64, item: u64) -> Txn {
        self.op(Op::Append(api::Append { key, item }))
    }

    /// Reads the keys `from..=to` that exist, at most `limit` of them.
    pub fn scan(self, from: u64, to: u64, limit: u32) -> Txn {
        self.op(Op::Scan(api::Scan { from, to, limit }))
    }

    /// Aborts the transaction (cause `stale_read`) unless `key` is still at `version`, as a
    /// versioned read returned it ([`crate::Client::read`]).
    pub fn check(self, key: u64, version: u64) -> Txn {
        self.op(Op::Check(api::Check { key, version }))
    }

    /// The operations so far.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(crate) fn request(&self) -> api::RunRequest {
        api::RunRequest {
            transaction: Some(api::run_request::Transaction::KeyValue(api::KeyValue {
                table: self.table.clone(),
                operations: self.ops.clone(),
            })),
            reservation: None,
        }
    }
}

/// A committed transaction: its id and what each operation read.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The transaction's id.
    pub txn: u64,
    /// One result per operation; empty when the commit was learned by asking after a lost
    /// answer ([`Outcome::reads_lost`]).
    pub results: Vec<api::OperationResult>,
    /// The commit was learned from an outcome query: what it read is not known.
    pub reads_lost: bool,
}

impl Outcome {
    /// Operation `i`'s value: a `get`'s bytes (trailing zero bytes dropped; empty for a
    /// missing key); `None` for other operations, or after [`Outcome::reads_lost`].
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        match self.results.get(i)?.result.as_ref()? {
            R::Value(v) => Some(v),
            _ => None,
        }
    }

    /// Operation `i`'s value as a little-endian `i64` (what `add` keeps): `None` as for
    /// [`Outcome::value`].
    pub fn number(&self, i: usize) -> Option<i64> {
        let v = self.value(i)?;
        let mut b = [0u8; 8];
        let n = v.len().min(8);
        b[..n].copy_from_slice(&v[..n]);
        Some(i64::from_le_bytes(b))
    }

    /// Operation `i`'s list items (a `get` of a key `append` wrote); an empty list for a
    /// missing key.
    pub fn items(&self, i: usize) -> Option<&[u64]> {
        match self.results.get(i)?.result.as_ref()? {
            R::Items(l) => Some(&l.items),
            R::Value(v) if v.is_empty() => Some(&[]),
            _ => None,
        }
    }

    /// Operation `i`'s rows (a `scan`): `(key, value)` in key order.
    pub fn rows(&self, i: usize) -> Option<Vec<(u64, &[u8])>> {
        match self.results.get(i)?.result.as_ref()? {
            R::Rows(r) => Some(r.rows.iter().map(|row| (row.key, row.value.as_slice())).collect()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_read_as_their_operations_answer() {
        let o = Outcome {
            txn: 1,
            results: vec![
                api::OperationResult { result: Some(R::Value(vec![7])) },
                api::OperationResult { result: Some(R::Items(api::Items { items: vec![1, 2] })) },
                api::OperationResult { result: None },
                api::OperationResult {
                    result: Some(R::Rows(api::Rows { rows: vec![api::Row { key: 3, value: b"a".to_vec() }] })),
                },
                api::OperationResult { result: Some(R::Value(vec![])) },
            ],
            reads_lost: false,
        };
        assert_eq!(o.value(0), Some(&[7u8][..]));
        assert_eq!(o.number(0), Some(7));
        assert_eq!(o.items(1), Some(&[1u64, 2][..]));
        assert_eq!(o.value(2), None);
        assert_eq!(o.rows(3), Some(vec![(3, &b"a"[..])]));
        assert_eq!(o.items(4), Some(&[][..]));
        assert_eq!(o.number(4), Some(0));
        assert_eq!(o.value(9), None);
        let t = Txn::new("kv").get(1).put(2, "x").delete(3).add(4, -1).append(5, 6).scan(0, 9, 3).check(7, 8);
        assert_eq!(t.len(), 7);
        let Some(api::run_request::Transaction::KeyValue(kv)) = t.request().transaction else { panic!("key/value") };
        assert_eq!(kv.table, "kv");
        assert!(matches!(kv.operations[6].op, Some(Op::Check(api::Check { key: 7, version: 8 }))));
    }
}

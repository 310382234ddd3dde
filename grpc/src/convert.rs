//! The API's messages (`redt.v1`) to and from the node's wire messages
//! ([`redt_proto::wire`]): a `RunRequest` becomes a submission of a procedure call, the
//! coordinator's answer a `RunResponse` or a status ([`crate::errors`]).

use crate::errors::{self, malformed};
use redt_api::v1 as api;
use redt_dc_executor::{decode_scan, list_items, KvOp, LIST_TAG};
use redt_proto::wire::{OutcomeReply, ProcedureCall, ProcedureKind, SubmitRequest, TpccCall};
use redt_proto::{TableId, Topology};
use redt_protocol::call::kv_call;
use tonic::Status;

/// The family name of the TPC-C procedures (`Procedure::name`).
pub const TPCC: &str = "tpcc";

/// What each operation of a key/value transaction answers, to shape its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A value or a list (`Get`).
    Value,
    /// The rows of a `Scan`.
    Rows,
    /// Nothing (`Put`, `Delete`, `Add`, `Append`, `Check`).
    Nothing,
}

/// The submission of `req` and what its operations answer (empty for a procedure).
///
/// # Errors
/// `INVALID_ARGUMENT` (reason `MALFORMED`): no transaction, an unknown table, an empty list
/// of operations, an operation without its kind, an unknown procedure family.
pub fn submission(topology: &Topology, req: api::RunRequest) -> Result<(SubmitRequest, Vec<Answer>), Status> {
    let (call, answers) = match req.transaction {
        None => return Err(malformed("a RunRequest without a transaction (key_value or procedure)")),
        Some(api::run_request::Transaction::KeyValue(kv)) => key_value(topology, kv)?,
        Some(api::run_request::Transaction::Procedure(p)) => {
            if p.name != TPCC {
                return Err(malformed(format!("unknown procedure family {:?}; this node knows {TPCC:?}", p.name)));
            }
            let kind = ProcedureKind::Tpcc(TpccCall { kind: p.kind, params: p.params });
            (ProcedureCall { kind: Some(kind) }, Vec::new())
        }
    };
    let (txn, token) = match req.reservation {
        Some(r) => (Some(r.txn), r.token),
        None => (None, 0),
    };
    Ok((SubmitRequest { call: Some(call), txn, token }, answers))
}

/// The table named `name`.
///
/// # Errors
/// `INVALID_ARGUMENT` naming the tables there are.
pub fn table_id(topology: &Topology, name: &str) -> Result<TableId, Status> {
    match topology.table_by_name(name) {
        Some(t) => Ok(t.id),
        None => {
            let names: Vec<&str> = topology.tables.iter().map(|t| t.name.as_str()).collect();
            Err(malformed(format!("no table {name:?}; the tables are {}", names.join(", "))))
        }
    }
}

/// The key/value call of `kv` (the wire encoding is [`kv_call`]'s) and what its operations
/// answer.
fn key_value(topology: &Topology, kv: api::KeyValue) -> Result<(ProcedureCall, Vec<Answer>), Status> {
    let table = table_id(topology, &kv.table)?;
    if kv.operations.is_empty() {
        return Err(malformed("a key/value transaction without operations"));
    }
    let mut ops = Vec::with_capacity(kv.operations.len());
    let mut answers = Vec::with_capacity(kv.operations.len());
    for (i, o) in kv.operations.into_iter().enumerate() {
        use api::operation::Op;
        let (op, answer) = match o.op {
            None => {
                return Err(malformed(format!(
                    "operation {i} has no kind (get, put, delete, add, append, scan, check)"
                )))
            }
            Some(Op::Get(g)) => (KvOp::Read(g.key), Answer::Value),
            Some(Op::Put(p)) => (KvOp::Write(p.key, p.value), Answer::Nothing),
            Some(Op::Delete(d)) => (KvOp::Delete(d.key), Answer::Nothing),
            Some(Op::Add(a)) => (KvOp::Add(a.key, a.delta), Answer::Nothing),
            Some(Op::Append(a)) => (KvOp::Append(a.key, a.item), Answer::Nothing),
            Some(Op::Scan(s)) => (KvOp::Scan(s.from, s.to, s.limit), Answer::Rows),
            Some(Op::Check(c)) => (KvOp::Check(c.key, c.version), Answer::Nothing),
        };
        ops.push(op);
        answers.push(answer);
    }
    Ok((kv_call(table, &ops), answers))
}

/// The response to a transaction whose coordinator answered `o`, its operations answering
/// `answers`.
///
/// # Errors
/// The status of an abort or an unknown outcome ([`errors::from_outcome`]); `INTERNAL`
/// for an answer whose reads do not match the operations.
pub fn response(o: OutcomeReply, answers: &[Answer]) -> Result<api::RunResponse, Status> {
    if let Some(s) = errors::from_outcome(&o) {
        return Err(s);
    }
    let bad = |why: String| {
        errors::status(tonic::Code::Internal, format!("transaction {}: {why}", o.txn), errors::reason::INTERNAL, &[])
    };
    let mut results = Vec::with_capacity(answers.len());
    if !answers.is_empty() {
        if o.reads.len() != answers.len() || (!o.read_lens.is_empty() && o.read_lens.len() != o.reads.len()) {
            return Err(bad(format!("{} reads answered {} operations", o.reads.len(), answers.len())));
        }
        for (i, (read, answer)) in o.reads.iter().zip(answers).enumerate() {
            let len = o.read_lens.get(i).map_or(read.len(), |&l| l as usize).max(read.len());
            results.push(result(read, len, *answer).map_err(|why| bad(format!("operation {i}: {why}")))?);
        }
    }
    Ok(api::RunResponse { txn: o.txn, results })
}

/// One operation's result from the value it read (`read`, its trailing zero bytes dropped;
/// `len` bytes long in the cell).
fn result(read: &[u8], len: usize, answer: Answer) -> Result<api::OperationResult, String> {
    use api::operation_result::Result as R;
    let mut whole = read.to_vec();
    whole.resize(len, 0);
    let items = |v: &[u8]| R::Items(api::Items { items: list_items(v) });
    let r = match answer {
        Answer::Nothing => None,
        Answer::Value if whole.first() == Some(&LIST_TAG) => Some(items(&whole)),
        Answer::Value => Some(R::Value(read.to_vec())),
        Answer::Rows => {
            let rows = decode_scan(&whole).ok_or("undecodable scan rows")?;
            Some(R::Rows(api::Rows {
                rows: rows
                    .into_iter()
                    .map(|(key, mut value)| {
                        let kept = value.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
                        value.truncate(kept);
                        api::Row { key, value }
                    })
                    .collect(),
            }))
        }
    };
    Ok(api::OperationResult { result: r })
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::operation::Op;
    use api::operation_result::Result as R;
    use redt_protocol::call::kv_kind;

    fn topology() -> Topology {
        let yaml = include_str!("../../configs/local-fast.yaml");
        Topology::from_yaml("local-fast.yaml", yaml).expect("local-fast parses")
    }

    fn run(ops: Vec<Op>) -> api::RunRequest {
        api::RunRequest {
            transaction: Some(api::run_request::Transaction::KeyValue(api::KeyValue {
                table: "kv".into(),
                operations: ops.into_iter().map(|op| api::Operation { op: Some(op) }).collect(),
            })),
            reservation: None,
        }
    }

    #[test]
    fn every_operation_becomes_its_wire_operation() {
        let t = topology();
        let req = run(vec![
            Op::Get(api::Get { key: 1 }),
            Op::Put(api::Put { key: 2, value: b"v".to_vec() }),
            Op::Delete(api::Delete { key: 3 }),
            Op::Add(api::Add { key: 4, delta: -5 }),
            Op::Append(api::Append { key: 5, item: u64::MAX }),
            Op::Scan(api::Scan { from: 6, to: 9, limit: 7 }),
            Op::Check(api::Check { key: 7, version: 1 << 50 }),
        ]);
        let (sub, answers) = submission(&t, req).expect("valid");
        let Some(ProcedureKind::Kv(kv)) = sub.call.and_then(|c| c.kind) else { panic!("a key/value call") };
        assert_eq!(kv.table, 2);
        let kinds: Vec<u32> = kv.ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                kv_kind::READ,
                kv_kind::WRITE,
                kv_kind::DELETE,
                kv_kind::ADD,
                kv_kind::APPEND,
                kv_kind::SCAN,
                kv_kind::CHECK
            ]
        );
        assert_eq!(kv.ops[3].operand, -5);
        assert_eq!(kv.ops[4].operand as u64, u64::MAX);
        assert_eq!(redt_protocol::call::scan_of(&kv.ops[5]), Ok((6, 9, 7)));
        assert_eq!(kv.ops[6].operand as u64, 1 << 50);
        assert_eq!(
            answers,
            [
                Answer::Value,
                Answer::Nothing,
                Answer::Nothing,
                Answer::Nothing,
                Answer::Nothing,
                Answer::Rows,
                Answer::Nothing
            ]
        );
        assert_eq!(sub.txn, None);
    }

    #[test]
    fn requests_without_what_they_need_are_malformed() {
        let t = topology();
        let none = api::RunRequest { transaction: None, reservation: None };
        assert_eq!(submission(&t, none).unwrap_err().code(), tonic::Code::InvalidArgument);
        let empty = run(vec![]);
        assert!(submission(&t, empty).unwrap_err().message().contains("without operations"));
        let mut unknown = run(vec![Op::Get(api::Get { key: 1 })]);
        if let Some(api::run_request::Transaction::KeyValue(kv)) = &mut unknown.transaction {
            kv.table = "nope".into();
        }
        let e = submission(&t, unknown).unwrap_err();
        assert!(e.message().contains("usertable, kv"), "{}", e.message());
        let no_kind = api::RunRequest {
            transaction: Some(api::run_request::Transaction::KeyValue(api::KeyValue {
                table: "kv".into(),
                operations: vec![api::Operation { op: None }],
            })),
            reservation: None,
        };
        assert!(submission(&t, no_kind).unwrap_err().message().contains("operation 0"));
        let proc = api::RunRequest {
            transaction: Some(api::run_request::Transaction::Procedure(api::Procedure {
                name: "ycsb".into(),
                kind: 0,
                params: vec![],
            })),
            reservation: Some(api::Reservation { txn: 9, token: 3, ..Default::default() }),
        };
        assert!(submission(&t, proc).unwrap_err().message().contains("tpcc"));
    }

    #[test]
    fn results_are_shaped_by_their_operation() {
        let list = {
            let mut v = vec![LIST_TAG, 2, 0, 0, 0];
            v.extend_from_slice(&5u64.to_le_bytes());
            v.extend_from_slice(&256u64.to_le_bytes());
            v
        };
        let trimmed = |v: &[u8]| v[..v.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)].to_vec();
        // A scan's encoding ends in zero bytes here (the last row's empty value's length).
        let rows = redt_dc_executor::encode_scan(&[(3, b"ab\0\0".to_vec()), (4, vec![])]);
        let o = OutcomeReply {
            outcome: 0,
            txn: 7,
            reads: vec![b"hi".to_vec(), trimmed(&list), b"x".to_vec(), vec![], trimmed(&rows), vec![]],
            read_lens: vec![2048, 2048, 2048, 0, rows.len() as u32, 0],
            ..Default::default()
        };
        let answers = [Answer::Value, Answer::Value, Answer::Nothing, Answer::Nothing, Answer::Rows, Answer::Value];
        let r = response(o.clone(), &answers).expect("committed");
        assert_eq!(r.txn, 7);
        let got: Vec<Option<R>> = r.results.into_iter().map(|x| x.result).collect();
        assert_eq!(got[0], Some(R::Value(b"hi".to_vec())));
        assert_eq!(got[1], Some(R::Items(api::Items { items: vec![5, 256] })));
        assert_eq!(got[2], None);
        assert_eq!(got[3], None);
        assert_eq!(
            got[4],
            Some(R::Rows(api::Rows {
                rows: vec![api::Row { key: 3, value: b"ab".to_vec() }, api::Row { key: 4, value: vec![] }]
            }))
        );
        assert_eq!(got[5], Some(R::Value(vec![])));
        let short = OutcomeReply { reads: vec![], ..o };
        assert_eq!(response(short, &answers).unwrap_err().code(), tonic::Code::Internal);
    }
}

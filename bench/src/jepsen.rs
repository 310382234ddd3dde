//! Jepsen/Elle micro-operations (`["r", k, null]`, `["append", k, v]`, `["w", k, v]`,
//! `["delete", k, null]`, `["scan", from, to, null]`) ↔ the key/value procedure, for `redt client --jsonl` and the
//! list-append workload.
//!
//! A scan reads every key of `from..=to` (integers, `from <= to`) through the
//! ordered index, in key order, at most [`redt_dc_executor::MAX_RANGE_ROWS`] rows, or at most
//! the integer given in place of `null`; its answer fills that place with `[[k, v], …]`, `v`
//! decoded as a read's. Keys never written, or deleted, are not rows.
//!
//! A delete removes a key: later reads return `null` and scans skip it, until a
//! `w` or `append` writes it again.
//!
//! Keys may be integers (used as is) or strings (hashed with FNV-1a 64; two distinct strings
//! with the same hash would share a record). Values of `w` may be integers or strings and
//! are stored tagged (`1` + i64, or `2` + u32 length + bytes); `append` values must be
//! integers (stored in the list format of [`redt_dc_executor::LIST_TAG`]); a read returns
//! `null` for a key never written, an integer, a string, or a list of integers.

use redt_dc_executor::{list_items, KvOp, LIST_TAG};
use serde_json::{json, Value};

const INT_TAG: u8 = 1;
const STR_TAG: u8 = 2;

/// One micro-operation.
#[derive(Clone, Debug, PartialEq)]
pub struct MicroOp {
    /// `r`, `w`, `append`, `delete` or `scan`.
    pub f: String,
    /// The key as given.
    pub key: Value,
    /// The value as given (`null` for reads; for a scan its row limit, `null` for the most).
    pub value: Value,
    /// A scan's last key as given (`None` for the other functions).
    pub to: Option<Value>,
}

/// A key as a record key.
///
/// # Errors
/// A key that is neither a non-negative integer nor a string.
pub fn key_of(k: &Value) -> Result<u64, String> {
    match k {
        Value::Number(n) => n.as_u64().ok_or_else(|| format!("key {n} is not a non-negative integer")),
        Value::String(s) => {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in s.as_bytes() {
                h ^= *b as u64;
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            Ok(h)
        }
        other => Err(format!("key {other} must be an integer or a string")),
    }
}

/// Parses one line: `{"value": [[f, k, v], …]}` (other fields are ignored).
///
/// # Errors
/// Malformed JSON, a missing `value`, a micro-op that is not a 3-element array, an unknown
/// function.
pub fn parse_line(line: &str) -> Result<Vec<MicroOp>, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let ops = v.get("value").and_then(|x| x.as_array()).ok_or("expected an object with a `value` array")?;
    if ops.is_empty() {
        return Err("a transaction needs at least one micro-op".into());
    }
    ops.iter()
        .map(|op| {
            let a = op.as_array().ok_or_else(|| format!("micro-op {op} is not [f, k, v]"))?;
            let f = a.first().and_then(Value::as_str);
            if f == Some("scan") {
                if a.len() != 4 {
                    return Err(format!("micro-op {op} is not [\"scan\", from, to, null]"));
                }
                return Ok(MicroOp {
                    f: "scan".into(),
                    key: a[1].clone(),
                    value: a[3].clone(),
                    to: Some(a[2].clone()),
                });
            }
            if a.len() != 3 {
                return Err(format!("micro-op {op} is not [f, k, v]"));
            }
            let f = f.ok_or_else(|| format!("function {} is not a string", a[0]))?;
            if !matches!(f, "r" | "w" | "append" | "delete") {
                return Err(format!("unknown function `{f}` (known: r, w, append, delete, scan)"));
            }
            Ok(MicroOp { f: f.to_string(), key: a[1].clone(), value: a[2].clone(), to: None })
        })
        .collect()
}

/// The key/value operations of `ops`.
///
/// # Errors
/// A bad key, a `w` value that is neither integer nor string, an `append` value that is not
/// an integer.
pub fn to_kv_ops(ops: &[MicroOp]) -> Result<Vec<KvOp>, String> {
    ops.iter()
        .map(|op| {
            let k = key_of(&op.key)?;
            Ok(match op.f.as_str() {
                "r" => KvOp::Read(k),
                "w" => KvOp::Write(k, encode_value(&op.value)?),
                "scan" => scan_op(op)?,
                "delete" => KvOp::Delete(k),
                _ => {
                    let x = op.value.as_i64().ok_or_else(|| format!("append value {} must be an integer", op.value))?;
                    KvOp::Append(k, x as u64)
                }
            })
        })
        .collect()
}

/// The scan of a `["scan", from, to, limit]` micro-op.
fn scan_op(op: &MicroOp) -> Result<KvOp, String> {
    let int = |v: &Value, what: &str| {
        v.as_u64().ok_or_else(|| format!("a scan's {what} key must be a non-negative integer, got {v}"))
    };
    let from = int(&op.key, "first")?;
    let to = int(op.to.as_ref().unwrap_or(&Value::Null), "last")?;
    if from > to {
        return Err(format!("scan from key {from} to key {to}: the first key is past the last"));
    }
    let max = redt_dc_executor::MAX_RANGE_ROWS;
    let limit = match &op.value {
        Value::Null => max,
        v => match v.as_u64() {
            Some(n) if (1..=u64::from(max)).contains(&n) => n as u32,
            _ => return Err(format!("a scan returns 1 to {max} rows; asked for {v}")),
        },
    };
    Ok(KvOp::Scan(from, to, limit))
}

/// Encodes a `w` value.
///
/// # Errors
/// A value that is neither an integer nor a string.
pub fn encode_value(v: &Value) -> Result<Vec<u8>, String> {
    if let Some(i) = v.as_i64() {
        let mut b = vec![INT_TAG];
        b.extend_from_slice(&i.to_le_bytes());
        return Ok(b);
    }
    if let Some(s) = v.as_str() {
        let mut b = vec![STR_TAG];
        b.extend_from_slice(&(s.len() as u32).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
        return Ok(b);
    }
    Err(format!("value {v} must be an integer or a string"))
}

/// Decodes a cell value read back.
pub fn decode_value(b: &[u8]) -> Value {
    match b.first() {
        None => Value::Null,
        Some(&INT_TAG) if b.len() >= 9 => json!(i64::from_le_bytes(b[1..9].try_into().expect("8 bytes"))),
        Some(&STR_TAG) if b.len() >= 5 => {
            let n = u32::from_le_bytes(b[1..5].try_into().expect("4 bytes")) as usize;
            let end = (5 + n).min(b.len());
            json!(String::from_utf8_lossy(&b[5..end]))
        }
        Some(&LIST_TAG) => json!(list_items(b).into_iter().map(|x| x as i64).collect::<Vec<_>>()),
        _ if b.iter().all(|&x| x == 0) => Value::Null,
        _ => json!(format!("<{} undecodable bytes>", b.len())),
    }
}

/// The micro-ops with their reads filled in from `reads` (one entry per op).
pub fn fill_reads(ops: &[MicroOp], reads: &[Option<Vec<u8>>]) -> Value {
    Value::Array(
        ops.iter()
            .enumerate()
            .map(|(i, op)| {
                if op.f == "scan" {
                    let rows = reads.get(i).and_then(|r| r.as_deref()).and_then(redt_dc_executor::decode_scan);
                    let rows: Vec<Value> =
                        rows.unwrap_or_default().iter().map(|(k, v)| json!([k, decode_value(v)])).collect();
                    return json!([op.f, op.key, op.to, rows]);
                }
                let v = if op.f == "r" {
                    reads.get(i).and_then(|r| r.as_deref()).map(decode_value).unwrap_or(Value::Null)
                } else {
                    op.value.clone()
                };
                json!([op.f, op.key, v])
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips_values() {
        let ops = parse_line(r#"{"value":[["r",1,null],["append","x",5],["w",2,"hi"],["w",3,-7]]}"#).unwrap();
        let kv = to_kv_ops(&ops).unwrap();
        assert_eq!(kv[0], KvOp::Read(1));
        assert!(matches!(kv[1], KvOp::Append(_, 5)));
        assert_eq!(decode_value(&encode_value(&json!("hi")).unwrap()), json!("hi"));
        assert_eq!(decode_value(&encode_value(&json!(-7)).unwrap()), json!(-7));
        assert_eq!(decode_value(&[0u8; 16]), Value::Null);
        let mut list = vec![LIST_TAG, 2, 0, 0, 0];
        list.extend_from_slice(&5u64.to_le_bytes());
        list.extend_from_slice(&6u64.to_le_bytes());
        assert_eq!(decode_value(&list), json!([5, 6]));
        let del = to_kv_ops(&parse_line(r#"{"value":[["delete",4,null],["r",4,null]]}"#).unwrap()).unwrap();
        assert_eq!(del, vec![KvOp::Delete(4), KvOp::Read(4)]);
        assert!(parse_line(r#"{"value":[["remove",4,null]]}"#)
            .unwrap_err()
            .contains("known: r, w, append, delete, scan"));
    }

    #[test]
    fn scans_parse_and_bad_scans_are_refused() {
        let ops = parse_line(r#"{"value":[["scan",3,9,null],["scan",1,1,5]]}"#).unwrap();
        let kv = to_kv_ops(&ops).unwrap();
        assert_eq!(kv, vec![KvOp::Scan(3, 9, redt_dc_executor::MAX_RANGE_ROWS), KvOp::Scan(1, 1, 5)]);
        let err = |line: &str| to_kv_ops(&parse_line(line).unwrap()).unwrap_err();
        assert!(err(r#"{"value":[["scan",9,3,null]]}"#).contains("the first key is past the last"));
        assert!(err(r#"{"value":[["scan",1,3,100000]]}"#).contains("returns 1 to 1000 rows"));
        assert!(err(r#"{"value":[["scan","a",3,null]]}"#).contains("non-negative integer"));
        assert!(parse_line(r#"{"value":[["scan",1,3]]}"#).is_err());
        let reads = vec![Some(redt_dc_executor::encode_scan(&[(4, encode_value(&json!(7)).unwrap())]))];
        assert_eq!(fill_reads(&ops[..1], &reads), json!([["scan", 3, 9, [[4, 7]]]]));
    }

    #[test]
    fn refuses_bad_lines() {
        assert!(parse_line("nope").is_err());
        assert!(parse_line(r#"{"value":[]}"#).is_err());
        assert!(parse_line(r#"{"value":[["cas",1,2]]}"#).is_err());
        assert!(parse_line(r#"{"value":[["r",1]]}"#).is_err());
        assert!(to_kv_ops(&parse_line(r#"{"value":[["append",1,"s"]]}"#).unwrap()).is_err());
        assert!(to_kv_ops(&parse_line(r#"{"value":[["r",-1,null]]}"#).unwrap()).is_err());
        assert!(to_kv_ops(&parse_line(r#"{"value":[["w",1,[1]]]}"#).unwrap()).is_err());
    }

    /// A JSON value of the shapes a micro-op's fields take, and a few it must refuse.
    fn json_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            ".{0,8}".prop_map(|s| json!(s)),
            proptest::collection::vec(any::<i64>(), 0..3).prop_map(|v| json!(v)),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever a `redt client --jsonl` line holds, parsing it, turning it into
        /// key/value operations and filling in reads answer or refuse, never panic.
        #[test]
        fn arbitrary_lines_never_panic(line in ".{0,200}") {
            if let Ok(ops) = parse_line(&line) {
                let _ = to_kv_ops(&ops);
            }
        }

        #[test]
        fn json_shaped_lines_never_panic(
            ops in proptest::collection::vec(
                (prop_oneof![Just("r"), Just("w"), Just("append"), Just("cas"), Just("")], json_value(), json_value()),
                0..5,
            ),
            extra in json_value(),
            reads in proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24)), 0..6),
        ) {
            let ops: Vec<Value> = ops.into_iter().map(|(f, k, v)| json!([f, k, v])).collect();
            for line in [json!({"value": ops, "extra": extra}).to_string(), json!({"value": extra}).to_string()] {
                if let Ok(parsed) = parse_line(&line) {
                    let _ = to_kv_ops(&parsed);
                    let _ = fill_reads(&parsed, &reads);
                }
            }
        }

        #[test]
        fn arbitrary_cell_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_value(&bytes);
        }
    }
}

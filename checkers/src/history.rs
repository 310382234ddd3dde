//! List-append histories in Jepsen's JSON-lines form, and the checker that compares one
//! with the lists the database holds at the end.
//!
//! One line per event: `{"index":3,"type":"invoke","f":"txn","value":[["append",2,7],["r",1,null]],"process":0,"time":1234}`
//! then, when the transaction returns, `{"index":5,"type":"ok","f":"txn","value":[["append",2,7],["r",1,[4,5]]],"process":0,"time":9876}`
//! (`fail`: certainly not committed; `info`: unknown, after which the client continues as a
//! new process, as Jepsen's do). `time` is in nanoseconds since the start of the run. This
//! is what Elle (`elle-cli --model list-append`) reads.
//!
//! [`check`] verifies, against the final lists:
//! - every `ok` append is in its key's final list exactly once;
//! - no `fail` append is there, and nothing is there that no transaction appended;
//! - every `ok` read of a key is a prefix of the key's final list;
//! - real time: if `ok` transaction A returned before `ok` transaction B was invoked, A's
//!   appends precede B's appends in the final list and B's reads of that key contain them;
//! - and, with [`crate::elle`] over the same history and lists, no aborted or intermediate
//!   read, no read at odds with its transaction's own operations, and no dependency cycle:
//!   the history is strictly serializable as far as Elle's analysis can tell.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

/// The `type` of an event: an invocation, or a completion in Jepsen's words for the three
/// [`redt_proto::Outcome`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// The transaction is submitted.
    Invoke,
    /// It committed ([`redt_proto::Outcome::Committed`]).
    Ok,
    /// It certainly did not commit ([`redt_proto::Outcome::Aborted`]).
    Fail,
    /// Its outcome is unknown ([`redt_proto::Outcome::Unknown`]).
    Info,
}

/// One micro-operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mop {
    /// `["append", key, value]`.
    Append(u64, u64),
    /// `["r", key, list]`: `None` until read (and in invocations).
    Read(u64, Option<Vec<u64>>),
}

impl Mop {
    /// The Jepsen form.
    pub fn to_json(&self) -> Value {
        match self {
            Mop::Append(k, v) => json!(["append", k, v]),
            Mop::Read(k, None) => json!(["r", k, null]),
            Mop::Read(k, Some(l)) => json!(["r", k, l]),
        }
    }

    /// Parses the Jepsen form.
    ///
    /// # Errors
    /// Anything but `["append", uint, uint]` or `["r", uint, null | [uint…]]`.
    pub fn from_json(v: &Value) -> Result<Mop, String> {
        let a = v.as_array().filter(|a| a.len() == 3).ok_or_else(|| format!("micro-op {v} is not [f, k, v]"))?;
        let k = a[1].as_u64().ok_or_else(|| format!("key {} is not an unsigned integer", a[1]))?;
        match a[0].as_str() {
            Some("append") => {
                Ok(Mop::Append(k, a[2].as_u64().ok_or_else(|| format!("append value {} is not an integer", a[2]))?))
            }
            Some("r") => match &a[2] {
                Value::Null => Ok(Mop::Read(k, None)),
                Value::Array(items) => Ok(Mop::Read(
                    k,
                    Some(
                        items
                            .iter()
                            .map(|x| x.as_u64().ok_or_else(|| format!("read item {x} is not an integer")))
                            .collect::<Result<_, _>>()?,
                    ),
                )),
                other => Err(format!("read value {other} is neither null nor a list")),
            },
            _ => Err(format!("unknown function {} (list-append has append and r)", a[0])),
        }
    }
}

/// One history event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the history.
    pub index: u64,
    /// `invoke`, `ok`, `fail` or `info`.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// Always `txn`.
    pub f: String,
    /// The micro-operations.
    pub value: Value,
    /// The client (a new one after an `info`).
    pub process: u64,
    /// Nanoseconds since the start of the run.
    pub time: u64,
    /// Why a transaction failed or is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Records a history in memory and, if asked, as JSON lines in a file.
pub struct HistoryWriter {
    out: Option<std::io::BufWriter<std::fs::File>>,
    events: Vec<Event>,
    start: Instant,
}

impl HistoryWriter {
    /// A history starting now, written to `path` if given.
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn new(path: Option<&Path>) -> Result<Self, String> {
        let out = match path {
            Some(p) => {
                Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?))
            }
            None => None,
        };
        Ok(HistoryWriter { out, events: Vec::new(), start: Instant::now() })
    }

    /// Appends an event (its index and time are assigned here).
    ///
    /// # Errors
    /// Writing the file.
    pub fn record(&mut self, kind: EventType, process: u64, mops: &[Mop], error: Option<String>) -> Result<(), String> {
        let e = Event {
            index: self.events.len() as u64,
            kind,
            f: "txn".into(),
            value: Value::Array(mops.iter().map(Mop::to_json).collect()),
            process,
            time: self.start.elapsed().as_nanos() as u64,
            error,
        };
        if let Some(out) = &mut self.out {
            serde_json::to_writer(&mut *out, &e).map_err(|e| e.to_string())?;
            out.write_all(b"\n").map_err(|e| e.to_string())?;
        }
        self.events.push(e);
        Ok(())
    }

    /// Restarts the clock `time` counts from (call when the run starts).
    pub fn restart_clock(&mut self) {
        self.start = Instant::now();
    }

    /// Flushes the file and returns the events.
    ///
    /// # Errors
    /// Flushing the file.
    pub fn finish(mut self) -> Result<Vec<Event>, String> {
        if let Some(out) = &mut self.out {
            out.flush().map_err(|e| e.to_string())?;
        }
        Ok(self.events)
    }
}

/// Reads a JSON-lines history.
///
/// # Errors
/// I/O errors and lines that are not events.
pub fn read_history(path: &Path) -> Result<Vec<Event>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut events = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        events.push(serde_json::from_str(&line).map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?);
    }
    Ok(events)
}

/// The outcome of [`check`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    /// Transactions in the history.
    pub transactions: u64,
    /// `ok` transactions.
    pub ok: u64,
    /// `fail` transactions.
    pub fail: u64,
    /// `info` transactions (and invocations without a completion).
    pub info: u64,
    /// Appends of `ok` transactions.
    pub ok_appends: u64,
    /// Appends of `fail` transactions.
    pub fail_appends: u64,
    /// Appends of `info` transactions.
    pub info_appends: u64,
    /// Appends of `info` transactions found in the final lists (they did commit).
    pub info_appends_visible: u64,
    /// Reads of `ok` transactions.
    pub ok_reads: u64,
    /// Keys with a final list.
    pub keys: u64,
    /// Items in every final list.
    pub final_items: u64,
    /// Violations found, by kind (`[kind, count]`, in order of first occurrence).
    pub violations_by_kind: Vec<(String, u64)>,
    /// The first violations, described.
    pub violations: Vec<String>,
    /// No violation at all.
    pub valid: bool,
}

impl CheckReport {
    fn violation(&mut self, kind: &str, what: String) {
        match self.violations_by_kind.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => self.violations_by_kind.push((kind.to_string(), 1)),
        }
        if self.violations.len() < 20 {
            self.violations.push(format!("{kind}: {what}"));
        }
    }
}

struct Txn {
    kind: EventType,
    invoked: u64,
    completed: u64,
    mops: Vec<Mop>,
    index: u64,
    process: u64,
}

/// Pairs invocations with completions (per process, in order).
fn transactions(events: &[Event]) -> Result<Vec<Txn>, String> {
    let mut open: HashMap<u64, (u64, u64, Value)> = HashMap::new();
    let mut txns = Vec::new();
    let parse = |v: &Value| -> Result<Vec<Mop>, String> {
        v.as_array().ok_or_else(|| format!("value {v} is not a list"))?.iter().map(Mop::from_json).collect()
    };
    for (pos, e) in events.iter().enumerate() {
        let pos = pos as u64;
        match e.kind {
            EventType::Invoke => {
                if open.insert(e.process, (pos, e.index, e.value.clone())).is_some() {
                    return Err(format!("process {} invoked twice without completing (index {})", e.process, e.index));
                }
            }
            k => {
                let (invoked, index, inv) = open.remove(&e.process).ok_or_else(|| {
                    format!("completion without invocation: process {}, index {}", e.process, e.index)
                })?;
                let mops = if k == EventType::Ok { parse(&e.value)? } else { parse(&inv)? };
                txns.push(Txn { kind: k, invoked, completed: pos, mops, index, process: e.process });
            }
        }
    }
    for (process, (invoked, index, inv)) in open {
        txns.push(Txn { kind: EventType::Info, invoked, completed: u64::MAX, mops: parse(&inv)?, index, process });
    }
    txns.sort_by_key(|t| t.invoked);
    Ok(txns)
}

/// Checks a list-append history against the final list of every key (keys absent from
/// `finals` are taken as empty).
///
/// # Errors
/// A malformed history (unpaired events, bad micro-ops).
pub fn check(events: &[Event], finals: &BTreeMap<u64, Vec<u64>>) -> Result<CheckReport, String> {
    let txns = transactions(events)?;
    let mut r = CheckReport { transactions: txns.len() as u64, keys: finals.len() as u64, ..Default::default() };
    let empty = Vec::new();
    let final_of = |k: u64| finals.get(&k).unwrap_or(&empty);

    // Who appended what.
    let mut appended: HashMap<(u64, u64), (EventType, u64)> = HashMap::new();
    for t in &txns {
        match t.kind {
            EventType::Ok => r.ok += 1,
            EventType::Fail => r.fail += 1,
            _ => r.info += 1,
        }
        for m in &t.mops {
            match m {
                Mop::Append(k, v) => {
                    match t.kind {
                        EventType::Ok => r.ok_appends += 1,
                        EventType::Fail => r.fail_appends += 1,
                        _ => r.info_appends += 1,
                    }
                    if let Some((_, other)) = appended.insert((*k, *v), (t.kind, t.index)) {
                        r.violation(
                            "duplicate-append",
                            format!("value {v} appended to key {k} twice (index {other} and {})", t.index),
                        );
                    }
                }
                Mop::Read(..) if t.kind == EventType::Ok => r.ok_reads += 1,
                Mop::Read(..) => {}
            }
        }
    }

    // Positions in the final lists; nothing there that was not appended (or that failed).
    let mut pos: HashMap<(u64, u64), usize> = HashMap::new();
    for (&k, list) in finals {
        r.final_items += list.len() as u64;
        for (i, &v) in list.iter().enumerate() {
            if pos.insert((k, v), i).is_some() {
                r.violation("duplicate", format!("value {v} appears more than once in the final list of key {k}"));
            }
            match appended.get(&(k, v)) {
                None => r.violation("phantom", format!("value {v} in the final list of key {k} was never appended")),
                Some((EventType::Fail, idx)) => r.violation(
                    "failed-append-visible",
                    format!("value {v} of key {k} was appended by failed transaction {idx}"),
                ),
                Some((EventType::Info, _)) => r.info_appends_visible += 1,
                _ => {}
            }
        }
    }

    // Every ok append is there; every ok read is a prefix.
    for t in txns.iter().filter(|t| t.kind == EventType::Ok) {
        for m in &t.mops {
            match m {
                Mop::Append(k, v) => {
                    if !pos.contains_key(&(*k, *v)) {
                        r.violation(
                            "lost",
                            format!(
                                "value {v} appended to key {k} by ok transaction {} is not in the final list",
                                t.index
                            ),
                        );
                    }
                }
                Mop::Read(k, Some(l)) => {
                    let f = final_of(*k);
                    if l.len() > f.len() || f[..l.len()] != l[..] {
                        r.violation(
                            "read-not-prefix",
                            format!("transaction {} read {l:?} from key {k}, not a prefix of the final {f:?}", t.index),
                        );
                    }
                }
                Mop::Read(k, None) => r.violation(
                    "read-missing",
                    format!("ok transaction {} has no value for its read of key {k}", t.index),
                ),
            }
        }
    }

    // Real time, per key: the ok appends sorted by completion, with the highest final
    // position among those completed before each point.
    let mut by_key: HashMap<u64, Vec<(u64, usize)>> = HashMap::new();
    for t in txns.iter().filter(|t| t.kind == EventType::Ok) {
        for m in &t.mops {
            if let Mop::Append(k, v) = m {
                if let Some(&p) = pos.get(&(*k, *v)) {
                    by_key.entry(*k).or_default().push((t.completed, p));
                }
            }
        }
    }
    let mut prefix_max: HashMap<u64, (Vec<u64>, Vec<usize>)> = HashMap::new();
    for (k, mut v) in by_key {
        v.sort();
        let mut best = 0usize;
        let maxes = v
            .iter()
            .map(|&(_, p)| {
                best = best.max(p + 1);
                best
            })
            .collect();
        prefix_max.insert(k, (v.iter().map(|&(c, _)| c).collect(), maxes));
    }
    // Items a transaction invoked at `invoked` must see on key `k`: every ok append that
    // completed before, i.e. the final list up to the highest such position.
    let must_see = |k: u64, invoked: u64| -> usize {
        let Some((done, maxes)) = prefix_max.get(&k) else { return 0 };
        let n = done.partition_point(|&c| c < invoked);
        if n == 0 {
            0
        } else {
            maxes[n - 1]
        }
    };
    for t in txns.iter().filter(|t| t.kind == EventType::Ok) {
        for m in &t.mops {
            match m {
                Mop::Append(k, v) => {
                    if let Some(&p) = pos.get(&(*k, *v)) {
                        let need = must_see(*k, t.invoked);
                        if p < need {
                            r.violation(
                                "realtime",
                                format!(
                                    "value {v} of key {k} (transaction {}) precedes an append that completed before it was invoked",
                                    t.index
                                ),
                            );
                        }
                    }
                }
                Mop::Read(k, Some(l)) => {
                    let need = must_see(*k, t.invoked);
                    if l.len() < need {
                        r.violation(
                            "realtime",
                            format!(
                                "transaction {} read {} items of key {k}, but {need} had been appended by transactions completed before it",
                                t.index,
                                l.len()
                            ),
                        );
                    }
                }
                Mop::Read(_, None) => {}
            }
        }
    }
    // Elle's analysis of the same history and lists adds what the checks above do not look
    // for: aborted and intermediate reads, a transaction's reads against its own operations,
    // and the dependency cycles (G0, G1c, G-single, G2, with real time) of a history that is
    // not strictly serializable.
    let elle_txns: Vec<crate::elle::Txn> = txns
        .iter()
        .enumerate()
        .map(|(id, t)| crate::elle::Txn {
            id,
            process: t.process,
            invoke_ns: t.invoked,
            complete_ns: (t.completed != u64::MAX).then_some(t.completed),
            outcome: match t.kind {
                EventType::Ok => redt_proto::Outcome::Committed,
                EventType::Fail => redt_proto::Outcome::Aborted,
                _ => redt_proto::Outcome::Unknown,
            },
            ops: t
                .mops
                .iter()
                .map(|m| match m {
                    Mop::Append(key, value) => crate::elle::Op::Append { key: *key, value: *value },
                    Mop::Read(key, list) => crate::elle::Op::Read { key: *key, list: list.clone() },
                })
                .collect(),
        })
        .collect();
    for a in crate::elle::check(&elle_txns, Some(finals)).anomalies {
        use crate::elle::Anomaly as A;
        let found_above = matches!(
            a,
            A::DuplicateAppend { .. }
                | A::DuplicateInRead { .. }
                | A::PhantomValue { .. }
                | A::IncompatibleOrder { .. }
                | A::LostAppend { .. }
                | A::Malformed { .. }
        );
        if !found_above {
            r.violation(&format!("elle {}", a.name()), a.to_string());
        }
    }
    r.valid = r.violations_by_kind.is_empty();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(index: u64, kind: EventType, process: u64, mops: &[Mop]) -> Event {
        Event {
            index,
            kind,
            f: "txn".into(),
            value: Value::Array(mops.iter().map(Mop::to_json).collect()),
            process,
            time: index * 10,
            error: None,
        }
    }

    /// Process 0 appends 1 to key 1 (ok), process 1 appends 2 (fail), process 0 then
    /// appends 3 and reads [1, 3], process 2 appends 4 (info) and never returns.
    fn good() -> (Vec<Event>, BTreeMap<u64, Vec<u64>>) {
        use EventType::*;
        use Mop::*;
        let h = vec![
            ev(0, Invoke, 0, &[Append(1, 1)]),
            ev(1, Invoke, 1, &[Append(1, 2)]),
            ev(2, Ok, 0, &[Append(1, 1)]),
            ev(3, Fail, 1, &[Append(1, 2)]),
            ev(4, Invoke, 0, &[Append(1, 3), Read(1, None)]),
            ev(5, Invoke, 2, &[Append(1, 4)]),
            ev(6, Ok, 0, &[Append(1, 3), Read(1, Some(vec![1, 3]))]),
            ev(7, Info, 2, &[Append(1, 4)]),
        ];
        (h, BTreeMap::from([(1, vec![1, 3, 4])]))
    }

    #[test]
    fn a_consistent_history_passes() {
        let (h, f) = good();
        let r = check(&h, &f).unwrap();
        assert!(r.valid, "{:?}", r.violations);
        assert_eq!((r.ok, r.fail, r.info), (2, 1, 1));
        assert_eq!(r.info_appends_visible, 1);
    }

    #[test]
    fn violations_are_caught() {
        let (h, _) = good();
        let kinds = |f: BTreeMap<u64, Vec<u64>>| {
            let r = check(&h, &f).unwrap();
            assert!(!r.valid);
            r.violations_by_kind.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
        };
        // An ok append lost.
        assert!(kinds(BTreeMap::from([(1, vec![1])])).contains(&"lost".to_string()));
        // A failed append visible.
        assert!(kinds(BTreeMap::from([(1, vec![1, 3, 2])])).contains(&"failed-append-visible".to_string()));
        // A value nobody appended.
        assert!(kinds(BTreeMap::from([(1, vec![1, 3, 9])])).contains(&"phantom".to_string()));
        // Out of real-time order: 1 completed before 3 was invoked.
        let k = kinds(BTreeMap::from([(1, vec![3, 1])]));
        assert!(k.contains(&"realtime".to_string()) && k.contains(&"read-not-prefix".to_string()), "{k:?}");
        // Duplicated.
        assert!(kinds(BTreeMap::from([(1, vec![1, 3, 3])])).contains(&"duplicate".to_string()));
    }

    #[test]
    fn a_stale_read_is_caught() {
        use EventType::*;
        use Mop::*;
        // 5 is appended and acknowledged; a later transaction reads an empty list.
        let h = vec![
            ev(0, Invoke, 0, &[Append(2, 5)]),
            ev(1, Ok, 0, &[Append(2, 5)]),
            ev(2, Invoke, 1, &[Read(2, None)]),
            ev(3, Ok, 1, &[Read(2, Some(vec![]))]),
        ];
        let r = check(&h, &BTreeMap::from([(2, vec![5])])).unwrap();
        assert_eq!(r.violations_by_kind[0], ("realtime".to_string(), 1));
        // Elle sees the cycle: the reader's anti-dependency on the append, against real time.
        assert!(r.violations_by_kind.iter().any(|(k, _)| k.starts_with("elle G-single")), "{:?}", r.violations_by_kind);
    }

    #[test]
    fn a_write_skew_only_elle_sees_is_caught() {
        use EventType::*;
        use Mop::*;
        // Concurrent: 0 reads key 1 empty and appends to key 2; 1 reads key 2 empty and appends
        // to key 1. Each read is a prefix of its final list and nothing is lost or stale in real
        // time, but no serial order explains both empty reads (G2).
        let h = vec![
            ev(0, Invoke, 0, &[Read(1, None), Append(2, 7)]),
            ev(1, Invoke, 1, &[Read(2, None), Append(1, 8)]),
            ev(2, Ok, 0, &[Read(1, Some(vec![])), Append(2, 7)]),
            ev(3, Ok, 1, &[Read(2, Some(vec![])), Append(1, 8)]),
        ];
        let r = check(&h, &BTreeMap::from([(1, vec![8]), (2, vec![7])])).unwrap();
        assert!(!r.valid);
        assert!(r.violations_by_kind.iter().all(|(k, _)| k.starts_with("elle")), "{:?}", r.violations_by_kind);
        assert!(r.violations_by_kind.iter().any(|(k, _)| k == "elle G2"), "{:?}", r.violations_by_kind);
    }

    #[test]
    fn writes_and_reads_back_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let mut w = HistoryWriter::new(Some(&path)).unwrap();
        w.record(EventType::Invoke, 0, &[Mop::Append(1, 1), Mop::Read(1, None)], None).unwrap();
        w.record(EventType::Ok, 0, &[Mop::Append(1, 1), Mop::Read(1, Some(vec![1]))], None).unwrap();
        let mem = w.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["type"], "invoke");
        assert_eq!(first["f"], "txn");
        assert_eq!(first["value"], json!([["append", 1, 1], ["r", 1, null]]));
        assert_eq!(read_history(&path).unwrap(), mem);
        assert!(check(&mem, &BTreeMap::from([(1, vec![1])])).unwrap().valid);
    }
}

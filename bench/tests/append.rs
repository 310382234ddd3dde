//! A short list-append run on the local-fast topology (own ports): the history file it
//! writes is well-formed Jepsen JSON lines and every `ok` matches the final lists.

use redt_bench::{run_append, AppendConfig};
use redt_checkers::history::{check, read_history, EventType, Mop};
use redt_coordinator::RetryPolicy;
use redt_proto::Topology;
use std::collections::HashMap;
use std::time::Duration;

/// configs/local-fast.yaml on port 7400 (other tests use 7100), under its own name.
fn topology() -> Topology {
    let text = include_str!("../../configs/local-fast.yaml")
        .replace(":7100", ":7400")
        .replace("name: local-fast", "name: local-fast-append-test");
    Topology::from_yaml("local-fast (append test)", &text).expect("topology")
}

#[test]
fn short_append_run_writes_a_history_that_matches_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let cfg = AppendConfig {
        duration: Duration::from_millis(2500),
        keys: 8,
        history: Some(path.clone()),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let r = rt.block_on(run_append(topology(), &cfg)).expect("run");
    assert!(r.pass, "check failed: {:?} {:?}", r.check.violations_by_kind, r.check.violations);
    assert!(r.outcomes.committed > 10, "only {} transactions committed", r.outcomes.committed);
    assert!(r.check.ok_appends > 0 && r.check.ok_reads > 0);
    // Retried transactions are in the history once: the retries are counted beside it.
    let t = &r.retries;
    assert_eq!(t.max_retries, RetryPolicy::DEFAULT_RETRIES);
    assert_eq!(t.failed, r.check.fail, "a fail is a transaction given up");
    assert_eq!(t.attempts, r.check.ok + r.check.fail + r.check.info + t.retries, "{t:?}");
    assert_eq!(r.outcomes.aborted, t.abort_causes.iter().map(|(_, n)| n).sum::<u64>(), "aborts are attempts");

    // The file: one invoke then one completion per transaction, per process.
    let events = read_history(&path).expect("history file");
    assert_eq!(events.len() as u64, r.events);
    let mut open: HashMap<u64, usize> = HashMap::new();
    let mut last_time = 0;
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.index, i as u64);
        assert_eq!(e.f, "txn");
        assert!(e.time >= last_time, "time goes forward");
        last_time = e.time;
        let mops: Vec<Mop> = e.value.as_array().unwrap().iter().map(|m| Mop::from_json(m).unwrap()).collect();
        assert!((1..=4).contains(&mops.len()));
        match e.kind {
            EventType::Invoke => {
                assert!(open.insert(e.process, i).is_none(), "process {} invoked twice", e.process);
                assert!(mops.iter().all(|m| !matches!(m, Mop::Read(_, Some(_)))), "invocations read nothing");
            }
            kind => {
                let inv = open.remove(&e.process).expect("a completion follows its invocation");
                let invoked: Vec<Mop> =
                    events[inv].value.as_array().unwrap().iter().map(|m| Mop::from_json(m).unwrap()).collect();
                assert_eq!(invoked.len(), mops.len());
                if kind == EventType::Ok {
                    assert!(mops.iter().all(|m| !matches!(m, Mop::Read(_, None))), "ok reads are filled");
                } else {
                    assert_eq!(mops, invoked);
                }
            }
        }
    }
    assert!(open.is_empty(), "every transaction completed");
    // The file, re-read, passes the same check against the final lists.
    let again = check(&events, &r.finals).unwrap();
    assert!(again.valid && again.ok == r.outcomes.committed);
    // And a corrupted final state is caught: drop the last item of a list holding an ok append.
    let mut broken = r.finals.clone();
    let (k, _) = broken.iter().find(|(_, l)| !l.is_empty()).map(|(k, l)| (*k, l.clone())).unwrap();
    broken.get_mut(&k).unwrap().pop();
    let bad = check(&events, &broken).unwrap();
    assert!(!bad.valid || r.check.info_appends_visible > 0);
}

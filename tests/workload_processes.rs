//! The workload lifecycle against real node processes: `redt cluster up` runs a
//! copy of `configs/local-fast.yaml` (4 processes, 2 ms RTT); `redt workload init|run|check`
//! load YCSB, bank and list-append data through the cluster, run their clients and check them,
//! and refuse a run with flags the cluster was not initialised with, or on a cluster with no
//! init record, naming the values and the fix. A second cluster, the TPC-C tables on the same
//! 4-node shape, gets one warehouse at a small scale, a short run and the 12 consistency
//! conditions before and after. No timing is asserted.

mod common;
use common::{cluster_up, local_fast_yaml, path_str, redt, text, tpcc_local_yaml, ClusterGuard};
use std::path::Path;
use std::process::Output;

/// Listen port of the YCSB/bank/append cluster (drill_processes.rs uses 7720).
const PORT: u16 = 7740;
/// Listen port of the TPC-C cluster.
const TPCC_PORT: u16 = 7760;

/// A MemStore directory under /dev/shm when there is one.
fn shm_dir() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() { tempfile::tempdir_in("/dev/shm") } else { tempfile::tempdir() }
        .expect("a temporary MemStore directory")
}

/// `redt workload ARGS… --cluster CONFIG --certs CERTS`.
fn workload(args: &[&str], config: &Path, certs: &Path) -> Output {
    let mut all = vec!["workload"];
    all.extend_from_slice(args);
    all.extend(["--cluster", path_str(config), "--certs", path_str(certs)]);
    redt(&all)
}

/// Commits `call` through node 0 of the cluster of `config` with the client certificate of
/// `certs`, retrying after an abort: a change made behind the workload's back, for its check
/// to find.
fn tamper(config: &Path, certs: &Path, call: redt_proto::wire::ProcedureCall) -> redt_coordinator::TxnAnswer {
    let topo = std::sync::Arc::new(redt_proto::Topology::load(config).expect("the topology"));
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let client =
            redt_coordinator::Client::connect(topo, certs, std::time::Duration::from_secs(5)).expect("a client");
        for _ in 0..100 {
            let out = client.submit(redt_proto::NodeId(0), call.clone()).await;
            if out.status == redt_coordinator::TxnStatus::Committed {
                return out;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the tampering transaction did not commit");
    })
}

/// Standard output of a successful run, as JSON.
fn json_of(out: &Output, what: &str) -> serde_json::Value {
    assert!(out.status.success(), "{what}: {}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what} --json: {e}: {}", text(out)))
}

/// Standard error of a failed run.
fn refused(out: &Output, what: &str) -> String {
    assert!(!out.status.success(), "{what} must fail: {}", text(out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn ycsb_bank_and_append_through_init_run_and_check() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = shm_dir();
    let config = work.path().join("local-fast-workload.yaml");
    std::fs::write(&config, local_fast_yaml(&format!("workload-processes-{}", std::process::id()), PORT)).unwrap();
    let run_dir = work.path().join("run");
    let certs = run_dir.join("certs");
    let _guard = ClusterGuard::new(run_dir.clone());
    let out = cluster_up(&config, &run_dir, 0, shm.path(), &["--no-metrics"]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));

    // No init record yet: run and check say to init first.
    let e = refused(&workload(&["run", "ycsb", "--duration", "1s"], &config, &certs), "run before init");
    assert!(e.contains("the cluster has no ycsb init record"), "{e}");
    assert!(e.contains(&format!("redt workload init ycsb --cluster {}", config.display())), "{e}");
    let e = refused(&workload(&["check", "bank"], &config, &certs), "check before init");
    assert!(e.contains("the cluster has no bank init record") && e.contains("redt workload init bank"), "{e}");

    // `bench ycsb --cluster` on a cluster that holds no records (and says so in no init record)
    // aborts every transaction: it must not pass.
    let out = redt(&[
        "bench",
        "ycsb",
        "--cluster",
        path_str(&config),
        "--certs",
        path_str(&certs),
        "--duration",
        "1s",
        "--warmup",
        "0s",
    ]);
    let e = refused(&out, "bench ycsb on an empty cluster");
    assert!(e.contains("note: the cluster has no YCSB init record; assuming 16384 records per partition"), "{e}");
    assert!(e.contains("the YCSB run committed no transaction in 1.0 s"), "{e}");

    // YCSB: 50 records per partition × 4 partitions, a short run, the check.
    let init =
        json_of(&workload(&["init", "ycsb", "--records-per-partition", "50", "--json"], &config, &certs), "init");
    assert_eq!(init["records"], 200, "{init}");
    let run = json_of(
        &workload(&["run", "ycsb", "--duration", "2s", "--warmup", "500ms", "--json"], &config, &certs),
        "run ycsb",
    );
    assert!(run["committed"].as_u64().unwrap() > 0, "{run}");
    let check = json_of(&workload(&["check", "ycsb", "--json"], &config, &certs), "check ycsb");
    assert_eq!(
        (check["pass"].as_bool(), check["records"].as_u64(), check["missing"].as_u64()),
        (Some(true), Some(200), Some(0))
    );

    // A record changed behind the workload's back (cell 3 of key 5 no longer one repeated
    // byte) fails the check, naming it.
    let update = redt_dc_executor::YcsbOp::Update { key: 5, cell: 3, value: vec![1, 2, 3] };
    tamper(&config, &certs, redt_protocol::call::ycsb_call(redt_proto::TableId(1), 10, &[update]));
    // A records call reads a record as it is, and a key with no record as missing.
    use redt_dc_executor::RecordOp;
    // (Keys 1,000,000 and 1,000,001: partitions 0 and 1, one with a replica in node 0's DC,
    // the coordinator's, one read only through other DCs' votes.)
    let gets = [1_000_000u64, 1_000_001, 5].map(|key| RecordOp::Get { table: redt_proto::TableId(1), key });
    let read = tamper(&config, &certs, redt_protocol::call::records_call(&gets));
    let decoded: Vec<Option<Vec<Vec<u8>>>> = read
        .reads
        .iter()
        .map(|r| redt_protocol::call::decode_record_read(r.as_deref().expect("a get's read")).unwrap())
        .collect();
    assert_eq!(decoded[..2], [None, None], "keys 1,000,000 and 1,000,001 were never written");
    let cells = decoded[2].as_ref().expect("key 5 was loaded");
    assert_eq!((cells.len(), &cells[3][..4]), (10, &[1u8, 2, 3, 0][..]), "its 10 cells, cell 3 as just written");
    let out = workload(&["check", "ycsb"], &config, &certs);
    let e = refused(&out, "check ycsb after tampering");
    assert!(e.contains("FAILED (0 of 200 records missing, 1 malformed)"), "{e}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("key 5: not one repeated byte per cell"), "{}", text(&out));

    // A run asking for other records is refused naming both values and the fix, by `workload
    // run` and by `bench ycsb --cluster` alike.
    let e = refused(
        &workload(&["run", "ycsb", "--records-per-partition", "16384", "--duration", "1s"], &config, &certs),
        "run with another record count",
    );
    assert!(e.contains("--records-per-partition 16384 does not match the cluster"), "{e}");
    assert!(e.contains("initialised with 50 records per partition"), "{e}");
    assert!(e.contains("redt workload init ycsb --records-per-partition 16384"), "{e}");
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", "ycsb", "--cluster", path_str(&config), "--certs", path_str(&certs)];
        args.extend_from_slice(extra);
        redt(&args)
    };
    let e = refused(&bench(&["--records-per-partition", "16384", "--duration", "1s"]), "bench ycsb, another count");
    assert!(e.contains("initialised with 50 records per partition"), "{e}");

    // A YCSB property file: its record count matches (200 over 4 partitions), its mix runs;
    // operationcount is noted, not used; an unknown key is refused naming it.
    let props = work.path().join("workloadb");
    std::fs::write(
        &props,
        "# workload B\nrecordcount=200\noperationcount=1000\nreadproportion=0.95\nupdateproportion=0.05\n\
         requestdistribution=uniform\nmaxexecutiontime=1\nthreadcount=4\n",
    )
    .unwrap();
    let out = workload(&["run", "ycsb", "-P", path_str(&props), "--warmup", "0s", "--json"], &config, &certs);
    let run = json_of(&out, "run ycsb -P");
    assert_eq!((run["mix"]["workload"].as_str(), run["mix"]["write_ratio"].as_f64()), (Some("a"), Some(0.05)), "{run}");
    assert_eq!((run["mix"]["distribution"].as_str(), run["clients"].as_u64()), (Some("uniform"), Some(4)), "{run}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("operationcount=1000: redt runs for a duration"));
    std::fs::write(&props, "recordcount=200\nhotspotopnfraction=0.2\n").unwrap();
    let e = refused(&workload(&["run", "ycsb", "-P", path_str(&props)], &config, &certs), "-P with an unknown key");
    assert!(e.contains("line 2: unknown YCSB property `hotspotopnfraction`"), "{e}");

    // Bank: 16 accounts of 1,000, transfers, the total.
    let e = refused(&workload(&["run", "bank", "--duration", "1s"], &config, &certs), "bank before init");
    assert!(e.contains("run `redt workload init bank"), "{e}");
    let init = json_of(&workload(&["init", "bank", "--accounts", "16", "--json"], &config, &certs), "init bank");
    assert_eq!(init["accounts"], 16);
    let run = json_of(
        &workload(&["run", "bank", "--duration", "2s", "--warmup", "0s", "--json"], &config, &certs),
        "run bank",
    );
    assert!(run["committed"].as_u64().unwrap() > 0, "{run}");
    let check = json_of(&workload(&["check", "bank", "--json"], &config, &certs), "check bank");
    assert_eq!(
        (check["pass"].as_bool(), check["total"].as_i64(), check["runs"].as_u64()),
        (Some(true), Some(16_000), Some(1))
    );
    let e = refused(&workload(&["run", "bank", "--accounts", "64", "--duration", "1s"], &config, &certs), "bank, 64");
    assert!(e.contains("--accounts 64 does not match the cluster: it was initialised with 16 accounts"), "{e}");
    // Money made behind the bank's back: account 3 set to 5,000.
    let write = redt_dc_executor::KvOp::Write(3, 5000i64.to_le_bytes().to_vec());
    tamper(&config, &certs, redt_protocol::call::kv_call(redt_proto::TableId(2), &[write]));
    let e = refused(&workload(&["check", "bank"], &config, &certs), "check bank after tampering");
    assert!(e.contains("bank check failed: FAILED (total ") && e.contains("expected 16000 = 16 × 1000"), "{e}");

    // List-append: the run's history to a file, checked again later against the lists.
    let history = work.path().join("history.jsonl");
    json_of(&workload(&["init", "append", "--json"], &config, &certs), "init append");
    let run = json_of(
        &workload(&["run", "append", "--duration", "2s", "--history", path_str(&history), "--json"], &config, &certs),
        "run append",
    );
    assert_eq!(run["pass"], true, "{run}");
    let check = json_of(
        &workload(&["check", "append", "--history", path_str(&history), "--json"], &config, &certs),
        "check append",
    );
    assert_eq!((check["pass"].as_bool(), check["events"].as_u64()), (Some(true), run["events"].as_u64()), "{check}");
    assert!(check["check"]["ok_appends"].as_u64().unwrap() > 0, "{check}");
}

#[test]
fn tpcc_through_init_run_and_check() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = shm_dir();
    let config = work.path().join("tpcc-local.yaml");
    std::fs::write(&config, tpcc_local_yaml(&format!("workload-tpcc-{}", std::process::id()), TPCC_PORT)).unwrap();
    let run_dir = work.path().join("run");
    let certs = run_dir.join("certs");
    let _guard = ClusterGuard::new(run_dir.clone());
    let out = cluster_up(&config, &run_dir, 0, shm.path(), &["--no-metrics"]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));

    let e = refused(&workload(&["run", "tpcc", "--duration", "1s"], &config, &certs), "tpcc before init");
    assert!(e.contains("the cluster has no tpcc init record") && e.contains("redt workload init tpcc"), "{e}");
    let init = json_of(
        &workload(&["init", "tpcc", "--warehouses", "1", "--scale", "100,30,9", "--json"], &config, &certs),
        "init tpcc",
    );
    assert!(init["rows"].as_u64().unwrap() > 4000, "{init}");
    let check = json_of(&workload(&["check", "tpcc", "--json"], &config, &certs), "check tpcc after init");
    assert_eq!(check["report"]["passed"], true, "{check}");
    assert_eq!(check["extra_reads"], 0, "{check}");
    let run = json_of(
        &workload(
            &["run", "tpcc", "--duration", "3s", "--warmup", "500ms", "--terminals", "2", "--json"],
            &config,
            &certs,
        ),
        "run tpcc",
    );
    assert!(run["tpmc"].as_f64().unwrap() > 0.0, "{run}");
    let check = json_of(&workload(&["check", "tpcc", "--json"], &config, &certs), "check tpcc after the run");
    let failed: Vec<&serde_json::Value> =
        check["report"]["conditions"].as_array().unwrap().iter().filter(|c| c["violations"] != 0).collect();
    assert!(failed.is_empty() && check["report"]["passed"] == true, "{failed:?}\n{check}");
    assert_eq!(check["runs"], 1);
    let e = refused(&workload(&["run", "tpcc", "--warehouses", "2", "--duration", "1s"], &config, &certs), "tpcc, 2");
    assert!(e.contains("--warehouses 2 does not match the cluster: it was initialised with 1 warehouses"), "{e}");

    // W_YTD of warehouse 1 raised by a cent behind the terminals' back: conditions 1 and 8
    // fail.
    use redt_bench::tpcc::schema::{self as sc, table};
    use redt_dc_executor::RecordOp;
    let key = sc::warehouse_key(1);
    let read =
        tamper(&config, &certs, redt_protocol::call::records_call(&[RecordOp::Get { table: table::WAREHOUSE, key }]));
    let bytes = read.reads[0].as_deref().expect("a get returns its read");
    let mut cells = redt_protocol::call::decode_record_read(bytes).unwrap().expect("warehouse 1 exists");
    cells[sc::w::YTD as usize] = sc::num(sc::get(&cells[sc::w::YTD as usize]) + 1);
    tamper(
        &config,
        &certs,
        redt_protocol::call::records_call(&[RecordOp::Put { table: table::WAREHOUSE, key, cells }]),
    );
    let out = workload(&["check", "tpcc", "--json"], &config, &certs);
    refused(&out, "check tpcc after tampering");
    let check: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
    let failed: Vec<u64> = check["report"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["violations"] != 0)
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    assert_eq!(failed, [1, 8], "{check}");
}

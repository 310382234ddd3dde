//! A program in another language against real node processes: the Python client
//! (`clients/python`, `grpcio` stubs generated from `api/proto/redt/v1/redt.proto`) checks the
//! gRPC endpoints with stock tooling (`smoke.py`: reflection, health, a transaction, the
//! error model with a certificate of the wrong role), then runs bank transfers (`bank.py`)
//! while a whole DC is killed, and the total must hold.
//!
//! A third runs optimistic list-append transactions through the API
//! (`append_interactive.py`: versioned reads, then appends committed with checks of what was
//! read) while a DC is cut off again and again, and checks the history with Elle
//! (`redt workload check append`).
//!
//! Needs Python 3 with `pip install -r clients/python/requirements.txt` (`.ci/run` installs
//! it); without it the tests fail saying so.

mod common;

use common::{cluster_up, local_fast_yaml, path_str, redt, text, ClusterGuard};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 7820;
const GRPC_PORT: &str = "7825";

fn python(script: &str, args: &[&str], stubs: &Path) -> Command {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python");
    let mut c = Command::new("python3");
    c.arg(format!("{dir}/{script}")).args(args).env("REDT_STUBS_DIR", stubs).stdin(Stdio::null());
    c
}

/// Fails the test, saying what to install, when the Python client's packages are missing.
fn python_deps() {
    let deps = Command::new("python3")
        .args(["-c", "import grpc, grpc_tools, grpc_status, grpc_reflection, grpc_health"])
        .output()
        .expect("python3 runs");
    assert!(
        deps.status.success(),
        "the Python client needs its packages: pip install -r clients/python/requirements.txt\n{}",
        text(&deps)
    );
}

#[test]
fn a_python_client_moves_money_while_a_dc_is_killed_and_the_total_holds() {
    python_deps();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cluster.yaml");
    std::fs::write(&config, local_fast_yaml(&format!("python-client-{}", std::process::id()), PORT)).unwrap();
    let run_dir = dir.path().join("run");
    let stubs = dir.path().join("stubs");
    let up = cluster_up(&config, &run_dir, 0, &dir.path().join("shm"), &["--grpc-port", GRPC_PORT]);
    let mut guard = ClusterGuard::new(run_dir.clone());
    assert!(up.status.success(), "{}", text(&up));

    let smoke = python("smoke.py", &["--run-dir", path_str(&run_dir)], &stubs).output().unwrap();
    assert!(smoke.status.success(), "{}", text(&smoke));
    let said = String::from_utf8_lossy(&smoke.stdout);
    assert!(said.contains("PERMISSION_DENIED FORBIDDEN"), "{said}");

    let progress = dir.path().join("progress");
    let bank = python(
        "bank.py",
        &["--run-dir", path_str(&run_dir), "--duration", "14", "--clients", "4", "--progress", path_str(&progress)],
        &stubs,
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let committed = || std::fs::read_to_string(&progress).ok().and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0);
    let t0 = Instant::now();
    while committed() < 50 && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = committed();
    assert!(before >= 50, "only {before} transfers committed before the kill");
    let kill = redt(&["cluster", "kill", "--run-dir", path_str(&run_dir), "--node", "dc2-n1"]);
    assert!(kill.status.success(), "{}", text(&kill));
    let killed_at = committed();
    let out = bank.wait_with_output().unwrap();
    assert!(out.status.success(), "bank.py failed\n{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    let counts: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(counts["total"], counts["expected"], "{counts}");
    assert_eq!(counts["unknown"], 0, "{counts}");
    let after = counts["committed"].as_u64().unwrap() - killed_at;
    assert!(after >= 50, "only {after} transfers committed after dc2 was killed: {counts}");
    let down = guard.down();
    assert!(down.status.success(), "{}", text(&down));
}

#[test]
fn the_api_reference_is_generated_from_the_proto_file() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/api_reference.py");
    let out = Command::new("python3").args([script, "--check"]).stdin(Stdio::null()).output().expect("python3 runs");
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn optimistic_list_appends_through_the_api_pass_elle_while_a_dc_is_cut_off() {
    const PORT: u16 = 7840;
    python_deps();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cluster.yaml");
    std::fs::write(&config, local_fast_yaml(&format!("python-append-{}", std::process::id()), PORT)).unwrap();
    let run_dir = dir.path().join("run");
    let up = cluster_up(&config, &run_dir, 0, &dir.path().join("shm"), &["--grpc-port", "7845"]);
    let mut guard = ClusterGuard::new(run_dir.clone());
    assert!(up.status.success(), "{}", text(&up));
    let (config_s, run_s) = (path_str(&config), path_str(&run_dir));
    let init = redt(&["workload", "init", "append", "--cluster", config_s, "--run-dir", run_s]);
    assert!(init.status.success(), "{}", text(&init));
    let drill = Command::new(common::REDT)
        .args(["drill", "partition dc4|dc1,dc2,dc3 at 2s heal-after 2s every 4s", "--duration", "12s"])
        .args(["--run-dir", run_s])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let history = dir.path().join("h.jsonl");
    let stubs = dir.path().join("stubs");
    let args = ["--run-dir", run_s, "--duration", "12", "--clients", "6", "--history", path_str(&history)];
    let run = python("append_interactive.py", &args, &stubs).output().unwrap();
    assert!(run.status.success(), "{}", text(&run));
    let counts: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&run.stdout).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", text(&run)));
    assert!(counts["ok"].as_u64().unwrap() >= 100, "{counts}");
    let drilled = drill.wait_with_output().unwrap();
    assert!(drilled.status.success(), "{}", text(&drilled));
    assert!(String::from_utf8_lossy(&drilled.stdout).contains("heal partition"), "{}", text(&drilled));
    let check = redt(&[
        "workload",
        "check",
        "append",
        "--cluster",
        config_s,
        "--run-dir",
        run_s,
        "--history",
        path_str(&history),
    ]);
    if !check.status.success() || !String::from_utf8_lossy(&check.stdout).contains("list-append check          pass") {
        // Kept for a look: the history names each failed transaction's attempts.
        let kept = std::env::temp_dir().join(format!("redt-python-append-{}.jsonl", std::process::id()));
        let _ = std::fs::copy(&history, &kept);
        panic!("the history (kept in {}) fails the check:\n{}", kept.display(), text(&check));
    }
    let down = guard.down();
    assert!(down.status.success(), "{}", text(&down));
}

//! Helpers shared by the tests that run the `redt` binary (`cluster_processes.rs`,
//! `drill_processes.rs`, `workload_processes.rs`, `interval_rows.rs`).

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The `redt` binary under test.
pub const REDT: &str = env!("CARGO_BIN_EXE_redt");

/// `configs/local-fast.yaml` with every node on `port` instead of 7100 and the cluster named
/// `name` (which names its MemStore files).
pub fn local_fast_yaml(name: &str, port: u16) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-fast.yaml");
    let text = std::fs::read_to_string(path).expect("configs/local-fast.yaml");
    assert!(text.contains(":7100\""), "local-fast.yaml nodes listen on port 7100");
    assert!(text.contains("\nname: local-fast\n"), "local-fast.yaml is named local-fast");
    text.replace(":7100\"", &format!(":{port}\"")).replace("\nname: local-fast\n", &format!("\nname: {name}\n"))
}

/// `configs/tpcc.yaml`'s tables on local-fast's shape: 4 DCs × 1 node on `port`, 2 ms RTT, 4
/// partitions, a small MemStore, named `name`.
pub fn tpcc_local_yaml(name: &str, port: u16) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/tpcc.yaml");
    let mut v: serde_norway::Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let shape: serde_norway::Value = serde_norway::from_str(&format!(
        "name: {name}\n\
         memstore: {{ size: 160MiB, index: 8MiB, ring: 8MiB }}\n\
         links: {{ default: {{ rtt: 2ms, jitter: 0ms, loss: 0%, rate: unlimited }} }}\n\
         dcs:\n\
         {}\
         partitions:\n\
         {}",
        (1..=4)
            .map(|d| format!("  - {{ name: dc{d}, nodes: [ {{ name: dc{d}-n1, addr: \"127.0.{d}.1:{port}\" }} ] }}\n"))
            .collect::<String>(),
        (0..4)
            .map(|p| format!(
                "  - {{ replicas: [{}] }}\n",
                (0..3).map(|r| format!("dc{}-n1", (p + r) % 4 + 1)).collect::<Vec<_>>().join(", ")
            ))
            .collect::<String>()
    ))
    .unwrap();
    for (k, val) in shape.as_mapping().unwrap() {
        v.as_mapping_mut().unwrap().insert(k.clone(), val.clone());
    }
    serde_norway::to_string(&v).unwrap()
}

/// Runs `redt args…` to completion, standard input closed.
pub fn redt(args: &[&str]) -> Output {
    Command::new(REDT).args(args).stdin(Stdio::null()).output().expect("run the redt binary")
}

/// Runs `redt cluster up` on `config` into `run_dir`, loading `records` records per
/// partition, with the MemStore files under `shm`, and then the flags `extra`.
pub fn cluster_up(config: &Path, run_dir: &Path, records: u32, shm: &Path, extra: &[&str]) -> Output {
    let records = records.to_string();
    let mut args = vec![
        "cluster",
        "up",
        "--config",
        path_str(config),
        "--run-dir",
        path_str(run_dir),
        "--records-per-partition",
        &records,
        "--shm-dir",
        path_str(shm),
    ];
    args.extend_from_slice(extra);
    redt(&args)
}

/// A run's status, standard output and standard error, for an assertion message.
pub fn text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A temporary path as `&str` (they are UTF-8 here).
pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// Stops the cluster of `run_dir` when dropped (unless [`ClusterGuard::down`] already did),
/// so a failing assertion does not leave node processes behind; a test that panicked also
/// gets the nodes' last log lines on standard error.
pub struct ClusterGuard {
    run_dir: PathBuf,
    armed: bool,
}

impl ClusterGuard {
    /// Guards the cluster `redt cluster up --run-dir run_dir` starts.
    pub fn new(run_dir: PathBuf) -> ClusterGuard {
        ClusterGuard { run_dir, armed: true }
    }

    /// `redt cluster down --wipe` now; nothing more at drop.
    pub fn down(&mut self) -> Output {
        self.armed = false;
        redt(&["cluster", "down", "--run-dir", path_str(&self.run_dir), "--wipe"])
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let out = self.down();
        if std::thread::panicking() {
            eprintln!("cleanup: redt cluster down: {}", text(&out));
            for log in std::fs::read_dir(self.run_dir.join("logs")).into_iter().flatten().flatten() {
                let body = std::fs::read_to_string(log.path()).unwrap_or_default();
                let tail: Vec<&str> = body.lines().rev().take(20).collect();
                eprintln!("--- {}\n{}", log.path().display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            }
        }
    }
}

//! Real multi-host deployment: two hosts of one DC in two network namespaces
//! joined by a veth pair, with the `tcp` in-DC verbs backend and `listen`/`advertise`
//! addresses (host names among them); a `shm` node that maps, but never makes, another node's
//! MemStore file; and an `rdma` DC refused by a build without RDMA.
//!
//! The namespace test needs root and iproute2's `ip netns` (as CI has). Where namespaces
//! cannot be made it fails saying so, unless `REDT_SKIP_NETNS=1` is set (then it passes
//! after printing that it skipped).

mod common;

use common::{path_str, redt, text, REDT};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Set to `1` to skip the network-namespace test where namespaces cannot be made.
const SKIP_ENV: &str = "REDT_SKIP_NETNS";

/// Runs `ip args…`; its output.
fn ip(args: &[&str]) -> std::io::Result<Output> {
    Command::new("ip").args(args).stdin(Stdio::null()).output()
}

/// Runs `ip args…` and panics, with its standard error, unless it succeeds.
fn ip_ok(args: &[&str]) {
    match ip(args) {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("ip {}: {e}", args.join(" ")),
    }
}

/// Two network namespaces (two "hosts") joined by a veth pair, at 10.77.0.1/24 and
/// 10.77.0.2/24, each with its own `/etc/hosts` naming both (`host-a`, `host-b`: what
/// `ip netns exec` mounts from `/etc/netns/<name>/`), and the processes started in them.
/// Dropping it kills the processes and deletes the namespaces (the veth pair goes with
/// them) and their `/etc/netns` directories, whether the test passed or not.
struct Hosts {
    names: [String; 2],
    children: Vec<(String, Child)>,
}

impl Hosts {
    /// The hosts, or why they cannot be made (not root, no `ip`).
    fn make() -> Result<Hosts, String> {
        let tag = std::process::id();
        let names = [format!("redt-mh{tag}-a"), format!("redt-mh{tag}-b")];
        match ip(&["netns", "add", &names[0]]) {
            Ok(out) if out.status.success() => {}
            Ok(out) => return Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            Err(e) => return Err(format!("cannot run `ip`: {e}")),
        }
        // From here on the guard cleans up whatever was made.
        let hosts = Hosts { names: names.clone(), children: Vec::new() };
        ip_ok(&["netns", "add", &names[1]]);
        let veth = [format!("rmh{tag}a"), format!("rmh{tag}b")];
        ip_ok(&["link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1]]);
        for (k, (ns, dev)) in names.iter().zip(&veth).enumerate() {
            ip_ok(&["link", "set", dev, "netns", ns]);
            ip_ok(&["-n", ns, "addr", "add", &format!("10.77.0.{}/24", k + 1), "dev", dev]);
            ip_ok(&["-n", ns, "link", "set", dev, "up"]);
            ip_ok(&["-n", ns, "link", "set", "lo", "up"]);
            let etc = Path::new("/etc/netns").join(ns);
            std::fs::create_dir_all(&etc).expect("create /etc/netns/<namespace>");
            std::fs::write(etc.join("hosts"), "127.0.0.1 localhost\n10.77.0.1 host-a\n10.77.0.2 host-b\n")
                .expect("write the namespace's hosts file");
        }
        Ok(hosts)
    }

    /// `ip netns exec <host k> redt args…`, standard output and error to `log`.
    fn spawn(&mut self, k: usize, name: &str, args: &[&str], log: &Path) {
        let file = std::fs::File::create(log).expect("create a log file");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.names[k], REDT])
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone a file handle"))
            .stderr(file)
            .spawn()
            .expect("start a process in a namespace");
        self.children.push((name.to_string(), child));
    }

    /// `ip netns exec <host k> redt args…` with `input` on standard input, to completion.
    fn run(&self, k: usize, args: &[&str], input: &str) -> Output {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.names[k], REDT])
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a process in a namespace");
        child.stdin.take().expect("piped").write_all(input.as_bytes()).expect("write standard input");
        child.wait_with_output().expect("wait for a process in a namespace")
    }

    /// Panics unless every process started is still running, with the log of the first that
    /// is not.
    fn all_running(&mut self, logs: &Path) {
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(logs.join(format!("{name}.log"))).unwrap_or_default();
                panic!("{name} exited ({status}):\n{log}");
            }
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.names {
            let _ = ip(&["netns", "del", ns]);
            let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(ns));
        }
        // Gone only when empty: other namespaces' files stay.
        let _ = std::fs::remove_dir("/etc/netns");
    }
}

/// The two-host topology: DCs dc1 and dc2, each with one node on host A (10.77.0.1) and one
/// on host B (10.77.0.2), both DCs on the `tcp` backend. dc1's nodes listen on every address
/// and advertise host names; dc2's advertise IPs (dc2-b also listens on its IP alone).
/// Partition p0 lives on dc1-a and dc2-b, p1 on dc1-b and dc2-a, so keys 0 and 1 (the kv
/// table's `key % 2`) put a transaction's records on both nodes of each DC.
const TOPOLOGY: &str = r#"
name: multi-host
epoch: 1
memstore: { size: 8MiB, index: 256KiB, ring: 256KiB }
# A small ring takes a small transaction's redo: 64 writes of 2 KiB cells fit.
limits: { max_ops_per_txn: 64 }
dcs:
  - name: dc1
    backend: tcp
    nodes:
      - { name: dc1-a, listen: "0.0.0.0:7100", advertise: "host-a:7100" }
      - { name: dc1-b, listen: "0.0.0.0:7100", advertise: "host-b:7100" }
  - name: dc2
    backend: tcp
    nodes:
      - { name: dc2-a, listen: "0.0.0.0:7200", advertise: "10.77.0.1:7200" }
      - { name: dc2-b, listen: "10.77.0.2:7200", advertise: "10.77.0.2:7200" }
links:
  default: { rtt: 2ms }
tables:
  - name: kv
    id: 2
    cells: [ { name: value, bytes: 2048 } ]
partitions:
  - { replicas: [dc1-a, dc2-b] }
  - { replicas: [dc1-b, dc2-a] }
"#;

/// The nodes of [`TOPOLOGY`], each with its host (0: A, 1: B).
const NODES: [(&str, usize); 4] = [("dc1-a", 0), ("dc1-b", 1), ("dc2-a", 0), ("dc2-b", 1)];

/// Waits until `log` says its node is ready; panics with the log if `deadline` passes.
fn wait_ready(log: &Path, deadline: Instant) {
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(" ready on ") {
            return;
        }
        assert!(Instant::now() < deadline, "{} never said it was ready:\n{text}", log.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The MemStore files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Two hosts of one DC (two network namespaces, a veth pair between them) run dc1's and
/// dc2's nodes with the `tcp` backend: a client on host A commits a transaction that writes
/// a record on both nodes of each DC, a client on host B reads what it wrote and overwrites
/// it, host A reads that back, and list appends across both hosts commit too. Each host's
/// `--shm-dir` holds its own nodes' MemStore files only (no copy of the other host's), and an
/// abort names its DC as the topology does (`dc1`, not `dc#0`).
#[test]
fn two_hosts_of_one_dc_commit_across_network_namespaces() {
    let mut hosts = match Hosts::make() {
        Ok(h) => h,
        Err(why) if std::env::var(SKIP_ENV).as_deref() == Ok("1") => {
            eprintln!("skipped: cannot make network namespaces ({why}) and {SKIP_ENV}=1");
            return;
        }
        Err(why) => panic!(
            "cannot make network namespaces ({why}): this test runs two hosts in two network namespaces \
             and needs root and iproute2 (`ip netns`); run it as root, or set {SKIP_ENV}=1 to skip it"
        ),
    };
    let work = tempfile::tempdir().expect("a temporary directory");
    let dir = work.path();
    let config = dir.join("topology.yaml");
    std::fs::write(&config, TOPOLOGY).expect("write the topology");
    let certs = dir.join("certs");
    let out = redt(&["certs", "init", "--config", path_str(&config), "--out", path_str(&certs)]);
    assert!(out.status.success(), "{}", text(&out));
    let shm: Vec<PathBuf> = ["shm-a", "shm-b"].iter().map(|d| dir.join(d)).collect();
    for (name, host) in NODES {
        let data = dir.join("data").join(name);
        let args = [
            "node",
            "--config",
            path_str(&config),
            "--node",
            name,
            "--certs",
            path_str(&certs),
            "--shm-dir",
            path_str(&shm[host]),
            "--data-dir",
            path_str(&data),
        ];
        hosts.spawn(host, name, &args, &dir.join(format!("{name}.log")));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for (name, _) in NODES {
        wait_ready(&dir.join(format!("{name}.log")), deadline);
    }
    let client = ["client", "--jsonl", "--cluster", path_str(&config), "--certs", path_str(&certs)];
    let answers = |out: &Output| -> Vec<String> {
        assert!(out.status.success(), "{}", text(out));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    };

    // The first commit may wait for the nodes to find each other (QUIC, TCP verbs).
    let first = r#"{"value":[["w",0,10],["w",1,11]]}"#;
    let mut tries = 0;
    loop {
        let got = answers(&hosts.run(0, &client, &format!("{first}\n")));
        if got.first().is_some_and(|l| l.contains(r#""type":"ok""#)) {
            break;
        }
        tries += 1;
        hosts.all_running(dir);
        assert!(tries < 20, "the first transaction never committed: {got:?}");
        std::thread::sleep(Duration::from_millis(500));
    }

    let from_b = answers(&hosts.run(
        1,
        &client,
        "{\"value\":[[\"r\",0,null],[\"r\",1,null]]}\n{\"value\":[[\"w\",0,20],[\"w\",1,21]]}\n",
    ));
    assert_eq!(
        from_b,
        [r#"{"type":"ok","value":[["r",0,10],["r",1,11]]}"#, r#"{"type":"ok","value":[["w",0,20],["w",1,21]]}"#],
        "host B reads what host A wrote on both hosts and overwrites it"
    );
    let from_a = answers(&hosts.run(
        0,
        &client,
        "{\"value\":[[\"r\",0,null],[\"r\",1,null]]}\n\
         {\"value\":[[\"append\",2,1],[\"append\",3,1]]}\n\
         {\"value\":[[\"append\",2,2],[\"append\",3,2]]}\n\
         {\"value\":[[\"r\",2,null],[\"r\",3,null]]}\n\
         {\"value\":[[\"append\",0,5]]}\n",
    ));
    assert_eq!(from_a.len(), 5, "{from_a:?}");
    assert_eq!(from_a[0], r#"{"type":"ok","value":[["r",0,20],["r",1,21]]}"#, "host A reads host B's writes");
    assert!(from_a[1].contains(r#""type":"ok""#) && from_a[2].contains(r#""type":"ok""#), "{from_a:?}");
    assert_eq!(from_a[3], r#"{"type":"ok","value":[["r",2,[1,2]],["r",3,[1,2]]]}"#);
    // Key 0 holds an integer: the append aborts, and the reason names the DC.
    let abort = &from_a[4];
    assert!(abort.contains(r#""type":"fail""#), "{abort}");
    assert!(abort.contains("dc1 voted abort: append to a value that is not a list"), "{abort}");
    assert!(!abort.contains('#'), "no internal ids in the error: {abort}");
    hosts.all_running(dir);

    // Each host made only its own nodes' MemStore files (node ids 0 and 2 on A, 1 and 3 on B).
    assert_eq!(files(&shm[0]), ["redt-multi-host-e1-node0.memstore", "redt-multi-host-e1-node2.memstore"]);
    assert_eq!(files(&shm[1]), ["redt-multi-host-e1-node1.memstore", "redt-multi-host-e1-node3.memstore"]);
    let ready = std::fs::read_to_string(dir.join("dc1-b.log")).unwrap_or_default();
    assert!(ready.contains("dc1-b ready on 0.0.0.0:7100 (advertised as host-b:7100; dc dc1, backend tcp"), "{ready}");
}

/// A topology of one DC with two nodes on loopback addresses and `backend`, on `port`.
fn one_dc(name: &str, port: u16, backend: &str) -> String {
    format!(
        r#"
name: {name}
epoch: 1
memstore: {{ size: 1MiB, index: 64KiB, ring: 64KiB }}
# A small ring takes a small transaction's redo.
limits: {{ max_ops_per_txn: 64 }}
dcs:
  - name: dc1
    backend: {backend}
    nodes:
      - {{ name: dc1-n1, addr: "127.0.1.1:{port}" }}
      - {{ name: dc1-n2, addr: "127.0.1.2:{port}" }}
tables:
  - name: kv
    id: 2
    cells: [ {{ name: value, bytes: 64 }} ]
partitions:
  - {{ replicas: [dc1-n1] }}
  - {{ replicas: [dc1-n2] }}
"#
    )
}

/// Node processes started by a test, killed when dropped.
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `redt args…` with standard output and error to `log`.
fn start(args: &[&str], log: &Path) -> Child {
    let file = std::fs::File::create(log).expect("create a log file");
    Command::new(REDT)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("clone a file handle"))
        .stderr(file)
        .spawn()
        .expect("start redt")
}

/// Runs `redt client --jsonl` on `config` with `lines` on standard input; its answers.
fn client(config: &Path, certs: &Path, lines: &str) -> Vec<String> {
    let mut child = Command::new(REDT)
        .args(["client", "--jsonl", "--cluster", path_str(config), "--certs", path_str(certs)])
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redt client");
    child.stdin.take().expect("piped").write_all(lines.as_bytes()).expect("write standard input");
    let out = child.wait_with_output().expect("wait for redt client");
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// With `backend: shm` a node maps the other nodes' MemStore files of its DC but never makes
/// one. dc1-n1 starts alone: it says dc1-n2's file is not there yet, a transaction
/// writing dc1-n2's record fails naming that file, and the file still does not exist. Once
/// dc1-n2 has started (and made its file), a transaction writing both nodes' records commits
/// and reads back.
#[test]
fn a_shm_node_maps_but_never_creates_another_nodes_memstore_file() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let dir = work.path();
    let name = format!("shm-later-{}", std::process::id());
    let config = dir.join("topology.yaml");
    std::fs::write(&config, one_dc(&name, 17694, "shm")).expect("write the topology");
    let certs = dir.join("certs");
    let out = redt(&["certs", "init", "--config", path_str(&config), "--out", path_str(&certs)]);
    assert!(out.status.success(), "{}", text(&out));
    let shm = dir.join("shm");
    let node = |n: &str| {
        let data = dir.join("data").join(n);
        let args = [
            "node",
            "--config",
            path_str(&config),
            "--node",
            n,
            "--certs",
            path_str(&certs),
            "--shm-dir",
            path_str(&shm),
            "--data-dir",
            path_str(&data),
            "--no-failover",
        ];
        start(&args, &dir.join(format!("{n}.log")))
    };
    let mut nodes = Nodes(vec![node("dc1-n1")]);
    wait_ready(&dir.join("dc1-n1.log"), Instant::now() + Duration::from_secs(20));
    let own = format!("redt-{name}-e1-node0.memstore");
    let peer_file = shm.join(format!("redt-{name}-e1-node1.memstore"));
    let log = std::fs::read_to_string(dir.join("dc1-n1.log")).unwrap_or_default();
    assert!(
        log.contains(&format!(
            "dc1-n1: dc1-n2's MemStore file {} is not there yet; it is mapped once dc1-n2 has made it",
            peer_file.display()
        )),
        "{log}"
    );
    assert_eq!(files(&shm), std::slice::from_ref(&own));

    // Key 1 is partition p1's, on dc1-n2.
    let answer = client(&config, &certs, "{\"value\":[[\"w\",1,2]]}\n");
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert!(!answer[0].contains(r#""type":"ok""#), "{answer:?}");
    assert!(
        answer[0].contains(&format!("dc1-n2's MemStore file {} does not exist yet", peer_file.display())),
        "{answer:?}"
    );
    assert_eq!(files(&shm), std::slice::from_ref(&own), "dc1-n1 did not make dc1-n2's file");

    nodes.0.push(node("dc1-n2"));
    wait_ready(&dir.join("dc1-n2.log"), Instant::now() + Duration::from_secs(20));
    let mut tries = 0;
    loop {
        let got = client(&config, &certs, "{\"value\":[[\"w\",0,1],[\"w\",1,2]]}\n");
        if got.first().is_some_and(|l| l.contains(r#""type":"ok""#)) {
            break;
        }
        tries += 1;
        assert!(tries < 20, "the transaction never committed: {got:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let read = client(&config, &certs, "{\"value\":[[\"r\",0,null],[\"r\",1,null]]}\n");
    assert_eq!(read, [r#"{"type":"ok","value":[["r",0,1],["r",1,2]]}"#]);
    assert_eq!(files(&shm), [own, format!("redt-{name}-e1-node1.memstore")]);
}

/// `backend: rdma` in a build without the `rdma` feature is refused by `redt config check`,
/// `redt cluster up` (before any node starts) and `redt node`, each saying how to rebuild.
#[cfg(not(feature = "rdma"))]
#[test]
fn the_rdma_backend_needs_a_build_with_rdma() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let dir = work.path();
    let config = dir.join("topology.yaml");
    std::fs::write(&config, one_dc(&format!("rdma-{}", std::process::id()), 7692, "rdma")).expect("write");
    let wanted = "dc1 has `backend: rdma`, but this redt was built without RDMA: rebuild it with \
                  `cargo build --release --features rdma`";
    let out = redt(&["config", "check", path_str(&config)]);
    assert!(!out.status.success() && text(&out).contains(wanted), "{}", text(&out));
    let run_dir = dir.join("run");
    let out = redt(&["cluster", "up", "--config", path_str(&config), "--run-dir", path_str(&run_dir)]);
    assert!(!out.status.success() && text(&out).contains(wanted), "{}", text(&out));
    assert!(!run_dir.join("pids").exists(), "no node was started");
    let out = redt(&["node", "--config", path_str(&config), "--node", "dc1-n1", "--certs", path_str(&dir.join("c"))]);
    assert!(!out.status.success() && text(&out).contains(wanted), "{}", text(&out));
}

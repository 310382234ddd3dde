//! The metrics endpoint of real node processes: `redt cluster up` starts a copy of
//! `configs/local-fast.yaml`, `redt client --jsonl` runs transactions through it, and a plain
//! HTTP GET of every node's `/metrics` (at the addresses `cluster up` printed and wrote to
//! `metrics-targets.json`) is parsed strictly: the committed counters add up to what the
//! client was told, and the epoch, the latency histogram and the links are there.

mod common;
use common::{cluster_up, local_fast_yaml, path_str, redt, text, ClusterGuard, REDT};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Listen port of this test's cluster (cluster_processes.rs uses 7640–7680, drill_processes.rs
/// 7720, the embedded-cluster tests 7610–7940); its metrics are on TCP port 7961.
const PORT: u16 = 7960;

/// One sample of a scrape: metric name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A scrape in the Prometheus text format 0.0.4, parsed strictly: every line is a `# HELP`,
/// a `# TYPE` or a sample; every sample belongs to a family whose TYPE came before it (a
/// histogram's `_bucket`, `_sum` and `_count` to the histogram); no series appears twice.
struct Scrape {
    samples: Vec<Sample>,
    types: HashMap<String, String>,
}

impl Scrape {
    fn parse(body: &str) -> Scrape {
        let mut types: HashMap<String, String> = HashMap::new();
        let mut helps: HashMap<String, String> = HashMap::new();
        let mut samples = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, line) in body.lines().enumerate() {
            let at = |why: &str| -> ! { panic!("line {}: {why}: {line:?}", i + 1) };
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or_else(|| at("HELP without a text"));
                assert!(is_name(name), "line {}: bad metric name {name:?}", i + 1);
                assert!(!help.trim().is_empty(), "line {}: empty HELP", i + 1);
                assert!(helps.insert(name.into(), help.into()).is_none(), "line {}: HELP twice", i + 1);
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or_else(|| at("TYPE without a type"));
                assert!(is_name(name), "line {}: bad metric name {name:?}", i + 1);
                assert!(["counter", "gauge", "histogram"].contains(&kind), "line {}: type {kind:?}", i + 1);
                assert!(helps.contains_key(name), "line {}: TYPE before HELP", i + 1);
                assert!(types.insert(name.into(), kind.into()).is_none(), "line {}: TYPE twice", i + 1);
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                at("neither HELP, TYPE nor a sample");
            }
            let sample = parse_sample(line).unwrap_or_else(|why| at(&why));
            let family = family_of(&sample.name, &types).unwrap_or_else(|| at("a sample of no declared family"));
            let kind = &types[&family];
            match kind.as_str() {
                "histogram" => assert!(sample.name != family, "line {}: a bare histogram sample", i + 1),
                _ => assert_eq!(sample.name, family, "line {}: a {kind} sample under another name", i + 1),
            }
            assert!(seen.insert((sample.name.clone(), sample.labels.clone())), "line {}: series twice", i + 1);
            samples.push(sample);
        }
        assert!(!samples.is_empty(), "a scrape without samples:\n{body}");
        Scrape { samples, types }
    }

    /// The samples of `name` whose labels include every pair of `with`.
    fn find<'a>(&'a self, name: &'a str, with: &'a [(&'a str, &'a str)]) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name && with.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
    }

    /// The one sample of `name` with labels `with`.
    fn one(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self.find(name, with).collect();
        assert_eq!(found.len(), 1, "exactly one {name} {with:?}: {found:?}");
        found[0].value
    }

    /// The sum over every sample of `name`.
    fn sum(&self, name: &str) -> f64 {
        self.find(name, &[]).map(|s| s.value).sum()
    }
}

/// Whether `s` is a metric or label name.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The declared family a sample name belongs to.
fn family_of(name: &str, types: &HashMap<String, String>) -> Option<String> {
    if types.contains_key(name) {
        return Some(name.to_string());
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .filter_map(|suffix| name.strip_suffix(suffix))
        .find(|base| types.get(*base).is_some_and(|t| t == "histogram"))
        .map(str::to_string)
}

/// `name{k="v",…} value` (labels optional, no timestamp).
fn parse_sample(line: &str) -> Result<Sample, String> {
    let end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..end];
    if !is_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        loop {
            let key_start = chars.peek().map(|&(i, _)| i).ok_or("unterminated labels")?;
            let eq = inner[key_start..].find('=').ok_or("a label without =")? + key_start;
            let key = &inner[key_start..eq];
            if !is_name(key) {
                return Err(format!("bad label name {key:?}"));
            }
            while chars.peek().is_some_and(|&(i, _)| i <= eq) {
                chars.next();
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("a label value without quotes".into());
            }
            let mut value = String::new();
            loop {
                match chars.next().ok_or("unterminated label value")?.1 {
                    '"' => break,
                    '\\' => match chars.next().ok_or("a dangling escape")?.1 {
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        'n' => value.push('\n'),
                        c => return Err(format!("unknown escape \\{c}")),
                    },
                    c => value.push(c),
                }
            }
            if labels.insert(key.to_string(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            match chars.next().ok_or("unterminated labels")? {
                (_, ',') => continue,
                (i, '}') => {
                    rest = &inner[i + 1..];
                    break;
                }
                (_, c) => return Err(format!("{c:?} after a label")),
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().map_err(|e| format!("value {v:?}: {e}"))?,
    };
    Ok(Sample { name: name.to_string(), labels, value })
}

/// `GET path` over HTTP/1.1 at `addr`: the status code, the headers (lower-case names) and
/// the body.
fn http_get(addr: SocketAddr, path: &str) -> (u16, HashMap<String, String>, String) {
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to the metrics endpoint");
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the response");
    let (head, body) = response.split_once("\r\n\r\n").expect("headers end");
    let mut lines = head.lines();
    let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).expect("a status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

/// Runs `lines` through `redt client --jsonl` and returns its answers.
fn client(config: &Path, certs: &Path, lines: &str) -> Vec<serde_json::Value> {
    let mut child = Command::new(REDT)
        .args(["client", "--jsonl", "--cluster", path_str(config), "--certs", path_str(certs)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redt client");
    child.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redt client --jsonl: {}", text(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("answer {l:?} is not JSON: {e}")))
        .collect()
}

#[test]
fn a_scrape_of_every_node_counts_the_commits_the_client_saw() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = if Path::new("/dev/shm").is_dir() { tempfile::tempdir_in("/dev/shm") } else { tempfile::tempdir() }
        .expect("a temporary MemStore directory");
    let config = work.path().join("local-fast-metrics.yaml");
    let yaml = format!(
        "{}\ntimeouts: {{ phase1_timeout: 2s }}\n",
        local_fast_yaml(&format!("metrics-processes-{}", std::process::id()), PORT)
    );
    std::fs::write(&config, yaml).unwrap();
    let run_dir = work.path().join("run");
    let mut guard = ClusterGuard::new(run_dir.clone());
    let out = cluster_up(&config, &run_dir, 16, shm.path(), &[]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();

    // Where the endpoints are: the Prometheus file_sd targets, one per node, each also
    // printed (the nodes' QUIC port + 1 on their own IPs: the file has no `metrics:`).
    let targets: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("metrics-targets.json")).expect("targets file"))
            .expect("targets JSON");
    let addrs: Vec<SocketAddr> = targets
        .as_array()
        .expect("a list of target groups")
        .iter()
        .map(|g| g["targets"][0].as_str().expect("a target").parse().expect("IP:PORT"))
        .collect();
    let expected: Vec<SocketAddr> = (1..=4).map(|dc| format!("127.0.{dc}.1:{}", PORT + 1).parse().unwrap()).collect();
    assert_eq!(addrs, expected, "{stdout}");
    for (dc, addr) in addrs.iter().enumerate() {
        let line = format!("dc{}-n1 metrics at http://{addr}/metrics", dc + 1);
        assert!(stdout.contains(&line), "`{line}` printed: {stdout}");
    }

    // Transactions: 12 writes and 4 reads through the first node (the client's default).
    let mut lines = String::new();
    for k in 0..12 {
        lines.push_str(&format!("{{\"value\":[[\"w\",{k},{}]]}}\n", k + 100));
    }
    for k in 0..4 {
        lines.push_str(&format!("{{\"value\":[[\"r\",{k},null]]}}\n"));
    }
    let answers = client(&config, &run_dir.join("certs"), &lines);
    assert_eq!(answers.len(), 16);
    let ok = answers.iter().filter(|a| a["type"] == "ok").count();
    assert!(ok > 0, "some transactions commit: {answers:?}");

    // Every node's scrape parses; their committed counters add up to the client's oks.
    let mut committed = 0.0;
    for (i, addr) in addrs.iter().enumerate() {
        let peers: Vec<String> = (1..=4).filter(|&d| d != i + 1).map(|d| format!("dc{d}")).collect();
        // QUIC measures a round trip once a connection is up: the nodes' heartbeats open
        // theirs within moments of starting; wait for them rather than race them.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let (body, scrape) = loop {
            let (status, headers, body) = http_get(*addr, "/metrics");
            assert_eq!(status, 200, "{body}");
            let content_type = headers.get("content-type").map(String::as_str);
            assert_eq!(content_type, Some("text/plain; version=0.0.4; charset=utf-8"));
            let scrape = Scrape::parse(&body);
            let measured = |p: &String| scrape.find("redt_link_rtt_seconds", &[("peer_dc", p)]).count() == 1;
            if peers.iter().all(measured) {
                break (body, scrape);
            }
            assert!(std::time::Instant::now() < deadline, "no round trip measured to every DC:\n{body}");
            std::thread::sleep(Duration::from_millis(100));
        };
        let node = format!("dc{}-n1", i + 1);
        assert!(scrape.samples.iter().all(|s| s.labels.get("node") == Some(&node)), "every sample names {node}");
        assert_eq!(scrape.types["redt_txn_committed_total"], "counter");
        assert_eq!(scrape.types["redt_epoch"], "gauge");
        assert_eq!(scrape.one("redt_epoch", &[]), 1.0, "{node} is at the file's epoch");
        let here = scrape.sum("redt_txn_committed_total");
        committed += here;
        // The latency histogram: cumulative buckets up to +Inf, which counts every commit.
        assert_eq!(scrape.types["redt_txn_commit_latency_seconds"], "histogram");
        let buckets: Vec<f64> = scrape.find("redt_txn_commit_latency_seconds_bucket", &[]).map(|s| s.value).collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "cumulative buckets: {buckets:?}");
        assert_eq!(scrape.one("redt_txn_commit_latency_seconds_bucket", &[("le", "+Inf")]), here);
        assert_eq!(scrape.one("redt_txn_commit_latency_seconds_count", &[]), here);
        // Every abort has its cause.
        assert_eq!(scrape.sum("redt_txn_aborted_by_cause_total"), scrape.sum("redt_txn_aborted_total"));
        assert!(scrape.one("redt_ring_capacity_slots", &[]) > 0.0);
        // The record heap: the loaded and committed records use some of it, never more than all.
        let (used, size) =
            (scrape.one("redt_record_heap_used_bytes", &[]), scrape.one("redt_record_heap_size_bytes", &[]));
        assert!(used > 0.0 && used <= size, "{node}: record heap {used} of {size} bytes");
        assert!(scrape.one("redt_record_heap_free_bytes", &[]) >= 0.0);
        // The executor thread ran every phase 1 of this run in its short lane (they are small),
        // and its busy time covers at least its longest job.
        assert!(scrape.one("redt_executor_jobs_total", &[("lane", "short")]) > 0.0, "{node} ran short jobs");
        let (busy, longest) =
            (scrape.one("redt_executor_busy_seconds_total", &[]), scrape.one("redt_executor_longest_job_seconds", &[]));
        assert!(busy >= longest && longest > 0.0, "{node}: busy {busy} s, longest job {longest} s");
        // The node process's own figures, under the names every Prometheus client exports.
        assert_eq!(scrape.types["process_cpu_seconds_total"], "counter");
        assert!(scrape.one("process_cpu_seconds_total", &[]) > 0.0, "{node} spent CPU starting up");
        assert_eq!(scrape.types["process_resident_memory_bytes"], "gauge");
        assert!(scrape.one("process_resident_memory_bytes", &[]) > 0.0, "{node} has resident memory");
        // Heartbeats alone cross every link; QUIC has measured each round trip.
        for peer in &peers {
            let with = [("peer_dc", peer.as_str())];
            assert!(scrape.one("redt_link_messages_sent_total", &with) > 0.0, "{node} → {peer}");
            assert!(scrape.one("redt_link_received_bytes_total", &with) > 0.0, "{node} ← {peer}");
            let rtt = scrape.one("redt_link_rtt_seconds", &with);
            assert!(rtt > 0.0 && rtt < 1.0, "{node} → {peer}: {rtt} s");
        }
        if i == 0 {
            assert!(here > 0.0, "the coordinating node counted commits:\n{body}");
            assert!(scrape.sum("redt_verbs_total") > 0.0, "its data path issued verbs");
            println!("a scrape of {node} (excerpt):");
            for l in body.lines().filter(|l| l.starts_with("redt_txn_committed") || l.starts_with("redt_epoch")) {
                println!("  {l}");
            }
        }
    }
    // `cluster up` wrote the YCSB init record for the 16 records per partition its nodes
    // loaded: one transaction of its own (`redt workload`).
    assert!(stdout.contains("loaded 16 YCSB records per partition (recorded in the cluster"), "{stdout}");
    assert_eq!(
        committed,
        ok as f64 + 1.0,
        "the nodes counted exactly the commits the client was told of, and cluster up's record"
    );

    // `redt status`: every node's rates over a window, and the RTT matrix its QUIC
    // connections measured. netem delays each way by half the 2 ms RTT and never
    // sends early, so every measured RTT between DCs is at least 2 ms; one node per DC
    // leaves the diagonal unmeasured.
    let out = redt(&["status", "--window", "300ms", "--timeout", "2s", "--run-dir", path_str(&run_dir)]);
    assert!(out.status.success(), "redt status: {}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    println!("redt status:\n{table}");
    assert!(table.contains("rates over the last"), "{table}");
    // Each node's process CPU time and resident memory, and its CPU over the window.
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert!(header.contains(&"cpu") && header.contains(&"rss"), "{table}");
    let rates = table.split("rates over the last").nth(1).unwrap_or_default();
    assert!(rates.lines().nth(1).is_some_and(|h| h.ends_with("cpu cores")), "{table}");
    for dc in 1..=4 {
        let row = rates.lines().find(|l| l.starts_with(&format!("dc{dc}-n1 "))).unwrap_or_default();
        let cores: f64 = row.split_whitespace().last().and_then(|c| c.parse().ok()).unwrap_or(-1.0);
        assert!(cores >= 0.0, "dc{dc}-n1 reports its CPU over the window: {table}");
    }
    let matrix = table.split("measured RTT ms").nth(1).unwrap_or_else(|| panic!("an RTT matrix: {table}"));
    for from in 1..=4 {
        let row = matrix
            .lines()
            .find(|l| l.starts_with(&format!("dc{from} ")))
            .unwrap_or_else(|| panic!("a row for dc{from}: {table}"));
        let cells: Vec<&str> = row.split_whitespace().skip(1).collect();
        assert_eq!(cells.len(), 4, "{row}");
        for (to, cell) in (1..=4).zip(&cells) {
            if to == from {
                assert_eq!(*cell, "-", "dc{from} has one node: {row}");
            } else {
                let ms: f64 = cell.parse().unwrap_or_else(|e| panic!("dc{from} → dc{to}: {cell:?}: {e}"));
                assert!(ms >= 2.0, "dc{from} → dc{to}: {ms} ms is below the configured 2 ms: {table}");
            }
        }
    }

    // Anything but GET /metrics is refused.
    assert_eq!(http_get(addrs[0], "/").0, 404);
    let out = guard.down();
    assert!(out.status.success(), "redt cluster down: {}", text(&out));
    assert!(!run_dir.join("metrics-targets.json").exists(), "down removes the targets file");
}

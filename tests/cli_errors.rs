//! The rough edges a new user may meet on the command line, each checked by its
//! error message, against the `redt` binary: durations, sizes and rates read by one parser
//! everywhere; a missing file named in one line with its OS error once; `netem set`
//! validated like the topology file; names, not internal ids, in messages. No cluster is
//! started: every command here is refused before it would reach one.

mod common;

use common::{path_str, redt, text, REDT};
use std::path::Path;
use std::process::{Command, Output};

/// Runs `redt args…` with backtraces off.
fn run(args: &[&str]) -> Output {
    Command::new(REDT).args(args).env("RUST_BACKTRACE", "0").output().expect("run the redt binary")
}

/// The standard error of a run that failed (asserted).
fn refused(args: &[&str]) -> String {
    let out = run(args);
    assert!(!out.status.success(), "`redt {}` is refused: {}", args.join(" "), text(&out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `configs/local-fast.yaml` of this checkout.
fn local_fast() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-fast.yaml").to_string()
}

/// Every duration flag of every subcommand: a negative value, a zero run length and a value
/// that is no duration are refused by the one parser with its message (not "unexpected
/// argument '-5'", not humantime's bare "expected number at 0").
#[test]
fn every_duration_flag_refuses_negative_zero_and_junk_with_how_to_write_one() {
    let cfg = local_fast();
    // (the command before the flag, the flag, whether zero is refused too)
    let flags: &[(&[&str], &str, bool)] = &[
        (&["bench", "ycsb"], "--duration", true),
        (&["bench", "ycsb"], "--warmup", false),
        (&["bench", "local"], "--duration", true),
        (&["bench", "bank"], "--duration", true),
        (&["bench", "append"], "--duration", true),
        (&["bench", "tpcc"], "--duration", true),
        (&["bench", "compare"], "--duration", true),
        (&["bench", "sweep", "--param", "rtt=10ms"], "--duration", true),
        (&["bench", "ycsb"], "--interval", true),
        (&["workload", "run", "ycsb"], "--duration", true),
        (&["sim"], "--duration", true),
        (&["status"], "--timeout", true),
        (&["drill", "kill-node dc1-n1 at 1s"], "--duration", true),
        (&["node", "--config", &cfg, "--node", "dc1-n1"], "--phase1-timeout", true),
        (&["cluster", "up", "--config", &cfg], "--clock-skew-bound", false),
        (&["certs", "init", "--config", &cfg, "--out", "/nonexistent"], "--valid-for", true),
        (&["netem", "set", "--from", "dc1", "--to", "dc2"], "--rtt", false),
        (&["netem", "set", "--from", "dc1", "--to", "dc2"], "--delay", false),
        (&["netem", "set", "--from", "dc1", "--to", "dc2"], "--jitter", false),
        (&["netem", "accuracy"], "--rtt", false),
    ];
    for (cmd, flag, zero_refused) in flags {
        fn with<'a>(cmd: &[&'a str], flag: &'a str, value: &'a str) -> Vec<&'a str> {
            [cmd, &[flag, value]].concat()
        }
        let with = |value: &'static str| with(cmd, flag, value);
        let err = refused(&with("-5s"));
        assert!(
            err.contains("invalid duration `-5s`: negative: a duration is a length of time;")
                && !err.contains("unexpected"),
            "{cmd:?} {flag} -5s: {err}"
        );
        let err = refused(&with("abc"));
        assert!(
            err.contains("invalid duration `abc`: not a number and a unit; write a number and a unit, e.g. 30s"),
            "{cmd:?} {flag} abc: {err}"
        );
        if *zero_refused {
            let err = refused(&with("0s"));
            assert!(
                err.contains("invalid duration `0s`: zero") || err.contains("must be above zero"),
                "{cmd:?} {flag} 0s: {err}"
            );
        }
    }
    // A drill plan's and a sweep's durations go through the same parser.
    let err = refused(&["drill", "kill-node dc1-n1 at soon", "--cluster", &cfg]);
    assert!(err.contains("`soon` after `at`: invalid duration `soon`: not a number and a unit"), "{err}");
    let err = refused(&["bench", "sweep", "--param", "rtt=10ms,fast", "--duration", "1s"]);
    assert!(err.contains("rtt value `fast`: invalid duration `fast`"), "{err}");
}

/// Sizes and rates: one parser (bytesize) for the topology file, `netem set --rate`,
/// `--record-size` and a `-P` property file, so they accept and refuse the same text with
/// the same words.
#[test]
fn sizes_and_rates_are_read_by_one_parser_in_the_file_and_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(local_fast()).unwrap();
    let yaml = |from: &str, to: &str| {
        assert!(base.contains(from), "local-fast.yaml has `{from}`");
        let f = dir.path().join("t.yaml");
        std::fs::write(&f, base.replacen(from, to, 1)).unwrap();
        f
    };
    // A rate in the file and on the command line: the same words.
    let f = yaml("rate: unlimited", "rate: 100mb");
    let file_err = refused(&["config", "check", path_str(&f)]);
    assert!(file_err.contains("invalid rate `100mb`: not a number and a unit;"), "{file_err}");
    let flag_err = refused(&["netem", "set", "--from", "dc1", "--to", "dc2", "--rate", "100mb"]);
    assert!(flag_err.contains("invalid rate `100mb`: not a number and a unit;"), "{flag_err}");
    // bytesize's units in the file.
    let f = yaml("size: ", "size: -");
    let err = refused(&["config", "check", path_str(&f)]);
    assert!(err.contains("memstore.size: invalid size `-") && err.contains(": negative;"), "{err}");
    // --record-size takes a size for its bytes.
    let err = refused(&["bench", "ycsb", "--record-size", "4x-1", "--duration", "1s"]);
    assert!(err.contains("record size `4x-1`: invalid size `-1`: negative;"), "{err}");
    // A property file's `fieldlength` and `maxexecutiontime` too.
    let props = dir.path().join("w.properties");
    std::fs::write(&props, "fieldlength=-3\n").unwrap();
    let err = refused(&["bench", "ycsb", "-P", path_str(&props)]);
    assert!(err.contains("fieldlength") && err.contains("invalid size `-3`: negative"), "{err}");
    std::fs::write(&props, "maxexecutiontime=soon\n").unwrap();
    let err = refused(&["bench", "ycsb", "-P", path_str(&props)]);
    assert!(err.contains("maxexecutiontime") && err.contains("invalid duration `soon`"), "{err}");
}

/// A file that is not there: one line, `error: ` with the path, the OS error once.
#[test]
fn a_missing_file_is_one_error_line_with_its_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let m = path_str(&missing);
    let nodir = dir.path().join("nodir");
    let nd = path_str(&nodir);
    let cfg = local_fast();
    let history = dir.path().join("missing.jsonl");
    let props = dir.path().join("missing.properties");
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (vec!["config", "check", m], &missing),
        (vec!["bench", "ycsb", "--config", m], &missing),
        (vec!["bench", "local", "--config", m], &missing),
        (vec!["bench", "bank", "--config", m], &missing),
        (vec!["bench", "ycsb", "-P", path_str(&props)], &props),
        (vec!["bench", "ycsb", "--cluster", m], &missing),
        (vec!["workload", "run", "ycsb", "--cluster", m], &missing),
        (vec!["workload", "check", "append", "--cluster", &cfg, "--history", path_str(&history)], &history),
        (vec!["cluster", "up", "--config", m, "--run-dir", nd], &missing),
        (vec!["node", "--config", m, "--node", "dc1-n1"], &missing),
        (vec!["client", "--jsonl", "--cluster", m], &missing),
        (vec!["certs", "init", "--config", m, "--out", nd], &missing),
        (vec!["certs", "issue", "--config", &cfg, "--certs", nd, "--role", "client", "--name", "c"], &nodir),
        (vec!["netem", "tc-script", "--config", m], &missing),
        (vec!["netem", "set", "--from", "dc1", "--to", "dc2", "--rtt", "1ms", "--cluster", m], &missing),
        (vec!["netem", "set", "--from", "dc1", "--to", "dc2", "--rtt", "1ms", "--run-dir", nd], &nodir),
        (vec!["sim", "--config", m], &missing),
        (vec!["status", "--run-dir", nd], &nodir),
        (vec!["drill", "kill-node dc1-n1 at 1s", "--cluster", m], &missing),
        (vec!["drill", "kill-node dc1-n1 at 1s", "--run-dir", nd], &nodir),
    ];
    for (args, path) in cases {
        let err = refused(&args);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "`redt {}`: one line: {err}", args.join(" "));
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(path_str(path)),
            "`redt {}`: {err}",
            args.join(" ")
        );
        // The OS error once, or a message of redt's own for a missing certificate.
        let os = err.matches("No such file or directory").count();
        assert!(
            os == 1 || (os == 0 && err.contains("is missing")),
            "`redt {}`: the OS error once: {err}",
            args.join(" ")
        );
    }
    // Certificates missing from an existing directory: named, in one line.
    std::fs::create_dir_all(&nodir).unwrap();
    let err = refused(&["client", "--jsonl", "--cluster", &cfg, "--certs", nd]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: ") && err.contains(nd), "{err}");
    assert_eq!(err.matches("is missing").count(), 1, "the transport error's text once: {err}");
}

/// `netem set`: refused with a reason, changing nothing, when it names one DC twice, changes
/// nothing, names an unknown DC (listing the file's), or leaves a jitter above half the RTT
/// as the topology file refuses it; `--delay` is tc's one-way delay; without `--cluster` it
/// takes the topology `redt cluster up` recorded in the run directory (no relative default).
#[test]
fn netem_set_is_validated_like_the_topology_file() {
    let cfg = local_fast();
    let set = |extra: &[&str]| refused(&[&["netem", "set"], extra].concat());
    let err = set(&["--from", "dc1", "--to", "dc1", "--rtt", "10ms", "--cluster", &cfg]);
    assert_eq!(err, "error: --from and --to must name two different DCs (both are `dc1`)\n");
    let err = set(&["--from", "dc1", "--to", "dc2", "--cluster", &cfg]);
    assert!(err.starts_with("error: nothing to change: give at least one of --rtt (or --delay)"), "{err}");
    let err = set(&["--from", "dc1", "--to", "dc9", "--rtt", "10ms", "--cluster", &cfg]);
    assert!(err.contains("no DC named `dc9` (its DCs: dc1, dc2, dc3, dc4)"), "{err}");
    let err = set(&["--from", "dc1", "--to", "dc2", "--rtt", "10ms", "--jitter", "6ms", "--cluster", &cfg]);
    assert!(
        err.contains("--jitter: jitter 6ms exceeds half the rtt (10ms / 2), as the topology file refuses too"),
        "{err}"
    );
    let err = set(&["--from", "dc1", "--to", "dc2", "--delay", "5ms", "--jitter", "6ms", "--cluster", &cfg]);
    assert!(err.contains("--jitter: jitter 6ms exceeds half the rtt (10ms / 2)"), "--delay is one-way: {err}");
    let err = set(&["--from", "dc1", "--to", "dc2", "--delay", "5ms", "--rtt", "10ms", "--cluster", &cfg]);
    assert!(err.contains("cannot be used with"), "{err}");
    // The same jitter in a topology file: the same words.
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(&cfg).unwrap();
    let f = dir.path().join("j.yaml");
    let rtt_line = base.lines().find(|l| l.contains("rtt:")).expect("local-fast.yaml has an rtt");
    assert!(rtt_line.contains("jitter:"), "the rtt line carries the jitter: {rtt_line}");
    let jittery = rtt_line
        .split(',')
        .map(|kv| if kv.contains("jitter:") { " jitter: 1h" } else { kv })
        .collect::<Vec<_>>()
        .join(",");
    std::fs::write(&f, base.replacen(rtt_line, &jittery, 1)).unwrap();
    let err = refused(&["config", "check", path_str(&f)]);
    assert!(err.contains("jitter 1h exceeds half the rtt"), "{err}");
    // No --cluster: the run directory's topology, or a message saying what to pass.
    let err = set(&["--from", "dc1", "--to", "dc2", "--rtt", "10ms", "--run-dir", path_str(dir.path())]);
    assert!(
        err.contains("is not the run directory of a `redt cluster up` cluster")
            && err.contains("pass --run-dir DIR, or --cluster FILE and --certs DIR"),
        "{err}"
    );
    let help = redt(&["netem", "set", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--delay <DELAY>") && help.contains("One-way delay, as tc netem's `delay`"), "{help}");
    assert!(!help.contains("configs/default.yaml"), "no relative default topology: {help}");
}

/// Errors name DCs and nodes by their names, never `dc#N` / `node#N`.
#[test]
fn errors_name_dcs_and_nodes_not_internal_ids() {
    let cfg = local_fast();
    for args in [
        vec!["drill", "kill-node nosuch at 1s", "--cluster", &cfg],
        vec!["drill", "kill-dc dc9 at 1s", "--cluster", &cfg],
        vec!["netem", "set", "--from", "dc1", "--to", "dc9", "--rtt", "10ms", "--cluster", &cfg],
        vec!["node", "--config", &cfg, "--node", "nosuch"],
        vec!["client", "--jsonl", "--cluster", &cfg, "--node", "nosuch"],
    ] {
        let err = refused(&args);
        assert!(!err.contains("dc#") && !err.contains("node#"), "`redt {}`: {err}", args.join(" "));
        assert!(err.contains("dc1"), "`redt {}` lists the names: {err}", args.join(" "));
    }
}

/// Limits whose largest redo entry would not fit one entry of the ring are refused when the
/// topology is loaded, by `redt config check` and by the commands that start or reach a
/// cluster, with both sizes and the `max_ops_per_txn` that fits; that value loads.
#[test]
fn limits_larger_than_the_ring_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(local_fast()).unwrap();
    assert!(base.contains("\ntables:"), "local-fast.yaml has tables");
    let with_ops = |ops: u64| {
        let f = dir.path().join(format!("ops-{ops}.yaml"));
        // A phase-1 timeout long enough for that many operations (a tenth of it at 25 µs each):
        // the ring is what refuses them.
        let section = format!("\nlimits: {{ max_ops_per_txn: {ops} }}\ntimeouts: {{ phase1_timeout: 2s }}\ntables:");
        std::fs::write(&f, base.replacen("\ntables:", &section, 1)).unwrap();
        f
    };
    let f = with_ops(4096);
    let err = refused(&["config", "check", path_str(&f)]);
    for part in [
        "the limits admit a redo entry of 8659032 bytes, more than the ring's 4194240",
        "table `kv`",
        "lower limits.max_ops_per_txn to 1983 or less",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    let err = refused(&["status", "--cluster", path_str(&f), "--window", "0s", "--timeout", "1s"]);
    assert!(err.contains("lower limits.max_ops_per_txn to 1983"), "{err}");
    let ok = run(&["config", "check", path_str(&with_ops(1983))]);
    assert!(ok.status.success(), "{}", text(&ok));
}

//! The files of `deploy/` that docs/deploy.md walks through: the example
//! topologies check, the lab's tc script is a shell script with a block per host, and the
//! systemd unit and the Dockerfile start `redt node` with flags it accepts (the unit also
//! passes `systemd-analyze verify` where that is installed; the Dockerfile is checked for its
//! shape here, no container engine being at hand).

mod common;

use common::{path_str, redt, text, REDT};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file)
}

fn read(file: &str) -> String {
    std::fs::read_to_string(deploy(file)).unwrap_or_else(|e| panic!("deploy/{file}: {e}"))
}

/// Whether `script` is valid `sh` syntax (`sh -n`).
fn sh_syntax_ok(script: &str) -> Result<(), String> {
    let out = Command::new("sh")
        .args(["-n", "-c", script])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A topology with no node `use-a`: `redt node --node use-a` fails on it only after every
/// flag before it parsed.
fn elsewhere(dir: &Path) -> PathBuf {
    let path = dir.join("other.yaml");
    let text = read("lab.yaml").replace("use-a", "use-x");
    std::fs::write(&path, text).expect("write a topology");
    path
}

/// Runs `redt` with `args` (the binary's own path left out) and expects the refusal of a node
/// the topology lacks: every flag was known and every value parsed.
fn runs_as_node(args: &[String], what: &str) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = redt(&args);
    assert!(!out.status.success(), "{what}: {}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no node named `use-a`"),
        "{what}: every flag is one `redt node` takes: {}",
        text(&out)
    );
}

/// `deploy/cluster.yaml` (3 regions × 2 hosts, host names, `backend: tcp`) and its lab
/// variant check; giving a region of two hosts `backend: shm` is refused naming both hosts;
/// the lab with its WAN (`lab-links.yaml`) gives a tc script with one block per host, each
/// steering the other regions' IPs into their netem bands, that `sh` parses.
#[test]
fn the_example_topologies_check_and_the_lab_script_is_a_script() {
    for file in ["cluster.yaml", "lab.yaml"] {
        let out = redt(&["config", "check", path_str(&deploy(file))]);
        assert!(out.status.success(), "{file}: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        for region in ["us-east", "eu-west", "ap-south"] {
            assert!(said.contains(&format!("{region}: in-DC verbs backend tcp; ")), "{said}");
        }
    }
    let shown =
        String::from_utf8_lossy(&redt(&["config", "check", path_str(&deploy("cluster.yaml"))]).stdout).into_owned();
    assert!(shown.contains("use-a listening at 0.0.0.0:7100, advertised as use-a.redt.example.net:7100"), "{shown}");

    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = work.path().join("shm.yaml");
    let text_shm = read("cluster.yaml").replacen("    backend: tcp", "    backend: shm", 1);
    std::fs::write(&shm, text_shm).expect("write");
    let out = redt(&["config", "check", path_str(&shm)]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(
            "dcs[0].backend: backend `shm` needs every node of us-east on one host, but use-a advertises \
             use-a.redt.example.net and use-b use-b.redt.example.net"
        ),
        "{}",
        text(&out)
    );

    let wan = work.path().join("lab-wan.yaml");
    std::fs::write(&wan, read("lab.yaml") + &read("lab-links.yaml")).expect("write");
    let out = redt(&["netem", "tc-script", "--config", path_str(&wan), "--device", "eth0"]);
    assert!(out.status.success(), "{}", text(&out));
    let script = String::from_utf8_lossy(&out.stdout).into_owned();
    sh_syntax_ok(&script).unwrap_or_else(|e| panic!("the tc script is no sh script ({e}):\n{script}"));
    for (node, ip) in [("use-a", "10.0.1.1"), ("euw-b", "10.0.2.2"), ("aps-a", "10.0.3.1")] {
        assert!(script.contains(&format!("# node {node} ({ip})")), "{script}");
    }
    assert!(script.contains("delay 100ms 2ms") && script.contains("match ip dst 10.0.3.2/32"), "{script}");
    // The nodes run lab.yaml itself, which emulates nothing.
    let lab = redt(&["config", "check", path_str(&deploy("lab.yaml"))]);
    assert!(String::from_utf8_lossy(&lab.stdout).contains("between DCs 100ms / 1s"), "{}", text(&lab));
}

/// The systemd unit's `ExecStart` is a `redt node` command line whose flags `redt` takes, and
/// `systemd-analyze verify` finds nothing to say about the unit (skipped, saying so, where
/// systemd-analyze is not installed).
#[test]
fn the_systemd_unit_runs_a_node_with_flags_redt_takes() {
    let unit = read("redt-node@.service");
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("the unit has an ExecStart line");
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"/usr/local/bin/redt"), "{exec}");
    let work = tempfile::tempdir().expect("a temporary directory");
    let config = elsewhere(work.path());
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| w.replace("%i", "use-a").replace("/etc/redt/cluster.yaml", path_str(&config)))
        .collect();
    runs_as_node(&args, "ExecStart");

    let instance = work.path().join("redt-node@use-a.service");
    std::fs::write(&instance, unit.replace("/usr/local/bin/redt", REDT)).expect("write the unit");
    match Command::new("systemd-analyze").args(["verify", "--man=no", path_str(&instance)]).output() {
        Err(e) => eprintln!("systemd-analyze not available ({e}): the unit's syntax was not verified"),
        Ok(out) => {
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(
                out.status.success() && !said.contains("redt-node@use-a.service"),
                "systemd-analyze verify: {said}"
            );
        }
    }
}

/// The Dockerfile has only known instructions (continuation lines joined), a build stage its
/// final stage copies from, `RUN` commands `sh` parses, and an `ENTRYPOINT` (JSON) that is a
/// `redt node` command line whose flags `redt` takes once `--node NAME` is appended.
#[test]
fn the_dockerfile_is_well_formed_and_its_entrypoint_runs_a_node() {
    let file = read("Dockerfile");
    let mut joined = String::new();
    let mut instructions = Vec::new();
    for line in file.lines() {
        let line = line.trim_end();
        if joined.is_empty() && (line.trim_start().starts_with('#') || line.trim().is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => joined.push_str(part),
            None => {
                joined.push_str(line);
                instructions.push(std::mem::take(&mut joined));
            }
        }
    }
    assert!(joined.is_empty(), "a continuation runs off the end");
    let known = ["FROM", "ARG", "RUN", "WORKDIR", "COPY", "ENV", "USER", "EXPOSE", "VOLUME", "ENTRYPOINT", "CMD"];
    let mut stages = Vec::new();
    let mut entrypoint = None;
    for ins in &instructions {
        let (keyword, rest) = ins.split_once(' ').unwrap_or((ins, ""));
        assert!(known.contains(&keyword), "unknown instruction `{keyword}` in `{ins}`");
        match keyword {
            "FROM" => {
                if let Some((_, name)) = rest.split_once(" AS ") {
                    stages.push(name.trim().to_string());
                }
            }
            "COPY" => {
                if let Some(from) = rest.split_whitespace().find_map(|w| w.strip_prefix("--from=")) {
                    assert!(stages.iter().any(|s| s == from), "COPY from the unknown stage `{from}`");
                }
            }
            "RUN" => sh_syntax_ok(rest).unwrap_or_else(|e| panic!("RUN is no sh command ({e}): {rest}")),
            "ENTRYPOINT" | "CMD" => {
                let words: Vec<String> =
                    serde_json::from_str(rest).unwrap_or_else(|e| panic!("{keyword} is no JSON array ({e}): {rest}"));
                if keyword == "ENTRYPOINT" {
                    entrypoint = Some(words);
                }
            }
            _ => {}
        }
    }
    assert_eq!(instructions.first().map(|i| i.starts_with("ARG") || i.starts_with("FROM")), Some(true));
    let entrypoint = entrypoint.expect("an ENTRYPOINT");
    assert_eq!(entrypoint.first().map(String::as_str), Some("/usr/local/bin/redt"));
    let work = tempfile::tempdir().expect("a temporary directory");
    let config = elsewhere(work.path());
    let data = work.path().join("data");
    let mut args: Vec<String> = entrypoint[1..]
        .iter()
        .map(|w| w.replace("/etc/redt/cluster.yaml", path_str(&config)).replace("/var/lib/redt", path_str(&data)))
        .collect();
    args.extend(["--node".to_string(), "use-a".to_string()]);
    runs_as_node(&args, "ENTRYPOINT");
}

//! `--log-format`: with standard error piped, JSON logs are one JSON object per
//! line and neither format writes an ANSI escape.

use std::process::Command;

/// Runs `redt [--log-format FORMAT] sim --seed 1` on the local-fast topology with `RUST_LOG=info`
/// (its recoveries log at info) and returns standard error.
fn sim_stderr(format: Option<&str>) -> Vec<u8> {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-fast.yaml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redt"));
    if let Some(f) = format {
        cmd.args(["--log-format", f]);
    }
    let out = cmd
        .args(["sim", "--seed", "1", "--config", config])
        .env("RUST_LOG", "info")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("redt runs");
    assert!(out.status.success(), "redt sim failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!out.stderr.is_empty(), "the run logs at info");
    out.stderr
}

#[test]
fn json_logs_are_one_object_per_line_without_ansi() {
    let err = sim_stderr(Some("json"));
    assert!(!err.contains(&0x1b), "an ESC byte in JSON logs");
    let text = String::from_utf8(err).expect("UTF-8 logs");
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"]["message"].is_string(), "{line}");
    }
}

#[test]
fn text_logs_to_a_pipe_have_no_ansi() {
    for format in [None, Some("text")] {
        let err = sim_stderr(format);
        assert!(!err.contains(&0x1b), "an ESC byte in text logs piped ({format:?})");
        assert!(String::from_utf8_lossy(&err).contains(" INFO "), "text lines");
    }
}

#[test]
fn a_bad_log_format_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_redt"))
        .args(["--log-format", "xml", "config", "check", "x"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("redt runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'xml'") && err.contains("json"), "{err}");
}

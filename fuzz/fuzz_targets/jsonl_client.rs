//! One line of `redt client --jsonl` input: parsed into micro-ops, turned into key/value
//! operations, and its reads filled in from the line's own bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redt_bench::jepsen::{decode_value, fill_reads, parse_line, to_kv_ops};

fuzz_target!(|data: &[u8]| {
    let _ = decode_value(data);
    let Ok(line) = std::str::from_utf8(data) else { return };
    let Ok(ops) = parse_line(line) else { return };
    let _ = to_kv_ops(&ops);
    let reads: Vec<Option<Vec<u8>>> = data.chunks(9).map(|c| Some(c.to_vec())).collect();
    let _ = fill_reads(&ops, &reads);
});

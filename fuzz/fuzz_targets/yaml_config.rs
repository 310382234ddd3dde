//! A topology file (YAML): loaded and resolved as `redt config check` and every node do, then
//! the timeouts and verbs limits derived from it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redt_proto::Topology;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(t) = Topology::from_yaml("fuzz.yaml", text) else { return };
    let _ = redt_coordinator::NodeTimeouts::resolve(&t, &t.timeouts);
    let _ = redt_dc_executor::ServerLimits::from_config(&t.verbs);
});

//! A redo ring entry as replay and recovery read it from a MemStore: the first 8 bytes are the
//! ring index it is read at, the rest the slots' bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redt_dc_executor::ring::decode;
use redt_proto::NodeId;

fuzz_target!(|data: &[u8]| {
    let Some((index, bytes)) = data.split_first_chunk::<8>() else { return };
    let _ = decode(NodeId(1), u64::from_le_bytes(*index), bytes);
});

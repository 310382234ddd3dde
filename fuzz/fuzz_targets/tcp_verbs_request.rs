//! A TCP verbs frame body (redt-tcp, in-DC): decoded as a request, as the server does, and as
//! a reply, as the client does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redt_dc_executor::verbs::{decode_reply_body, decode_request_body};

fuzz_target!(|data: &[u8]| {
    let _ = decode_request_body(data);
    let _ = decode_reply_body(data);
});

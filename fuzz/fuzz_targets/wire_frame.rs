//! A QUIC RPC frame as a node reads it off a stream: the 4-byte length prefix checked against
//! the frame limit, the body decoded as an `Envelope` (prost), then every typed decoder and
//! check a node or a client runs on its body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redt_protocol::message::{Reply, Request};
use redt_protocol::outcome::{Finding, OutcomeLookup};
use redt_transport::frame::{check_prefix, decode_body};
use redt_transport::DEFAULT_MAX_FRAME_BYTES;
use redt_coordinator::NodeStatus;
use redt_proto::wire::Body;
use redt_proto::{NodeId, Topology};
use std::sync::OnceLock;

fn topology() -> &'static Topology {
    static T: OnceLock<Topology> = OnceLock::new();
    T.get_or_init(|| {
        let text = include_str!("../../configs/local-fast.yaml");
        Topology::from_yaml("local-fast.yaml", text).expect("configs/local-fast.yaml is valid")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((prefix, body)) = data.split_first_chunk::<4>() else { return };
    let Ok(len) = check_prefix(*prefix, DEFAULT_MAX_FRAME_BYTES) else { return };
    let Some(body) = body.get(..len) else { return };
    let Ok(envelope) = decode_body(body) else { return };
    let Some(body) = envelope.body else { return };
    if let Ok(r) = Request::try_from(body.clone()) {
        let _ = r.check(topology());
        let _ = Body::from(r);
    }
    let _ = Reply::from_wire(NodeId(1), body.clone());
    match body {
        Body::NodeStatus(s) => {
            let _ = NodeStatus::from_wire(&s);
        }
        Body::TxnFound(f) => {
            for m in &f.findings {
                let _ = Finding::from_wire(m);
            }
        }
        Body::TxnOutcome(o) => {
            let _ = OutcomeLookup::from_wire(o.state, o.cts, o.detail);
        }
        _ => {}
    }
});

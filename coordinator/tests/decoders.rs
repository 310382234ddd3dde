//! Every decoder of what arrives from the network, fed arbitrary bytes and arbitrary field
//! values, answers with a value or an error and never panics (no panic on outside
//! input): the envelope (prost), the typed requests and their topology checks, the replies
//! (votes with their abort reasons, promises carrying ring entries, snapshot chunks), a
//! node's status and an outcome lookup's findings.

use proptest::prelude::*;
use prost::Message;
use redt_coordinator::NodeStatus;
use redt_proto::wire::{Body, EntryRefMsg, Envelope, ItemVoteMsg, PromiseMsg, PromisesReply, VoteMsg};
use redt_proto::{NodeId, Topology};
use redt_protocol::message::{Reply, Request};
use redt_protocol::outcome::{Finding, OutcomeLookup};
use std::sync::OnceLock;

fn topology() -> &'static Topology {
    static T: OnceLock<Topology> = OnceLock::new();
    T.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/local-fast.yaml");
        Topology::load(std::path::Path::new(path)).expect("local-fast.yaml")
    })
}

/// Runs every decoder that applies to `body`.
fn decode_all(body: Body) {
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
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_a_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(Envelope { body: Some(body), .. }) = Envelope::decode(bytes.as_slice()) {
            decode_all(body);
        }
    }

    #[test]
    fn arbitrary_votes_never_panic(
        commit: bool,
        kind: u32,
        node: u32,
        value: u64,
        dc: u32,
        items in proptest::collection::vec(
            (any::<u32>(), any::<u32>(), proptest::collection::vec(any::<u32>(), 0..4),
             proptest::collection::vec(any::<u64>(), 0..4)),
            0..4,
        ),
        entries in proptest::collection::vec((any::<u32>(), any::<u64>(), any::<u64>()), 0..4),
    ) {
        let m = VoteMsg {
            txn: 1,
            dc,
            commit,
            abort_reason: "why".into(),
            abort_kind: kind % 10,
            abort_node: node,
            abort_value: value,
            items: items
                .into_iter()
                .map(|(access, node, cells, versions)| ItemVoteMsg {
                    access,
                    node,
                    cells,
                    versions,
                    read_cells: (0..access % 3).collect(),
                    values: (0..access % 3).map(|i| vec![1; i as usize]).collect(),
                    // Lengths that pad, that are too short, or not parallel to the values.
                    value_lens: (0..access % 4).map(|i| i * 1000 + node % 3).collect(),
                    absent: access % 2 == 0,
                    row: (access % 3 == 0).then_some(u64::from(access)),
                })
                .collect(),
            hlc: value,
            entries: entries.into_iter().map(|(node, index, slots)| EntryRefMsg { node, index, slots }).collect(),
            nested_messages: 0,
            nested_round_trips: 0,
        };
        let body = Body::Vote(m);
        // Through the bytes too: the decoder sees exactly what a peer could send.
        let bytes = Envelope { epoch: 1, from: 2, body: Some(body.clone()) }.encode_to_vec();
        prop_assert!(Envelope::decode(bytes.as_slice()).is_ok());
        decode_all(body);
    }

    #[test]
    fn arbitrary_promises_never_panic(
        kind in 0u32..6,
        vote: u32,
        recorded: u32,
        node: u32,
        entry in proptest::option::of((any::<u32>(), any::<u64>(), any::<u64>())),
        redo in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let m = PromiseMsg {
            node,
            kind,
            entry: entry.map(|(node, index, slots)| EntryRefMsg { node, index, slots }),
            vote,
            recorded,
            redo,
            ..PromiseMsg::default()
        };
        decode_all(Body::Promises(PromisesReply { promises: vec![m] }));
    }
}

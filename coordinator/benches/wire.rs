//! Micro-benchmarks of the inter-node messages of one YCSB transaction on the wire, through
//! the functions the transport and the node use:
//!
//! - sending: the typed message to its wire body (`Body::from(Request)`,
//!   `Reply::into_wire`), put in an `Envelope` and framed with its length prefix
//!   (`transport::frame::encode_frame`);
//! - receiving: the prefix checked (`check_prefix`), the body decoded (`decode_body`), the
//!   typed message back (`Request::try_from` and `Request::check` against the topology, or
//!   `Reply::from_wire`).
//!
//! The messages: the phase-1 request of the main YCSB job's transaction (10 operations on 2
//! partitions, 5 reads of every cell and 5 updates of one 100-byte cell, 3 participant DCs;
//! the topology is `configs/default.yaml`), one DC's commit vote on it (an item per access:
//! every cell's version and 100-byte value for a read, the cell's version for an update; an
//! entry on each of 2 nodes), and the phase-2 commit decision naming those entries. The
//! vote, the largest, is also timed without its typed conversion (the frame alone, the body
//! alone). Allocation goes through mimalloc, as in the `redt` binary.
//!
//! `cargo bench -p redt-coordinator --bench wire` (about 25 s; it prints each message's framed
//! size first); a name filter after `--` runs some of them only.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use redt_dc_executor::{CellVersion, Decision, EntryRef, ItemVote, Vote, YcsbOp};
use redt_proto::wire::{Body, Envelope};
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, PartitionId, TableId, Topology, TxnId};
use redt_protocol::call::ycsb_call;
use redt_protocol::cost::Cost;
use redt_protocol::message::{Decide, DecideRole, Execute, Reply, Request};
use redt_protocol::plan::Scope;
use redt_transport::frame::{check_prefix, decode_body, encode_frame, PREFIX_BYTES};
use redt_transport::DEFAULT_MAX_FRAME_BYTES;
use std::time::Duration;

/// The `redt` binary's allocator (`src/main.rs`), so allocations cost here what they cost
/// there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Cells per record and bytes per cell (the default topology's `usertable`).
const CELLS: usize = 10;
const CELL_BYTES: usize = 100;
/// Operations per transaction.
const OPS: u64 = 10;
/// An HLC reading ten days after the clock's origin (so timestamps take the varint bytes a
/// running cluster's do).
const HLC: Cts = Cts((864_000_000 << redt_dc_executor::LOGICAL_BITS) | 3);
const TXN: TxnId = TxnId((1 << 48) | 4_242);

/// The keys: round-robin over partitions 0 and 3 of the default topology's 8.
fn key(i: u64) -> u64 {
    8 * (1_000 + 37 * i) + [0, 3][i as usize % 2]
}

fn ops() -> Vec<YcsbOp> {
    (0..OPS)
        .map(|i| {
            if i < OPS / 2 {
                YcsbOp::Read { key: key(i) }
            } else {
                YcsbOp::Update { key: key(i), cell: (i % CELLS as u64) as u16, value: vec![i as u8; CELL_BYTES] }
            }
        })
        .collect()
}

fn execute() -> Request {
    Request::Execute(Execute {
        txn: TXN,
        coordinator: NodeId(1),
        participants: vec![DcId(0), DcId(1), DcId(2)],
        call: ycsb_call(TableId(1), CELLS, &ops()),
        scope: Scope::Dc,
        replicate: false,
        start: HLC,
        deadline_ms: 864_000_000 + 2_000,
        partitions: vec![PartitionId(0), PartitionId(3)],
        epoch: Epoch(1),
        share: 0,
        carried: Vec::new(),
    })
}

fn entries() -> Vec<EntryRef> {
    vec![
        EntryRef { node: NodeId(2), index: 1_234_567, slots: 22 },
        EntryRef { node: NodeId(3), index: 987_654, slots: 21 },
    ]
}

fn vote() -> Reply {
    let version = |c: u64| CellVersion::new(c as u16 + 1, Cts(HLC.0 - 1_000 * (c + 1)));
    let items = (0..OPS)
        .map(|i| {
            let node = NodeId(2 + (i % 2) as u16);
            if i < OPS / 2 {
                ItemVote {
                    access: i as usize,
                    node,
                    versions: (0..CELLS as u64).map(|c| (c as u16, version(c))).collect(),
                    values: (0..CELLS as u16).map(|c| (c, vec![c as u8; CELL_BYTES])).collect(),
                    absent: false,
                    row: None,
                }
            } else {
                let cell = (i % CELLS as u64) as u16;
                ItemVote {
                    access: i as usize,
                    node,
                    versions: vec![(cell, version(i))],
                    values: vec![],
                    absent: false,
                    row: None,
                }
            }
        })
        .collect();
    Reply::Vote {
        dc: DcId(1),
        vote: Vote { txn: TXN, abort: None, items, hlc: Cts(HLC.0 + 77), entries: entries() },
        nested: Cost::default(),
    }
}

fn decide() -> Request {
    Request::Decide(Decide {
        txn: TXN,
        ballot: Ballot(0),
        decision: Decision::Commit(Cts(HLC.0 + 1_000)),
        entries: entries(),
        role: DecideRole::Executor,
        catch_up: vec![],
    })
}

fn envelope(body: Body) -> Envelope {
    Envelope { epoch: 1, from: 1, body: Some(body) }
}

/// The body of a frame, its prefix checked.
fn body_of(frame: &[u8]) -> &[u8] {
    let prefix = frame[..PREFIX_BYTES].try_into().expect("a whole prefix");
    let len = check_prefix(prefix, DEFAULT_MAX_FRAME_BYTES).expect("within the limit");
    &frame[PREFIX_BYTES..PREFIX_BYTES + len]
}

fn requests(c: &mut Criterion) {
    let topology =
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("the default topology");
    for (what, request) in [("phase-1 request (10 ops)", execute()), ("phase-2 commit decision", decide())] {
        let frame = encode_frame(&envelope(Body::from(request.clone())), DEFAULT_MAX_FRAME_BYTES).expect("frames");
        println!("{what}: {} B framed", frame.len());
        c.bench_function(&format!("{what}: encode"), |b| {
            b.iter_batched(
                || request.clone(),
                |r| encode_frame(&envelope(Body::from(r)), DEFAULT_MAX_FRAME_BYTES).expect("frames"),
                BatchSize::SmallInput,
            )
        });
        c.bench_function(&format!("{what}: decode and check"), |b| {
            b.iter(|| {
                let e = decode_body(body_of(black_box(&frame))).expect("decodes");
                let r = Request::try_from(e.body.expect("a body")).expect("a request");
                r.check(&topology).expect("within the topology");
                r
            })
        });
    }
}

fn replies(c: &mut Criterion) {
    let reply = vote();
    let frame = encode_frame(&envelope(reply.clone().into_wire(TXN, 1)), DEFAULT_MAX_FRAME_BYTES).expect("frames");
    let what = "commit vote (10 items: 5 reads x 10 cells of 100 B)";
    println!("{what}: {} B framed", frame.len());
    c.bench_function(&format!("{what}: encode"), |b| {
        b.iter_batched(
            || reply.clone(),
            |r| encode_frame(&envelope(r.into_wire(TXN, 1)), DEFAULT_MAX_FRAME_BYTES).expect("frames"),
            BatchSize::SmallInput,
        )
    });
    c.bench_function(&format!("{what}: decode"), |b| {
        b.iter(|| {
            let e = decode_body(body_of(black_box(&frame))).expect("decodes");
            Reply::from_wire(NodeId(2), e.body.expect("a body")).expect("a vote")
        })
    });
    let built = envelope(reply.into_wire(TXN, 1));
    c.bench_function(&format!("{what}: encode_frame only"), |b| {
        b.iter(|| encode_frame(black_box(&built), DEFAULT_MAX_FRAME_BYTES).expect("frames"))
    });
    c.bench_function(&format!("{what}: decode_body only"), |b| {
        b.iter(|| decode_body(body_of(black_box(&frame))).expect("decodes"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = requests, replies
}
criterion_main!(benches);

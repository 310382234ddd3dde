//! Property tests: randomly generated valid topology files resolve, and the resolved
//! `Topology` keeps its invariants; arbitrary input never panics the loader.

use proptest::prelude::*;
use redt_proto::{DcId, NodeId, PartitionId, Topology};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

/// Link parameters in milliseconds / percent / bits per second (`None` = unlimited).
#[derive(Clone, Debug)]
struct LinkSpec {
    rtt_ms: u64,
    jitter_ms: u64,
    loss_pct: u8,
    rate_mbit: Option<u32>,
}

#[derive(Clone, Debug)]
struct OverrideSpec {
    from: usize,
    to: usize,
    symmetric: bool,
    link: LinkSpec,
}

#[derive(Clone, Debug)]
struct TableSpec {
    cells: usize,
    bytes: u32,
    shift: Option<u8>,
    record_locking: bool,
    generated_cells: bool,
}

/// A valid topology, described abstractly.
#[derive(Clone, Debug)]
struct Spec {
    epoch: u32,
    nodes_per_dc: Vec<usize>,
    /// Per partition: (dc, node index within the dc), primary first, DCs distinct.
    partitions: Vec<Vec<(usize, usize)>>,
    tables: Vec<TableSpec>,
    default: LinkSpec,
    overrides: Vec<OverrideSpec>,
}

fn link() -> impl Strategy<Value = LinkSpec> {
    (0u64..500, 0u64..=100, 0u8..=100, prop::option::of(1u32..10_000)).prop_map(|(rtt_ms, j, loss_pct, rate_mbit)| {
        LinkSpec { rtt_ms, jitter_ms: rtt_ms / 2 * j / 100, loss_pct, rate_mbit }
    })
}

fn table() -> impl Strategy<Value = TableSpec> {
    (1usize..=64, 1u32..=65536, prop::option::of(0u8..=63), any::<bool>(), any::<bool>()).prop_map(
        |(cells, bytes, shift, record_locking, generated_cells)| TableSpec {
            cells,
            bytes,
            shift,
            record_locking,
            generated_cells,
        },
    )
}

fn spec() -> impl Strategy<Value = Spec> {
    prop::collection::vec(1usize..=3, 1..=5)
        .prop_flat_map(|nodes_per_dc| {
            let n_dcs = nodes_per_dc.len();
            (Just(nodes_per_dc), 1..=n_dcs)
        })
        .prop_flat_map(|(nodes_per_dc, r)| {
            let n_dcs = nodes_per_dc.len();
            let dcs: Vec<usize> = (0..n_dcs).collect();
            let one_partition = (Just(dcs).prop_shuffle(), prop::collection::vec(any::<u8>(), r));
            let partitions = prop::collection::vec(one_partition, 1..=16);
            let overrides = if n_dcs >= 2 {
                prop::collection::vec((0..n_dcs, 1..n_dcs, any::<bool>(), link()), 0..=4).boxed()
            } else {
                Just(Vec::new()).boxed()
            };
            (
                1u32..=u32::MAX,
                Just(nodes_per_dc),
                Just(r),
                partitions,
                prop::collection::vec(table(), 1..=3),
                link(),
                overrides,
            )
        })
        .prop_map(|(epoch, nodes_per_dc, r, partitions, tables, default, overrides)| {
            let n_dcs = nodes_per_dc.len();
            let partitions = partitions
                .into_iter()
                .map(|(order, picks)| {
                    order.iter().take(r).zip(picks).map(|(&dc, pick)| (dc, pick as usize % nodes_per_dc[dc])).collect()
                })
                .collect();
            let overrides = overrides
                .into_iter()
                .map(|(from, step, symmetric, link)| OverrideSpec { from, to: (from + step) % n_dcs, symmetric, link })
                .collect();
            Spec { epoch, nodes_per_dc, partitions, tables, default, overrides }
        })
}

fn link_yaml(l: &LinkSpec) -> String {
    let rate = l.rate_mbit.map_or("unlimited".to_owned(), |m| format!("{m}mbit"));
    format!("rtt: {}ms, jitter: {}ms, loss: {}%, rate: {rate}", l.rtt_ms, l.jitter_ms, l.loss_pct)
}

fn render(s: &Spec) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "name: prop\nepoch: {}\nmemstore: {{ size: 4MiB, index: 1MiB, ring: 1MiB }}\ndcs:", s.epoch);
    for (d, &n) in s.nodes_per_dc.iter().enumerate() {
        let _ = writeln!(y, "  - name: dc{d}\n    nodes:");
        for k in 0..n {
            let _ = writeln!(y, "      - {{ name: dc{d}-n{k}, addr: \"127.0.{d}.{k}:{}\" }}", 7000 + d);
        }
    }
    let _ = writeln!(y, "links:\n  default: {{ {} }}\n  overrides:", link_yaml(&s.default));
    if s.overrides.is_empty() {
        y.pop();
        y.push_str(" []\n");
    }
    for o in &s.overrides {
        let _ = writeln!(
            y,
            "    - {{ from: dc{}, to: dc{}, symmetric: {}, {} }}",
            o.from,
            o.to,
            o.symmetric,
            link_yaml(&o.link)
        );
    }
    y.push_str("tables:\n");
    for (t, ts) in s.tables.iter().enumerate() {
        let _ = writeln!(y, "  - name: t{t}\n    id: {}", t + 10);
        let _ = writeln!(y, "    locking: {}", if ts.record_locking { "record" } else { "cell" });
        if let Some(bits) = ts.shift {
            let _ = writeln!(y, "    partitioning: {{ shift: {bits} }}");
        }
        if ts.generated_cells {
            let _ = writeln!(y, "    cells: {{ count: {}, bytes: {} }}", ts.cells, ts.bytes);
        } else {
            let cells: Vec<String> = (0..ts.cells).map(|c| format!("{{ name: c{c}, bytes: {} }}", ts.bytes)).collect();
            let _ = writeln!(y, "    cells: [{}]", cells.join(", "));
        }
    }
    y.push_str("partitions:\n");
    for p in &s.partitions {
        let names: Vec<String> = p.iter().map(|(d, k)| format!("dc{d}-n{k}")).collect();
        let _ = writeln!(y, "  - {{ replicas: [{}] }}", names.join(", "));
    }
    y
}

/// The `links` matrix the spec describes, in (rtt ms, jitter ms) per directed pair.
fn expected_links(s: &Spec) -> Vec<Vec<(u64, u64)>> {
    let n = s.nodes_per_dc.len();
    let mut m: Vec<Vec<(u64, u64)>> = (0..n)
        .map(|f| (0..n).map(|t| if f == t { (0, 0) } else { (s.default.rtt_ms, s.default.jitter_ms) }).collect())
        .collect();
    for o in &s.overrides {
        m[o.from][o.to] = (o.link.rtt_ms, o.link.jitter_ms);
        if o.symmetric {
            m[o.to][o.from] = (o.link.rtt_ms, o.link.jitter_ms);
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn valid_topologies_resolve_with_invariants(s in spec(), keys in prop::collection::vec(any::<u64>(), 8)) {
        let yaml = render(&s);
        let t = match Topology::from_yaml("prop.yaml", &yaml) {
            Ok(t) => t,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n---\n{yaml}"))),
        };
        let n_dcs = s.nodes_per_dc.len();
        prop_assert_eq!(t.epoch.0, s.epoch);

        // DCs and nodes: dense ids, consistent membership, nodes numbered in file order.
        prop_assert_eq!(t.dcs.len(), n_dcs);
        prop_assert_eq!(t.nodes.len(), s.nodes_per_dc.iter().sum::<usize>());
        for (d, dc) in t.dcs.iter().enumerate() {
            prop_assert_eq!(dc.id, DcId(d as u16));
            prop_assert_eq!(dc.nodes.len(), s.nodes_per_dc[d]);
            for n in &dc.nodes {
                prop_assert_eq!(t.nodes[n.0 as usize].dc, dc.id);
            }
        }
        for (i, n) in t.nodes.iter().enumerate() {
            prop_assert_eq!(n.id, NodeId(i as u16));
            prop_assert!(i == 0 || t.nodes[i - 1].dc <= n.dc);
        }

        // Partitions: dense ids, same replica count, distinct DCs, primary as written.
        let r = s.partitions[0].len();
        prop_assert_eq!(t.partitions.len(), s.partitions.len());
        for (p, (part, want)) in t.partitions.iter().zip(&s.partitions).enumerate() {
            prop_assert_eq!(part.id, PartitionId(p as u32));
            prop_assert_eq!(part.replicas.len(), r);
            let dcs: HashSet<DcId> = part.replicas.iter().map(|n| t.nodes[n.0 as usize].dc).collect();
            prop_assert_eq!(dcs.len(), r);
            let (d0, k0) = want[0];
            prop_assert_eq!(&t.nodes[part.replicas[0].0 as usize].name, &format!("dc{d0}-n{k0}"));
            for dc in &t.dcs {
                let inside = t.replica_in_dc(part.id, dc.id);
                prop_assert_eq!(inside.is_some(), dcs.contains(&dc.id));
            }
        }

        // Tables: partition_of always in range.
        prop_assert_eq!(t.tables.len(), s.tables.len());
        for (table, ts) in t.tables.iter().zip(&s.tables) {
            prop_assert_eq!(table.cells.len(), ts.cells);
            for &k in keys.iter().chain(&[0, u64::MAX]) {
                prop_assert!((t.partition_of(table, k).0 as usize) < t.partitions.len());
            }
        }

        // Links: square, as the spec says, jitter within bounds.
        let want = expected_links(&s);
        prop_assert_eq!(t.links.len(), n_dcs);
        for (f, row) in t.links.iter().enumerate() {
            prop_assert_eq!(row.len(), n_dcs);
            for (to, l) in row.iter().enumerate() {
                let (rtt_ms, jitter_ms) = want[f][to];
                prop_assert_eq!(l.rtt, Duration::from_millis(rtt_ms));
                prop_assert_eq!(l.jitter, Duration::from_millis(jitter_ms));
                prop_assert!(l.jitter <= l.rtt / 2);
                prop_assert!((0.0..=1.0).contains(&l.loss));
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = Topology::from_yaml("junk.yaml", &text);
    }

    #[test]
    fn mutated_valid_text_never_panics(
        s in spec(),
        at in any::<prop::sample::Index>(),
        len in 0usize..40,
        patch in "[ -~\n]{0,20}",
    ) {
        let yaml = render(&s);
        let start = at.index(yaml.len());
        let end = (start + len).min(yaml.len());
        // The rendered text is ASCII, so any byte index is a char boundary.
        let mutated = format!("{}{}{}", &yaml[..start], patch, &yaml[end..]);
        let _ = Topology::from_yaml("mutated.yaml", &mutated);
    }
}

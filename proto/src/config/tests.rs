//! One test per validation rule, each asserting the field path and the problem text.

use super::*;
use crate::topology::{
    DetectorTimeoutsConfig, GrpcConfig, LimitsConfig, MetricsConfig, QuicConfig, RecoveryTimeoutsConfig,
    TimeoutsConfig, VerbsConfig,
};

const FILE: &str = "test.yaml";

/// A valid topology split into top-level sections, so tests can swap one out.
struct Doc {
    sections: Vec<(&'static str, String)>,
}

impl Doc {
    fn base() -> Doc {
        let s = |k: &'static str, v: &str| (k, v.to_owned());
        Doc {
            sections: vec![
                s("name", "name: test\n"),
                s("epoch", "epoch: 1\n"),
                s("memstore", "memstore: { size: 1MiB, index: 64KiB, ring: 64KiB }\n"),
                s(
                    "dcs",
                    r#"dcs:
  - name: dc1
    nodes:
      - { name: dc1-n1, addr: "127.0.1.1:7100" }
      - { name: dc1-n2, addr: "127.0.1.2:7100" }
  - name: dc2
    nodes:
      - { name: dc2-n1, addr: "127.0.2.1:7100" }
      - { name: dc2-n2, addr: "127.0.2.2:7100" }
  - name: dc3
    nodes:
      - { name: dc3-n1, addr: "127.0.3.1:7100" }
"#,
                ),
                s(
                    "links",
                    r#"links:
  default: { rtt: 40ms, jitter: 1ms, loss: 0%, rate: unlimited }
  overrides:
    - { from: dc1, to: dc2, rtt: 80ms }
"#,
                ),
                s(
                    "tables",
                    r#"tables:
  - name: usertable
    id: 1
    cells: [ { name: f0, bytes: 100 }, { name: f1, bytes: 100 } ]
"#,
                ),
                s(
                    "partitions",
                    r#"partitions:
  - { replicas: [dc1-n1, dc2-n1] }
  - { replicas: [dc2-n2, dc3-n1] }
  - { replicas: [dc1-n2, dc3-n1] }
  - { replicas: [dc1-n1, dc2-n2] }
"#,
                ),
            ],
        }
    }

    /// Replaces section `key` with `text` (which must start with `key:`).
    fn set(mut self, key: &str, text: &str) -> Doc {
        let slot = self.sections.iter_mut().find(|(k, _)| *k == key).expect("known section");
        slot.1 = format!("{text}\n");
        self
    }

    fn remove(mut self, key: &str) -> Doc {
        self.sections.retain(|(k, _)| *k != key);
        self
    }

    /// Replaces the first `from` in the rendered text (which must occur).
    fn edit(self, from: &str, to: &str) -> String {
        let text = self.render();
        assert!(text.contains(from), "`{from}` not in base document");
        text.replacen(from, to, 1)
    }

    fn render(&self) -> String {
        self.sections.iter().map(|(_, t)| t.as_str()).collect()
    }
}

/// Anything the tests pass as a document.
trait Yaml {
    fn yaml(&self) -> String;
}
impl Yaml for str {
    fn yaml(&self) -> String {
        self.to_owned()
    }
}
impl Yaml for String {
    fn yaml(&self) -> String {
        self.clone()
    }
}
impl Yaml for Doc {
    fn yaml(&self) -> String {
        self.render()
    }
}

fn ok(text: &(impl Yaml + ?Sized)) -> Topology {
    let text = &text.yaml();
    match Topology::from_yaml(FILE, text) {
        Ok(t) => t,
        Err(e) => panic!("expected a valid topology, got: {e}\n---\n{text}"),
    }
}

/// Asserts `text` breaks a rule at `field` with a problem containing `needle`.
fn invalid(text: &(impl Yaml + ?Sized), field: &str, needle: &str) -> String {
    let text = &text.yaml();
    match Topology::from_yaml(FILE, text) {
        Err(ConfigError::Invalid { file, field: f, problem }) => {
            assert_eq!(file, FILE);
            assert_eq!(f, field, "wrong field (problem: {problem})");
            assert!(problem.contains(needle), "problem `{problem}` does not contain `{needle}`");
            problem
        }
        Err(e) => panic!("expected Invalid at {field}, got: {e}"),
        Ok(_) => panic!("expected Invalid at {field}, got a valid topology\n---\n{text}"),
    }
}

/// Asserts `text` is refused by the parser with a message containing `needle`.
fn parse_error(text: &(impl Yaml + ?Sized), needle: &str) -> String {
    let text = &text.yaml();
    match Topology::from_yaml(FILE, text) {
        Err(ConfigError::Parse { file, message }) => {
            assert_eq!(file, FILE);
            assert!(message.contains(needle), "message `{message}` does not contain `{needle}`");
            message
        }
        Err(e) => panic!("expected Parse error, got: {e}"),
        Ok(_) => panic!("expected Parse error, got a valid topology"),
    }
}

// ----- the valid base and its resolution -----

#[test]
fn base_resolves() {
    let t = ok(&Doc::base().render());
    assert_eq!(t.name, "test");
    assert_eq!(t.epoch, Epoch(1));
    assert_eq!(t.memstore, MemStoreConfig { size_bytes: 1 << 20, index_bytes: 64 << 10, ring_bytes: 64 << 10 });
    assert_eq!(t.dcs.len(), 3);
    assert_eq!(t.nodes.len(), 5);
    assert_eq!(t.dcs[1].nodes, vec![NodeId(2), NodeId(3)]);
    assert_eq!(t.dcs[2].nodes, vec![NodeId(4)]);
    for (i, n) in t.nodes.iter().enumerate() {
        assert_eq!(n.id, NodeId(i as u16));
        assert!(t.dcs[n.dc.0 as usize].nodes.contains(&n.id));
    }
    assert_eq!(t.node_by_name("dc2-n2").map(|n| (n.id, n.dc)), Some((NodeId(3), DcId(1))));
    assert_eq!(t.nodes[4].listen, "127.0.3.1:7100".parse::<SocketAddr>().unwrap());
    assert_eq!(t.partitions.len(), 4);
    assert_eq!(
        t.partitions[1],
        Partition { id: PartitionId(1), replicas: vec![NodeId(3), NodeId(4)], learners: vec![] }
    );
    let table = &t.tables[0];
    assert_eq!(table.id, TableId(1));
    assert_eq!(table.locking, Locking::Cell);
    assert_eq!(table.partitioning, Partitioning::Modulo);
    assert_eq!(table.cells.len(), 2);
    assert_eq!(table.cells[1], CellSchema { name: "f1".into(), bytes: 100 });
    // links: default everywhere, the override both ways, zero on the diagonal.
    let ms = Duration::from_millis;
    assert_eq!(t.links.len(), 3);
    assert!(t.links.iter().all(|row| row.len() == 3));
    assert_eq!(t.links[0][1].rtt, ms(80));
    assert_eq!(t.links[1][0].rtt, ms(80));
    assert_eq!(t.links[1][0].jitter, ms(1), "override inherits the default's jitter");
    assert_eq!(t.links[0][2].rtt, ms(40));
    assert_eq!(t.links[2][1].rtt, ms(40));
    assert_eq!(t.links[1][1], LinkConditions::default());
    assert_eq!(t.links[0][2].rate_bits_per_s, None);
}

#[test]
fn asymmetric_override_sets_one_direction() {
    let t = ok(&Doc::base().edit("rtt: 80ms }", "rtt: 80ms, symmetric: false, loss: 1% }"));
    assert_eq!(t.links[0][1].rtt, Duration::from_millis(80));
    assert!((t.links[0][1].loss - 0.01).abs() < 1e-12);
    assert_eq!(t.links[1][0].rtt, Duration::from_millis(40));
    assert_eq!(t.links[1][0].loss, 0.0);
}

#[test]
fn later_override_wins() {
    let t = ok(&Doc::base().set(
        "links",
        "links:
  default: { rtt: 40ms }
  overrides:
    - { from: dc1, to: dc2, rtt: 80ms }
    - { from: dc2, to: dc1, rtt: 60ms, symmetric: false }",
    ));
    assert_eq!(t.links[0][1].rtt, Duration::from_millis(80));
    assert_eq!(t.links[1][0].rtt, Duration::from_millis(60));
}

#[test]
fn links_section_is_optional() {
    let t = ok(&Doc::base().remove("links").render());
    assert!(t.links.iter().flatten().all(|l| *l == LinkConditions::default()));
    let t = ok(&Doc::base().set("links", "links:\n  default: { rtt: 2ms }"));
    assert_eq!(t.links[0][1].rtt, Duration::from_millis(2));
    assert_eq!(t.links[0][1].jitter, Duration::ZERO);
}

#[test]
fn table_options() {
    let t = ok(&Doc::base().set(
        "tables",
        "tables:
  - { name: a, id: 7, locking: record, partitioning: { shift: 40 }, cells: { count: 10, bytes: 100 } }
  - { name: b, id: 8, partitioning: modulo, cells: { count: 3, bytes: 8, prefix: c } }",
    ));
    let a = t.table_by_name("a").unwrap();
    assert_eq!(a.id, TableId(7));
    assert_eq!(a.locking, Locking::Record);
    assert_eq!(a.partitioning, Partitioning::Shift { bits: 40 });
    let names: Vec<&str> = a.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["field0", "field1", "field2", "field3", "field4", "field5", "field6", "field7", "field8", "field9"]
    );
    assert!(a.cells.iter().all(|c| c.bytes == 100));
    let b = t.table(TableId(8)).unwrap();
    assert_eq!(b.partitioning, Partitioning::Modulo);
    assert_eq!(b.cells[2], CellSchema { name: "c2".into(), bytes: 8 });
    assert_eq!(t.partition_of(a, 5 << 40), PartitionId(1));
}

// ----- parse errors and unknown keys -----

#[test]
fn yaml_syntax_error_has_position() {
    let msg = parse_error(&Doc::base().edit("epoch: 1", "epoch: [1"), "line");
    assert!(msg.contains("column"), "{msg}");
    let shown = Topology::from_yaml(FILE, "a: [").unwrap_err().to_string();
    assert!(shown.starts_with("test.yaml: "), "{shown}");
}

#[test]
fn unknown_top_level_key() {
    parse_error(&format!("{}colour: red\n", Doc::base().render()), "unknown field `colour`");
}

#[test]
fn unknown_nested_key() {
    let msg = parse_error(
        &Doc::base().edit("addr: \"127.0.1.2:7100\" }", "addr: \"127.0.1.2:7100\", port: 1 }"),
        "unknown field `port`",
    );
    assert!(msg.contains("line 8"), "{msg}");
    parse_error(&Doc::base().edit("rate: unlimited }", "rate: unlimited, delay: 1ms }"), "unknown field `delay`");
    parse_error(&Doc::base().edit("id: 1", "id: 1\n    partitioning: { shift: 4, mask: 1 }"), "unknown field `mask`");
    parse_error(
        &Doc::base().edit("cells: [", "cells: { count: 2, bytes: 1, size: 3 }\n    x: ["),
        "unknown field `size`",
    );
}

#[test]
fn missing_key_and_wrong_type() {
    parse_error(&Doc::base().remove("epoch").render(), "missing field `epoch`");
    parse_error(&Doc::base().edit("epoch: 1", "epoch: one"), "epoch");
    parse_error(&Doc::base().edit("id: 1", "id: 70000"), "id");
    parse_error(&Doc::base().edit("id: 1", "id: 1\n    locking: row"), "unknown variant `row`");
    parse_error(&Doc::base().edit("id: 1", "id: 1\n    partitioning: hash"), "unknown variant `hash`");
    parse_error(&Doc::base().edit("size: 1MiB", "size: true"), "string or a number");
    parse_error("", "");
}

#[test]
fn duplicate_yaml_key_is_refused() {
    parse_error(&Doc::base().edit("epoch: 1", "epoch: 1\nepoch: 2"), "epoch");
}

// ----- top level -----

#[test]
fn name_must_not_be_empty() {
    invalid(&Doc::base().edit("name: test", "name: \"\""), "name", "must not be empty");
}

#[test]
fn epoch_at_least_one() {
    invalid(&Doc::base().edit("epoch: 1", "epoch: 0"), "epoch", "at least 1");
}

// ----- memstore -----

#[test]
fn memstore_sizes_are_multiples_of_64() {
    invalid(&Doc::base().edit("size: 1MiB", "size: 1000"), "memstore.size", "multiple of 64");
    invalid(&Doc::base().edit("index: 64KiB", "index: 100B"), "memstore.index", "multiple of 64");
    invalid(&Doc::base().edit("ring: 64KiB", "ring: 65537"), "memstore.ring", "multiple of 64");
}

#[test]
fn memstore_size_syntax() {
    invalid(&Doc::base().edit("size: 1MiB", "size: 1 MiBs"), "memstore.size", "invalid size `1 MiBs`");
    invalid(&Doc::base().edit("size: 1MiB", "size: -64"), "memstore.size", "invalid size `-64`: negative");
    invalid(&Doc::base().edit("size: 1MiB", "size: 99999999999TiB"), "memstore.size", "too large for 64 bits");
    let t = ok(&Doc::base().edit("size: 1MiB", "size: 1048576"));
    assert_eq!(t.memstore.size_bytes, 1 << 20);
    // bytesize's syntax: decimal units and fractions too.
    assert_eq!(ok(&Doc::base().edit("size: 1MiB", "size: 2MB")).memstore.size_bytes, 2_000_000);
    assert_eq!(ok(&Doc::base().edit("size: 1MiB", "size: 1.5 mib")).memstore.size_bytes, 3 << 19);
}

#[test]
fn memstore_index_at_least_one_bucket() {
    invalid(&Doc::base().edit("index: 64KiB", "index: 0"), "memstore.index", "at least 64");
    ok(&Doc::base().edit("index: 64KiB", "index: 64"));
}

#[test]
fn memstore_ring_at_least_one_slot() {
    invalid(&Doc::base().edit("ring: 64KiB", "ring: 64B"), "memstore.ring", "at least 128");
    ok(&Doc::base().edit("ring: 64KiB", "ring: 128"));
}

#[test]
fn memstore_size_leaves_room_for_records() {
    // index + ring + decision log (64 + 512 lines for 1,023 ring slots) + absent-key locks
    // (8 bytes per index bucket: 8 KiB for 1,024 buckets) + promise table (255 rows of 16
    // bytes for 1,023 ring slots: 64 lines) + superblock == size: no heap at all.
    let exact = (128 << 10) + 192 + 64 + 512 * 64 + (8 << 10) + 64 * 64;
    invalid(&Doc::base().edit("size: 1MiB", &format!("size: {exact}")), "memstore.size", "too small");
    invalid(&Doc::base().edit("size: 1MiB", "size: 64KiB"), "memstore.size", "too small");
    ok(&Doc::base().edit("size: 1MiB", &format!("size: {}", exact + 64)));
    // Sums that overflow are refused, not wrapped.
    invalid(
        &Doc::base().edit("index: 64KiB, ring: 64KiB", "index: 16777215TiB, ring: 16777215TiB"),
        "memstore.size",
        "too small",
    );
}

// ----- DCs and nodes -----

#[test]
fn at_least_one_dc() {
    invalid(&Doc::base().set("dcs", "dcs: []"), "dcs", "at least one DC");
}

#[test]
fn dc_names_unique() {
    invalid(&Doc::base().edit("name: dc2", "name: dc1"), "dcs[1].name", "duplicate DC name `dc1`");
    invalid(&Doc::base().edit("name: dc1", "name: \" \""), "dcs[0].name", "must not be empty");
}

#[test]
fn dc_has_a_node() {
    let text = Doc::base().edit(
        "  - name: dc3\n    nodes:\n      - { name: dc3-n1, addr: \"127.0.3.1:7100\" }",
        "  - { name: dc3, nodes: [] }",
    );
    invalid(&text, "dcs[2].nodes", "at least one node");
}

#[test]
fn node_names_unique_across_dcs() {
    invalid(
        &Doc::base().edit("{ name: dc2-n1,", "{ name: dc1-n2,"),
        "dcs[1].nodes[0].name",
        "duplicate node name `dc1-n2`",
    );
}

#[test]
fn node_addrs_parse() {
    invalid(&Doc::base().edit("127.0.3.1:7100", "localhost:7100"), "dcs[2].nodes[0].addr", "invalid socket address");
    invalid(&Doc::base().edit("127.0.3.1:7100", "127.0.3.1"), "dcs[2].nodes[0].addr", "invalid socket address");
    let t = ok(&Doc::base().edit("\"127.0.3.1:7100\"", "\"[::1]:7100\""));
    assert!(t.nodes[4].listen.is_ipv6());
    assert_eq!(t.nodes[4].advertise.to_string(), "[::1]:7100");
}

/// The base document with dc2 on two hosts: `backend` for dc2 and the two nodes' entries.
fn two_hosts(backend: &str, n1: &str, n2: &str) -> String {
    Doc::base().edit(
        "  - name: dc2\n    nodes:\n      - { name: dc2-n1, addr: \"127.0.2.1:7100\" }\n      - { name: dc2-n2, addr: \"127.0.2.2:7100\" }",
        &format!("  - name: dc2\n{backend}    nodes:\n      - {{ name: dc2-n1, {n1} }}\n      - {{ name: dc2-n2, {n2} }}"),
    )
}

#[test]
fn addr_is_listen_and_advertise_at_once() {
    let t = ok(&Doc::base());
    assert_eq!(t.nodes[4].listen, "127.0.3.1:7100".parse::<SocketAddr>().unwrap());
    assert_eq!(t.nodes[4].advertise, HostPort::from(t.nodes[4].listen));
    assert!(t.dcs.iter().all(|d| d.backend == VerbsBackend::Shm), "shm is the default");
}

#[test]
fn listen_and_advertise_may_differ_and_advertise_may_be_a_host_name() {
    let t = ok(&two_hosts(
        "    backend: tcp\n",
        r#"listen: "0.0.0.0:7100", advertise: "DC2-A.example.net:7200""#,
        r#"listen: "10.77.0.2:7100", advertise: "10.77.0.2:7100""#,
    ));
    let (a, b) = (&t.nodes[2], &t.nodes[3]);
    assert_eq!(t.dcs[1].backend, VerbsBackend::Tcp);
    assert_eq!(
        (a.listen.to_string(), a.advertise.to_string()),
        ("0.0.0.0:7100".into(), "dc2-a.example.net:7200".into())
    );
    assert_eq!(a.advertise.ip(), None, "a host name is kept, not resolved at load");
    assert_eq!(b.advertise.socket_addr(), Some(b.listen));
    // `listen` alone, or `advertise` alone with an IP, stands for both.
    let t = ok(&two_hosts("    backend: tcp\n", r#"listen: "10.77.0.1:7100""#, r#"advertise: "10.77.0.2:7100""#));
    assert_eq!(t.nodes[2].advertise.to_string(), "10.77.0.1:7100");
    assert_eq!(t.nodes[3].listen.to_string(), "10.77.0.2:7100");
    // A name that does not resolve is no error at load: it is resolved when connecting.
    ok(&two_hosts(
        "    backend: tcp\n",
        r#"listen: "0.0.0.0:7100", advertise: "nowhere.invalid:7100""#,
        r#"addr: "10.0.0.2:7100""#,
    ));
}

#[test]
fn bad_node_addresses_are_refused_naming_the_key() {
    let tcp = "    backend: tcp\n";
    let b = r#"addr: "10.77.0.2:7100""#;
    invalid(
        &two_hosts(tcp, r#"addr: "10.77.0.1:7100", listen: "0.0.0.0:7100""#, b),
        "dcs[1].nodes[0].addr",
        "either `addr`",
    );
    invalid(&two_hosts(tcp, r#"addr: "0.0.0.0:7100""#, b), "dcs[1].nodes[0].addr", "0.0.0.0 cannot be advertised");
    invalid(&two_hosts(tcp, r#"listen: "0.0.0.0:7100""#, b), "dcs[1].nodes[0].listen", "cannot be advertised");
    invalid(
        &two_hosts(tcp, r#"listen: "0.0.0.0:7100", advertise: "[::]:7100""#, b),
        "dcs[1].nodes[0].advertise",
        ":: cannot be advertised",
    );
    invalid(&two_hosts(tcp, r#"advertise: "db1.example.net:7100""#, b), "dcs[1].nodes[0].listen", "is required");
    invalid(
        &two_hosts(tcp, r#"listen: "db1:7100", advertise: "db1:7100""#, b),
        "dcs[1].nodes[0].listen",
        "invalid socket address",
    );
    invalid(
        &two_hosts(tcp, r#"listen: "0.0.0.0:7100", advertise: "db_1:7100""#, b),
        "dcs[1].nodes[0].advertise",
        "neither an IP address nor a host name",
    );
    invalid(
        &two_hosts(tcp, r#"listen: "0.0.0.0:7100", advertise: "db1""#, b),
        "dcs[1].nodes[0].advertise",
        "has no port",
    );
    invalid(&two_hosts(tcp, "advertise: 7", b), "dcs[1].nodes[0].advertise", "has no port");
    invalid(&Doc::base().edit(r#", addr: "127.0.3.1:7100""#, ""), "dcs[2].nodes[0]", "needs an address");
    // Two nodes advertising one name, or binding one address on one host.
    invalid(
        &two_hosts(
            tcp,
            r#"listen: "0.0.0.0:7100", advertise: "db1:7100""#,
            r#"listen: "0.0.0.0:7101", advertise: "DB1:7100""#,
        ),
        "dcs[1].nodes[1].advertise",
        "duplicate advertise address db1:7100 (also dcs[1].nodes[0])",
    );
    invalid(
        &two_hosts(
            tcp,
            r#"listen: "0.0.0.0:7100", advertise: "db1:7100""#,
            r#"listen: "10.0.0.1:7100", advertise: "db1:7101""#,
        ),
        "dcs[1].nodes[1].listen",
        "dc2-n2 and dc2-n1 (dcs[1].nodes[0]) are on one host and would both bind 10.0.0.1:7100 and 0.0.0.0:7100",
    );
    // On two hosts they may.
    ok(&two_hosts(
        tcp,
        r#"listen: "0.0.0.0:7100", advertise: "db1:7100""#,
        r#"listen: "0.0.0.0:7100", advertise: "db2:7100""#,
    ));
    parse_error(&two_hosts(tcp, r#"addr: "10.77.0.1:7100", host: db1"#, b), "unknown field `host`");
}

#[test]
fn shm_is_refused_for_a_dc_on_several_hosts() {
    let (a, b) = (r#"addr: "10.77.0.1:7100""#, r#"addr: "10.77.0.2:7100""#);
    for backend in ["", "    backend: shm\n"] {
        let e = invalid(&two_hosts(backend, a, b), "dcs[1].backend", "needs every node of dc2 on one host");
        assert!(e.contains("dc2-n1 advertises 10.77.0.1 and dc2-n2 10.77.0.2"), "{e}");
        assert!(e.contains("`backend: tcp`"), "{e}");
        assert_eq!(e.contains("(the default)"), backend.is_empty(), "{e}");
    }
    ok(&two_hosts("    backend: tcp\n", a, b));
    ok(&two_hosts("    backend: rdma\n", a, b));
    // One host: the same IP at two ports, the same name, or loopback addresses.
    ok(&two_hosts("    backend: shm\n", a, r#"addr: "10.77.0.1:7101""#));
    ok(&two_hosts(
        "",
        r#"listen: "0.0.0.0:7100", advertise: "db1:7100""#,
        r#"listen: "0.0.0.0:7101", advertise: "db1:7101""#,
    ));
    invalid(
        &two_hosts(
            "",
            r#"listen: "0.0.0.0:7100", advertise: "db1:7100""#,
            r#"listen: "0.0.0.0:7101", advertise: "10.0.0.1:7101""#,
        ),
        "dcs[1].backend",
        "dc2-n1 advertises db1 and dc2-n2 10.0.0.1",
    );
    invalid(
        &two_hosts("    backend: disk\n", a, b),
        "dcs[1].backend",
        "unknown backend `disk` (expected shm, tcp or rdma)",
    );
}

#[test]
fn node_addrs_unique() {
    invalid(
        &Doc::base().edit("127.0.2.2:7100", "127.0.1.1:7100"),
        "dcs[1].nodes[1].addr",
        "duplicate address 127.0.1.1:7100",
    );
}

// ----- links -----

#[test]
fn override_names_existing_dcs() {
    invalid(&Doc::base().edit("from: dc1", "from: dc9"), "links.overrides[0].from", "unknown DC `dc9`");
    invalid(&Doc::base().edit("to: dc2", "to: dc9"), "links.overrides[0].to", "unknown DC `dc9`");
}

#[test]
fn override_from_differs_from_to() {
    invalid(&Doc::base().edit("to: dc2", "to: dc1"), "links.overrides[0].to", "same DC");
}

#[test]
fn rtt_and_jitter_parse() {
    invalid(&Doc::base().edit("rtt: 40ms", "rtt: 40 parsecs"), "links.default.rtt", "invalid duration");
    invalid(&Doc::base().edit("rtt: 80ms", "rtt: fast"), "links.overrides[0].rtt", "invalid duration");
    invalid(&Doc::base().edit("jitter: 1ms", "jitter: -1ms"), "links.default.jitter", "invalid duration");
    let t = ok(&Doc::base().edit("rtt: 80ms", "rtt: 1s 500ms"));
    assert_eq!(t.links[0][1].rtt, Duration::from_millis(1500));
    let t = ok(&Doc::base().edit("jitter: 1ms", "jitter: 0"));
    assert_eq!(t.links[0][2].jitter, Duration::ZERO);
}

#[test]
fn jitter_at_most_half_rtt() {
    invalid(&Doc::base().edit("jitter: 1ms", "jitter: 21ms"), "links.default.jitter", "exceeds half the rtt");
    ok(&Doc::base().edit("jitter: 1ms", "jitter: 20ms"));
    // An override inherits the default jitter; with a smaller rtt it no longer fits.
    invalid(&Doc::base().edit("rtt: 80ms", "rtt: 1ms"), "links.overrides[0].jitter", "exceeds half the rtt");
}

/// A link's RTT is at most 60 s (`LinkConditions::MAX_RTT`), in the file as in `redt netem
/// set` (`--rtt 1000000h` would cut a link for good).
#[test]
fn rtt_at_most_a_minute() {
    invalid(&Doc::base().edit("rtt: 40ms", "rtt: 61s"), "links.default.rtt", "more than 1m, the largest allowed");
    invalid(&Doc::base().edit("rtt: 80ms", "rtt: 1000000h"), "links.overrides[0].rtt", "the largest allowed");
    let t = ok(&Doc::base().edit("rtt: 80ms", "rtt: 60s"));
    assert_eq!(t.links[0][1].rtt, Duration::from_secs(60));
}

#[test]
fn loss_is_a_percentage() {
    invalid(&Doc::base().edit("loss: 0%", "loss: 101%"), "links.default.loss", "0% to 100%");
    invalid(&Doc::base().edit("loss: 0%", "loss: -1%"), "links.default.loss", "invalid loss");
    invalid(&Doc::base().edit("loss: 0%", "loss: 0.5"), "links.default.loss", "percentage");
    invalid(&Doc::base().edit("loss: 0%", "loss: nan%"), "links.default.loss", "invalid loss");
    invalid(&Doc::base().edit("rtt: 80ms", "rtt: 80ms, loss: 200%"), "links.overrides[0].loss", "invalid loss");
    let t = ok(&Doc::base().edit("loss: 0%", "loss: 0.5%"));
    assert!((t.links[0][2].loss - 0.005).abs() < 1e-12);
    let t = ok(&Doc::base().edit("loss: 0%", "loss: 100%"));
    assert_eq!(t.links[0][2].loss, 1.0);
}

#[test]
fn rate_parses() {
    invalid(&Doc::base().edit("rate: unlimited", "rate: fast"), "links.default.rate", "invalid rate");
    invalid(&Doc::base().edit("rate: unlimited", "rate: 0bit"), "links.default.rate", "below 1 bit/s");
    invalid(&Doc::base().edit("rtt: 80ms", "rtt: 80ms, rate: 10MB"), "links.overrides[0].rate", "invalid rate");
    let t = ok(&Doc::base().edit("rate: unlimited", "rate: 100mbit"));
    assert_eq!(t.links[0][2].rate_bits_per_s, Some(100_000_000));
}

// ----- tables -----

#[test]
fn at_least_one_table() {
    invalid(&Doc::base().set("tables", "tables: []"), "tables", "at least one table");
}

#[test]
fn table_names_and_ids_unique() {
    let two = |second: &str| {
        Doc::base()
            .set("tables", &format!("tables:\n  - {{ name: a, id: 1, cells: {{ count: 1, bytes: 8 }} }}\n  - {second}"))
    };
    invalid(
        &two("{ name: a, id: 2, cells: { count: 1, bytes: 8 } }").render(),
        "tables[1].name",
        "duplicate table name `a`",
    );
    invalid(&two("{ name: b, id: 1, cells: { count: 1, bytes: 8 } }").render(), "tables[1].id", "duplicate table id 1");
    invalid(
        &two("{ name: \"\", id: 2, cells: { count: 1, bytes: 8 } }").render(),
        "tables[1].name",
        "must not be empty",
    );
}

#[test]
fn cell_count_1_to_64() {
    invalid(
        &Doc::base().edit("cells: [ { name: f0, bytes: 100 }, { name: f1, bytes: 100 } ]", "cells: []"),
        "tables[0].cells",
        "1 to 64 cells, got 0",
    );
    let list: Vec<String> = (0..65).map(|i| format!("{{ name: c{i}, bytes: 1 }}")).collect();
    let text = Doc::base().edit("{ name: f0, bytes: 100 }, { name: f1, bytes: 100 }", &list.join(", "));
    invalid(&text, "tables[0].cells", "1 to 64 cells, got 65");
    let gen = |n: u32| {
        Doc::base()
            .edit("[ { name: f0, bytes: 100 }, { name: f1, bytes: 100 } ]", &format!("{{ count: {n}, bytes: 8 }}"))
    };
    invalid(&gen(65), "tables[0].cells.count", "got 65");
    invalid(&gen(0), "tables[0].cells.count", "got 0");
    assert_eq!(ok(&gen(64)).tables[0].cells.len(), 64);
}

#[test]
fn cell_names_unique() {
    invalid(&Doc::base().edit("name: f1", "name: f0"), "tables[0].cells[1].name", "duplicate cell name `f0`");
    invalid(&Doc::base().edit("name: f1", "name: \"\""), "tables[0].cells[1].name", "must not be empty");
}

#[test]
fn cell_bytes_1_to_65536() {
    invalid(
        &Doc::base().edit("bytes: 100 }, { name: f1", "bytes: 0 }, { name: f1"),
        "tables[0].cells[0].bytes",
        "1 to 65536",
    );
    invalid(
        &Doc::base().edit("{ name: f1, bytes: 100 }", "{ name: f1, bytes: 65537 }"),
        "tables[0].cells[1].bytes",
        "got 65537",
    );
    ok(&Doc::base().edit("{ name: f1, bytes: 100 }", "{ name: f1, bytes: 65536 }"));
    let gen = Doc::base().edit("[ { name: f0, bytes: 100 }, { name: f1, bytes: 100 } ]", "{ count: 2, bytes: 0 }");
    invalid(&gen, "tables[0].cells.bytes", "1 to 65536");
}

#[test]
fn shift_at_most_63() {
    invalid(
        &Doc::base().edit("id: 1", "id: 1\n    partitioning: { shift: 64 }"),
        "tables[0].partitioning.shift",
        "at most 63",
    );
    invalid(
        &Doc::base().edit("id: 1", "id: 1\n    partitioning: { shift: 300 }"),
        "tables[0].partitioning.shift",
        "got 300",
    );
    let t = ok(&Doc::base().edit("id: 1", "id: 1\n    partitioning: { shift: 63 }"));
    assert_eq!(t.tables[0].partitioning, Partitioning::Shift { bits: 63 });
}

// ----- partitions -----

#[test]
fn at_least_one_partition() {
    invalid(&Doc::base().set("partitions", "partitions: []"), "partitions", "at least one partition");
}

#[test]
fn partition_has_a_replica() {
    invalid(&Doc::base().edit("[dc1-n1, dc2-n1]", "[]"), "partitions[0].replicas", "at least one replica");
}

#[test]
fn replicas_name_existing_nodes() {
    invalid(
        &Doc::base().edit("[dc2-n2, dc3-n1]", "[dc2-n2, dc3-n9]"),
        "partitions[1].replicas[1]",
        "unknown node `dc3-n9`",
    );
}

#[test]
fn no_two_replicas_in_one_dc() {
    let text = Doc::base().edit("[dc1-n1, dc2-n2]", "[dc2-n1, dc2-n2]");
    invalid(&text, "partitions[3].replicas", "two replicas in dc2");
    let shown = Topology::from_yaml("configs/x.yaml", &text).unwrap_err().to_string();
    assert_eq!(shown, "configs/x.yaml: partitions[3].replicas: two replicas in dc2");
    invalid(
        &Doc::base().edit("[dc1-n1, dc2-n2]", "[dc1-n1, dc1-n1]"),
        "partitions[3].replicas",
        "`dc1-n1` listed twice",
    );
}

#[test]
fn replica_counts_equal() {
    invalid(
        &Doc::base().edit("[dc1-n2, dc3-n1]", "[dc1-n2, dc3-n1, dc2-n1]"),
        "partitions[2].replicas",
        "has 3 replicas but partitions[0] has 2",
    );
}

// ----- loading from disk -----

#[test]
fn load_reads_a_file_and_labels_errors_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    std::fs::write(&path, Doc::base().render()).unwrap();
    assert_eq!(Topology::load(&path).unwrap().nodes.len(), 5);
    std::fs::write(&path, Doc::base().edit("epoch: 1", "epoch: 0")).unwrap();
    let shown = Topology::load(&path).unwrap_err().to_string();
    assert_eq!(shown, format!("{}: epoch: must be at least 1", path.display()));
}

#[test]
fn load_missing_file_is_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.yaml");
    match Topology::load(&path) {
        Err(e @ ConfigError::Io { .. }) => {
            assert!(e.to_string().contains("absent.yaml: cannot read"), "{e}");
            // The OS error is in the message once, not also in a source chain a report prints.
            assert!(std::error::Error::source(&e).is_none(), "{e}");
        }
        other => panic!("expected Io error, got {other:?}"),
    }
}

// ----- value parsers -----

#[test]
fn value_parsers() {
    assert_eq!(parse_size("64"), Ok(64));
    assert_eq!(parse_size("64B"), Ok(64));
    assert_eq!(parse_size("2 KiB"), Ok(2048));
    assert_eq!(parse_size("256MiB"), Ok(256 << 20));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("1 mib"), Ok(1 << 20), "units in any case (bytesize)");
    assert_eq!(parse_size("1.5KiB"), Ok(1536));
    assert_eq!(parse_size("2MB"), Ok(2_000_000), "decimal units too");
    let err = |r: Result<u64, String>| r.unwrap_err();
    assert!(err(parse_size("")).starts_with("invalid size ``: empty; write a number"), "{}", err(parse_size("")));
    assert!(err(parse_size("MiB")).starts_with("invalid size `MiB`: "));
    assert!(err(parse_size("-1MiB")).starts_with("invalid size `-1MiB`: negative;"));
    assert!(err(parse_size("3 parsecs")).contains("e.g. 16MiB"), "{}", err(parse_size("3 parsecs")));
    assert!(err(parse_size("99999999EiB")).contains("too large for 64 bits"));
    assert_eq!(parse_duration("40ms"), Ok(Duration::from_millis(40)));
    assert_eq!(parse_duration("0ms"), Ok(Duration::ZERO));
    assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    let derr = |s| parse_duration(s).unwrap_err();
    assert!(derr("").starts_with("invalid duration ``: empty;"), "{}", derr(""));
    assert!(derr("-5s").starts_with("invalid duration `-5s`: negative: a duration is a length of time;"));
    assert!(derr("abc").starts_with("invalid duration `abc`: not a number and a unit; write a number"));
    assert!(derr("abc").ends_with("e.g. 30s, 500ms, 2m, 1h"), "{}", derr("abc"));
    assert!(derr("5").contains("`5`: no unit;"), "{}", derr("5"));
    assert!(derr("5 parsecs").contains("unknown unit `parsecs`"), "{}", derr("5 parsecs"));
    assert_eq!(parse_loss("0%"), Ok(0.0));
    assert_eq!(parse_loss("1%"), Ok(0.01));
    assert!(parse_loss("%").is_err());
    assert!(parse_loss("1e2%").is_err());
    assert!(parse_loss("inf%").is_err());
    assert_eq!(parse_rate("unlimited"), Ok(None));
    assert_eq!(parse_rate("1gbit"), Ok(Some(1_000_000_000)));
    assert_eq!(parse_rate("100mbit"), Ok(Some(100_000_000)));
    assert_eq!(parse_rate("10kbit"), Ok(Some(10_000)));
    assert_eq!(parse_rate("1.5Mbit"), Ok(Some(1_500_000)));
    assert_eq!(parse_rate("9600"), Ok(Some(9600)));
    assert_eq!(parse_rate("1kibit"), Ok(Some(1024)), "tc's binary prefixes");
    let rerr = |s| parse_rate(s).unwrap_err();
    assert!(rerr("1..5gbit").starts_with("invalid rate `1..5gbit`: "));
    assert!(rerr("gbit").starts_with("invalid rate `gbit`: not a number and a unit;"), "{}", rerr("gbit"));
    assert!(rerr("100mb").contains("not a number and a unit"), "a byte unit is no rate: {}", rerr("100mb"));
    assert!(rerr("0bit").contains("below 1 bit/s"), "{}", rerr("0bit"));
    assert!(rerr("-1mbit").contains("`-1mbit`: negative"));
    assert!(rerr("99999999999tbit").contains("too large"));
    assert!(rerr("fast").ends_with("e.g. 100mbit"), "{}", rerr("fast"));
}

// ----- timeouts -----

/// The base document with `section` (a `timeouts:` block) appended.
fn with_timeouts(section: &str) -> String {
    format!("{}{section}\n", Doc::base().render())
}

#[test]
fn timeouts_are_optional_and_unset_by_default() {
    assert_eq!(ok(&Doc::base()).timeouts, TimeoutsConfig::default());
    assert_eq!(ok(&with_timeouts("timeouts: {}")).timeouts, TimeoutsConfig::default());
    assert_eq!(ok(&with_timeouts("timeouts: { recovery: {} }")).timeouts, TimeoutsConfig::default());
}

#[test]
fn every_timeout_key_parses() {
    let t = ok(&with_timeouts(
        r#"timeouts:
  phase1_timeout: 750ms
  clock_skew_bound: 0
  retry_every: 100ms
  retry_max: 2s
  give_up_after: 10m
  lock_wait: 25ms
  recovery:
    own_dc_after: 150ms
    other_dc_after: 1s 500ms
    turn: 300ms
    round_timeout: 60ms
    retry_base: 25ms
    retry_max: 3s
    scan_every: 50ms
    gap_wait: 250us
    catch_up_give_up: 45s
  detector:
    interval: 30ms
    timeout: 400ms"#,
    ))
    .timeouts;
    let ms = |n| Some(Duration::from_millis(n));
    assert_eq!(
        t,
        TimeoutsConfig {
            phase1_timeout: ms(750),
            clock_skew_bound: Some(Duration::ZERO),
            retry_every: ms(100),
            retry_max: ms(2000),
            give_up_after: ms(600_000),
            lock_wait: ms(25),
            recovery: RecoveryTimeoutsConfig {
                own_dc_after: ms(150),
                other_dc_after: ms(1500),
                turn: ms(300),
                round_timeout: ms(60),
                retry_base: ms(25),
                retry_max: ms(3000),
                scan_every: ms(50),
                gap_wait: Some(Duration::from_micros(250)),
                catch_up_give_up: ms(45_000),
            },
            detector: DetectorTimeoutsConfig { interval: ms(30), timeout: ms(400) },
        }
    );
    // Some keys only: the rest stay unset.
    let t = ok(&with_timeouts("timeouts: { phase1_timeout: 1s, recovery: { turn: 2s } }")).timeouts;
    assert_eq!(t.phase1_timeout, ms(1000));
    assert_eq!(t.recovery.turn, ms(2000));
    assert_eq!(t.retry_max, None);
    assert_eq!(t.recovery.retry_max, None);
    assert_eq!(t.detector, DetectorTimeoutsConfig::default());
    // A lock wait of zero is No-Wait, not an error.
    let t = ok(&with_timeouts("timeouts: { lock_wait: 0ms }")).timeouts;
    assert_eq!(t.lock_wait, Some(Duration::ZERO));
    let t = ok(&with_timeouts("timeouts: { detector: { interval: 1h } }")).timeouts;
    assert_eq!(t.detector, DetectorTimeoutsConfig { interval: ms(3_600_000), timeout: None });
}

#[test]
fn bad_timeouts_are_refused_naming_the_key() {
    invalid(&with_timeouts("timeouts: { phase1_timeout: 0 }"), "timeouts.phase1_timeout", "above zero");
    invalid(&with_timeouts("timeouts: { retry_max: 0ms }"), "timeouts.retry_max", "above zero");
    invalid(&with_timeouts("timeouts: { recovery: { scan_every: 0s } }"), "timeouts.recovery.scan_every", "above zero");
    invalid(&with_timeouts("timeouts: { phase1_timeout: soon }"), "timeouts.phase1_timeout", "invalid duration");
    invalid(&with_timeouts("timeouts: { recovery: { turn: 5 } }"), "timeouts.recovery.turn", "invalid duration");
    invalid(&with_timeouts("timeouts: { recovery: { turn: -1s } }"), "timeouts.recovery.turn", "invalid duration");
    invalid(&with_timeouts("timeouts: { give_up_after: 2days }"), "timeouts.give_up_after", "largest timeout");
    invalid(&with_timeouts("timeouts: { lock_wait: often }"), "timeouts.lock_wait", "invalid duration");
    invalid(
        &with_timeouts("timeouts: { recovery: { catch_up_give_up: 99999999999999y } }"),
        "timeouts.recovery.catch_up_give_up",
        "",
    );
    ok(&with_timeouts("timeouts: { give_up_after: 24h }"));
    invalid(&with_timeouts("timeouts: { detector: { interval: 0s } }"), "timeouts.detector.interval", "above zero");
    invalid(&with_timeouts("timeouts: { detector: { timeout: 25h } }"), "timeouts.detector.timeout", "largest timeout");
}

#[test]
fn unknown_timeout_keys_are_refused() {
    parse_error(&with_timeouts("timeouts: { phase2_timeout: 1s }"), "unknown field `phase2_timeout`");
    parse_error(&with_timeouts("timeouts: { recovery: { retry_min: 1s } }"), "unknown field `retry_min`");
    // A recovery key at the top level is not one of the coordinator's.
    parse_error(&with_timeouts("timeouts: { turn: 1s }"), "unknown field `turn`");
    parse_error(&with_timeouts("timeouts: { detector: { phi: 8 } }"), "unknown field `phi`");
    parse_error(&with_timeouts("timeouts: 5s"), "timeouts");
}

// ----- verbs -----

#[test]
fn verbs_limits_are_optional_and_parse() {
    assert_eq!(ok(&Doc::base()).verbs, VerbsConfig::default());
    assert_eq!(ok(&with_timeouts("verbs: {}")).verbs, VerbsConfig::default());
    let v = ok(&with_timeouts(
        "verbs: { max_connections: 256, max_connections_per_peer: 16, handshake_timeout: 500ms, \
         first_frame_timeout: 1s, idle_timeout: 2m }",
    ))
    .verbs;
    let ms = |n| Some(Duration::from_millis(n));
    assert_eq!(
        v,
        VerbsConfig {
            max_connections: Some(256),
            max_connections_per_peer: Some(16),
            handshake_timeout: ms(500),
            first_frame_timeout: ms(1000),
            idle_timeout: ms(120_000),
        }
    );
}

#[test]
fn bad_verbs_limits_are_refused_naming_the_key() {
    invalid(&with_timeouts("verbs: { max_connections: 0 }"), "verbs.max_connections", "at least 1");
    invalid(&with_timeouts("verbs: { max_connections_per_peer: 70000 }"), "verbs.max_connections_per_peer", "largest");
    invalid(&with_timeouts("verbs: { handshake_timeout: 0s }"), "verbs.handshake_timeout", "above zero");
    invalid(&with_timeouts("verbs: { first_frame_timeout: later }"), "verbs.first_frame_timeout", "invalid duration");
    invalid(&with_timeouts("verbs: { idle_timeout: 25h }"), "verbs.idle_timeout", "largest timeout");
    parse_error(&with_timeouts("verbs: { max_connections: -1 }"), "max_connections");
    parse_error(&with_timeouts("verbs: { per_peer: 3 }"), "unknown field `per_peer`");
}

// ----- transport -----

#[test]
fn transport_defaults_when_left_out() {
    assert_eq!(ok(&Doc::base()).transport, QuicConfig::default());
    assert_eq!(ok(&with_timeouts("transport: {}")).transport, QuicConfig::default());
    let d = QuicConfig::default();
    assert_eq!(
        (d.max_connections, d.max_connections_per_peer, d.max_streams_per_connection, d.max_calls_in_flight),
        (1024, 64, 256, 1024)
    );
    assert_eq!((d.stream_receive_window_bytes, d.connection_receive_window_bytes), (1 << 20, 16 << 20));
    let s = Duration::from_secs;
    assert_eq!((d.call_slot_timeout, d.handler_timeout, d.write_timeout), (s(5), s(30), s(10)));
}

#[test]
fn every_transport_key_parses() {
    let t = ok(&with_timeouts(
        "transport: { max_connections: 100, max_connections_per_peer: 4, max_streams_per_connection: 32, \
         stream_receive_window: 64KiB, connection_receive_window: 1MiB, max_calls_in_flight: 50, \
         call_slot_timeout: 1s, handler_timeout: 2s, write_timeout: 3s }",
    ))
    .transport;
    let s = Duration::from_secs;
    assert_eq!(
        t,
        QuicConfig {
            max_connections: 100,
            max_connections_per_peer: 4,
            max_streams_per_connection: 32,
            stream_receive_window_bytes: 64 << 10,
            connection_receive_window_bytes: 1 << 20,
            max_calls_in_flight: 50,
            call_slot_timeout: s(1),
            handler_timeout: s(2),
            write_timeout: s(3),
        }
    );
    // One key only: the others keep their defaults.
    let t = ok(&with_timeouts("transport: { handler_timeout: 500ms }")).transport;
    assert_eq!(t, QuicConfig { handler_timeout: Duration::from_millis(500), ..QuicConfig::default() });
}

/// The commented `transport:` example in configs/default.yaml, uncommented, sets every key to
/// its default: the file documents the defaults truthfully.
#[test]
fn the_transport_example_in_default_yaml_spells_out_the_defaults() {
    let text = include_str!("../../../configs/default.yaml");
    let start = text.find("\n# transport:\n").expect("default.yaml has a commented transport example") + 1;
    let block: String = text[start..]
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or(l)))
        .collect();
    assert_eq!(block.lines().count(), 10, "the header and every key:\n{block}");
    let t = Topology::from_yaml("default.yaml", &format!("{text}\n{block}")).expect("the example is valid");
    assert_eq!(t.transport, QuicConfig::default());
}

#[test]
fn bad_transport_values_are_refused_naming_the_key() {
    let bad = |yaml: &str, key: &str, needle: &str| {
        invalid(&with_timeouts(&format!("transport: {{ {yaml} }}")), &format!("transport.{key}"), needle)
    };
    bad("max_connections: 0", "max_connections", "at least 1");
    bad("max_connections: 70000", "max_connections", "largest allowed");
    bad("max_connections_per_peer: 0", "max_connections_per_peer", "at least 1");
    bad("max_streams_per_connection: 65537", "max_streams_per_connection", "largest allowed");
    bad("max_calls_in_flight: 0", "max_calls_in_flight", "at least 1");
    bad("max_calls_in_flight: 2000000", "max_calls_in_flight", "largest allowed");
    bad("stream_receive_window: 1KiB", "stream_receive_window", "outside 4096 to 1073741824 bytes");
    bad("connection_receive_window: 2GiB", "connection_receive_window", "outside");
    bad("stream_receive_window: lots", "stream_receive_window", "invalid size");
    // The connection's window holds at least one stream's, defaults filled in.
    bad("stream_receive_window: 32MiB", "connection_receive_window", "less than the stream_receive_window");
    bad("call_slot_timeout: 0s", "call_slot_timeout", "above zero");
    bad("handler_timeout: 25h", "handler_timeout", "largest timeout");
    bad("write_timeout: soon", "write_timeout", "invalid duration");
    parse_error(&with_timeouts("transport: { max_connections: -1 }"), "max_connections");
    parse_error(&with_timeouts("transport: { max_streams: 3 }"), "unknown field `max_streams`");
    parse_error(&with_timeouts("transport: 5"), "transport");
}

// ----- limits -----

#[test]
fn limits_default_when_left_out() {
    assert_eq!(ok(&Doc::base()).limits, LimitsConfig::default());
    assert_eq!(ok(&with_timeouts("limits: {}")).limits, LimitsConfig::default());
    let d = LimitsConfig::default();
    assert_eq!((d.max_ops_per_txn, d.max_bytes_per_txn, d.max_jsonl_line_bytes), (1024, 4 << 20, 1 << 20));
    assert_eq!((d.max_pending_votes, d.max_accepted_redo, d.max_background_retries), (100_000, 100_000, 1024));
}

#[test]
fn every_limit_key_parses() {
    let l =
        ok(&with_timeouts("limits: { max_ops_per_txn: 100, max_bytes_per_txn: 64KiB, max_jsonl_line_bytes: 2048 }"))
            .limits;
    assert_eq!(
        l,
        LimitsConfig {
            max_ops_per_txn: 100,
            max_bytes_per_txn: 64 << 10,
            max_jsonl_line_bytes: 2048,
            ..LimitsConfig::default()
        }
    );
    let l = ok(&with_timeouts("limits: { max_bulk_percent: 50 }")).limits;
    assert_eq!(l, LimitsConfig { max_bulk_percent: 50, ..LimitsConfig::default() });
    assert!(LimitsConfig::default().free_deleted_records, "freeing deleted records is on by default");
    let l = ok(&with_timeouts("limits: { free_deleted_records: false }")).limits;
    assert_eq!(l, LimitsConfig { free_deleted_records: false, ..LimitsConfig::default() });
    let l = ok(&with_timeouts("limits: { max_pending_votes: 10, max_accepted_redo: 20 }")).limits;
    assert_eq!(l, LimitsConfig { max_pending_votes: 10, max_accepted_redo: 20, ..LimitsConfig::default() });
    // One key only: the others keep their defaults.
    let l = ok(&with_timeouts("limits: { max_ops_per_txn: 7 }")).limits;
    assert_eq!(l, LimitsConfig { max_ops_per_txn: 7, ..LimitsConfig::default() });
}

#[test]
fn the_operation_limit_follows_the_phase1_timeout() {
    // A tenth of the phase-1 timeout at 25 µs per operation: 2,000 at 500 ms (the default
    // 1,024 fits), 400 at 100 ms.
    assert_eq!(LimitsConfig::max_ops_for_phase1(Duration::from_millis(500)), 2000);
    assert_eq!(LimitsConfig::max_ops_for_phase1(Duration::from_millis(100)), 400);
    assert_eq!(LimitsConfig::max_ops_for_phase1(Duration::from_micros(1)), 1, "never below one operation");
    assert_eq!(ok(&with_timeouts("timeouts: { phase1_timeout: 500ms }")).limits.max_ops_per_txn, 1024);
    // Left out, the limit is lowered to what a short timeout leaves room for.
    assert_eq!(ok(&with_timeouts("timeouts: { phase1_timeout: 100ms }")).limits.max_ops_per_txn, 400);
    assert_eq!(
        ok(&with_timeouts("timeouts: { phase1_timeout: 100ms }\nlimits: { max_ops_per_txn: 400 }"))
            .limits
            .max_ops_per_txn,
        400
    );
    // Set above it, refused with both numbers.
    invalid(
        &with_timeouts("timeouts: { phase1_timeout: 100ms }\nlimits: { max_ops_per_txn: 1024 }"),
        "limits.max_ops_per_txn",
        "1024 operations may hold an executor thread about 25 ms (25 µs each), more than a tenth of the phase-1 \
         timeout (100ms); set at most 400",
    );
}

#[test]
fn bad_limits_are_refused_naming_the_key() {
    invalid(&with_timeouts("limits: { max_ops_per_txn: 0 }"), "limits.max_ops_per_txn", "at least 1");
    invalid(&with_timeouts("limits: { max_ops_per_txn: 4KiB }"), "limits.max_ops_per_txn", "invalid count");
    invalid(&with_timeouts("limits: { max_ops_per_txn: 2000000 }"), "limits.max_ops_per_txn", "largest allowed");
    invalid(&with_timeouts("limits: { max_bytes_per_txn: 0B }"), "limits.max_bytes_per_txn", "at least 1");
    invalid(&with_timeouts("limits: { max_bytes_per_txn: 1GiB }"), "limits.max_bytes_per_txn", "largest allowed");
    invalid(&with_timeouts("limits: { max_jsonl_line_bytes: lots }"), "limits.max_jsonl_line_bytes", "invalid size");
    invalid(&with_timeouts("limits: { max_pending_votes: 0 }"), "limits.max_pending_votes", "at least 1");
    invalid(&with_timeouts("limits: { max_pending_votes: 10000001 }"), "limits.max_pending_votes", "largest allowed");
    invalid(&with_timeouts("limits: { max_accepted_redo: 0 }"), "limits.max_accepted_redo", "at least 1");
    invalid(&with_timeouts("limits: { max_background_retries: 0 }"), "limits.max_background_retries", "at least 1");
    invalid(&with_timeouts("limits: { max_bulk_percent: 0 }"), "limits.max_bulk_percent", "at least 1");
    invalid(&with_timeouts("limits: { max_bulk_percent: 101 }"), "limits.max_bulk_percent", "largest allowed");
    invalid(
        &with_timeouts("limits: { max_background_retries: 65537 }"),
        "limits.max_background_retries",
        "largest allowed",
    );
    let l = ok(&with_timeouts("limits: { max_background_retries: 8 }")).limits;
    assert_eq!(l.max_background_retries, 8);
    invalid(&with_timeouts("limits: { max_accepted_redo: 1KiB }"), "limits.max_accepted_redo", "invalid count");
    parse_error(&with_timeouts("limits: { max_participants: 3 }"), "unknown field `max_participants`");
    parse_error(&with_timeouts("limits: 5"), "limits");
}

// ----- metrics -----

#[test]
fn metrics_are_off_without_the_section_and_on_each_node_ip_with_it() {
    let t = ok(&Doc::base());
    assert_eq!(t.metrics, MetricsConfig::default());
    assert_eq!(t.metrics_addr(NodeId(0)), None);
    let t = ok(&with_timeouts("metrics: { port: 9464 }"));
    assert_eq!(t.metrics, MetricsConfig { port: Some(9464), ..MetricsConfig::default() });
    assert_eq!(t.metrics_addr(NodeId(0)), Some("127.0.1.1:9464".parse().unwrap()));
    assert_eq!(t.metrics_addr(NodeId(3)), Some("127.0.2.2:9464".parse().unwrap()));
    // The limits' defaults, and a section of limits only (no node serves metrics by the file).
    let d = MetricsConfig::default();
    assert_eq!((d.max_connections, d.max_connections_per_peer), (32, 4));
    assert_eq!(d.idle_timeout, Duration::from_secs(5));
    assert_eq!(d.write_timeout, Duration::from_secs(5));
    assert!(!d.tls, "plain HTTP by default");
    let t = ok(&with_timeouts(
        "metrics: { max_connections: 8, max_connections_per_peer: 2, idle_timeout: 250ms, write_timeout: 2s, \
         tls: true }",
    ));
    assert_eq!(
        t.metrics,
        MetricsConfig {
            port: None,
            max_connections: 8,
            max_connections_per_peer: 2,
            idle_timeout: Duration::from_millis(250),
            write_timeout: Duration::from_secs(2),
            tls: true,
        }
    );
    assert_eq!(t.metrics_addr(NodeId(0)), None);
    assert_eq!(ok(&with_timeouts("metrics: {}")).metrics, MetricsConfig::default());
}

#[test]
fn a_node_may_serve_its_metrics_at_its_own_address() {
    let own = Doc::base().edit(
        r#"{ name: dc1-n1, addr: "127.0.1.1:7100" }"#,
        r#"{ name: dc1-n1, addr: "127.0.1.1:7100", metrics: "127.0.0.1:9500" }"#,
    );
    // Without the section, only that node serves metrics by the file.
    let t = ok(&own);
    assert_eq!(t.nodes[0].metrics, Some("127.0.0.1:9500".parse().unwrap()));
    assert_eq!(t.metrics_addr(NodeId(0)), Some("127.0.0.1:9500".parse().unwrap()));
    assert_eq!(t.metrics_addr(NodeId(1)), None);
    // With it, the others follow the section's port and that one keeps its own address.
    let t = ok(&format!("{own}metrics: {{ port: 9464 }}\n"));
    assert_eq!(t.metrics_addr(NodeId(0)), Some("127.0.0.1:9500".parse().unwrap()));
    assert_eq!(t.metrics_addr(NodeId(1)), Some("127.0.1.2:9464".parse().unwrap()));
}

#[test]
fn bad_node_metrics_addresses_are_refused_naming_the_node() {
    let node = |metrics: &str| {
        Doc::base().edit(
            r#"{ name: dc1-n2, addr: "127.0.1.2:7100" }"#,
            &format!(r#"{{ name: dc1-n2, addr: "127.0.1.2:7100", metrics: "{metrics}" }}"#),
        )
    };
    invalid(&node("localhost:9464"), "dcs[0].nodes[1].metrics", "expected IP:PORT");
    invalid(&node("127.0.0.1:0"), "dcs[0].nodes[1].metrics", "has no port");
    invalid(&node("127.0.1.1:7100"), "dcs[0].nodes[1].metrics", "QUIC port of dc1-n1");
    invalid(&node("0.0.0.0:7100"), "dcs[0].nodes[1].metrics", "QUIC port of dc1-n1");
    // The section's port at dc1-n1's IP is what dc1-n2 asks for.
    invalid(
        &format!("{}metrics: {{ port: 9464 }}\n", node("127.0.1.1:9464")),
        "dcs[0].nodes[1].metrics",
        "nodes dc1-n1 and dc1-n2 are on one host and would serve metrics at 127.0.1.1:9464 and 127.0.1.1:9464",
    );
    // Another IP of the host, or another port, is fine.
    ok(&format!("{}metrics: {{ port: 9464 }}\n", node("127.0.0.1:9464")));
    ok(&node("127.0.1.1:9465"));
}

#[test]
fn bad_metrics_sections_are_refused_naming_the_key() {
    invalid(&with_timeouts("metrics: { port: 0 }"), "metrics.port", "not a TCP port");
    invalid(&with_timeouts("metrics: { port: 70000 }"), "metrics.port", "expected 1 to 65535");
    invalid(&with_timeouts("metrics: { port: 7100 }"), "metrics.port", "QUIC port of dc1-n1");
    let shared_ip = Doc::base().edit("127.0.1.2:7100", "127.0.1.1:7101");
    invalid(
        &format!("{shared_ip}metrics: {{ port: 9464 }}\n"),
        "metrics.port",
        "nodes dc1-n1 and dc1-n2 are on one host and would serve metrics at 127.0.1.1:9464 and 127.0.1.1:9464",
    );
    // Without the section two nodes may share an IP.
    ok(&shared_ip);
    parse_error(&with_timeouts("metrics: { port: -1 }"), "port");
    parse_error(&with_timeouts("metrics: { port: 9464, path: /m }"), "unknown field `path`");
    invalid(&with_timeouts("metrics: { max_connections: 0 }"), "metrics.max_connections", "at least 1");
    invalid(
        &with_timeouts("metrics: { max_connections_per_peer: 70000 }"),
        "metrics.max_connections_per_peer",
        "more than 65536",
    );
    invalid(&with_timeouts("metrics: { idle_timeout: 0s }"), "metrics.idle_timeout", "above zero");
    invalid(&with_timeouts("metrics: { idle_timeout: 25h }"), "metrics.idle_timeout", "largest timeout");
    invalid(&with_timeouts("metrics: { write_timeout: 0s }"), "metrics.write_timeout", "above zero");
    invalid(&with_timeouts("metrics: { write_timeout: 25h }"), "metrics.write_timeout", "largest timeout");
    invalid(&with_timeouts("metrics: { write_timeout: soon }"), "metrics.write_timeout", "soon");
    parse_error(&with_timeouts("metrics: { tls: maybe }"), "tls");
}

#[test]
fn the_grpc_section_gives_every_node_its_endpoint_and_a_node_may_have_its_own() {
    let t = ok(&Doc::base());
    assert_eq!(t.grpc, GrpcConfig::default());
    assert_eq!(t.grpc_addr(NodeId(0)), None);
    let t = ok(&with_timeouts("grpc: { port: 7300 }"));
    assert_eq!(t.grpc, GrpcConfig { port: Some(7300) });
    assert_eq!(t.grpc_addr(NodeId(0)), Some("127.0.1.1:7300".parse().unwrap()));
    assert_eq!(t.grpc_addr(NodeId(3)), Some("127.0.2.2:7300".parse().unwrap()));
    assert_eq!(ok(&with_timeouts("grpc: {}")).grpc, GrpcConfig::default());
    let own = Doc::base().edit(
        r#"{ name: dc1-n1, addr: "127.0.1.1:7100" }"#,
        r#"{ name: dc1-n1, addr: "127.0.1.1:7100", grpc: "0.0.0.0:7400" }"#,
    );
    let t = ok(&format!("{own}grpc: {{ port: 7300 }}\n"));
    assert_eq!(t.grpc_addr(NodeId(0)), Some("0.0.0.0:7400".parse().unwrap()));
    assert_eq!(t.grpc_addr(NodeId(1)), Some("127.0.1.2:7300".parse().unwrap()));
}

#[test]
fn bad_grpc_addresses_are_refused_naming_the_key() {
    invalid(&with_timeouts("grpc: { port: 0 }"), "grpc.port", "not a TCP port");
    invalid(&with_timeouts("grpc: { port: 70000 }"), "grpc.port", "expected 1 to 65535");
    invalid(&with_timeouts("grpc: { port: 7100 }"), "grpc.port", "the QUIC port of dc1-n1");
    invalid(&with_timeouts("grpc: { port: 9464 }\nmetrics: { port: 9464 }"), "grpc.port", "serves its metrics");
    parse_error(&with_timeouts("grpc: { port: 7300, tls: false }"), "unknown field `tls`");
    let shared_ip = Doc::base().edit("127.0.1.2:7100", "127.0.1.1:7101");
    invalid(
        &format!("{shared_ip}grpc: {{ port: 7300 }}\n"),
        "grpc.port",
        "where dc1-n1 of the same host serves gRPC too",
    );
    let node = |grpc: &str| {
        Doc::base().edit(
            r#"{ name: dc1-n2, addr: "127.0.1.2:7100" }"#,
            &format!(r#"{{ name: dc1-n2, addr: "127.0.1.2:7100", grpc: "{grpc}" }}"#),
        )
    };
    invalid(&node("localhost:7300"), "dcs[0].nodes[1].grpc", "expected IP:PORT");
    invalid(&node("127.0.0.1:0"), "dcs[0].nodes[1].grpc", "has no port");
    invalid(&node("0.0.0.0:7100"), "dcs[0].nodes[1].grpc", "the QUIC port of dc1-n1");
    ok(&node("127.0.1.1:7300"));
}

// ----- names -----

/// Every name of the file, and every reference to one, is refused outside the safe set,
/// naming the field, the name and the character.
#[test]
fn names_outside_the_safe_set_are_refused_naming_the_field_and_the_character() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("name: test", "name: \"my cluster\"", "name", "\"my cluster\" has the character ' ' at position 3"),
        ("name: dc2", "name: \"dc2/../x\"", "dcs[1].name", "has the character '/' at position 4"),
        ("name: dc1-n2", "name: \"dc1\\nn2\"", "dcs[0].nodes[1].name", "has the character '\\n' at position 4"),
        ("name: dc1-n1", "name: \"-rf\"", "dcs[0].nodes[0].name", "the character '-' at position 1"),
        ("name: usertable", "name: \"user;table\"", "tables[0].name", "the character ';' at position 5"),
        ("name: f1", "name: \"f1\\u00e9\"", "tables[0].cells[1].name", "the character 'é' at position 3"),
        ("from: dc1", "from: \"dc1 \"", "links.overrides[0].from", "the character ' ' at position 4"),
        ("to: dc2", "to: \"$dc2\"", "links.overrides[0].to", "the character '$' at position 1"),
        ("[dc1-n1, dc2-n1]", "[dc1-n1, \"dc2*n1\"]", "partitions[0].replicas[1]", "the character '*' at position 4"),
    ];
    for (from, to, field, needle) in cases {
        let problem = invalid(&Doc::base().edit(from, to), field, needle);
        assert!(problem.contains("1 to 64 characters, each a letter"), "{problem}");
    }
}

#[test]
fn names_are_at_most_64_characters() {
    let long = format!("t{}", "x".repeat(64));
    let problem =
        invalid(&Doc::base().edit("name: usertable", &format!("name: {long}")), "tables[0].name", "65 characters");
    assert!(problem.contains(&format!("{:?}", format!("{}…", &long[..64]))), "shown cut at 64: {problem}");
    let longest = format!("t{}", "x".repeat(63));
    let t = ok(&Doc::base().edit("name: usertable", &format!("name: {longest}")));
    assert_eq!(t.tables[0].name, longest);
    // A generated cell's name is its prefix and number.
    let cells = |prefix: &str| {
        Doc::base().edit(
            "cells: [ { name: f0, bytes: 100 }, { name: f1, bytes: 100 } ]",
            &format!("cells: {{ count: 10, bytes: 8, prefix: {prefix} }}"),
        )
    };
    ok(&cells(&"p".repeat(63)));
    invalid(&cells(&"p".repeat(64)), "tables[0].cells.prefix", "names of up to 65 characters");
    invalid(&cells("f.x!"), "tables[0].cells.prefix", "the character '!' at position 4");
}

#[test]
fn names_of_letters_digits_dots_underscores_and_dashes_load() {
    let t = ok(&Doc::base().render().replace("dc1-n1", "A.b_C-9"));
    assert_eq!(t.nodes[0].name, "A.b_C-9");
}

// ----- size and depth, before parsing -----

#[test]
fn a_file_over_1_mib_is_refused_before_parsing() {
    let padded = format!("{}#{}\n", Doc::base().render(), "x".repeat(MAX_TOPOLOGY_BYTES));
    match Topology::from_yaml(FILE, &padded) {
        Err(e @ ConfigError::TooLarge { .. }) => {
            assert_eq!(
                e.to_string(),
                format!("test.yaml: {} bytes or more, over the 1048576 bytes a topology file may have", padded.len())
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // Just under the bound it loads (a comment is free).
    let under = Doc::base().render();
    ok(&format!("{under}#{}\n", "x".repeat(MAX_TOPOLOGY_BYTES - under.len() - 2)));
}

#[test]
fn load_refuses_a_large_file_and_reads_no_more_of_a_stream_than_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    std::fs::write(&path, format!("{}#{}\n", Doc::base().render(), "x".repeat(MAX_TOPOLOGY_BYTES))).unwrap();
    let shown = Topology::load(&path).unwrap_err().to_string();
    assert!(shown.starts_with(&format!("{}: ", path.display())) && shown.contains("over the 1048576 bytes"), "{shown}");
    #[cfg(target_os = "linux")]
    {
        // An endless stream: refused after reading one byte more than the bound.
        let shown = Topology::load(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(shown, "/dev/zero: 1048577 bytes or more, over the 1048576 bytes a topology file may have");
    }
}

fn too_deep(text: &str) -> (usize, usize) {
    match Topology::from_yaml(FILE, text) {
        Err(ConfigError::TooDeep { file, line, depth, max }) => {
            assert_eq!((file.as_str(), max), (FILE, MAX_TOPOLOGY_DEPTH));
            (line, depth)
        }
        other => panic!("expected TooDeep, got {other:?}"),
    }
}

/// 100,000 nested brackets, open or closed, flow or block: a clear error naming the line,
/// and no stack overflow.
#[test]
fn deep_nesting_is_refused_before_parsing() {
    let n = 100_000;
    assert_eq!(too_deep(&"[".repeat(n)), (1, 65));
    assert_eq!(too_deep(&format!("name: {}{}", "{a: ".repeat(n), "}".repeat(n))), (1, 65));
    assert_eq!(too_deep(&format!("{}1{}", "[".repeat(n), "]".repeat(n))), (1, 65));
    assert_eq!(too_deep(&format!("{}x\n", "- ".repeat(n))), (1, 65));
    let block: String = (0..200).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
    assert_eq!(too_deep(&block), (65, 65));
    let shown = Topology::from_yaml(FILE, &"[".repeat(n)).unwrap_err().to_string();
    assert_eq!(shown, "test.yaml: line 1: nested 65 levels deep, over the 64 a topology file may have");
    // A valid file with a deep value elsewhere: the line is the value's.
    let text = format!("{}verbs: {}\n", Doc::base().render(), "[".repeat(80));
    assert_eq!(too_deep(&text).1, 65);
}

/// The parser on its own (no pre-scan) refuses 100,000 nested brackets too, at 128 levels
/// ("recursion limit exceeded"), without overflowing the stack: the bound above gives the
/// clear message naming the bound and keeps the parser's work small.
#[test]
fn the_parser_alone_survives_deep_nesting() {
    let n = 100_000;
    for text in ["[".repeat(n), format!("{}{}", "[".repeat(n), "]".repeat(n))] {
        let r: std::result::Result<serde_norway::Value, _> = serde_norway::from_str(&text);
        let e = r.expect_err("refused").to_string();
        assert!(e.contains("recursion limit exceeded"), "{e}");
    }
}

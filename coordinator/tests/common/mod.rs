//! Helpers shared by the coordinator's integration tests.

use redt_proto::Topology;

/// `configs/local-fast.yaml` with every node on `port` instead of 7100 and the cluster named
/// `name` (unique per test: ports and names must not collide between concurrent tests).
pub fn local_fast(name: &str, port: u16) -> Topology {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/local-fast.yaml");
    let text = std::fs::read_to_string(path).expect("configs/local-fast.yaml");
    assert!(text.contains(":7100\""), "local-fast.yaml nodes listen on port 7100");
    assert!(text.contains("\nname: local-fast\n"), "local-fast.yaml is named local-fast");
    let text =
        text.replace(":7100\"", &format!(":{port}\"")).replace("\nname: local-fast\n", &format!("\nname: {name}\n"));
    Topology::from_yaml(path, &text).expect("the edited local-fast.yaml is valid")
}

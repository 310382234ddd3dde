//! Private key files: every one redt writes (`redt certs init`, `redt cluster up`,
//! `redt certs issue` and `rotate`) has mode 0600, also when it replaces a file of wider mode
//! or a symbolic link, and is written whole through a file renamed into place.
#![cfg(unix)]

mod common;
use common::local_fast;
use redt_proto::CertIdentity;
use redt_transport::{init_cluster_certs_with, load_identity, ClusterCa, Validity};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

/// The `.key` files of `dir`, by name.
fn keys(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut keys: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "key"))
        .collect();
    keys.sort();
    keys
}

/// No file but the certificates and keys: no temporary file is left behind.
fn assert_no_leftovers(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(name.ends_with(".pem") || name.ends_with(".key"), "{}: unexpected file {name}", dir.display());
    }
}

#[test]
fn every_key_written_at_init_has_mode_0600() {
    let topo = local_fast("keys-init", 7101);
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    init_cluster_certs_with(&topo, &certs, None, None).unwrap();
    let keys = keys(&certs);
    assert_eq!(keys.len(), topo.nodes.len() + 2, "a key per node, the client's and the operator's: {keys:?}");
    for k in keys.iter().chain([&dir.path().join("certs-ca/ca.key")]) {
        assert_eq!(mode(k), 0o600, "{}", k.display());
    }
    assert_no_leftovers(&certs);
    assert_no_leftovers(&dir.path().join("certs-ca"));
}

/// Issuing over a key file someone made readable by everyone (and over a symbolic link to
/// another file) leaves a 0600 key in its place, the link's target untouched; the new
/// identity loads.
#[test]
fn a_key_replacing_a_wider_file_or_a_link_has_mode_0600() {
    let topo = local_fast("keys-reissue", 7102);
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let ca_key = dir.path().join("certs-ca/ca.key");
    init_cluster_certs_with(&topo, &certs, None, None).unwrap();
    let ca = ClusterCa::load(&topo.name, &certs, &ca_key).unwrap();
    let n0 = &topo.nodes[0];
    let key = certs.join(format!("{}.key", n0.name));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(mode(&key), 0o644);
    let id = CertIdentity::Node { dc: topo.dcs[0].name.clone(), name: n0.name.clone() };
    let valid = Validity::starting_now(Duration::from_secs(3600));
    let written = ca.write_identity(&certs, &id, Some(n0.listen.ip()), valid).unwrap();
    assert_eq!(written.key_path, key);
    assert_eq!(mode(&key), 0o600, "the wider file was replaced");
    load_identity(&certs, &n0.name).expect("the new identity loads");

    let elsewhere = dir.path().join("elsewhere.txt");
    std::fs::write(&elsewhere, "not a key").unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o644)).unwrap();
    let alice = certs.join("alice.key");
    std::os::unix::fs::symlink(&elsewhere, &alice).unwrap();
    ca.write_identity(&certs, &CertIdentity::Client { name: "alice".into() }, None, valid).unwrap();
    assert!(std::fs::symlink_metadata(&alice).unwrap().file_type().is_file(), "the link itself was replaced");
    assert_eq!(mode(&alice), 0o600);
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "not a key", "the link's target is untouched");
    assert_eq!(mode(&elsewhere), 0o644);
    load_identity(&certs, "alice").expect("alice's identity loads");

    std::fs::set_permissions(&ca_key, std::fs::Permissions::from_mode(0o666)).unwrap();
    ca.write_ca(&certs, &ca_key).unwrap();
    assert_eq!(mode(&ca_key), 0o600, "the CA's key too");
    assert_no_leftovers(&certs);
}

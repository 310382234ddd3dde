//! The cross-process verbs backend: two real processes map the same `/dev/shm` MemStore
//! file and see each other's WRITEs and atomics (docs/design.md §3).

use redt_proto::{NodeId, Offset};
use redt_verbs::{LocalVerbs, Verbs};
use std::path::{Path, PathBuf};
use std::process::Command;

const SIZE: u64 = 1 << 20;
const ROUNDS: u64 = 20_000;
const COUNTER: Offset = Offset(4096);
const FLAG: Offset = Offset(4160);
const READY: Offset = Offset(4224);
const MSG: Offset = Offset(8192);

fn shm_dir() -> PathBuf {
    let d = Path::new("/dev/shm");
    if d.is_dir() {
        d.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Child side: runs only when the parent starts this test binary with `REDT_SHM_CHILD`.
#[test]
fn shm_child() {
    let Ok(prefix) = std::env::var("REDT_SHM_CHILD") else { return };
    let v = LocalVerbs::open_shared(&shm_dir(), &prefix, [NodeId(0)], SIZE).unwrap();
    let n = NodeId(0);
    v.compare_and_swap(n, READY, 0, 1).unwrap();
    // Wait for the parent's go flag (a CAS it made), then race it on the counter.
    while v.compare_and_swap(n, FLAG, 1, 1).unwrap() != 1 {
        std::thread::yield_now();
    }
    for _ in 0..ROUNDS {
        v.fetch_and_add(n, COUNTER, 1).unwrap();
        // A CAS loop doubling as an increment: must see the parent's atomics to succeed.
        loop {
            let cur = v.compare_and_swap(n, COUNTER.plus(8), 0, 0).unwrap();
            if v.compare_and_swap(n, COUNTER.plus(8), cur, cur + 1).unwrap() == cur {
                break;
            }
        }
    }
    v.write(n, MSG, b"hello from the child process!").unwrap();
}

trait Plus {
    fn plus(self, d: u64) -> Offset;
}
impl Plus for Offset {
    fn plus(self, d: u64) -> Offset {
        Offset(self.0 + d)
    }
}

#[test]
fn two_processes_share_one_region_and_its_atomics() {
    if std::env::var("REDT_SHM_CHILD").is_ok() {
        return;
    }
    let prefix = format!("redt-test-{}", std::process::id());
    let dir = shm_dir();
    let v = LocalVerbs::open_shared(&dir, &prefix, [NodeId(0)], SIZE).unwrap();
    let n = NodeId(0);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "shm_child", "--nocapture", "--test-threads", "1"])
        .env("REDT_SHM_CHILD", &prefix)
        .spawn()
        .unwrap();
    // Start together: wait until the child has mapped the file, then give the go.
    while v.compare_and_swap(n, READY, 1, 1).unwrap() != 1 {
        std::thread::yield_now();
    }
    v.compare_and_swap(n, FLAG, 0, 1).unwrap();
    for _ in 0..ROUNDS {
        v.fetch_and_add(n, COUNTER, 1).unwrap();
        loop {
            let cur = v.compare_and_swap(n, COUNTER.plus(8), 0, 0).unwrap();
            if v.compare_and_swap(n, COUNTER.plus(8), cur, cur + 1).unwrap() == cur {
                break;
            }
        }
    }
    assert!(child.wait().unwrap().success(), "child process failed");
    let mut buf = [0u8; 8];
    v.read(n, COUNTER, &mut buf).unwrap();
    assert_eq!(u64::from_le_bytes(buf), 2 * ROUNDS, "fetch-and-adds of both processes");
    v.read(n, COUNTER.plus(8), &mut buf).unwrap();
    assert_eq!(u64::from_le_bytes(buf), 2 * ROUNDS, "compare-and-swaps of both processes");
    let mut msg = [0u8; 29];
    v.read(n, MSG, &mut msg).unwrap();
    assert_eq!(&msg, b"hello from the child process!");
    drop(v);
    // A restarted process maps the same file and finds the data; a wrong size is refused.
    let again = LocalVerbs::open_shared(&dir, &prefix, [NodeId(0)], SIZE).unwrap();
    again.read(n, COUNTER, &mut buf).unwrap();
    assert_eq!(u64::from_le_bytes(buf), 2 * ROUNDS);
    assert!(LocalVerbs::open_shared(&dir, &prefix, [NodeId(0)], SIZE * 2).is_err());
    std::fs::remove_file(redt_verbs::shared_file(&dir, &prefix, n)).unwrap();
}

// ---------------------------------------------------------------------------------------
// How MemStore files are opened
// ---------------------------------------------------------------------------------------

use redt_verbs::shared_file;
use redt_verbs::Error;
use std::os::unix::fs::PermissionsExt;

const SMALL: u64 = 4096;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

/// A new MemStore file is created with mode 0600; opening it again maps the same bytes.
#[test]
fn a_new_memstore_file_is_private_to_its_user() {
    let dir = tempfile::tempdir().unwrap();
    let path = shared_file(dir.path(), "p", NodeId(0));
    let v = LocalVerbs::open_shared(dir.path(), "p", [NodeId(0)], SMALL).unwrap();
    assert_eq!(mode(&path), 0o600);
    v.write(NodeId(0), Offset(8), b"kept").unwrap();
    drop(v);
    let again = LocalVerbs::open_shared(dir.path(), "p", [NodeId(0)], SMALL).unwrap();
    let mut buf = [0u8; 4];
    again.read(NodeId(0), Offset(8), &mut buf).unwrap();
    assert_eq!(&buf, b"kept");
}

/// A MemStore file that already exists as a symbolic link is refused, whether its target
/// exists or not, and nothing is created or written through it.
#[test]
fn a_memstore_file_that_is_a_symlink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = shared_file(dir.path(), "p", NodeId(0));
    let target = dir.path().join("victim");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    for target_exists in [false, true] {
        if target_exists {
            std::fs::write(&target, b"precious").unwrap();
        }
        match LocalVerbs::open_shared(dir.path(), "p", [NodeId(0)], SMALL) {
            Err(Error::Backend(m)) => assert!(m.contains("symbolic link"), "{m}"),
            Err(other) => panic!("a symlink is refused with a backend error, not {other}"),
            Ok(_) => panic!("a symlinked MemStore file was opened"),
        }
        if target_exists {
            assert_eq!(std::fs::read(&target).unwrap(), b"precious", "the target is untouched");
        } else {
            assert!(!target.exists(), "nothing was created through the dangling symlink");
        }
    }
}

/// An existing MemStore file readable by others (as older versions made them) is
/// narrowed to 0600; one that is not a regular file is refused.
#[test]
fn an_existing_memstore_file_is_narrowed_and_must_be_regular() {
    let dir = tempfile::tempdir().unwrap();
    let path = shared_file(dir.path(), "p", NodeId(0));
    std::fs::write(&path, vec![0u8; SMALL as usize]).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    LocalVerbs::open_shared(dir.path(), "p", [NodeId(0)], SMALL).unwrap();
    assert_eq!(mode(&path), 0o600);

    let not_a_file = shared_file(dir.path(), "p", NodeId(1));
    std::fs::create_dir(&not_a_file).unwrap();
    assert!(LocalVerbs::open_shared(dir.path(), "p", [NodeId(1)], SMALL).is_err(), "a directory is refused");
}

/// Another node's MemStore file is mapped only once its node made and sized it: a missing or
/// still empty file is `None` and is left as it is (otherwise two hosts of one DC would each
/// make their own copy of the other's file); a symbolic link is refused as for the own file.
#[test]
fn another_nodes_file_is_mapped_but_never_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = shared_file(dir.path(), "p", NodeId(1));
    assert!(LocalVerbs::map_existing(dir.path(), "p", NodeId(1), SMALL).unwrap().is_none());
    assert!(!path.exists(), "a missing file is not created");
    std::fs::write(&path, b"").unwrap();
    assert!(LocalVerbs::map_existing(dir.path(), "p", NodeId(1), SMALL).unwrap().is_none(), "empty: not sized yet");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "an empty file is not sized");
    std::fs::remove_file(&path).unwrap();
    let owner = LocalVerbs::open_shared(dir.path(), "p", [NodeId(1)], SMALL).unwrap();
    owner.write(NodeId(1), Offset(8), b"mine").unwrap();
    let region = LocalVerbs::map_existing(dir.path(), "p", NodeId(1), SMALL).unwrap().expect("sized by its owner");
    let peer = LocalVerbs::new([(NodeId(1), region)]);
    let mut buf = [0u8; 4];
    peer.read(NodeId(1), Offset(8), &mut buf).unwrap();
    assert_eq!(&buf, b"mine");
    assert!(LocalVerbs::map_existing(dir.path(), "p", NodeId(1), SMALL * 2).is_err(), "a size mismatch is an error");
    let link = shared_file(dir.path(), "p", NodeId(2));
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(
        matches!(LocalVerbs::map_existing(dir.path(), "p", NodeId(2), SMALL), Err(Error::Backend(m)) if m.contains("symbolic link"))
    );
}

/// `open_dc_shared` maps the own file and another node's once that node made it, on first use:
/// before, a verb to it fails naming the node and its file, and the file is not created.
#[test]
fn a_peer_file_is_mapped_on_first_use_once_its_node_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let (verbs, missing) =
        LocalVerbs::open_dc_shared(dir.path(), "p", NodeId(0), [(NodeId(1), "dc1-n2".to_string())], SMALL).unwrap();
    assert_eq!(missing, [(NodeId(1), "dc1-n2".to_string())]);
    let path = shared_file(dir.path(), "p", NodeId(1));
    match verbs.fetch_and_add(NodeId(1), Offset(8), 1) {
        Err(Error::Backend(m)) => {
            assert!(m.starts_with(&format!("dc1-n2's MemStore file {} does not exist yet", path.display())), "{m}")
        }
        other => panic!("a verb to a node whose file is missing fails, not {other:?}"),
    }
    assert!(!path.exists(), "the peer's file is not created");
    assert!(verbs.region(NodeId(1)).is_none());
    let owner = LocalVerbs::open_shared(dir.path(), "p", [NodeId(1)], SMALL).unwrap();
    owner.write(NodeId(1), Offset(8), b"made").unwrap();
    let mut buf = [0u8; 4];
    verbs.read(NodeId(1), Offset(8), &mut buf).unwrap();
    assert_eq!(&buf, b"made", "mapped on first use, the owner's bytes");
    verbs.write(NodeId(0), Offset(8), b"mine").unwrap();
    assert!(verbs.region(NodeId(1)).is_some());
    assert!(matches!(verbs.read(NodeId(2), Offset(8), &mut buf), Err(Error::UnknownNode(NodeId(2)))));
}

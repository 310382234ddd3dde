//! The cross-process verbs backend: two real processes map the same `/dev/shm` MemStore
//! file and see each other's WRITEs and atomics (DESIGN.md §3).

use redt_dc_executor::{LocalVerbs, Verbs};
use redt_proto::{NodeId, Offset};
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
    std::fs::remove_file(redt_dc_executor::verbs::shared_file(&dir, &prefix, n)).unwrap();
}

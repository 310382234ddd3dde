//! Which `redt node` processes of a run directory are alive: each node holds an exclusive
//! lock on its pid file for as long as it runs (`redt node --pid-file`), so a pid file whose
//! lock nobody holds is stale, whatever process now has that pid. The kernel drops the lock
//! when the process ends, however it ends (SIGKILL included). Locks (`flock`) and signals go
//! through `rustix`.

use anyhow::{bail, Context, Result};
use rustix::fs::{flock, FlockOperation};
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// A node's pid file, locked for the life of the process that holds this value.
#[derive(Debug)]
pub struct PidLock {
    _file: File,
}

impl PidLock {
    /// Creates (or opens) `path`, takes its exclusive lock and writes this process's pid.
    ///
    /// # Errors
    /// The file cannot be created or written; another live process holds its lock (the
    /// error names that process's pid: the same node runs already).
    pub fn acquire(path: &Path) -> Result<PidLock> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening the pid file {}", path.display()))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(Errno::WOULDBLOCK) => {
                let pid = read_pid(&mut file).map_or_else(|| "unknown".to_string(), |p| p.to_string());
                bail!("{} is held by a running process (pid {pid}): this node runs already", path.display());
            }
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .with_context(|| format!("locking the pid file {}", path.display()));
            }
        }
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())?;
        file.sync_data()?;
        Ok(PidLock { _file: file })
    }
}

/// The pid of the live process holding `path`'s lock; `None` when the file is missing,
/// unreadable, or its lock is free (the process that wrote it has ended).
pub fn holder(path: &Path) -> Option<u32> {
    let mut file = File::open(path).ok()?;
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => None,
        Err(Errno::WOULDBLOCK) => read_pid(&mut file),
        Err(_) => None,
    }
}

/// Sends `signal` to `pid`.
///
/// # Errors
/// The pid is out of range or the kernel refused the signal (no such process, no permission).
pub fn signal(pid: u32, signal: rustix::process::Signal) -> Result<()> {
    let raw = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw).with_context(|| format!("pid {pid}"))?;
    rustix::process::kill_process(raw, signal).with_context(|| format!("sending {signal:?} to pid {pid}"))?;
    Ok(())
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_pid_file_names_its_holder_and_refuses_a_second_holder_until_released() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("pids").join("dc1-n1.pid");
        assert_eq!(holder(&path), None, "no file, no holder");
        let lock = PidLock::acquire(&path).expect("the first holder");
        assert_eq!(holder(&path), Some(std::process::id()));
        let err = PidLock::acquire(&path).expect_err("a second holder is refused").to_string();
        assert!(err.contains(&format!("pid {}", std::process::id())) && err.contains("runs already"), "{err}");
        drop(lock);
        assert_eq!(holder(&path), None, "released: the file is stale");
        assert!(path.is_file(), "the stale file stays until `cluster down` removes it");
        let again = PidLock::acquire(&path).expect("a stale file is taken over");
        assert_eq!(holder(&path), Some(std::process::id()));
        drop(again);
    }

    #[test]
    fn a_stale_pid_of_a_live_process_is_not_taken_for_a_node() {
        // The pid file names this (live) test process, but nobody holds its lock: a node that
        // died and whose pid was reused looks exactly so.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("dc1-n1.pid");
        std::fs::write(&path, format!("{}\n", std::process::id())).expect("write");
        assert_eq!(holder(&path), None);
    }
}

//! A durable raft-rs [`Storage`] for the membership Raft group: the log, the hard state and the
//! conf state of one peer, kept in files of one directory and mirrored in memory for reads.
//!
//! The membership log is small (one entry per membership change, never compacted), so every
//! entry stays in memory; the files exist to be read back when the peer restarts, so that a
//! restarted voter comes back with its term, its vote, its log and its commit index. Raft's
//! Figure 2 makes the term, the vote and the log persistent state: a voter that forgot its
//! vote could vote twice in one term (§5.2), one that forgot an acknowledged entry could undo
//! a commit the leader counted it for (§5.3).
//!
//! # Files
//!
//! All integers are little-endian; CRCs are CRC-32 (IEEE), as `crc32fast` computes them.
//!
//! - `raft.meta`, written once when the directory is created: magic `redtRmet`, version
//!   `u32`, Raft id `u64`, voter count `u32` and ids `u64`, learner count `u32` and ids `u64`
//!   (each set sorted), CRC of all before.
//! - `raft.state`, replaced whole on each change: magic `redtRhst`, version `u32` (2),
//!   `HardState` length `u32` and protobuf bytes, `ConfState` length `u32` and protobuf bytes,
//!   the conf index `u64` (the log index of the last conf change the conf state includes; 0
//!   for the initial configuration), CRC of all before. Version 1 (no conf index) is still
//!   read, as conf index 0: it was written before any conf change was proposed.
//! - `raft.log`, appended to, and rewritten whole when an append replaces a suffix: magic
//!   `redtRlog`, version `u32`, then records: length `u32`, CRC `u32` of the length's 4 bytes
//!   and the payload, payload = one protobuf `Entry`.
//!
//! A whole-file replacement writes `<name>.tmp`, fsyncs it, renames it over `<name>` and
//! fsyncs the directory, so a crash leaves the old or the new file, never a mix. An append
//! writes its records at the end of `raft.log` and fsyncs before returning, so a crash can
//! leave only a torn tail: a record cut short or failing its CRC. Opening cuts the file back to
//! the last whole record and reports the bytes cut in [`Recovery::dropped_tail_bytes`]; those
//! records were never acknowledged (an append returns only after fsync, and raft-rs sends the
//! messages that depend on it only after that). A new directory is built under a sibling
//! `.<name>.init` directory and renamed into place, so a crash while creating leaves no
//! half-made directory.
//!
//! Entries start at index 1 and are consecutive; nothing is ever compacted, so
//! [`Storage::snapshot`] is never needed and answers `SnapshotTemporarilyUnavailable`.
//!
//! # Conf state
//!
//! The conf state (which peers vote, which learn) is the group's configuration as of the
//! conf index ([`DiskStorage::set_conf_state`]): the initial voters and learners, changed by
//! every committed conf change up to that index (raft-rs's `ConfState`, as
//! `RawNode::apply_conf_change` returns it). raft-rs takes it at start as the configuration
//! as of its `Config::applied` index, so a reopened peer starts at the conf index
//! ([`Recovery::conf_index`]) and re-applies only the conf changes after it.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

use crate::error::{Error, Result};

const META_FILE: &str = "raft.meta";
const STATE_FILE: &str = "raft.state";
const LOG_FILE: &str = "raft.log";
const TMP_SUFFIX: &str = ".tmp";

const META_MAGIC: [u8; 8] = *b"redtRmet";
const STATE_MAGIC: [u8; 8] = *b"redtRhst";
const LOG_MAGIC: [u8; 8] = *b"redtRlog";
/// The format version of the meta and log files.
const VERSION: u32 = 1;
/// The format version of the state file (2 added the conf index).
const STATE_VERSION: u32 = 2;
/// Magic and version at the head of each file.
const HEADER_BYTES: usize = 12;
/// Length and CRC before each record's payload.
const RECORD_HEADER_BYTES: usize = 8;

/// What [`DiskStorage::open`] found in the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// Whether the directory was created by this open (a first start, empty log).
    pub created: bool,
    /// The index of the last entry read back (0 for an empty log).
    pub last_index: u64,
    /// The term of the hard state read back.
    pub term: u64,
    /// The commit index of the hard state read back. raft-rs delivers entries `1..=commit` as
    /// committed again after the restart (see [`crate::RaftMembership::open`]).
    pub commit: u64,
    /// The log index of the last conf change the conf state read back includes (0: the
    /// initial configuration); at most `commit`.
    pub conf_index: u64,
    /// Bytes cut from the end of `raft.log`: a torn or CRC-failing tail left by a crash during
    /// an append. Zero after a clean stop; worth a warning otherwise.
    pub dropped_tail_bytes: u64,
}

/// A raft-rs [`Storage`] backed by a directory (module docs give the files), with every entry,
/// the hard state and the conf state also held in memory.
///
/// Reads ([`Storage`]) answer from memory. Writes ([`DiskStorage::append`],
/// [`DiskStorage::set_hardstate`], [`DiskStorage::set_commit`]) reach the disk and are fsynced
/// before they return, then update the memory copy; a write that fails leaves the memory copy
/// as it was.
pub struct DiskStorage {
    dir: PathBuf,
    /// `raft.log`, open for writing at `log_len`.
    log: File,
    /// Bytes of `raft.log` that hold the header and whole records.
    log_len: u64,
    hard_state: HardState,
    conf_state: ConfState,
    /// The index of the last conf change `conf_state` includes.
    conf_index: u64,
    /// `entries[i].index == i + 1`.
    entries: Vec<Entry>,
    recovery: Recovery,
}

impl DiskStorage {
    /// Opens the storage of Raft peer `id` in `dir`, or creates it there with an empty log, a
    /// default hard state (term 0, no vote, commit 0) and the conf state `voters`/`learners`
    /// if `dir` does not exist or is empty. `voters` and `learners` are Raft ids; they are the
    /// group's initial configuration and must be the same on every open (order does not
    /// matter).
    ///
    /// On reopen a torn tail of the log is cut off (see [`DiskStorage::recovery`]), and the
    /// files are checked: every file's magic, version and CRC, entries consecutive from 1 with
    /// terms that never go down, the commit index within the log, and a conf state raft-rs can
    /// restore (voters present, no id twice, no joint configuration) as of a conf index within
    /// the commit index. Nothing is written
    /// before every check has passed.
    ///
    /// # Errors
    ///
    /// [`Error::ForeignStorage`] if `dir` holds the storage of another Raft id or another
    /// initial voter/learner set (the message names both); [`Error::CorruptStorage`] for a
    /// file that cannot be read back; [`Error::InconsistentStorage`] for files that contradict
    /// each other or Raft's rules, or a non-empty `dir` without a meta file;
    /// [`Error::StorageIo`] if the file system fails.
    pub fn open(dir: &Path, id: u64, voters: &[u64], learners: &[u64]) -> Result<Self> {
        let expected = Meta::new(id, voters, learners);
        let created = !dir.exists() || is_empty_dir(dir)?;
        if created {
            create(dir, &expected)?;
        }
        let meta_path = dir.join(META_FILE);
        if !meta_path.exists() {
            return Err(inconsistent(dir, format!("the directory is not empty and has no {META_FILE}")));
        }
        let found = Meta::decode(&meta_path, &read(&meta_path)?)?;
        if found != expected {
            return Err(Error::ForeignStorage {
                dir: dir.to_path_buf(),
                found: found.to_string(),
                expected: expected.to_string(),
            });
        }
        let state_path = dir.join(STATE_FILE);
        let (hard_state, conf_state, conf_index) = decode_state(&state_path, &read(&state_path)?)?;
        let log_path = dir.join(LOG_FILE);
        let log_bytes = read(&log_path)?;
        let (entries, good_len) = decode_log(&log_path, &log_bytes)?;
        check_log(dir, &entries, &hard_state, &conf_state, conf_index)?;

        // Temporary files of a whole-file replacement cut short by a crash.
        for name in [META_FILE, STATE_FILE, LOG_FILE] {
            let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
            match fs::remove_file(&tmp) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(&tmp)(e)),
                _ => {}
            }
        }
        let log = OpenOptions::new().write(true).open(&log_path).map_err(io_error(&log_path))?;
        let dropped_tail_bytes = (log_bytes.len() - good_len) as u64;
        if dropped_tail_bytes > 0 {
            log.set_len(good_len as u64).map_err(io_error(&log_path))?;
            log.sync_all().map_err(io_error(&log_path))?;
        }
        let recovery = Recovery {
            created,
            last_index: entries.len() as u64,
            term: hard_state.term,
            commit: hard_state.commit,
            conf_index,
            dropped_tail_bytes,
        };
        Ok(DiskStorage {
            dir: dir.to_path_buf(),
            log,
            log_len: good_len as u64,
            hard_state,
            conf_state,
            conf_index,
            entries,
            recovery,
        })
    }

    /// Returns what [`DiskStorage::open`] found: whether it created the directory, the log
    /// and hard state it read back, and the bytes of torn tail it cut off.
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// Returns the storage directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Returns the hard state (term, vote, commit index) as last written.
    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// Returns the conf state as last written and the log index of the last conf change it
    /// includes (0: the initial configuration).
    pub fn conf_state(&self) -> (&ConfState, u64) {
        (&self.conf_state, self.conf_index)
    }

    /// Replaces the conf state with `cs`, the configuration after applying the committed conf
    /// change at log index `index` (what raft-rs's `RawNode::apply_conf_change` returned), and
    /// fsyncs it with the hard state. A reopened peer starts from it (module docs, "Conf
    /// state").
    ///
    /// # Errors
    ///
    /// [`Error::InconsistentStorage`] (and nothing written) if `index` is not above the
    /// current conf index or is beyond the commit index (only committed conf changes are
    /// applied), or `cs` has no voter, an id 0 or twice, or is a joint configuration;
    /// [`Error::StorageIo`] if writing fails (the old conf state stays in place).
    pub fn set_conf_state(&mut self, cs: ConfState, index: u64) -> Result<()> {
        if index <= self.conf_index || index > self.hard_state.commit {
            return Err(inconsistent(
                &self.dir,
                format!(
                    "conf change at index {index}: the conf index is {} and the commit index {}",
                    self.conf_index, self.hard_state.commit
                ),
            ));
        }
        check_conf_state(&self.dir, &cs)?;
        write_atomic(&self.dir, STATE_FILE, &encode_state(&self.hard_state, &cs, index))?;
        self.conf_state = cs;
        self.conf_index = index;
        Ok(())
    }

    /// Appends `entries` (consecutive indexes, as a raft-rs `Ready` lists them) to the log and
    /// fsyncs it. If the first one's index is at or below the last index, the entries from
    /// that index on are replaced (a follower's conflicting suffix, Raft §5.3): the file is
    /// then rewritten whole, which is rare. An empty slice does nothing.
    ///
    /// # Errors
    ///
    /// [`Error::InconsistentStorage`] (and nothing written) if the entries would leave a gap
    /// after the last index, replace an entry at or below the commit index (Raft §5.4:
    /// committed entries are never overwritten), are not consecutive, or lower the term of the
    /// log (terms never go down along a log, Raft §5.3), or if one entry encodes to 4 GiB or
    /// more; [`Error::StorageIo`] if writing or fsyncing fails (the file is cut back to
    /// its previous length where possible).
    pub fn append(&mut self, entries: &[Entry]) -> Result<()> {
        let Some(first) = entries.first() else { return Ok(()) };
        let last = self.last_index_u64();
        if first.index == 0 || first.index > last + 1 {
            return Err(inconsistent(&self.dir, format!("append at index {} after last index {last}", first.index)));
        }
        if first.index <= self.hard_state.commit {
            return Err(inconsistent(
                &self.dir,
                format!(
                    "append at index {} would replace committed entries (commit {})",
                    first.index, self.hard_state.commit
                ),
            ));
        }
        let prev_term = self.term_at(first.index - 1).unwrap_or(0);
        if first.term < prev_term {
            return Err(inconsistent(
                &self.dir,
                format!("entry {} has term {} after term {prev_term}", first.index, first.term),
            ));
        }
        for pair in entries.windows(2) {
            if pair[1].index != pair[0].index + 1 || pair[1].term < pair[0].term {
                return Err(inconsistent(
                    &self.dir,
                    format!(
                        "appended entry {} (term {}) does not follow entry {} (term {})",
                        pair[1].index, pair[1].term, pair[0].index, pair[0].term
                    ),
                ));
            }
        }
        let mut records = Vec::new();
        for entry in entries {
            encode_record(&self.dir, entry, &mut records)?;
        }
        let keep = (first.index - 1) as usize;
        if first.index <= last {
            let mut bytes = log_header();
            for entry in &self.entries[..keep] {
                encode_record(&self.dir, entry, &mut bytes)?;
            }
            bytes.extend_from_slice(&records);
            write_atomic(&self.dir, LOG_FILE, &bytes)?;
            let path = self.dir.join(LOG_FILE);
            self.log = OpenOptions::new().write(true).open(&path).map_err(io_error(&path))?;
            self.log_len = bytes.len() as u64;
            self.entries.truncate(keep);
        } else {
            self.write_at_end(&records)?;
        }
        self.entries.extend_from_slice(entries);
        Ok(())
    }

    /// Replaces the hard state (term, vote, commit index) and fsyncs it; the conf state and
    /// conf index are kept. raft-rs requires it durable before the messages that depend on it are sent (a
    /// vote, Raft §5.2).
    ///
    /// # Errors
    ///
    /// [`Error::InconsistentStorage`] (and nothing written) if `hs.commit` is beyond the last
    /// index; [`Error::StorageIo`] if writing fails (the old hard state stays in place).
    pub fn set_hardstate(&mut self, hs: HardState) -> Result<()> {
        if hs.commit > self.last_index_u64() {
            return Err(inconsistent(
                &self.dir,
                format!("commit index {} beyond last index {}", hs.commit, self.last_index_u64()),
            ));
        }
        write_atomic(&self.dir, STATE_FILE, &encode_state(&hs, &self.conf_state, self.conf_index))?;
        self.hard_state = hs;
        Ok(())
    }

    /// Sets the commit index of the hard state to `commit` (a raft-rs `LightReady`'s
    /// `commit_index`) and fsyncs it.
    ///
    /// # Errors
    ///
    /// As [`DiskStorage::set_hardstate`].
    pub fn set_commit(&mut self, commit: u64) -> Result<()> {
        let mut hs = self.hard_state.clone();
        hs.commit = commit;
        self.set_hardstate(hs)
    }

    fn write_at_end(&mut self, records: &[u8]) -> Result<()> {
        let path = self.dir.join(LOG_FILE);
        let written = self
            .log
            .seek(SeekFrom::Start(self.log_len))
            .and_then(|_| self.log.write_all(records))
            .and_then(|()| self.log.sync_data());
        if let Err(e) = written {
            // Best effort: a partial record left here would be cut off as a torn tail on the
            // next open anyway.
            let _ = self.log.set_len(self.log_len);
            return Err(io_error(&path)(e));
        }
        self.log_len += records.len() as u64;
        Ok(())
    }

    fn last_index_u64(&self) -> u64 {
        self.entries.len() as u64
    }

    /// The term of entry `index`, 0 for index 0, `None` beyond the log.
    fn term_at(&self, index: u64) -> Option<u64> {
        match index {
            0 => Some(0),
            i => self.entries.get((i - 1) as usize).map(|e| e.term),
        }
    }
}

impl Storage for DiskStorage {
    /// Returns the hard state and conf state as last written.
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state.clone()))
    }

    /// Returns entries `[low, high)`, at least one if any, then as many as fit `max_size`
    /// bytes (raft-rs's `limit_size`); `StorageError::Unavailable` beyond the log.
    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low == 0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if low > high || high > self.last_index_u64() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let mut entries = self.entries[(low - 1) as usize..(high - 1) as usize].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    /// Returns the term of entry `idx` (0 for index 0); `StorageError::Unavailable` beyond the
    /// log.
    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.term_at(idx).ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    /// Returns 1: the log is never compacted.
    fn first_index(&self) -> raft::Result<u64> {
        Ok(1)
    }

    /// Returns the index of the last entry, 0 for an empty log.
    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last_index_u64())
    }

    /// Returns `SnapshotTemporarilyUnavailable`: the log is never compacted, so raft-rs never
    /// needs a snapshot to catch a peer up (a membership snapshot is future work).
    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable))
    }
}

impl fmt::Debug for DiskStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiskStorage")
            .field("dir", &self.dir)
            .field("last_index", &self.last_index_u64())
            .field("hard_state", &self.hard_state)
            .finish()
    }
}

// ---- the meta file ------------------------------------------------------------------------

/// The identity of a storage directory: whose log it is.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Meta {
    id: u64,
    voters: Vec<u64>,
    learners: Vec<u64>,
}

impl Meta {
    fn new(id: u64, voters: &[u64], learners: &[u64]) -> Self {
        let sorted = |ids: &[u64]| {
            let mut ids = ids.to_vec();
            ids.sort_unstable();
            ids
        };
        Meta { id, voters: sorted(voters), learners: sorted(learners) }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = header(META_MAGIC);
        out.extend_from_slice(&self.id.to_le_bytes());
        for ids in [&self.voters, &self.learners] {
            out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            for id in ids {
                out.extend_from_slice(&id.to_le_bytes());
            }
        }
        seal(out)
    }

    fn decode(path: &Path, bytes: &[u8]) -> Result<Self> {
        let mut body = Reader { path, bytes: unseal(path, bytes, META_MAGIC)?, pos: 0 };
        let id = body.u64()?;
        let mut sets = [Vec::new(), Vec::new()];
        for set in &mut sets {
            let n = body.u32()? as usize;
            if n > body.remaining() / 8 {
                return Err(corrupt(path, format!("a set of {n} ids in {} bytes", body.remaining())));
            }
            for _ in 0..n {
                set.push(body.u64()?);
            }
        }
        body.finish()?;
        let [voters, learners] = sets;
        Ok(Meta { id, voters, learners })
    }
}

impl fmt::Display for Meta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft id {} (voters {:?}, learners {:?})", self.id, self.voters, self.learners)
    }
}

// ---- the state file -----------------------------------------------------------------------

fn encode_state(hs: &HardState, cs: &ConfState, conf_index: u64) -> Vec<u8> {
    let mut out = versioned_header(STATE_MAGIC, STATE_VERSION);
    for message in [encode_message(hs), encode_message(cs)] {
        out.extend_from_slice(&(message.len() as u32).to_le_bytes());
        out.extend_from_slice(&message);
    }
    out.extend_from_slice(&conf_index.to_le_bytes());
    seal(out)
}

/// Decodes a state file of version 2, or of version 1 (no conf index: 0).
fn decode_state(path: &Path, bytes: &[u8]) -> Result<(HardState, ConfState, u64)> {
    let version = check_versioned_header(path, bytes, STATE_MAGIC, &[1, STATE_VERSION])?;
    let mut body = Reader { path, bytes: unseal_checked(path, bytes)?, pos: 0 };
    let n = body.u32()? as usize;
    let hs = HardState::parse_from_bytes(body.take(n)?)
        .map_err(|e| corrupt(path, format!("hard state does not decode: {e}")))?;
    let n = body.u32()? as usize;
    let cs = ConfState::parse_from_bytes(body.take(n)?)
        .map_err(|e| corrupt(path, format!("conf state does not decode: {e}")))?;
    let conf_index = if version >= 2 { body.u64()? } else { 0 };
    body.finish()?;
    Ok((hs, cs, conf_index))
}

// ---- the log file -------------------------------------------------------------------------

fn log_header() -> Vec<u8> {
    header(LOG_MAGIC)
}

fn encode_record(dir: &Path, entry: &Entry, out: &mut Vec<u8>) -> Result<()> {
    let payload = encode_message(entry);
    let Ok(len) = u32::try_from(payload.len()) else {
        return Err(inconsistent(dir, format!("entry {} encodes to {} bytes", entry.index, payload.len())));
    };
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&record_crc(len, &payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(())
}

fn record_crc(len: u32, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&len.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Returns the entries of whole, CRC-checked records and the length of the file up to the
/// end of the last of them; decoding stops at the first record that is cut short, has a zero
/// length or fails its CRC (a torn tail).
fn decode_log(path: &Path, bytes: &[u8]) -> Result<(Vec<Entry>, usize)> {
    check_header(path, bytes, LOG_MAGIC)?;
    let mut entries = Vec::new();
    let mut pos = HEADER_BYTES;
    while let Some(head) = bytes.get(pos..pos + RECORD_HEADER_BYTES) {
        let len = u32::from_le_bytes(head[..4].try_into().expect("a 4-byte slice"));
        let crc = u32::from_le_bytes(head[4..].try_into().expect("a 4-byte slice"));
        let start = pos + RECORD_HEADER_BYTES;
        let Some(payload) = bytes.get(start..start + len as usize) else { break };
        if len == 0 || record_crc(len, payload) != crc {
            break;
        }
        let entry = Entry::parse_from_bytes(payload)
            .map_err(|e| corrupt(path, format!("record at byte {pos} passes its CRC but does not decode: {e}")))?;
        entries.push(entry);
        pos = start + len as usize;
    }
    Ok((entries, pos))
}

/// Checks what raft-rs assumes of a restored log and would panic on otherwise.
fn check_log(dir: &Path, entries: &[Entry], hs: &HardState, cs: &ConfState, conf_index: u64) -> Result<()> {
    let mut prev_term = 0;
    for (i, entry) in entries.iter().enumerate() {
        let expected = i as u64 + 1;
        if entry.index != expected {
            return Err(inconsistent(dir, format!("log record {i} holds index {}, expected {expected}", entry.index)));
        }
        if entry.term < prev_term {
            return Err(inconsistent(
                dir,
                format!("entry {} has term {} after term {prev_term}", entry.index, entry.term),
            ));
        }
        prev_term = entry.term;
    }
    if hs.commit > entries.len() as u64 {
        return Err(inconsistent(
            dir,
            format!("commit index {} beyond the log's last index {}", hs.commit, entries.len()),
        ));
    }
    if conf_index > hs.commit {
        return Err(inconsistent(dir, format!("conf index {conf_index} beyond the commit index {}", hs.commit)));
    }
    check_conf_state(dir, cs)
}

/// Checks that `cs` is a configuration raft-rs can restore and that this crate writes: at
/// least one voter, no id 0 or twice, not joint.
fn check_conf_state(dir: &Path, cs: &ConfState) -> Result<()> {
    let mut ids: Vec<u64> = cs.voters.iter().chain(&cs.learners).copied().collect();
    ids.sort_unstable();
    let twice = ids.windows(2).any(|w| w[0] == w[1]);
    if cs.voters.is_empty() || twice || ids.contains(&0) {
        return Err(inconsistent(dir, format!("conf state {cs:?} has no voter, id 0 or an id twice")));
    }
    if !cs.voters_outgoing.is_empty() || !cs.learners_next.is_empty() || cs.auto_leave {
        return Err(inconsistent(dir, format!("conf state {cs:?} is a joint configuration (unsupported)")));
    }
    Ok(())
}

// ---- files --------------------------------------------------------------------------------

/// Builds a new storage directory under a sibling staging name and renames it to `dir`.
fn create(dir: &Path, meta: &Meta) -> Result<()> {
    let Some(name) = dir.file_name() else {
        return Err(inconsistent(dir, "the path names no directory".to_string()));
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::create_dir_all(parent).map_err(io_error(parent))?;
    let staging = parent.join(format!(".{}.init", name.to_string_lossy()));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io_error(&staging))?;
    }
    fs::create_dir(&staging).map_err(io_error(&staging))?;
    let conf = ConfState { voters: meta.voters.clone(), learners: meta.learners.clone(), ..ConfState::default() };
    write_atomic(&staging, LOG_FILE, &log_header())?;
    write_atomic(&staging, STATE_FILE, &encode_state(&HardState::default(), &conf, 0))?;
    write_atomic(&staging, META_FILE, &meta.encode())?;
    if dir.exists() {
        fs::remove_dir(dir).map_err(io_error(dir))?;
    }
    fs::rename(&staging, dir).map_err(io_error(dir))?;
    sync_dir(parent)
}

fn is_empty_dir(dir: &Path) -> Result<bool> {
    let mut entries = fs::read_dir(dir).map_err(io_error(dir))?;
    Ok(entries.next().is_none())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(io_error(path))
}

/// Replaces `dir/name` with `bytes`: write a temporary file, fsync it, rename it over the
/// file, fsync the directory.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let mut file = File::create(&tmp).map_err(io_error(&tmp))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(io_error(&tmp))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(io_error(&path))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error(dir))
}

// ---- framing ------------------------------------------------------------------------------

fn encode_message(message: &impl protobuf::Message) -> Vec<u8> {
    message.write_to_bytes().expect("a proto3 message has no required field, so it always encodes")
}

fn header(magic: [u8; 8]) -> Vec<u8> {
    versioned_header(magic, VERSION)
}

fn versioned_header(magic: [u8; 8], version: u32) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out
}

fn check_header(path: &Path, bytes: &[u8], magic: [u8; 8]) -> Result<()> {
    check_versioned_header(path, bytes, magic, &[VERSION]).map(|_| ())
}

/// Checks the magic and that the version is one of `readable` (the last is the newest);
/// returns the version.
fn check_versioned_header(path: &Path, bytes: &[u8], magic: [u8; 8], readable: &[u32]) -> Result<u32> {
    if bytes.len() < HEADER_BYTES || bytes[..8] != magic {
        return Err(corrupt(path, format!("no {} header", String::from_utf8_lossy(&magic))));
    }
    let version = u32::from_le_bytes(bytes[8..HEADER_BYTES].try_into().expect("a 4-byte slice"));
    if !readable.contains(&version) {
        let newest = readable.last().copied().unwrap_or(VERSION);
        return Err(corrupt(path, format!("format version {version}, this build reads {newest}")));
    }
    Ok(version)
}

/// Appends the CRC of `out` to it.
fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks the header and trailing CRC of a sealed file and returns the body between them.
fn unseal<'a>(path: &Path, bytes: &'a [u8], magic: [u8; 8]) -> Result<&'a [u8]> {
    check_header(path, bytes, magic)?;
    unseal_checked(path, bytes)
}

/// Checks the trailing CRC of a sealed file whose header was checked; returns the body.
fn unseal_checked<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a [u8]> {
    let Some(split) = bytes.len().checked_sub(4).filter(|&s| s >= HEADER_BYTES) else {
        return Err(corrupt(path, "too short for its CRC".to_string()));
    };
    let (sealed, crc) = bytes.split_at(split);
    let crc = u32::from_le_bytes(crc.try_into().expect("a 4-byte slice"));
    if crc32fast::hash(sealed) != crc {
        return Err(corrupt(path, "CRC mismatch".to_string()));
    }
    Ok(&sealed[HEADER_BYTES..])
}

/// Reads a sealed file's body; every read past the end is a [`Error::CorruptStorage`].
struct Reader<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let Some(bytes) = self.bytes.get(self.pos..self.pos.saturating_add(n)) else {
            return Err(corrupt(self.path, format!("{n} bytes wanted at byte {} of {}", self.pos, self.bytes.len())));
        };
        self.pos += n;
        Ok(bytes)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("a 4-byte slice")))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("an 8-byte slice")))
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn finish(&self) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(corrupt(self.path, format!("{n} bytes left over"))),
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::StorageIo { path: path.to_path_buf(), source }
}

fn corrupt(path: &Path, reason: String) -> Error {
    Error::CorruptStorage { path: path.to_path_buf(), reason }
}

fn inconsistent(dir: &Path, reason: String) -> Error {
    Error::InconsistentStorage { dir: dir.to_path_buf(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use raft::storage::MemStorage;

    const ID: u64 = 1;
    const VOTERS: [u64; 3] = [1, 3, 5];
    const LEARNERS: [u64; 1] = [2];

    fn open(dir: &Path) -> Result<DiskStorage> {
        DiskStorage::open(dir, ID, &VOTERS, &LEARNERS)
    }

    fn entry(index: u64, term: u64) -> Entry {
        let data = format!("command {index} of term {term}").into_bytes().into();
        Entry { index, term, data, ..Entry::default() }
    }

    fn all_entries(s: &impl Storage) -> Vec<Entry> {
        let last = s.last_index().unwrap();
        if last == 0 {
            return Vec::new();
        }
        s.entries(1, last + 1, None, GetEntriesContext::empty(false)).unwrap()
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
        HardState { term, vote, commit, ..HardState::default() }
    }

    fn log_len(dir: &Path) -> u64 {
        fs::metadata(dir.join(LOG_FILE)).unwrap().len()
    }

    #[test]
    fn a_new_directory_starts_empty_and_reopens_with_what_was_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("raft");
        let mut s = open(&dir).unwrap();
        assert_eq!(
            s.recovery(),
            Recovery { created: true, last_index: 0, term: 0, commit: 0, conf_index: 0, dropped_tail_bytes: 0 }
        );
        let state = s.initial_state().unwrap();
        assert_eq!(state.hard_state, HardState::default());
        assert_eq!(
            (state.conf_state.voters.as_slice(), state.conf_state.learners.as_slice()),
            (&VOTERS[..], &LEARNERS[..])
        );
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap(), s.term(0).unwrap()), (1, 0, 0));

        s.append(&[entry(1, 1), entry(2, 1)]).unwrap();
        s.append(&[entry(3, 2)]).unwrap();
        s.set_hardstate(hard_state(2, 3, 1)).unwrap();
        s.set_commit(3).unwrap();
        drop(s);

        let s = open(&dir).unwrap();
        assert_eq!(
            s.recovery(),
            Recovery { created: false, last_index: 3, term: 2, commit: 3, conf_index: 0, dropped_tail_bytes: 0 }
        );
        assert_eq!(all_entries(&s), vec![entry(1, 1), entry(2, 1), entry(3, 2)]);
        let state = s.initial_state().unwrap();
        assert_eq!(state.hard_state, hard_state(2, 3, 3));
        assert_eq!(state.conf_state.voters, VOTERS);
        assert_eq!(state.conf_state.learners, LEARNERS);
        assert_eq!((s.term(2).unwrap(), s.term(3).unwrap()), (1, 2));
        let ctx = || GetEntriesContext::empty(false);
        assert!(matches!(s.term(4), Err(raft::Error::Store(StorageError::Unavailable))));
        assert!(matches!(s.entries(0, 2, None, ctx()), Err(raft::Error::Store(StorageError::Compacted))));
        assert!(matches!(s.entries(1, 5, None, ctx()), Err(raft::Error::Store(StorageError::Unavailable))));
        assert_eq!(s.entries(2, 4, Some(0), ctx()).unwrap(), vec![entry(2, 1)], "at least one entry");
        assert!(matches!(s.snapshot(1, 3), Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable))));
        // An existing empty directory is a first start too.
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        assert!(open(&empty).unwrap().recovery().created);
    }

    /// Raft §5.3: a conflicting entry and all that follow it are replaced; §5.4: committed
    /// entries never are.
    #[test]
    fn an_append_that_conflicts_replaces_the_suffix_and_bad_appends_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("raft");
        let mut s = open(&dir).unwrap();
        s.append(&(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>()).unwrap();
        s.set_commit(2).unwrap();
        s.append(&[entry(3, 2), entry(4, 2)]).unwrap();
        let expected = vec![entry(1, 1), entry(2, 1), entry(3, 2), entry(4, 2)];
        assert_eq!(all_entries(&s), expected);

        let refused = |s: &mut DiskStorage, entries: &[Entry], what: &str| {
            let err = s.append(entries).unwrap_err();
            assert!(matches!(err, Error::InconsistentStorage { .. }), "{err}");
            assert!(err.to_string().contains(what), "{err}");
        };
        refused(&mut s, &[entry(2, 3)], "would replace committed entries (commit 2)");
        refused(&mut s, &[entry(6, 2)], "append at index 6 after last index 4");
        refused(&mut s, &[entry(5, 1)], "entry 5 has term 1 after term 2");
        refused(&mut s, &[entry(5, 2), entry(7, 2)], "does not follow");
        refused(&mut s, &[entry(5, 3), entry(6, 2)], "does not follow");
        assert!(s.set_hardstate(hard_state(2, 0, 5)).unwrap_err().to_string().contains("beyond last index 4"));
        s.append(&[]).unwrap();
        assert_eq!(all_entries(&s), expected, "a refused append changes nothing");
        drop(s);

        let s = open(&dir).unwrap();
        assert_eq!(all_entries(&s), expected);
        assert_eq!(s.hard_state(), &hard_state(0, 0, 2));
    }

    #[test]
    fn a_torn_tail_reopens_with_the_good_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("raft");
        let mut s = open(&dir).unwrap();
        for i in 1..=3 {
            s.append(&[entry(i, 1)]).unwrap();
        }
        s.set_commit(1).unwrap();
        let good = log_len(&dir);
        s.append(&[entry(4, 1)]).unwrap();
        let full = log_len(&dir);
        drop(s);
        let log = || OpenOptions::new().write(true).open(dir.join(LOG_FILE)).unwrap();
        let three = vec![entry(1, 1), entry(2, 1), entry(3, 1)];

        // Cut inside the last record's header, then inside its payload.
        for cut in [good + 5, full - 1] {
            log().set_len(cut).unwrap();
            let mut s = open(&dir).unwrap();
            assert_eq!(s.recovery().dropped_tail_bytes, cut - good);
            assert_eq!(s.recovery().last_index, 3);
            assert_eq!(all_entries(&s), three);
            assert_eq!(log_len(&dir), good, "the torn tail is cut off on disk");
            s.append(&[entry(4, 1)]).unwrap();
            drop(s);
            assert_eq!(open(&dir).unwrap().recovery().dropped_tail_bytes, 0);
        }

        // A flipped byte in the last record's payload fails its CRC.
        let mut bytes = fs::read(dir.join(LOG_FILE)).unwrap();
        bytes[full as usize - 2] ^= 0x40;
        fs::write(dir.join(LOG_FILE), &bytes).unwrap();
        let s = open(&dir).unwrap();
        assert_eq!((s.recovery().dropped_tail_bytes, s.recovery().last_index), (full - good, 3));
        drop(s);

        // Zeros after the end (a file extended but never written) are no record: the CRC covers
        // the length, so a zero length with a zero CRC does not pass.
        let mut file = OpenOptions::new().append(true).open(dir.join(LOG_FILE)).unwrap();
        file.write_all(&[0; 4096]).unwrap();
        drop(file);
        let s = open(&dir).unwrap();
        assert_eq!((s.recovery().dropped_tail_bytes, s.recovery().last_index), (4096, 3));
        assert_eq!(all_entries(&s), three);
    }

    #[test]
    fn a_lost_committed_record_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("raft");
        let mut s = open(&dir).unwrap();
        s.append(&[entry(1, 1), entry(2, 1), entry(3, 1)]).unwrap();
        s.set_hardstate(hard_state(1, 1, 3)).unwrap();
        drop(s);
        let len = log_len(&dir);
        OpenOptions::new().write(true).open(dir.join(LOG_FILE)).unwrap().set_len(len - 3).unwrap();
        let err = open(&dir).unwrap_err();
        assert!(matches!(err, Error::InconsistentStorage { .. }), "{err}");
        assert!(err.to_string().contains("commit index 3 beyond the log's last index 2"), "{err}");
        assert_eq!(log_len(&dir), len - 3, "nothing is written when a check fails");
    }

    /// Every single flipped byte and every truncation of the hard-state and meta files is an
    /// error, never a panic and never a silently different state.
    #[test]
    fn a_damaged_hard_state_or_meta_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("raft");
        let mut s = open(&dir).unwrap();
        s.append(&[entry(1, 1), entry(2, 2)]).unwrap();
        s.set_hardstate(hard_state(2, 3, 2)).unwrap();
        drop(s);
        for name in [STATE_FILE, META_FILE] {
            let path = dir.join(name);
            let good = fs::read(&path).unwrap();
            let mut damaged = Vec::new();
            for i in 0..good.len() {
                let mut bytes = good.clone();
                bytes[i] ^= 0x55;
                damaged.push(bytes);
            }
            damaged.extend((0..good.len()).map(|n| good[..n].to_vec()));
            for bytes in damaged {
                fs::write(&path, &bytes).unwrap();
                match open(&dir) {
                    Err(Error::CorruptStorage { path: p, reason }) => assert_eq!(p, path, "{reason}"),
                    other => panic!("{name} {bytes:?}: {other:?}"),
                }
            }
            fs::write(&path, &good).unwrap();
        }
        let mut bytes = fs::read(dir.join(STATE_FILE)).unwrap();
        bytes[8] = 3; // version 3, CRC fixed up
        let n = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..n]);
        bytes[n..].copy_from_slice(&crc.to_le_bytes());
        fs::write(dir.join(STATE_FILE), &bytes).unwrap();
        let err = open(&dir).unwrap_err().to_string();
        assert!(err.contains("format version 3, this build reads 2"), "{err}");
    }

    /// A conf change committed at index 2 demotes voter 5: the conf state and its index
    /// come back on reopen; a conf index beyond the commit index or not above the current
    /// one, and a joint or voterless conf state, are refused; a version-1 state file (no conf
    /// index) reads as conf index 0.
    #[test]
    fn the_conf_state_and_its_index_are_kept_across_reopens() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("raft");
        let mut s = open(&dir).unwrap();
        s.append(&[entry(1, 1), entry(2, 1), entry(3, 1)]).unwrap();
        s.set_hardstate(hard_state(1, 1, 2)).unwrap();
        let demoted = ConfState { voters: vec![1, 3], learners: vec![2, 5], ..ConfState::default() };
        let refused = |s: &mut DiskStorage, cs: &ConfState, index: u64, what: &str| {
            let err = s.set_conf_state(cs.clone(), index).unwrap_err();
            assert!(matches!(err, Error::InconsistentStorage { .. }), "{err}");
            assert!(err.to_string().contains(what), "{err}");
        };
        refused(&mut s, &demoted, 3, "the conf index is 0 and the commit index 2");
        let joint = ConfState { voters_outgoing: vec![1, 3, 5], ..demoted.clone() };
        refused(&mut s, &joint, 2, "joint configuration");
        refused(&mut s, &ConfState { learners: vec![1, 2, 3, 5], ..ConfState::default() }, 2, "no voter");
        s.set_conf_state(demoted.clone(), 2).unwrap();
        refused(&mut s, &demoted, 2, "the conf index is 2");
        s.set_commit(3).unwrap();
        assert_eq!(s.conf_state(), (&demoted, 2), "a hard state write keeps the conf state");
        drop(s);

        let s = open(&dir).unwrap();
        assert_eq!((s.recovery().conf_index, s.recovery().commit), (2, 3));
        assert_eq!(s.initial_state().unwrap().conf_state, demoted);
        drop(s);

        // A version-1 state file, as the previous build wrote it.
        let mut v1 = versioned_header(STATE_MAGIC, 1);
        let initial = ConfState { voters: VOTERS.to_vec(), learners: LEARNERS.to_vec(), ..ConfState::default() };
        for message in [encode_message(&hard_state(1, 1, 3)), encode_message(&initial)] {
            v1.extend_from_slice(&(message.len() as u32).to_le_bytes());
            v1.extend_from_slice(&message);
        }
        fs::write(dir.join(STATE_FILE), seal(v1)).unwrap();
        let s = open(&dir).unwrap();
        assert_eq!(s.conf_state(), (&initial, 0));
        assert_eq!(s.hard_state(), &hard_state(1, 1, 3));
    }

    #[test]
    fn a_directory_of_another_node_or_group_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("raft");
        open(&dir).unwrap().append(&[entry(1, 1)]).unwrap();
        let err = DiskStorage::open(&dir, 3, &VOTERS, &LEARNERS).unwrap_err();
        assert!(matches!(err, Error::ForeignStorage { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("belongs to raft id 1 (voters [1, 3, 5], learners [2]), not to raft id 3"), "{msg}");
        let err = DiskStorage::open(&dir, ID, &[1, 3], &[2, 5]).unwrap_err().to_string();
        assert!(err.contains("not to raft id 1 (voters [1, 3], learners [2, 5])"), "{err}");
        // The order the sets are given in does not matter.
        let s = DiskStorage::open(&dir, ID, &[5, 3, 1], &LEARNERS).unwrap();
        assert_eq!(s.last_index().unwrap(), 1);
    }

    #[test]
    fn a_foreign_or_half_made_directory_is_handled_without_harm() {
        let tmp = tempfile::tempdir().unwrap();
        // A non-empty directory without a meta file is someone else's: refused, untouched.
        let other = tmp.path().join("other");
        fs::create_dir(&other).unwrap();
        fs::write(other.join("data"), b"not ours").unwrap();
        let err = open(&other).unwrap_err();
        assert!(matches!(err, Error::InconsistentStorage { .. }), "{err}");
        assert_eq!(fs::read(other.join("data")).unwrap(), b"not ours");
        // A staging directory left by a crash during creation is replaced.
        let dir = tmp.path().join("raft");
        fs::create_dir(tmp.path().join(".raft.init")).unwrap();
        fs::write(tmp.path().join(".raft.init").join(META_FILE), b"half").unwrap();
        let s = open(&dir).unwrap();
        assert!(s.recovery().created);
        assert!(!tmp.path().join(".raft.init").exists());
        drop(s);
        // A temporary file left by a crash during a replacement is removed; the old file stays.
        fs::write(dir.join(format!("{STATE_FILE}{TMP_SUFFIX}")), b"half").unwrap();
        assert_eq!(open(&dir).unwrap().hard_state(), &HardState::default());
        assert!(!dir.join(format!("{STATE_FILE}{TMP_SUFFIX}")).exists());
    }

    /// One step of the round trip below: append `len` entries starting `back` entries before
    /// the end (clamped to after the commit index), with terms raised by `term_step`; then
    /// commit `commit_step` more entries; then maybe reopen.
    #[derive(Clone, Debug)]
    struct Step {
        back: u64,
        len: u64,
        term_step: u64,
        commit_step: u64,
        reopen: bool,
    }

    fn step() -> impl Strategy<Value = Step> {
        (0..6u64, 0..5u64, 0..3u64, 0..3u64, proptest::bool::weighted(0.2))
            .prop_map(|(back, len, term_step, commit_step, reopen)| Step { back, len, term_step, commit_step, reopen })
    }

    fn same_answers(disk: &DiskStorage, mem: &MemStorage) {
        let last = mem.last_index().unwrap();
        assert_eq!(disk.last_index().unwrap(), last);
        assert_eq!(disk.first_index().unwrap(), mem.first_index().unwrap());
        assert_eq!(all_entries(disk), all_entries(mem));
        for i in 0..=last {
            assert_eq!(disk.term(i).unwrap(), mem.term(i).unwrap(), "term({i})");
        }
        assert!(disk.term(last + 1).is_err() && mem.term(last + 1).is_err());
        assert_eq!(disk.initial_state().unwrap().hard_state, mem.initial_state().unwrap().hard_state);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// A DiskStorage answers `entries`, `term`, `first_index`, `last_index` and the hard
        /// state like raft-rs's MemStorage after the same appends (with suffix replacement)
        /// and commits, before and after every reopen.
        #[test]
        fn appends_and_reopens_answer_like_mem_storage(steps in proptest::collection::vec(step(), 1..16)) {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("raft");
            let mut disk = open(&dir).unwrap();
            let mem = MemStorage::new_with_conf_state((VOTERS.to_vec(), LEARNERS.to_vec()));
            for step in steps {
                let last = mem.last_index().unwrap();
                let commit = mem.initial_state().unwrap().hard_state.commit;
                let start = (last + 1 - step.back.min(last)).max(commit + 1);
                let term = mem.term(start - 1).unwrap() + step.term_step;
                let entries: Vec<Entry> = (start..start + step.len).map(|i| entry(i, term)).collect();
                disk.append(&entries).unwrap();
                mem.wl().append(&entries).unwrap();
                let last = mem.last_index().unwrap();
                let commit = (commit + step.commit_step).min(last);
                disk.set_commit(commit).unwrap();
                mem.wl().mut_hard_state().set_commit(commit);
                same_answers(&disk, &mem);
                if step.reopen {
                    drop(disk);
                    disk = open(&dir).unwrap();
                    prop_assert_eq!(disk.recovery().dropped_tail_bytes, 0);
                    same_answers(&disk, &mem);
                }
            }
        }
    }
}

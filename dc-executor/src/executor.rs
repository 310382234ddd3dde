//! The stateless executor of a sub-transaction (RedT §4.2, Algorithm 2; docs/design.md §2).
//!
//! `execute` runs phase 1 in one DC: for every node holding a touched replica it reserves a
//! redo entry (FAA on the ring tail), then posts one doorbell batch that WRITEs the entry
//! with status `Intent` (so every lock it is about to take is traceable to the
//! transaction), takes the locks of each record with one masked compare-and-swap (No-Wait:
//! a conflict aborts at once) and READs each record. It then runs the procedure on the
//! values read, WRITEs the entry again with the writes and the versions seen (status
//! `Logged`), sets the entry's vote word from none to commit by CAS, and returns a
//! [`Vote`].
//!
//! # Reads of keys that have no record
//!
//! A read of a key with no record creates none (a client's reads must not fill the heap),
//! nor does a write that leaves the key missing — a delete, or any access whose procedure
//! says it does not create ([`Procedure::creates`]), whose writes must then be all zero bytes
//! and change nothing. Such an access reads what a fresh record holds (every cell zero at
//! version 0) and locks the
//! key's *absence* in its place: the lock group [`crate::Index::absent_lock`] of the key's
//! home bucket's word in the absent-key lock area ([`crate::Layout::absent_lock`]), shared, in
//! the same doorbell batch and under the same No-Wait rules as a record's read lock, held
//! until the decision and released by the same fetch-and-add (its lock intent in the redo
//! entry names the word, so phase 2, recovery and a restarted executor release it as any
//! other). Serializability needs what the record's read lock gave: no transaction may write
//! the key between the read and the reader's decision. A key comes into existence only
//! through [`crate::DcHandle::create_record`], which publishes it while holding that group
//! exclusively and refuses (a lock-conflict abort vote) while a reader holds it; and the
//! reader, once its shared lock is granted, looks the key up again and votes abort on a
//! lock conflict if it now exists. So either the creator published before the reader's lock
//! (the second lookup sees the record) or the reader's lock came first (the creation is
//! refused until the decision): a read of a missing key that a concurrent transaction then
//! inserts is always detected, as a write to a read-locked record is. Keys sharing a word and
//! group share the lock (a false conflict at worst); a second absent key of one
//! sub-transaction on the same word and group relies on the first's lock (lock intent with no
//! lock bits), since a group admits only [`crate::lock::MAX_READERS`] readers. Replicas a
//! commit left behind and rebuilt learners create records without the lock, as they write
//! existing records without the record locks: their vote is stale until caught up.
//!
//! # Range reads
//!
//! A [`crate::RangeRead`] piece is run after every point access is located and created: the
//! executor scans its partition's B+-tree on the replica node (`ordered.rs`) from `from`
//! until `limit` entries hold rows or the range or the tree ends — when the range holds more
//! than `limit` keys it READs their records to count the rows (one doorbell batch per chunk
//! of entries); else it takes them all — and adds to the node's lock
//! batch a shared lock on each entry's read groups and gap group ([`crate::GAP_GROUP`]), and
//! on the gap group of the next key, or of the tree's end word when none follows (next-key
//! locking). An entry whose record holds no row ([`crate::record::RecordView::is_absent`]:
//! an aborted insert's fresh record, or a deleted key a range reader kept in the tree) is
//! locked like the others but does not count toward the limit; a piece that passes
//! [`MAX_RANGE_ENTRIES`] entries votes abort. Records are READ again in the lock batch. Once
//! the locks are granted it scans the tree again and votes abort on a lock conflict if the
//! keys changed (an insert that published in between held that gap exclusively and has let go
//! of it since) or if an entry's record gained or lost its row since the first READ; after
//! that no key can appear in the range until the decision, since an insert takes its
//! successor's gap exclusively ([`crate::DcHandle::create_record`]), and so does a write that
//! brings a deleted key back ([`crate::OrderedIndex::relink`]). Each row is voted as its own
//! item ([`ItemVote::row`]), so replicas that disagree on the rows disagree on the items and
//! the coordinator's ¾ rule compares them as it compares point reads.
//!
//! `finish` runs phase 2 from the redo entries alone (the executor keeps no state between
//! the two): on commit it marks each entry `Committed` with the commit timestamp, WRITEs
//! each new cell value whose version is older than `cts` (Thomas write rule), bumps the
//! update counters and releases the locks; on abort it marks the entries `Aborted` and
//! releases the locks. A committed entry that clears a record of an ordered table (a delete)
//! takes the key out of its tree before it releases that record (`ordered.rs`, "Deletes").

use crate::dc::{Created, DcHandle};
use crate::deleted::{DeletedFate, DeletedQueue, DeletedRecord};
use crate::error::{Error, Result};
use crate::hlc::Hlc;
use crate::lock::{self, LockConflictKind, LockOutcome};
use crate::ordered::GAP_GROUP;
use crate::procedure::{Procedure, RangeRead, RangeRow, ReadView, UserAbort, Write};
use crate::record::{counter_increment, lock_word};
use crate::record::{encode_cell, CellVersion, RecordLayout};
use crate::ring::{self, Change, EntryStatus, LockIntent, RedoEntry, RingWriter, VoteCode, VoteState, VoteWord};
use crate::verbs::DoorbellBatch;
use redt_proto::{Cts, DcId, Epoch, NodeId, Offset, TableId, TxnId};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The coordinator's decision, as recorded by [`Executor::record`] and applied by
/// [`Executor::finish`] (the protocol's one decision type, from `redt-proto`).
pub use redt_proto::Decision;

/// One access of the procedure that this DC holds, and the node holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalAccess {
    /// Index into [`Procedure::accesses`].
    pub access: usize,
    /// Node of this DC holding the replica.
    pub node: NodeId,
}

/// The part of a transaction one DC runs.
#[derive(Clone, Debug)]
pub struct SubTxn {
    /// The transaction.
    pub txn: TxnId,
    /// Topology epoch the coordinator planned with.
    pub epoch: Epoch,
    /// Coordinator node.
    pub coordinator: NodeId,
    /// The coordinator's HLC reading at start (recorded in the redo entries: the base of the
    /// phase-1 deadline, of recovery timeouts and of the commit timestamp).
    pub start: Cts,
    /// Every DC taking part (recorded in the redo entries for recovery).
    pub participants: Vec<DcId>,
    /// Every partition the transaction touches, ascending (recorded for recovery).
    pub partitions: Vec<redt_proto::PartitionId>,
    /// The procedure and its parameters.
    pub procedure: Arc<dyn Procedure>,
    /// The accesses held in this DC.
    pub local: Vec<LocalAccess>,
}

/// Why a sub-transaction voted abort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// A lock was held in a conflicting mode (No-Wait).
    LockConflict {
        /// The access whose lock was refused.
        access: usize,
        /// Which lock refused it.
        kind: crate::lock::LockConflictKind,
    },
    /// A record does not exist (and the access does not create it).
    NotFound {
        /// The access.
        access: usize,
    },
    /// The procedure aborted itself.
    User(String),
    /// A redo ring stayed full past the back-pressure limit.
    RingFull(NodeId),
    /// The record heap of a replica node is full: a record the sub-transaction writes could
    /// not be created there (nothing was created, locked or reserved).
    HeapFull(NodeId),
    /// The hash index of a replica node has no free slot for a record the sub-transaction
    /// writes (the record was allocated but not published; nothing was locked or reserved).
    IndexFull(NodeId),
    /// A recoverer fenced the vote word before this executor voted.
    Fenced,
    /// The replica node's epoch floor is above the transaction's epoch: the node serves (or
    /// served) a snapshot copy of a newer epoch, and no phase 1 of an older one may write it
    /// any more ([`crate::Layout::epoch_floor_offset`]).
    StaleEpoch {
        /// The replica node.
        node: NodeId,
        /// Its epoch floor.
        floor: Epoch,
    },
    /// A record the sub-transaction writes was created after a delete of its key was freed,
    /// and the transaction started before that (`deleted.rs`): a late copy of a phase 1 whose
    /// transaction was decided long ago, which must not write over the freed key's past.
    Superseded {
        /// The access.
        access: usize,
    },
    /// A CHECK failed ([`crate::VersionCheck`]): under its read lock, the cell of `access` on
    /// `node` was not at the version the procedure expects (older: the replica lags; newer: a
    /// write committed since the transaction's versioned read).
    StaleRead {
        /// The access.
        access: usize,
        /// The replica node whose version differs.
        node: NodeId,
    },
}

/// Per-access part of a vote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemVote {
    /// Index into [`Procedure::accesses`].
    pub access: usize,
    /// Node holding the replica.
    pub node: NodeId,
    /// `(cell, version)` for every cell read or written, ascending by cell.
    pub versions: Vec<(u16, CellVersion)>,
    /// `(cell, value)` for every cell read, ascending by cell.
    pub values: Vec<(u16, Vec<u8>)>,
    /// The key had no record (a read of an absent key, `Access::upsert` without writes): the
    /// values and versions are a fresh record's, every cell zero at version 0.
    pub absent: bool,
    /// For a row of a range read ([`crate::RangeRead`]; `access` is the range's): the row's
    /// key. `None` for a point access. A range read gives one item per row, in key order.
    pub row: Option<u64>,
}

/// Where a redo entry of the transaction lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef {
    /// Node whose ring holds it.
    pub node: NodeId,
    /// Ring index (monotonic slot number) of its first slot.
    pub index: u64,
    /// Slots reserved for it.
    pub slots: u64,
}

/// An executor's answer to phase 1 (RedT §4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vote {
    /// The transaction.
    pub txn: TxnId,
    /// `None` for a commit vote, else why it aborted.
    pub abort: Option<AbortReason>,
    /// Versions and values of the local accesses (empty on abort).
    pub items: Vec<ItemVote>,
    /// The executor's hybrid-logical-clock reading; `cts` is chosen above it.
    pub hlc: Cts,
    /// The redo entries written (each must see `finish`; empty when nothing stays locked).
    pub entries: Vec<EntryRef>,
}

impl Vote {
    /// An abort vote of `txn` for `reason`, at HLC reading `hlc`: no items, no entries.
    pub fn aborted(txn: TxnId, hlc: Cts, reason: AbortReason) -> Vote {
        Vote { txn, abort: Some(reason), items: Vec::new(), hlc, entries: Vec::new() }
    }

    /// Whether this is a commit vote.
    pub fn is_commit(&self) -> bool {
        self.abort.is_none()
    }
}

/// How a catch-up source finishes its entries ([`Executor::finish_owing`]): each entry's
/// catch-up mask, and the commit timestamp an aborted source keeps.
type Owing<'a> = (&'a dyn Fn(&RedoEntry) -> u8, Cts);

/// A record found retired but still indexed while locking (its retirer died before it
/// settled it): node, table, key, offset.
type RetiredRecord = (NodeId, redt_proto::TableId, u64, Offset);

/// The access whose lock was refused, and which lock refused it.
type Conflict = (usize, LockConflictKind);

/// A record being worked on during `execute`.
struct Held {
    access: usize,
    node: NodeId,
    /// The record's offset; for an absent key, the absent-key lock word less
    /// [`crate::record::LOCK_WORD`], so that `lock_word(record)` is the word locked.
    record: Offset,
    /// The key has no record: the lock is on the key's absence (`Layout::absent_lock`) and
    /// the values read are a fresh record's (zero, version 0), built here, not READ.
    absent: bool,
    rl_table: redt_proto::TableId,
    key: u64,
    cells: u64,
    shared_groups: u16,
    exclusive_groups: u16,
    cas: Option<lock::LockCas>,
    /// The record's gap group was held exclusively when its locks were taken: an insert of
    /// the key below it, or a committed delete taking its key out of the tree
    /// ([`crate::OrderedIndex::unlink`]).
    gap_taken: bool,
    image: Vec<u8>,
    /// What the lock is for.
    role: Role,
}

/// What a [`Held`] lock is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A planned access to one key (present or absent).
    Point,
    /// A row of a range read: its cells read share-locked, and the gap below it.
    Row,
    /// The gap past a range read's last row: the next key's gap group, or the tree's end word.
    Gap,
}

/// A range read's piece on one node, as first scanned (to check it again once locked).
struct Scanned {
    node: NodeId,
    access: usize,
    tree: Arc<crate::BTree>,
    range: RangeRead,
    /// The keys of the entries and of the next key (if any), in order.
    keys: Vec<u64>,
    /// Per entry, whether its record held a row when scanned (`None`: not READ, since the
    /// range holds no more keys than its limit).
    live: Vec<Option<bool>>,
    /// The [`Held`] items of the entries, in order.
    held: std::ops::Range<usize>,
}

/// How long after its commit timestamp a deleted record may be freed by default
/// (`deleted.rs`): twice the 30 s a catch-up's shipper tries before it gives up.
pub const DELETED_GRACE: Duration = Duration::from_secs(60);

/// Most entries one range read's piece passes, rows and keys without a row together
/// ([`crate::record::RecordView::is_absent`]: deleted, or never written): a piece that meets
/// more before its `limit` rows votes abort ([`AbortReason::User`]) rather than lock them all.
pub const MAX_RANGE_ENTRIES: usize = 4 * crate::ordered::MAX_RANGE_ROWS as usize;

/// What [`range_keys`] found: the entries `(key, record)` of the piece, whether each record
/// held a row, and the entry after them.
struct RangeKeys {
    entries: Vec<(u64, u64)>,
    live: Vec<Option<bool>>,
    next: Option<(u64, u64)>,
}

/// The entries of `range` in `tree` on `node`, from `range.from`, until `range.limit` of
/// them hold rows, the range ends or the tree ends, and the entry after them. Entries whose
/// records hold no row are kept (their gaps lie inside the range, so they are locked too)
/// but do not count toward the limit, so a range over deleted keys still returns its rows.
/// When the range holds at most `limit` keys, every one of them is locked whatever it holds,
/// and the first scan (the leaf READs of `limit + 1` entries) is all it costs. Otherwise each
/// chunk of the tree's entries costs the leaf READs of one scan and one doorbell batch of
/// record READs, without locks, to count the rows: what they show is checked again once the
/// locks are held. `None` when the piece passes [`MAX_RANGE_ENTRIES`] entries.
fn range_keys(
    verbs: &dyn crate::verbs::Verbs,
    node: NodeId,
    tree: &crate::BTree,
    rl: &RecordLayout,
    range: &RangeRead,
) -> Result<Option<RangeKeys>> {
    let limit = range.limit as usize;
    let mut found = RangeKeys { entries: Vec::new(), live: Vec::new(), next: None };
    let mut chunk = tree.scan(verbs, range.from, u64::MAX, limit + 1)?;
    let inside = chunk.iter().take_while(|e| e.0 <= range.to).count();
    if inside <= limit {
        found.next = chunk.get(inside).copied();
        chunk.truncate(inside);
        found.live = vec![None; inside];
        found.entries = chunk;
        return Ok(Some(found));
    }
    let mut rows = 0usize;
    loop {
        let want = limit - rows + 1;
        let mut batch = DoorbellBatch::new();
        let reads: Vec<_> = chunk
            .iter()
            .take_while(|e| e.0 <= range.to)
            .map(|e| batch.read(Offset(e.1), rl.record_bytes as usize))
            .collect();
        if !reads.is_empty() {
            verbs.post_batch(node, &mut batch)?;
        }
        for (i, &e) in chunk.iter().enumerate() {
            if e.0 > range.to || rows == limit {
                found.next = Some(e);
                return Ok(Some(found));
            }
            if found.entries.len() == MAX_RANGE_ENTRIES {
                return Ok(None);
            }
            let live = holds_row(rl, batch.read_result(reads[i]), e.0);
            found.entries.push(e);
            found.live.push(Some(live));
            rows += usize::from(live);
        }
        match chunk.last() {
            Some(&(last, _)) if chunk.len() == want && last < u64::MAX => {
                chunk = tree.scan(verbs, last + 1, u64::MAX, limit - rows + 1)?;
            }
            _ => return Ok(Some(found)),
        }
    }
}

/// Whether the record image `image` of `key` holds a row. An image that does not decode as
/// that key's record counts as one: the READ under the lock decides, and a change since votes
/// abort.
fn holds_row(rl: &RecordLayout, image: &[u8], key: u64) -> bool {
    rl.decode(image).is_none_or(|v| v.key != key || !v.is_absent())
}

/// Per-node work of one `execute`.
struct NodeWork {
    items: Vec<usize>,
    entry_index: Option<u64>,
    entry_slots: u64,
}

/// A stateless executor bound to one DC. Cheap to create; not shared between threads
/// (each worker owns one, with its own cached ring heads).
pub struct Executor {
    dc: Arc<DcHandle>,
    hlc: Arc<Hlc>,
    rings: BTreeMap<NodeId, RingWriter>,
    ring_patience: Duration,
    pub(crate) fence_entries: bool,
    /// Whether a PREPARE at a replica that answered `NoVote` for a full ring writes its
    /// fence entry later, once the ring has room (`prepare.rs`).
    pub(crate) fence_after_full_ring: bool,
    /// Whether a PREPARE that writes a fence entry keeps its promise in the node's promise
    /// table first (`promise_table.rs`); off only as a mutant.
    pub(crate) promise_table: bool,
    /// How a catch-up applied straight to the records settles a tie at one commit timestamp.
    pub(crate) thomas_rule: crate::ThomasRule,
    /// Mutant: a recorded decision is never replaced, even by a higher ballot's.
    pub(crate) first_record_stays: bool,
    /// Mutant switch: a PREPARE answers a replica's vote from an aborted try before the
    /// commit-voted entry of a later try (`redt_protocol`'s `prepare_reads_first_try`).
    pub(crate) prepare_reads_first_try: bool,
    /// Whether phase 1 syncs the disk images before it writes `Logged` entries and before
    /// it returns a commit vote (`durability: disk`); off only as a mutant.
    persist_votes: bool,
    /// Records committed deletes emptied, waiting to be freed (`deleted.rs`); none are kept
    /// while freeing is off.
    deleted: DeletedQueue,
    /// How many records' changes a catch-up applied straight to the records left out as
    /// superseded by the record's floor, since the last [`Executor::take_superseded`].
    pub(crate) superseded: u64,
    /// Whether committed deletes' records are freed ([`Executor::set_deleted_grace`]).
    free_deleted: bool,
    /// Whether phase 1 compares the versions a procedure's CHECKs expect with what it read
    /// under its locks ([`Procedure::checks`]); off only as a mutant.
    version_checks: bool,
    /// Whether freeing a deleted record raises its node's deletion horizon first; off only
    /// as a mutant (an older write of the key then brings it back).
    pub(crate) deletion_horizon: bool,
}

/// A bounded map: once it holds `cap` keys, inserting a new one forgets the oldest. The
/// executors' memories (fences, decisions, promises) are kept in it.
pub struct BoundedMap<K, V> {
    map: std::collections::HashMap<K, V>,
    order: std::collections::VecDeque<K>,
    cap: usize,
}

impl<K: std::hash::Hash + Eq + Copy, V> BoundedMap<K, V> {
    /// An empty map that holds at most `cap` keys.
    pub fn new(cap: usize) -> Self {
        BoundedMap { map: Default::default(), order: Default::default(), cap }
    }

    /// Sets `k` to `v`, or, if `k` is present, to `merge(old, v)`; a new key forgets the
    /// oldest one once the map is over its capacity.
    pub fn upsert(&mut self, k: K, v: V, merge: impl FnOnce(&mut V, V)) {
        if let Some(old) = self.map.get_mut(&k) {
            return merge(old, v);
        }
        self.map.insert(k, v);
        self.order.push_back(k);
        if self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    /// The value of `k`, if remembered.
    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }
}

/// A bounded set of transaction ids: the oldest is forgotten first once it holds
/// [`TxnSet::CAP`] ids. Executors remember fences and decisions with it.
pub struct TxnSet(BoundedMap<TxnId, ()>);

impl Default for TxnSet {
    fn default() -> Self {
        TxnSet(BoundedMap::new(Self::CAP))
    }
}

impl TxnSet {
    /// The most ids a set holds: 100,000.
    pub const CAP: usize = 100_000;

    /// Adds `t`, forgetting the oldest id if the set is then over [`TxnSet::CAP`].
    pub fn insert(&mut self, t: TxnId) {
        self.0.upsert(t, (), |_, _| {});
    }

    /// Whether `t` is remembered.
    pub fn contains(&self, t: &TxnId) -> bool {
        self.0.get(t).is_some()
    }
}

impl Executor {
    /// An executor over `dc` that ticks the shared hybrid logical clock `hlc` (time itself
    /// comes in as an argument of [`Executor::execute`]).
    pub fn new(dc: Arc<DcHandle>, hlc: Arc<Hlc>) -> Self {
        Executor {
            dc,
            hlc,
            rings: BTreeMap::new(),
            ring_patience: Duration::from_millis(200),
            fence_entries: true,
            fence_after_full_ring: true,
            thomas_rule: crate::ThomasRule::default(),
            first_record_stays: false,
            prepare_reads_first_try: false,
            promise_table: true,
            persist_votes: true,
            deleted: DeletedQueue::new(DELETED_GRACE),
            superseded: 0,
            free_deleted: false,
            deletion_horizon: true,
            version_checks: true,
        }
    }

    /// Turns the freeing of deleted records on with `Some(grace)`, how long after its commit
    /// timestamp a deleted record may be freed (`deleted.rs`), or off with `None` (the
    /// default). The grace must exceed the longest a catch-up may take to reach its replica:
    /// a replica change older than that on arrival may be turned away ([`DELETED_GRACE`] is a
    /// node's default).
    pub fn set_deleted_grace(&mut self, grace: Option<Duration>) {
        self.free_deleted = grace.is_some();
        if let Some(g) = grace {
            self.deleted.set_grace(g);
        }
    }

    /// Sets whether freeing a deleted record raises its node's deletion horizon first. On by
    /// default; off only as a deliberate bug that the simulation must catch (an older write
    /// of a freed key brings it back).
    pub fn set_deletion_horizon(&mut self, on: bool) {
        self.deletion_horizon = on;
    }

    /// Remembers the record of `(table, key)` on `node` as emptied by a delete committed at
    /// `cts` that reached the node another way than this executor's phase 2: a catch-up, a
    /// snapshot copy, a rebuild's purge, the sweep after a start (`deleted.rs`). Freed once
    /// its grace has passed if it holds no row then; one the delete has not reached yet is
    /// tried again. Nothing when freeing is off or the key has no record.
    ///
    /// # Errors
    /// Index and verbs errors.
    pub fn queue_deleted(&mut self, node: NodeId, table: TableId, key: u64, cts: Cts) -> Result<()> {
        if !self.free_deleted {
            return Ok(());
        }
        if let Some(record) = self.dc.index.lookup(self.dc.verbs.as_ref(), node, table, key)? {
            self.deleted.push(DeletedRecord { node, table, key, record, cts });
        }
        Ok(())
    }

    /// How many records' catch-up changes, applied straight to the records, were left out as
    /// superseded by the record's floor since the last call: older than a freed delete of the
    /// key, or of another key of its slot (`deleted.rs`).
    pub fn take_superseded(&mut self) -> u64 {
        std::mem::take(&mut self.superseded)
    }

    /// Whether committed deletes' records are freed ([`Executor::set_deleted_grace`]).
    pub fn frees_deleted(&self) -> bool {
        self.free_deleted
    }

    /// The records committed deletes emptied that wait for their grace, and what came of the
    /// others (`deleted.rs`).
    pub fn deleted_records(&self) -> &DeletedQueue {
        &self.deleted
    }

    /// Frees the deleted records whose grace has passed at physical time `now_ms` (ms since
    /// [`crate::ORIGIN_UNIX_MS`]), one batch at most (`deleted.rs`), without asking the
    /// other replicas: [`Executor::take_deleted_due`] then [`Executor::retire_taken`]. Returns
    /// how many it freed. Cheap when none is due: a look at the queue's front.
    ///
    /// # Errors
    /// Verbs errors (the batch's busy candidates are kept for another try).
    pub fn retire_deleted_due(&mut self, now_ms: u64) -> Result<usize> {
        let due = self.take_deleted_due(now_ms);
        self.retire_taken(now_ms, due)
    }

    /// Takes up to one batch of the deleted records whose grace has passed at physical time
    /// `now_ms`, each with the tries it had: the caller frees them with
    /// [`Executor::retire_taken`] or gives them back with [`Executor::deleted_busy`].
    pub fn take_deleted_due(&mut self, now_ms: u64) -> Vec<(u8, DeletedRecord)> {
        if self.deleted.is_empty() {
            return Vec::new();
        }
        self.deleted.due(now_ms)
    }

    /// Gives back a candidate taken at `now_ms` that could not be freed yet (another replica
    /// has not applied its delete, or did not answer): tried again a second later, at most 8
    /// times.
    pub fn deleted_busy(&mut self, now_ms: u64, tries: u8, r: DeletedRecord) {
        self.deleted.busy(now_ms, tries, r);
    }

    /// Gives back a candidate taken at `now_ms` whose delete is above a replica's catch-up
    /// floor (`DcHandle::catch_up_floor`): tried again a second later, the try not counted.
    pub fn deleted_held(&mut self, now_ms: u64, tries: u8, r: DeletedRecord) {
        self.deleted.hold(now_ms, tries, r);
    }

    /// Frees `taken` (from [`Executor::take_deleted_due`] at `now_ms`) that still hold no row
    /// and are held by nobody (`DcHandle::retire_deleted`); the busy ones are given back.
    /// Returns how many it freed.
    ///
    /// # Errors
    /// Verbs errors (the busy candidates are kept for another try).
    pub fn retire_taken(&mut self, now_ms: u64, taken: Vec<(u8, DeletedRecord)>) -> Result<usize> {
        if taken.is_empty() {
            return Ok(0);
        }
        let bound = self.deleted.bound(now_ms);
        let mut by_node: BTreeMap<NodeId, Vec<(u8, DeletedRecord)>> = BTreeMap::new();
        for (tries, r) in taken {
            by_node.entry(r.node).or_default().push((tries, r));
        }
        let mut freed = 0;
        for (node, batch) in by_node {
            let records: Vec<DeletedRecord> = batch.iter().map(|&(_, r)| r).collect();
            let fates = match self.dc.retire_deleted(node, &records, bound, self.deletion_horizon) {
                Ok(f) => f,
                Err(e) => {
                    for (tries, r) in batch {
                        self.deleted.busy(now_ms, tries, r);
                    }
                    return Err(e);
                }
            };
            for ((tries, r), fate) in batch.into_iter().zip(fates) {
                match fate {
                    DeletedFate::Freed => freed += 1,
                    DeletedFate::Kept => {}
                    DeletedFate::Busy => self.deleted.busy(now_ms, tries, r),
                }
            }
        }
        self.deleted.freed += freed as u64;
        Ok(freed)
    }

    /// Sets whether phase 1 syncs the DC's disk images before it writes its `Logged` entries
    /// and before it returns a commit vote (`durability: disk`, `persist.rs`). On by default;
    /// off only as a deliberate bug a test must catch (an acknowledged write lost to a power
    /// loss).
    pub fn set_persist_votes(&mut self, on: bool) {
        self.persist_votes = on;
    }

    /// Sets whether a PREPARE writes a fence entry on a replica that holds no entry of the
    /// transaction (`prepare.rs`). On by default; off only as a deliberate bug that the
    /// simulation must catch (a partition left with one replica able to hold a record never
    /// finishes its recovery).
    pub fn set_fence_entries(&mut self, on: bool) {
        self.fence_entries = on;
    }

    /// Sets whether a replica that answered `NoVote` because its ring had no room for a fence
    /// entry gets one at a later PREPARE of the same ballot or higher (`prepare.rs`). On by
    /// default; off only as a deliberate bug that the simulation must catch (its partition
    /// can never record a decision at a majority once its other replicas are removed).
    pub fn set_fence_after_full_ring(&mut self, on: bool) {
        self.fence_after_full_ring = on;
    }

    /// Sets whether a PREPARE that writes a fence entry keeps its promise in the node's
    /// promise table first (`promise_table.rs`). On by default; off only as a deliberate bug
    /// a test must catch: a `NoVote` for a full ring then promises nothing, so a later PREPARE
    /// of a lower ballot, by a restarted executor or another of the DC, gets a fence entry that
    /// accepts its RECORD after the higher ballot was promised.
    pub fn set_promise_table(&mut self, on: bool) {
        self.promise_table = on;
    }

    /// Sets the Thomas write rule of catch-ups applied straight to the records
    /// ([`Executor::apply_replica_now`]); [`crate::ThomasRule::Versions`] by default, the
    /// other only as a deliberate bug that the simulation must catch.
    pub fn set_thomas_rule(&mut self, rule: crate::ThomasRule) {
        self.thomas_rule = rule;
    }

    /// Sets whether a decision recorded in a vote word stays against a higher ballot's RECORD
    /// ([`Executor::record`]). Off by default; on only as a deliberate bug that the simulation
    /// must catch.
    pub fn set_first_record_stays(&mut self, on: bool) {
        self.first_record_stays = on;
    }

    /// Mutant switch for the simulation's checks: a PREPARE answers `NoVote` for a replica
    /// whose ring holds an aborted entry of the transaction (a try of a phase 1 that met a
    /// lock) even when a later try's entry voted commit. Off by default.
    pub fn set_prepare_reads_first_try(&mut self, on: bool) {
        self.prepare_reads_first_try = on;
    }

    /// Sets whether phase 1 checks the versions a procedure's CHECKs expect
    /// ([`Procedure::checks`]). On by default; off only as a deliberate bug that the
    /// simulation must catch (every CHECK passes, so an optimistic transaction commits writes
    /// computed from a stale read).
    pub fn set_version_checks(&mut self, on: bool) {
        self.version_checks = on;
    }

    /// Sets how long a reservation waits for replay to free ring space before the
    /// sub-transaction votes abort with [`AbortReason::RingFull`], measured on the machine's
    /// monotonic clock (`Instant::now`, passed to [`RingWriter::reserve`]). Zero means one
    /// READ of the ring head, then give up, whatever the clock says.
    pub fn with_ring_patience(mut self, patience: Duration) -> Self {
        self.ring_patience = patience;
        self
    }

    /// How long a reservation waits for replay to free ring space
    /// ([`Executor::with_ring_patience`]).
    pub fn ring_patience(&self) -> Duration {
        self.ring_patience
    }

    /// The DC handle.
    pub fn dc(&self) -> &Arc<DcHandle> {
        &self.dc
    }

    /// Reserves `slots` ring slots on `node` (FAA on the tail, waiting up to the ring
    /// patience on the monotonic clock for replay to free space). Returns the first slot's
    /// index.
    pub(crate) fn reserve_slots(&mut self, node: NodeId, slots: u64) -> Result<u64> {
        let patience = self.ring_patience;
        let verbs = self.dc.verbs.clone();
        self.ring(node).reserve(verbs.as_ref(), slots, patience, &Instant::now)
    }

    /// The writer of `node`'s ring, if this executor ever wrote to it.
    pub(crate) fn ring_writer(&mut self, node: NodeId) -> Option<&mut RingWriter> {
        self.rings.get_mut(&node)
    }

    fn ring(&mut self, node: NodeId) -> &mut RingWriter {
        let layout = self.dc.layout;
        self.rings.entry(node).or_insert_with(|| RingWriter::new(layout, node))
    }

    /// Runs phase 1 of `sub` (lock, read, run, pre-write, vote) at physical time `now_ms`
    /// (milliseconds since [`crate::ORIGIN_UNIX_MS`], the caller's clock; the vote's HLC
    /// reading is taken from it).
    ///
    /// Lock conflicts, missing records, a full ring and procedure aborts are abort votes,
    /// with every lock taken released and every entry written marked `Aborted`.
    ///
    /// A read of a key with no record creates none: it locks the key's absence (see the
    /// module docs). A record the sub-transaction writes that cannot be created because the
    /// heap or the index of its node is full is an abort vote ([`AbortReason::HeapFull`],
    /// [`AbortReason::IndexFull`]), made before anything is locked or reserved.
    ///
    /// # Errors
    /// Verbs failures, [`Error::InvalidSubTxn`] for a malformed sub-transaction (unknown
    /// table, write outside the declared cells, oversized value, a redo entry that cannot be
    /// encoded: refused before any ring space is reserved).
    pub fn execute(&mut self, sub: &SubTxn, now_ms: u64) -> Result<Vote> {
        let hlc = self.hlc.tick(now_ms);
        let accesses = sub.procedure.accesses();
        let invalid = |why: String| Error::InvalidSubTxn { txn: sub.txn, why };
        let ranges = self.range_reads(sub)?;
        // Every local record located; the missing ones the accesses allow created next.
        let found = self.locate(sub, &ranges)?;
        // Absent-key locks already planned, by (node, lock word, group): a second read of an
        // absent key of the same group relies on the first's lock (a group admits only
        // `lock::MAX_READERS` readers, and they would all be this transaction).
        let mut absent_locks: std::collections::BTreeSet<(NodeId, Offset, usize)> = Default::default();
        let mut held: Vec<Held> = Vec::with_capacity(sub.local.len());
        for (k, la) in sub.local.iter().enumerate() {
            let a = &accesses[la.access];
            let rl = self.dc.catalog.layout(a.table)?;
            if ranges.contains_key(&la.access) {
                continue;
            }
            let (record, absent) = match found[k] {
                Some(r) => (r, false),
                // A read of a key with no record creates nothing (a client's reads must not
                // fill the heap), nor does a write that leaves the key missing (a delete): it
                // locks the key's absence instead (see the module docs).
                None if a.upsert && (a.write == 0 || !sub.procedure.creates(la.access)) => {
                    let (word, group) = self.dc.index.absent_lock(a.table, a.key);
                    let first = absent_locks.insert((la.node, word, group));
                    let record = Offset(word.0 - crate::record::LOCK_WORD);
                    let shared = if first { 1u16 << group } else { 0 };
                    held.push(Held {
                        access: la.access,
                        node: la.node,
                        record,
                        absent: true,
                        rl_table: a.table,
                        key: a.key,
                        cells: a.read | a.write,
                        shared_groups: shared,
                        exclusive_groups: 0,
                        cas: None,
                        gap_taken: false,
                        image: Vec::new(),
                        role: Role::Point,
                    });
                    continue;
                }
                None if a.upsert => match self.dc.create_record(la.node, a.table, a.key) {
                    Ok(Created::Record(r)) => (r, false),
                    // A reader holds the key's absence: it must not appear before that
                    // reader's decision (No-Wait, as a read lock on its record would).
                    Ok(Created::AbsenceLocked) => {
                        return self.give_back(
                            &held,
                            self.abort_vote(
                                sub,
                                hlc,
                                AbortReason::LockConflict { access: la.access, kind: LockConflictKind::Absence },
                            ),
                        );
                    }
                    Err(Error::HeapFull { node, .. }) => {
                        return self.give_back(&held, self.abort_vote(sub, hlc, AbortReason::HeapFull(node)));
                    }
                    Err(Error::IndexFull { node, .. }) => {
                        return self.give_back(&held, self.abort_vote(sub, hlc, AbortReason::IndexFull(node)));
                    }
                    Err(e) => return Err(e),
                },
                None => {
                    return self
                        .give_back(&held, self.abort_vote(sub, hlc, AbortReason::NotFound { access: la.access }));
                }
            };
            let shared_groups = rl.groups_of(a.read);
            let exclusive_groups = rl.groups_of(a.write);
            held.push(Held {
                access: la.access,
                node: la.node,
                record,
                absent,
                rl_table: a.table,
                key: a.key,
                cells: a.read | a.write,
                shared_groups: shared_groups & !exclusive_groups,
                exclusive_groups,
                cas: None,
                gap_taken: false,
                image: Vec::new(),
                role: Role::Point,
            });
        }

        // A record this sub-transaction writes in a table it also reads a range of is put
        // back into its tree now if a delete took it out ([`crate::OrderedIndex::relink`]):
        // the key is then in the tree before the range is scanned, as a created one is, and
        // the relink's gap lock cannot meet this sub-transaction's own range locks.
        for h in held.iter().filter(|h| h.exclusive_groups != 0 && !h.absent) {
            let same_table = ranges.keys().any(|&r| accesses[r].table == h.rl_table);
            if same_table && !self.dc.ordered.relink(self.dc.verbs.as_ref(), h.node, h.rl_table, h.key, h.record)? {
                return self.give_back(
                    &held,
                    self.abort_vote(
                        sub,
                        hlc,
                        AbortReason::LockConflict { access: h.access, kind: LockConflictKind::Gap },
                    ),
                );
            }
        }

        // Range reads, after every point access is located and every record this
        // sub-transaction writes is created: a key it creates inside its own range is then in
        // the tree (a fresh record, no row) and its gap is locked like any other.
        let scanned = match self.scan_ranges(sub, &ranges, &mut held)? {
            Ok(scanned) => scanned,
            Err(reason) => return self.give_back(&held, self.abort_vote(sub, hlc, reason)),
        };

        // Group by node; reserve one entry per node, sized for the final (Logged) entry.
        let mut nodes: BTreeMap<NodeId, NodeWork> = BTreeMap::new();
        for (i, h) in held.iter().enumerate() {
            nodes
                .entry(h.node)
                .or_insert(NodeWork { items: Vec::new(), entry_index: None, entry_slots: 0 })
                .items
                .push(i);
        }
        // Every entry must encode before any ring space is reserved (a reservation never
        // written holds up replay until it is filled).
        let mut intents = BTreeMap::new();
        for (&node, work) in nodes.iter() {
            let entry = self.entry(sub, &held, &work.items, EntryStatus::Intent, None)?;
            if let Err(e) = ring::check_encodable(&entry) {
                return Err(invalid(e.to_string()));
            }
            intents.insert(node, entry);
        }
        for (&node, work) in nodes.iter_mut() {
            let entry = intents.remove(&node).expect("an intent entry per node, built above");
            work.entry_slots = ring::encoded_slots(&entry);
            let patience = self.ring_patience;
            let verbs = self.dc.verbs.clone();
            match self.ring(node).reserve(verbs.as_ref(), work.entry_slots, patience, &Instant::now) {
                Ok(idx) => work.entry_index = Some(idx),
                Err(Error::RingFull { .. }) => {
                    self.release(sub, &held, &nodes, hlc)?;
                    return Ok(self.abort_vote(sub, hlc, AbortReason::RingFull(node)));
                }
                Err(e) => return Err(e),
            }
            let idx = work.entry_index.expect("just reserved");
            let intent = ring::encode_padded(&entry, idx, work.entry_slots);
            let (mut conflict, retired, floor) = self.lock_node(node, idx, &intent, &work.items, &mut held)?;
            if conflict.is_none() {
                conflict = self
                    .recheck_under_locks(node, &work.items, &held, &scanned)?
                    .map(|access| (access, LockConflictKind::Changed));
            }
            if let Some((access, kind)) = conflict {
                self.release(sub, &held, &nodes, hlc)?;
                // Retired records still indexed (their retirer died before it settled them)
                // are settled now, so the next attempt finds the key missing.
                for &(node, table, key, record) in &retired {
                    self.dc.help_retirement(node, table, key, record)?;
                }
                return Ok(self.abort_vote(sub, hlc, AbortReason::LockConflict { access, kind }));
            }
            if floor > u64::from(sub.epoch.0) {
                self.release(sub, &held, &nodes, hlc)?;
                let floor = Epoch(u32::try_from(floor).unwrap_or(u32::MAX));
                return Ok(self.abort_vote(sub, hlc, AbortReason::StaleEpoch { node, floor }));
            }
            if let Some(access) = superseded(sub, &work.items, &held) {
                self.release(sub, &held, &nodes, hlc)?;
                return Ok(self.abort_vote(sub, hlc, AbortReason::Superseded { access }));
            }
        }

        // Decode what was read and run the procedure.
        let (items, values, rows) = self.read_items(sub, &mut held)?;
        if let Some((access, node)) = self.stale_read(sub, &items) {
            self.release(sub, &held, &nodes, hlc)?;
            return Ok(self.abort_vote(sub, hlc, AbortReason::StaleRead { access, node }));
        }
        let writes = match sub.procedure.run(&ReadView::with_rows(&values, &rows)) {
            Ok(w) => w,
            Err(UserAbort(why)) => {
                self.release(sub, &held, &nodes, hlc)?;
                return Ok(self.abort_vote(sub, hlc, AbortReason::User(why)));
            }
        };
        let new_values = match self.checked_writes(sub, &held, &values, writes) {
            Ok(v) => v,
            Err(e) => {
                self.release(sub, &held, &nodes, hlc)?;
                return Err(e);
            }
        };
        self.prewrite(sub, hlc, &held, &nodes, &new_values, items)
    }

    /// The pieces of `sub`'s range reads (`ranges`) on this DC's nodes: each piece's tree
    /// scanned, every row in it and the gap past the last one added to `held` to be
    /// share-locked (a row `held` already has by key adds its gap only). Returns what was
    /// scanned, to scan again under the locks, or why the phase 1 votes abort: a tree that
    /// cannot be made for a full heap, or a scan that passed `MAX_RANGE_ENTRIES` keys.
    ///
    /// # Errors
    /// [`Error::InvalidSubTxn`] for a table with no ordered index; verbs failures.
    fn scan_ranges(
        &self,
        sub: &SubTxn,
        ranges: &BTreeMap<usize, RangeRead>,
        held: &mut Vec<Held>,
    ) -> Result<std::result::Result<Vec<Scanned>, AbortReason>> {
        let accesses = sub.procedure.accesses();
        let invalid = |why: String| Error::InvalidSubTxn { txn: sub.txn, why };
        let mut scanned = Vec::new();
        let own: std::collections::BTreeSet<(NodeId, Offset)> =
            held.iter().filter(|h| !h.absent).map(|h| (h.node, h.record)).collect();
        for la in &sub.local {
            let Some(range) = ranges.get(&la.access) else { continue };
            let a = &accesses[la.access];
            let rl = self.dc.catalog.layout(a.table)?;
            // A range read's piece: its partition's tree on this node, every row in it
            // share-locked with its gap, and the gap past the last row (`ordered.rs`).
            let verbs = self.dc.verbs.clone();
            let part = self.dc.ordered.partitioner().partition_of(a.table, a.key);
            let tree = match self.dc.ordered.tree(verbs.as_ref(), la.node, a.table, part, true) {
                Ok(Some(t)) => t,
                Ok(None) => return Err(invalid(format!("table {} has no ordered index", a.table))),
                Err(Error::HeapFull { node, .. }) => return Ok(Err(AbortReason::HeapFull(node))),
                Err(e) => return Err(e),
            };
            // Nothing is locked or reserved yet.
            let Some(found) = range_keys(verbs.as_ref(), la.node, &tree, rl, range)? else {
                let why = format!(
                    "a range read of table {} from key {} passed {MAX_RANGE_ENTRIES} keys before {} rows",
                    a.table, range.from, range.limit
                );
                return Ok(Err(AbortReason::User(why)));
            };
            let RangeKeys { entries: rows, live, next } = found;
            let gap = crate::ordered::GAP_GROUP;
            let first = held.len();
            for &(key, record) in &rows {
                held.push(Held {
                    access: la.access,
                    node: la.node,
                    record: Offset(record),
                    absent: false,
                    rl_table: a.table,
                    key,
                    cells: a.read,
                    // A record this sub-transaction also accesses by key is locked by that
                    // access; the row adds its gap only.
                    shared_groups: if own.contains(&(la.node, Offset(record))) {
                        1 << gap
                    } else {
                        rl.groups_of(a.read) | 1 << gap
                    },
                    exclusive_groups: 0,
                    cas: None,
                    gap_taken: false,
                    image: Vec::new(),
                    role: Role::Row,
                });
            }
            let word = crate::ordered::gap_word(&tree, next.map(|(_, r)| Offset(r)));
            held.push(Held {
                access: la.access,
                node: la.node,
                record: Offset(word.0 - crate::record::LOCK_WORD),
                absent: false,
                rl_table: a.table,
                key: next.map_or(u64::MAX, |(k, _)| k),
                cells: 0,
                shared_groups: 1 << gap,
                exclusive_groups: 0,
                cas: None,
                gap_taken: false,
                image: Vec::new(),
                role: Role::Gap,
            });
            let keys = rows.iter().chain(&next).map(|e| e.0).collect();
            let held_rows = first..first + rows.len();
            scanned.push(Scanned {
                node: la.node,
                access: la.access,
                tree,
                range: range.clone(),
                keys,
                live,
                held: held_rows,
            });
        }
        Ok(Ok(scanned))
    }

    /// Locks and reads `node`'s records `items` (indexes into `held`) in one doorbell batch:
    /// the WRITE of the `Intent` entry `intent` at ring slot `idx` first, then per record a
    /// masked compare-and-swap of its lock word (No-Wait: a conflict is not waited for; a
    /// shared lock retried on a guess of the word a few times) and a READ, then the node's
    /// epoch floor. Each lock taken is noted in `held` with the image read (a fresh record's
    /// for a key read as absent). Returns the first access that conflicts, the records found
    /// retired but still indexed, and the epoch floor.
    ///
    /// # Errors
    /// Verbs failures.
    fn lock_node(
        &self,
        node: NodeId,
        idx: u64,
        intent: &[u8],
        items: &[usize],
        held: &mut [Held],
    ) -> Result<(Option<Conflict>, Vec<RetiredRecord>, u64)> {
        // Lock + read batch: WRITE intent, then per record masked-CAS and READ.
        let mut batch = DoorbellBatch::new();
        ring::push_write(&mut batch, &self.dc.layout, idx, intent);
        let mut slots = Vec::with_capacity(items.len());
        for &i in items {
            let h = &held[i];
            let rl = self.dc.catalog.layout(h.rl_table)?;
            if h.absent && h.shared_groups == 0 {
                // Covered by an earlier absent-key lock of this sub-transaction.
                slots.push(None);
                continue;
            }
            let cas = lock::plan(h.shared_groups, h.exclusive_groups, 0).expect("a zero guess never conflicts");
            let c = batch.masked_compare_and_swap(lock_word(h.record), cas.compare, cas.mask, cas.swap, cas.mask);
            let r = (!h.absent && h.role != Role::Gap).then(|| batch.read(h.record, rl.record_bytes as usize));
            slots.push(Some((c, r, cas)));
        }
        // Last in the batch, after the entry's WRITE: the node's epoch floor.
        let floor_at = batch.read(self.dc.layout.epoch_floor_offset(), 8);
        self.dc.verbs.post_batch(node, &mut batch)?;
        let floor = batch.read_result(floor_at).try_into().map(u64::from_le_bytes).unwrap_or(0);
        let mut conflict = None;
        let mut retired: Vec<RetiredRecord> = Vec::new();
        // What a key read as absent reads: a fresh record's image, never READ.
        let fresh = |h: &Held| -> Result<Vec<u8>> { Ok(self.dc.catalog.layout(h.rl_table)?.encode_new(h.key, &[])) };
        for (k, &i) in items.iter().enumerate() {
            let Some((c, r, mut cas)) = slots[k] else {
                held[i].image = fresh(&held[i])?;
                continue;
            };
            let mut old = batch.atomic_result(c);
            let mut image = match r {
                Some(r) => batch.read_result(r).to_vec(),
                None => fresh(&held[i])?,
            };
            let mut tries = 0;
            loop {
                match lock::outcome(&cas, old) {
                    LockOutcome::Acquired => {
                        held[i].cas = Some(cas);
                        held[i].gap_taken = old & lock::exclusive_bits(1 << crate::ordered::GAP_GROUP) != 0;
                        break;
                    }
                    LockOutcome::Retry(guess) if tries < lock::SHARED_RETRIES => {
                        tries += 1;
                        let h = &held[i];
                        let Some(next) = lock::plan(h.shared_groups, h.exclusive_groups, guess) else {
                            let kind = lock::conflict_kind(h.shared_groups, h.exclusive_groups, guess, GAP_GROUP);
                            conflict.get_or_insert((h.access, kind));
                            break;
                        };
                        cas = next;
                        old = self.dc.verbs.masked_compare_and_swap(
                            node,
                            lock_word(h.record),
                            cas.compare,
                            cas.mask,
                            cas.swap,
                            cas.mask,
                        )?;
                        if lock::outcome(&cas, old) == LockOutcome::Acquired && !h.absent && h.role != Role::Gap {
                            // The READ of the batch raced with other readers' CAS only;
                            // read again now that the locks are held.
                            let rl = self.dc.catalog.layout(h.rl_table)?;
                            image = vec![0; rl.record_bytes as usize];
                            self.dc.verbs.read(node, h.record, &mut image)?;
                        }
                    }
                    _ => {
                        let h = &held[i];
                        let kind = if old == crate::free_list::RETIRED {
                            LockConflictKind::Changed
                        } else {
                            lock::conflict_kind(h.shared_groups, h.exclusive_groups, old, GAP_GROUP)
                        };
                        if old == crate::free_list::RETIRED && !h.absent && h.role != Role::Gap {
                            retired.push((node, h.rl_table, h.key, h.record));
                        }
                        conflict.get_or_insert((h.access, kind));
                        break;
                    }
                }
            }
            // A record reached through an offset found before it was retired and reused
            // holds another key now (`retire.rs`): a conflict, as a lock held would be.
            if held[i].cas.is_some() && !held[i].absent && held[i].role != Role::Gap {
                let rl = self.dc.catalog.layout(held[i].rl_table)?;
                if rl.decode(&image).is_none_or(|v| v.key != held[i].key) {
                    conflict.get_or_insert((held[i].access, LockConflictKind::Changed));
                }
            }
            held[i].image = image;
        }
        Ok((conflict, retired, floor))
    }

    /// The range reads of `sub`, by the access that routes each piece to its partition.
    ///
    /// # Errors
    /// [`Error::InvalidSubTxn`]: a range of an unplanned access, over
    /// [`crate::ordered::MAX_RANGE_ROWS`] rows, on an access that writes, or of a table with
    /// no ordered index.
    fn range_reads(&self, sub: &SubTxn) -> Result<BTreeMap<usize, RangeRead>> {
        let accesses = sub.procedure.accesses();
        let invalid = |why: String| Error::InvalidSubTxn { txn: sub.txn, why };
        let mut ranges: BTreeMap<usize, RangeRead> = BTreeMap::new();
        for r in sub.procedure.ranges() {
            let a = accesses.get(r.access).ok_or_else(|| invalid(format!("range of unplanned access {}", r.access)))?;
            if r.limit > crate::ordered::MAX_RANGE_ROWS {
                return Err(invalid(format!(
                    "a range read of {} rows; at most {}",
                    r.limit,
                    crate::ordered::MAX_RANGE_ROWS
                )));
            }
            if a.write != 0 {
                return Err(invalid(format!("range access {} writes", r.access)));
            }
            if !self.dc.ordered.is_ordered(a.table) {
                return Err(invalid(format!("a range read of table {}, which has no ordered index", a.table)));
            }
            ranges.insert(r.access, r.clone());
        }
        Ok(ranges)
    }

    /// Where the record of each local point access of `sub` is (`None`: no record), in
    /// `sub.local`'s order, from one doorbell batch of index READs per node; the pieces of
    /// range reads (`ranges`) are located by their scans instead.
    ///
    /// # Errors
    /// [`Error::InvalidSubTxn`] for an unplanned access or cells beyond its table's; verbs
    /// failures.
    fn locate(&self, sub: &SubTxn, ranges: &BTreeMap<usize, RangeRead>) -> Result<Vec<Option<Offset>>> {
        let accesses = sub.procedure.accesses();
        let invalid = |why: String| Error::InvalidSubTxn { txn: sub.txn, why };
        let mut located: BTreeMap<NodeId, Vec<(usize, Option<Offset>)>> = BTreeMap::new();
        for (k, la) in sub.local.iter().enumerate() {
            let a = accesses.get(la.access).ok_or_else(|| invalid(format!("access {} not planned", la.access)))?;
            let rl = self.dc.catalog.layout(a.table)?;
            if (a.read | a.write) & !rl.all_cells() != 0 {
                return Err(invalid(format!("access {} names cells beyond the table's {}", la.access, rl.cells())));
            }
            if !ranges.contains_key(&la.access) {
                located.entry(la.node).or_default().push((k, None));
            }
        }
        let mut found: Vec<Option<Offset>> = vec![None; sub.local.len()];
        for (&node, list) in located.iter_mut() {
            let keys: Vec<_> = list
                .iter()
                .map(|&(k, _)| {
                    let a = &accesses[sub.local[k].access];
                    (a.table, a.key)
                })
                .collect();
            let offs = self.dc.index.lookup_many(self.dc.verbs.as_ref(), node, &keys)?;
            for (&(k, _), off) in list.iter().zip(offs) {
                found[k] = off;
            }
        }
        Ok(found)
    }

    /// The checks a phase 1 makes on `node` once the locks of its records `items` (indexes
    /// into `held`) are taken: that no key read as absent has a record now, that a write to a
    /// record holding no row can put its key back into the ordered index, and that each range
    /// read on the node scans the same keys again. Returns the access that conflicts, if any.
    ///
    /// # Errors
    /// Verbs failures.
    fn recheck_under_locks(
        &self,
        node: NodeId,
        items: &[usize],
        held: &[Held],
        scanned: &[Scanned],
    ) -> Result<Option<usize>> {
        // A key read as absent: with its absence locked, look again. A record created
        // between the lookup above and the lock would otherwise be missed (a creator
        // publishes only while it holds the absence exclusively, so one found now was
        // created before the lock, and none can be created after it until the decision).
        let absent: Vec<usize> = items.iter().copied().filter(|&i| held[i].absent).collect();
        if !absent.is_empty() {
            let keys: Vec<_> = absent.iter().map(|&i| (held[i].rl_table, held[i].key)).collect();
            let now = self.dc.index.lookup_many(self.dc.verbs.as_ref(), node, &keys)?;
            if let Some((&i, _)) = absent.iter().zip(&now).find(|(_, off)| off.is_some()) {
                return Ok(Some(held[i].access));
            }
        }
        // A write to a record holding no row (deleted, or never written) brings its key
        // back: one a delete took out of the tree goes back in, under the gap lock of an
        // insert, while this sub-transaction holds the record (`ordered.rs`, "Deletes").
        // While the record's gap group was held exclusively as its locks were taken, a
        // delete may be taking the key out of the tree even though the tree still maps
        // it: the write votes abort (No-Wait).
        for &i in items {
            let h = &held[i];
            if h.exclusive_groups == 0 || h.absent || h.role != Role::Point || !self.dc.ordered.is_ordered(h.rl_table) {
                continue;
            }
            let rl = self.dc.catalog.layout(h.rl_table)?;
            if !rl.decode(&h.image).is_some_and(|v| v.is_absent()) {
                continue;
            }
            if h.gap_taken || !self.dc.ordered.relink(self.dc.verbs.as_ref(), node, h.rl_table, h.key, h.record)? {
                return Ok(Some(h.access));
            }
        }
        // A range read: with its rows and gaps locked, scan again. A key published between
        // the scan and the locks (its inserter held the gap then) shows up now; none can
        // be published inside the range after the locks until the decision.
        for sc in scanned.iter().filter(|sc| sc.node == node) {
            // The same entries (and no more when none followed), each holding a row
            // as it did: then a scan now, under the locks, would find what we did.
            let more = usize::from(sc.keys.len() == sc.held.len());
            let now = sc.tree.scan(self.dc.verbs.as_ref(), sc.range.from, u64::MAX, sc.keys.len() + more)?;
            let changed = held[sc.held.clone()].iter().zip(&sc.live).any(|(h, &was)| {
                let rl = self.dc.catalog.layout(h.rl_table).ok();
                was.is_some_and(|was| rl.is_none_or(|rl| was != holds_row(rl, &h.image, h.key)))
            });
            if !now.iter().map(|e| e.0).eq(sc.keys.iter().copied()) || changed {
                return Ok(Some(sc.access));
            }
        }
        Ok(None)
    }

    /// What phase 1 read under its locks: the vote's items, and per access the cells read
    /// (`None`: not a point access) and the rows of its range reads, for the procedure. A
    /// row that holds none reads as a missing key and keeps no version.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an image that is not its key's record.
    #[allow(clippy::type_complexity)]
    fn read_items(
        &self,
        sub: &SubTxn,
        held: &mut [Held],
    ) -> Result<(Vec<ItemVote>, Vec<Option<Vec<Vec<u8>>>>, Vec<Vec<RangeRow>>)> {
        let accesses = sub.procedure.accesses();
        let mut values: Vec<Option<Vec<Vec<u8>>>> = vec![None; accesses.len()];
        let mut rows: Vec<Vec<RangeRow>> = vec![Vec::new(); accesses.len()];
        let mut items = Vec::with_capacity(held.len());
        for h in held.iter_mut() {
            let rl = self.dc.catalog.layout(h.rl_table)?;
            if h.role == Role::Gap {
                values[h.access].get_or_insert_with(Vec::new);
                continue;
            }
            let view = rl.decode(&h.image).filter(|v| v.key == h.key).ok_or(Error::NotFound {
                node: h.node,
                table: h.rl_table,
                key: h.key,
            })?;
            let a = &accesses[h.access];
            if h.role == Role::Row {
                if view.is_absent() {
                    // Reads as a missing key: no row, nothing to compare, no version kept.
                    h.cells = 0;
                    continue;
                }
                rows[h.access]
                    .push(RangeRow { key: h.key, cells: (0..rl.cells()).map(|c| view.value(c).to_vec()).collect() });
            } else {
                values[h.access] = Some((0..rl.cells()).map(|c| view.value(c).to_vec()).collect());
            }
            items.push(ItemVote {
                access: h.access,
                node: h.node,
                versions: cells_of(h.cells).map(|c| (c as u16, view.version(c))).collect(),
                values: cells_of(a.read).map(|c| (c as u16, view.value(c).to_vec())).collect(),
                absent: h.absent,
                row: (h.role == Role::Row).then_some(h.key),
            });
        }
        Ok((items, values, rows))
    }

    /// The first CHECK of `sub`'s procedure ([`Procedure::checks`]) that a local replica fails,
    /// as `(access, node)`: a point item of the access whose version of the cell is not the
    /// one expected (every local replica of the access is compared; a key read as absent is
    /// at version 0). `None` when every CHECK holds, or version checks are off (a mutant).
    fn stale_read(&self, sub: &SubTxn, items: &[ItemVote]) -> Option<(usize, NodeId)> {
        if !self.version_checks {
            return None;
        }
        for c in sub.procedure.checks() {
            for item in items.iter().filter(|i| i.access == c.access && i.row.is_none()) {
                let seen = item.versions.iter().find(|(cell, _)| *cell == c.cell).map_or(0, |(_, v)| v.0);
                if seen != c.version {
                    return Some((c.access, item.node));
                }
            }
        }
        None
    }

    /// The procedure's `writes`, checked against the plan and the table's cells, by (access,
    /// cell); `values` says which accesses are point accesses that read a record. A write to
    /// a missing key an access does not create ([`Procedure::creates`]) must be all zero
    /// bytes, and is dropped.
    ///
    /// # Errors
    /// [`Error::InvalidSubTxn`] for a write to an unplanned access or an undeclared cell, an
    /// oversized value, or a value written to a missing key the access does not create.
    fn checked_writes(
        &self,
        sub: &SubTxn,
        held: &[Held],
        values: &[Option<Vec<Vec<u8>>>],
        writes: Vec<Write>,
    ) -> Result<BTreeMap<(usize, u16), Vec<u8>>> {
        let accesses = sub.procedure.accesses();
        let invalid = |why: String| Error::InvalidSubTxn { txn: sub.txn, why };
        let mut new_values: BTreeMap<(usize, u16), Vec<u8>> = BTreeMap::new();
        let absent_writes: std::collections::BTreeSet<usize> =
            held.iter().filter(|h| h.absent && h.role == Role::Point).map(|h| h.access).collect();
        for w in writes {
            let Some(a) = accesses.get(w.access) else {
                return Err(invalid(format!("write to unplanned access {}", w.access)));
            };
            if a.write >> w.cell & 1 == 0 {
                return Err(invalid(format!("write to undeclared cell {} of access {}", w.cell, w.access)));
            }
            let rl = self.dc.catalog.layout(a.table)?;
            if w.value.len() > rl.cell_bytes[w.cell as usize] as usize {
                return Err(invalid(format!(
                    "{}-byte value for a {}-byte cell",
                    w.value.len(),
                    rl.cell_bytes[w.cell as usize]
                )));
            }
            if absent_writes.contains(&w.access) {
                // An access that creates nothing on a missing key ([`Procedure::creates`]):
                // its writes must leave the key missing, and change nothing.
                if w.value.iter().any(|&b| b != 0) {
                    return Err(invalid(format!(
                        "access {} writes a value to the missing key {} of table {} but does not create its record",
                        w.access, a.key, a.table
                    )));
                }
                continue;
            }
            if values[w.access].is_some() {
                new_values.insert((w.access, w.cell), w.value);
            }
        }
        Ok(new_values)
    }

    /// The pre-write (RedT §4.2.2): on each node, the `Logged` entry with the versions read and
    /// the writes `new_values`, then the commit vote in its vote word; the vote `items` once
    /// every node's is in. A vote word already set (a recoverer fenced the entry) makes it an
    /// abort vote, every lock released.
    ///
    /// # Errors
    /// Verbs and sync failures.
    fn prewrite(
        &mut self,
        sub: &SubTxn,
        hlc: Cts,
        held: &[Held],
        nodes: &BTreeMap<NodeId, NodeWork>,
        new_values: &BTreeMap<(usize, u16), Vec<u8>>,
        items: Vec<ItemVote>,
    ) -> Result<Vote> {
        // Under `durability: disk`, a `Logged` entry reaches a disk image only after
        // everything before its locks did (the release by their previous holder included),
        // so a restored image never holds two `Logged` entries claiming one lock
        // (`restore.rs`).
        if self.persist_votes {
            self.dc.persist(nodes.keys().copied())?;
        }
        let mut entries = Vec::with_capacity(nodes.len());
        let mut fenced = false;
        for (&node, work) in nodes {
            let idx = work.entry_index.expect("reserved above");
            let entry = self.entry(sub, held, &work.items, EntryStatus::Logged, Some(new_values))?;
            let bytes = ring::encode_padded(&entry, idx, work.entry_slots);
            let mut batch = DoorbellBatch::new();
            ring::push_write_body(&mut batch, &self.dc.layout, idx, &bytes);
            ring::push_set_status(&mut batch, &self.dc.layout, idx, EntryStatus::Logged, Cts(0));
            let v = batch.push(crate::verbs::WorkRequest::CompareAndSwap {
                offset: ring::vote_offset(&self.dc.layout, idx),
                expected: VoteWord::NONE.0,
                new: VoteWord::NONE.with_vote(ring::VoteCode::Commit).0,
            });
            self.dc.verbs.post_batch(node, &mut batch)?;
            if batch.atomic_result(v) != VoteWord::NONE.0 {
                fenced = true;
            }
            entries.push(EntryRef { node, index: idx, slots: work.entry_slots });
        }
        if fenced {
            self.release(sub, held, nodes, hlc)?;
            return Ok(self.abort_vote(sub, hlc, AbortReason::Fenced));
        }
        // The commit vote leaves only once its pre-write is durable (`durability: disk`).
        if self.persist_votes {
            self.dc.persist(nodes.keys().copied())?;
        }
        Ok(Vote { txn: sub.txn, abort: None, items, hlc, entries })
    }

    /// Builds the redo entry of `sub` for the records `items` of one node.
    fn entry(
        &self,
        sub: &SubTxn,
        held: &[Held],
        items: &[usize],
        status: EntryStatus,
        new_values: Option<&BTreeMap<(usize, u16), Vec<u8>>>,
    ) -> Result<RedoEntry> {
        let accesses = sub.procedure.accesses();
        let mut locks = Vec::with_capacity(items.len());
        let mut changes = Vec::new();
        for &i in items {
            let h = &held[i];
            let rl = self.dc.catalog.layout(h.rl_table)?;
            let added = lock::plan(h.shared_groups, h.exclusive_groups, 0).expect("zero guess").added;
            let view = if h.image.is_empty() { None } else { rl.decode(&h.image) };
            locks.push(LockIntent {
                record: h.record,
                table: h.rl_table,
                key: h.key,
                lock_bits: added,
                cells: h.cells,
                versions: cells_of(h.cells).map(|c| view.map_or(0, |v| v.version(c).0)).collect(),
            });
            // A key locked as absent is written nowhere (its writes change nothing).
            let written = if h.absent { 0 } else { accesses[h.access].write };
            for c in cells_of(written) {
                let value = match new_values {
                    // Final entry: only the cells the procedure wrote.
                    Some(nv) => match nv.get(&(h.access, c as u16)) {
                        Some(v) => pad(v, rl.cell_bytes[c]),
                        None => continue,
                    },
                    // Reservation: every declared cell at full size (the upper bound).
                    None => vec![0; rl.cell_bytes[c] as usize],
                };
                changes.push(Change { record: h.record, table: h.rl_table, key: h.key, cell: c as u16, value });
            }
        }
        Ok(RedoEntry {
            txn: sub.txn,
            status,
            cts: Cts(0),
            vote: VoteWord::NONE,
            epoch: sub.epoch,
            coordinator: sub.coordinator,
            start: sub.start,
            participants: sub.participants.clone(),
            partitions: sub.partitions.clone(),
            locks,
            changes,
        })
    }

    /// Releases every lock taken so far and marks every reserved entry `Aborted`.
    fn release(&self, sub: &SubTxn, held: &[Held], nodes: &BTreeMap<NodeId, NodeWork>, _hlc: Cts) -> Result<()> {
        for (&node, work) in nodes {
            let mut batch = DoorbellBatch::new();
            if let Some(idx) = work.entry_index {
                // Make the entry well-formed (an Intent entry may not have been written if
                // the reservation was the last thing done) and aborted.
                let entry = self.entry(sub, held, &work.items, EntryStatus::Aborted, None)?;
                ring::push_write(&mut batch, &self.dc.layout, idx, &ring::encode_padded(&entry, idx, work.entry_slots));
                ring::push_set_status(&mut batch, &self.dc.layout, idx, EntryStatus::Aborted, Cts(0));
            }
            for &i in &work.items {
                if let Some(cas) = held[i].cas {
                    batch.fetch_and_add(lock_word(held[i].record), lock::release_operand(cas.added));
                }
            }
            self.dc.verbs.post_batch(node, &mut batch)?;
        }
        // Records this sub-transaction would have written that no commit ever wrote (an
        // insert's fresh record) go back to the heap once nobody holds them (`retire.rs`).
        // A range's rows and next key are tried too: a reader's lock may have kept an aborted
        // insert's record from being retired when its inserter let go of it.
        for h in held.iter().filter(|h| !h.absent && (h.exclusive_groups != 0 || h.role != Role::Point)) {
            if h.role == Role::Gap && h.key == u64::MAX {
                continue; // The tree's end word: no record.
            }
            let fresh = h.image.is_empty()
                || self
                    .dc
                    .catalog
                    .layout(h.rl_table)?
                    .decode(&h.image)
                    .is_some_and(|v| v.key == h.key && v.is_absent());
            if fresh {
                self.dc.retire_if_unused(h.node, h.rl_table, h.key, h.record)?;
            }
        }
        Ok(())
    }

    /// Retires, once released, each record of `entry`'s lock intents on `node` that no commit
    /// ever wrote (its versions were zero when locked): on abort, a record the entry would
    /// have written (an insert's fresh record); on either decision, one a range reader locked
    /// — as a row, or as the next key's gap — while it held no row, which kept its inserter
    /// from retiring it (`retire.rs`).
    fn retire_unused(&self, node: NodeId, entry: &RedoEntry, committed: bool) -> Result<()> {
        for l in &entry.locks {
            let record_lock = lock_word(l.record);
            // Tried: a gap or a range row that held no row (its intent names no cells), and on
            // abort a record the entry would have written. Not a point read: reads of records
            // never written (a loaded table read for ever) would cost a READ each, and a
            // fresh record is held exclusively by its inserter, whose release retires it.
            let exclusive = l.lock_bits & lock::exclusive_bits(u16::MAX) != 0;
            let tried = l.cells == 0 || (exclusive && !committed);
            // A gap intent of key `u64::MAX` names a tree's end word, not a record.
            if !tried
                || self.dc.layout.is_absent_lock(record_lock)
                || (l.cells == 0 && l.key == u64::MAX)
                || l.versions.iter().any(|&v| v != 0)
                || (committed && entry.changes.iter().any(|c| c.record == l.record))
            {
                continue;
            }
            self.dc.retire_if_unused(node, l.table, l.key, l.record)?;
        }
        Ok(())
    }

    /// Before any lock is taken: retires the records this sub-transaction created for its
    /// writes (an insert's fresh records) and answers `vote`, an abort (`retire.rs`).
    fn give_back(&self, held: &[Held], vote: Vote) -> Result<Vote> {
        for h in held.iter().filter(|h| h.exclusive_groups != 0 && !h.absent && h.role == Role::Point) {
            self.dc.retire_if_unused(h.node, h.rl_table, h.key, h.record)?;
        }
        Ok(vote)
    }

    fn abort_vote(&self, sub: &SubTxn, hlc: Cts, reason: AbortReason) -> Vote {
        Vote::aborted(sub.txn, hlc, reason)
    }

    /// Records `decision` (commit or abort, with `ballot`) in the vote word of each of
    /// `entries` of `txn` (docs/design.md §2: every abort is recorded at a majority of each
    /// touched partition's replicas before it is acknowledged or acted on). The word keeps the
    /// decision's [`VoteCode`], not a commit's timestamp. A word that promised a higher ballot
    /// refuses; a word that records a decision at this ballot or a higher one keeps it; one
    /// that records a decision at a lower ballot takes the new one, as a Paxos acceptor does
    /// (`RECORD(b,d,cts): b<pb → NACK; pb:=b; rec:=(b,d,cts)`; docs/design.md, "Recovery");
    /// an entry already finished counts as recording the decision its status shows.
    ///
    /// Keeping the first decision recorded at any ballot left a transaction undecided for good
    /// (sim seed 50339, ycsb, default, `all,remove`, 6 s): one replica held an abort recorded at
    /// a lower ballot that never reached a majority, the others a commit recorded at a higher
    /// one whose majority had included a DC removed since, and the survivors' recoverers could
    /// complete the commit's majority only at the replica that refused it.
    ///
    /// Each compare-and-swap is preceded by a READ of the entry's header, and is made only
    /// while the slot still holds `txn`'s unfinished entry of this lap: an entry finished and
    /// released since the vote (a late or repeated RECORD) is never written, since its slot
    /// may hold another transaction's entry by now. The slot cannot be reused between that
    /// READ and the compare-and-swap unless the entry is finished and the ring laps in
    /// between; the swap expects the word just read, so even then it lands only on a word
    /// with exactly that value.
    ///
    /// Returns whether every entry now records `decision`.
    ///
    /// # Errors
    /// Verbs failures.
    pub fn record(
        &mut self,
        txn: TxnId,
        decision: Decision,
        ballot: redt_proto::Ballot,
        entries: &[EntryRef],
    ) -> Result<bool> {
        let decision = VoteCode::from(decision);
        let mut all = true;
        for e in entries {
            all &= self.record_one(txn, decision, ballot, e)?;
        }
        Ok(all)
    }

    /// [`Executor::record`] for one entry, of the decision's vote-word code.
    fn record_one(&mut self, txn: TxnId, decision: VoteCode, ballot: redt_proto::Ballot, e: &EntryRef) -> Result<bool> {
        let at = ring::vote_offset(&self.dc.layout, e.index);
        loop {
            let header = match ring::read_header(self.dc.verbs.as_ref(), e.node, &self.dc.layout, e.index) {
                Ok(h) if h.txn == txn => h,
                // Released (and maybe reused): what was decided is not known here.
                Ok(_) | Err(Error::TornEntry { .. }) => return Ok(false),
                Err(e) => return Err(e),
            };
            match header.status {
                EntryStatus::Intent | EntryStatus::Logged => {}
                EntryStatus::Committed => return Ok(decision == VoteCode::Commit),
                EntryStatus::Aborted => return Ok(decision == VoteCode::Abort),
                EntryStatus::Empty | EntryStatus::Flushed => return Ok(false),
            }
            let cur = header.vote.0;
            let Some(state) = VoteWord(cur).unpack() else { return Ok(false) };
            if state.decision != VoteCode::None && (state.recorded >= ballot || self.first_record_stays) {
                return Ok(state.decision == decision);
            }
            if state.promised > ballot {
                return Ok(false);
            }
            let next = VoteState { decision, recorded: ballot, promised: ballot, ..state };
            let Some(word) = VoteWord::pack(next) else { return Ok(false) };
            if self.dc.verbs.compare_and_swap(e.node, at, cur, word.0)? == cur {
                return Ok(true);
            }
        }
    }

    /// Runs phase 2 for `txn` from its redo entries: commit (mark `Committed` with `cts`,
    /// Thomas-rule WRITE of each new cell, update counters, release) or abort (mark
    /// `Aborted`, release). Idempotent per entry status: an entry already finished is left
    /// alone.
    ///
    /// # Errors
    /// Verbs failures; [`Error::TornEntry`] if an entry does not decode;
    /// [`Error::InvalidSubTxn`] if an entry belongs to another transaction.
    pub fn finish(&mut self, txn: TxnId, decision: Decision, entries: &[EntryRef]) -> Result<()> {
        self.finish_entries(txn, decision, entries, false, None)
    }

    /// [`Executor::finish`] for a catch-up source (docs/design.md §2, "a catch-up outlives its
    /// source"): each entry finished here gets the catch-up mask `owed(entry)` in the same
    /// WRITE as its decision, so replay applies it but the ring's head stays before it until
    /// [`Executor::clear_owed`]. An entry with a non-zero mask that is aborted (its DC was
    /// behind for another partition but ships this one) keeps `ship_cts`, the commit's
    /// timestamp, in its status word, for a later re-shipment.
    ///
    /// # Errors
    /// As [`Executor::finish`].
    pub fn finish_owing(
        &mut self,
        txn: TxnId,
        decision: Decision,
        entries: &[EntryRef],
        owed: &dyn Fn(&RedoEntry) -> u8,
        ship_cts: Cts,
    ) -> Result<()> {
        self.finish_entries(txn, decision, entries, false, Some((owed, ship_cts)))
    }

    /// Clears the catch-up mask of each of `entries` that still holds `txn`'s entry (a slot
    /// released or reused since is left alone), by compare-and-swap on its status word so a
    /// concurrent replay flush is never undone. Idempotent.
    ///
    /// # Errors
    /// Verbs failures.
    pub fn clear_owed(&mut self, txn: TxnId, entries: &[EntryRef]) -> Result<()> {
        let dc = self.dc.clone();
        for e in entries {
            loop {
                let header = match ring::read_header(dc.verbs.as_ref(), e.node, &dc.layout, e.index) {
                    Ok(h) if h.txn == txn => h,
                    Ok(_) | Err(Error::TornEntry { .. }) => break,
                    Err(err) => return Err(err),
                };
                if header.owed == 0 {
                    break;
                }
                let old = header.status.word_owed(header.cts, header.owed);
                let new = header.status.word(header.cts);
                let at = ring::status_offset(&dc.layout, e.index);
                if dc.verbs.compare_and_swap(e.node, at, old, new)? == old {
                    break;
                }
            }
        }
        Ok(())
    }

    /// [`Executor::finish`] for a decision applied here before: an entry whose slots no
    /// longer hold `txn`'s entry (finished, released and reused, or being rewritten) is
    /// skipped instead of refused. A phase 1 repeated after a restart leaves two entries and
    /// each decision may name either one, so a repeated decision must still finish what it
    /// names.
    ///
    /// # Errors
    /// Verbs failures.
    pub fn finish_again(&mut self, txn: TxnId, decision: Decision, entries: &[EntryRef]) -> Result<()> {
        self.finish_entries(txn, decision, entries, true, None)
    }

    /// Finishes `entries`; `owing` gives each entry's catch-up mask and the commit timestamp
    /// an aborted catch-up source keeps ([`Executor::finish_owing`]).
    fn finish_entries(
        &mut self,
        txn: TxnId,
        decision: Decision,
        entries: &[EntryRef],
        again: bool,
        owing: Option<Owing<'_>>,
    ) -> Result<()> {
        if let Decision::Commit(cts) = decision {
            self.hlc.observe(cts);
        }
        for e in entries {
            let entry = match ring::read_entry_sized(self.dc.verbs.as_ref(), e.node, &self.dc.layout, e.index, e.slots)
            {
                Ok(entry) => entry,
                Err(Error::TornEntry { .. }) if again => continue,
                Err(err) => return Err(err),
            };
            if entry.txn != txn {
                if again {
                    continue;
                }
                return Err(Error::InvalidSubTxn {
                    txn,
                    why: format!("ring entry {} on {} belongs to {}", e.index, e.node, entry.txn),
                });
            }
            if !matches!(entry.status, EntryStatus::Logged | EntryStatus::Intent) {
                continue;
            }
            let mut batch = DoorbellBatch::new();
            let (owed, ship_cts) = owing.map_or((0, Cts(0)), |(f, c)| (f(&entry), c));
            let layout = &self.dc.layout;
            // Records of ordered tables this entry clears (a delete): held until their keys
            // have left the tree.
            let mut deletes: Vec<&LockIntent> = Vec::new();
            match decision {
                Decision::Commit(cts) => {
                    ring::push_set_status_owed(&mut batch, layout, e.index, EntryStatus::Committed, cts, owed);
                    for (i, l) in entry.locks.iter().enumerate() {
                        // A record's changes are applied once, at its first intent: a range
                        // row of a record the transaction also writes (or a second access to
                        // it) has an intent of its own over the same changes.
                        if entry.locks[..i].iter().any(|o| o.record == l.record) {
                            continue;
                        }
                        let same: Vec<&LockIntent> = entry.locks.iter().filter(|o| o.record == l.record).collect();
                        let rl = self.dc.catalog.layout(l.table)?;
                        self.push_apply(&mut batch, rl, &same, &entry.changes, cts);
                        // A record this commit holds exclusively and found never written (one
                        // its phase 1 created, empty or not) is kept for good: it loses the
                        // flag that lets an aborted insert's record be retired (`retire.rs`).
                        let holds = same.iter().any(|o| o.lock_bits & lock::exclusive_bits(u16::MAX) != 0);
                        if holds && same.iter().all(|o| o.versions.iter().all(|&v| v == 0)) {
                            batch.write(Offset(l.record.0 + 8), rl.meta_kept().to_le_bytes().to_vec());
                        }
                        // The intent holding the record exclusively: another intent on the
                        // same record (this transaction's range row) releases its gap lock
                        // with the batch, before the key leaves the tree.
                        let exclusive = l.lock_bits & lock::exclusive_bits(u16::MAX) != 0;
                        // Freed later: RedT's phase 1 only (it carries a start, which a late
                        // copy of it is checked against: `superseded`).
                        let ordered = self.dc.ordered.is_ordered(l.table);
                        let freed = self.free_deleted && entry.start != Cts(0);
                        if exclusive && (ordered || freed) && clears(l, &entry.changes) {
                            if ordered {
                                deletes.push(l);
                            }
                            if freed {
                                let (table, key, record) = (l.table, l.key, l.record);
                                self.deleted.push(DeletedRecord { node: e.node, table, key, record, cts });
                            }
                        }
                    }
                }
                Decision::Abort if owed != 0 => {
                    ring::push_set_status_owed(&mut batch, layout, e.index, EntryStatus::Aborted, ship_cts, owed);
                }
                Decision::Abort => {
                    ring::push_set_status(&mut batch, layout, e.index, EntryStatus::Aborted, Cts(0));
                }
            }
            for l in entry.locks.iter().filter(|l| !deletes.iter().any(|d| std::ptr::eq(*d, *l))) {
                batch.fetch_and_add(lock_word(l.record), lock::release_operand(l.lock_bits));
            }
            self.dc.verbs.post_batch(e.node, &mut batch)?;
            for l in deletes {
                self.unlink_deleted(e.node, l)?;
            }
            self.retire_unused(e.node, &entry, matches!(decision, Decision::Commit(_)))?;
        }
        Ok(())
    }

    /// Takes the key of `l`'s record out of its tree if the record holds no row now (a
    /// committed delete, just applied; `ordered.rs`, "Deletes"), then releases `l`'s locks.
    /// Holding the record's locks until then keeps any writer of the same cells from
    /// bringing the key back between the READ and the removal; writers of other cells keep
    /// the key in the tree while they hold the record ([`crate::OrderedIndex::unlink`]).
    fn unlink_deleted(&self, node: NodeId, l: &LockIntent) -> Result<()> {
        let verbs = self.dc.verbs.as_ref();
        let rl = self.dc.catalog.layout(l.table)?;
        let mut image = vec![0u8; rl.record_bytes as usize];
        let unlinked = verbs.read(node, l.record, &mut image).map_err(Error::from).and_then(|()| {
            match rl.decode(&image).filter(|v| v.key == l.key && v.is_absent()) {
                Some(_) => self.dc.ordered.unlink(verbs, node, l.table, l.key, l.record, l.lock_bits).map(drop),
                None => Ok(()),
            }
        });
        verbs.fetch_and_add(node, lock_word(l.record), lock::release_operand(l.lock_bits))?;
        unlinked
    }

    /// Appends the Thomas-rule cell WRITEs and counter increments of the changes of one
    /// record, whose lock intents in the entry are `intents` (at least one): each cell is
    /// written once, at the version the first intent that read it saw, advanced to `cts`.
    fn push_apply(
        &self,
        batch: &mut DoorbellBatch,
        rl: &RecordLayout,
        intents: &[&LockIntent],
        changes: &[Change],
        cts: Cts,
    ) {
        let Some(l) = intents.first() else { return };
        let mut groups = 0u16;
        for ch in changes.iter().filter(|c| c.record == l.record) {
            let c = ch.cell as usize;
            let seen = intents
                .iter()
                .find_map(|l| cells_of(l.cells).position(|x| x == c).and_then(|k| l.versions.get(k)))
                .copied()
                .unwrap_or(0);
            let seen = CellVersion(seen);
            if cts <= seen.cts() {
                continue; // Thomas write rule: a newer write already landed.
            }
            let img = encode_cell(seen.next(cts), &ch.value, rl.cell_bytes[c]);
            batch.write(Offset(l.record.0 + rl.cell_offsets[c]), img);
            groups |= 1 << rl.cell_group[c];
        }
        push_counter_increments(batch, l.record, groups);
    }
}

/// The access of the first record among `items` that the sub-transaction writes and whose
/// floor is at or above the transaction's start (`deleted.rs`), if any. A phase 1 without a
/// start (the baselines') is never superseded: their deletes are never freed.
fn superseded(sub: &SubTxn, items: &[usize], held: &[Held]) -> Option<usize> {
    if sub.start == Cts(0) {
        return None;
    }
    items.iter().map(|&i| &held[i]).find_map(|h| {
        let floor = crate::record::floor_of(&h.image);
        (h.exclusive_groups != 0 && !h.absent && floor != Cts(0) && sub.start <= floor).then_some(h.access)
    })
}

/// Whether `l`'s changes in `changes` clear its record: at least one, each writing zero
/// bytes (a delete, [`crate::KvOp::Delete`] or a procedure's; whether the record then holds
/// no row depends on its other cells too).
fn clears(l: &LockIntent, changes: &[Change]) -> bool {
    let mut mine = changes.iter().filter(|c| c.record == l.record).peekable();
    mine.peek().is_some() && mine.all(|c| c.value.iter().all(|&b| b == 0))
}

/// Appends masked fetch-and-adds adding one to the update counter of each group in
/// `groups` of the record at `record` (one verb per counter word).
pub(crate) fn push_counter_increments(batch: &mut DoorbellBatch, record: Offset, groups: u16) {
    let mut per_word: BTreeMap<u64, (Offset, u64, u64)> = BTreeMap::new();
    for g in (0..lock::GROUPS).filter(|g| groups >> g & 1 == 1) {
        let (word, add, boundary) = counter_increment(record, g);
        per_word.entry(word.0).or_insert((word, 0, boundary)).1 |= add;
    }
    for (word, add, boundary) in per_word.into_values() {
        batch.push(crate::verbs::WorkRequest::MaskedFetchAndAdd { offset: word, add, boundary });
    }
}

/// The cell indices set in `mask`, ascending.
pub(crate) fn cells_of(mask: u64) -> impl Iterator<Item = usize> {
    (0..64).filter(move |c| mask >> c & 1 == 1)
}

fn pad(v: &[u8], bytes: u32) -> Vec<u8> {
    let mut out = v.to_vec();
    out.resize(bytes as usize, 0);
    out
}

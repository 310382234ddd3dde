//! Rebuilding a replica: the learner's side of a snapshot copy (docs/design.md, "Rebuild").
//!
//! A membership change adds a *learner* of a partition on some node, in a new epoch `e`. From
//! `e` on, every commit that writes the partition ships its new values to the learner (a
//! catch-up, [`crate::catch_up::catch_up`]). What was committed before `e` comes from a
//! snapshot copy, which this machine drives on the learner's node: it reads the partition's
//! records from **every voter** of the partition in chunks ([`Request::SnapshotRead`]) and
//! applies each chunk to the learner's own MemStore under the Thomas write rule (a cell is
//! written only with a newer commit timestamp), so the copy and the concurrent catch-ups
//! commute, and copies from several voters merge to the newest value of every cell.
//!
//! Why every voter: a commit of an older epoch reached `Q` up-to-date replicas; with `n ≥ 4`
//! a voter may have been left behind by it and be waiting for its catch-up, so no single voter
//! is known to hold every commit. At least one voter of each older commit was up to date
//! (fewer than `Q` replicas were removed), so the union of the voters' copies holds it.
//!
//! Why the copy is complete for older epochs: a voter serves the first chunk only once it has
//! applied epoch `e`, raised its epoch floor to `e` (an executor of an older epoch that WRITEs
//! into its ring afterwards reads the floor in the same doorbell batch and votes abort:
//! `redt_dc_executor::Layout::epoch_floor_offset`) and its ring holds no unfinished or
//! unapplied entry of an older epoch (`ExecutorCore::snapshot_read`). So every older commit
//! it was up to date for is in its records before the scan starts, and stays there (a record
//! only ever takes newer values).
//!
//! What the copy did not refresh: the learner may hold records from before, its own MemStore
//! kept while its DC was away. A key its voters deleted and freed since (`limits.
//! free_deleted_records`) is in no voter's copy, so the Thomas write rule never empties it
//! here. Its executor core notes every key a chunk or a replica change (a catch-up) wrote
//! since the copy began (`ExecutorCore::begin_refresh`); once every voter's copy is applied,
//! a last pass over the learner's own records of the partition empties every row that
//! neither refreshed ([`RebuildAction::Purge`], `ExecutorCore::purge_unrefreshed`). A key a
//! catch-up wrote before the copy began is not lost by it: that catch-up's commit had locked
//! the key on some voter before it was shipped, so the voter's copy, which starts later, holds
//! the key, unless the key was deleted and freed there since, and then emptying it is right.
//! A voter repair does not purge: its node's own executor writes the partition meanwhile.
//!
//! When every voter's copy is complete the learner is filled: its driver proposes the
//! promotion (`redt_membership::Command::Promote`). A catch-up of epoch `e` or later still
//! in flight then is harmless: a voter missing a write is a stale vote, which the decision
//! rule does not count as up to date, and its catch-up follows.
//!
//! Sans-IO like the other machines ([`crate::machine`]): the driver carries out each
//! [`RebuildAction`] — a snapshot read to send, records to apply to the node's own MemStore
//! (`ExecutorCore::apply_snapshot`) — and feeds replies, failures, apply results and timeouts
//! back.

use crate::machine::{earliest, AttemptId};
use crate::message::{Reply, Request, SnapshotRead};
use redt_dc_executor::SnapshotRecord;
use redt_proto::{Cts, Epoch, NodeId, PartitionId};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// How a rebuild copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebuildOptions {
    /// The most bytes of records one chunk carries (bytes; a chunk ends on an index bucket, so
    /// one bucket's records may pass it). Default 256 KiB.
    pub chunk_bytes: u32,
    /// The copy's bandwidth bound per source (bytes/s of records applied); `None`: as fast as
    /// the chunks come. Default 32 MiB/s.
    pub bytes_per_sec: Option<u64>,
    /// First pause before a chunk is asked again (a voter not ready, a record in use, an
    /// unreachable voter); it doubles up to `retry_max`.
    pub retry_base: Duration,
    /// The largest pause between two tries.
    pub retry_max: Duration,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        RebuildOptions {
            chunk_bytes: 256 * 1024,
            bytes_per_sec: Some(32 * 1024 * 1024),
            retry_base: Duration::from_millis(20),
            retry_max: Duration::from_millis(500),
        }
    }
}

/// How far a rebuild has come (for `redt status` and the logs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildProgress {
    /// Records applied so far (from every voter; a record copied from two voters counts
    /// twice).
    pub records: u64,
    /// Bytes of records applied so far.
    pub bytes: u64,
    /// Voters whose copy is complete.
    pub sources_done: usize,
    /// Voters copied from.
    pub sources: usize,
    /// Rows emptied after the copy because no voter's copy refreshed them (module docs).
    pub purged: u64,
}

/// One rebuild of a node, as `redt status` and the membership's leader see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebuildState {
    /// The epoch that added the learner.
    pub added_in: Epoch,
    /// How far the copy has come.
    pub progress: RebuildProgress,
    /// Whether the copy is complete: the learner may be promoted.
    pub filled: bool,
    /// Why the last try failed, if one did (a voter not ready yet, unreachable).
    pub last_error: Option<String>,
}

/// The copy from one voter.
#[derive(Debug)]
struct SourceCopy {
    node: NodeId,
    /// The index bucket to read from next; `None` once the copy reached the end.
    next: Option<u64>,
    /// Records of the last chunk not yet applied (a record in use here), and the bucket the
    /// chunk ended at.
    leftover: Vec<SnapshotRecord>,
    /// The highest deletion horizon the voter reported (raised here before its records are
    /// applied: a key it freed is not older-written back here).
    horizon: Cts,
    in_flight: bool,
    retry_at: Option<Instant>,
    failures: u32,
    /// No longer copied from (its DC was removed).
    dropped: bool,
    /// Counted in [`RebuildProgress::sources_done`].
    counted: bool,
}

impl SourceCopy {
    fn done(&self) -> bool {
        self.dropped || (self.next.is_none() && self.leftover.is_empty() && !self.in_flight)
    }
}

/// The last pass over the learner's own records after the copies (module docs).
#[derive(Debug)]
struct PurgePass {
    /// The index bucket to purge from next; `None` once the pass reached the end.
    next: Option<u64>,
    in_flight: bool,
    /// When to ask again after a busy record or a failure; `None`: as soon as the copies end.
    retry_at: Option<Instant>,
    failures: u32,
}

/// What one step of the purge did (`ExecutorCore::purge_unrefreshed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Purged {
    /// The index bucket to go on from, `None` at the end of the index; the bucket asked for,
    /// with nothing purged, when a record there is in use (ask again later).
    pub next: Option<u64>,
    /// Rows emptied.
    pub rows: u64,
}

/// The learner's side of one partition's snapshot copy (module docs).
#[derive(Debug)]
pub struct Rebuild {
    partition: PartitionId,
    epoch: Epoch,
    sources: Vec<SourceCopy>,
    /// `None` for a voter repair.
    purge: Option<PurgePass>,
    attempts: BTreeMap<AttemptId, usize>,
    next_attempt: AttemptId,
    options: RebuildOptions,
    actions: VecDeque<RebuildAction>,
    progress: RebuildProgress,
    last_error: Option<String>,
}

/// What the driver of a [`Rebuild`] must do next.
#[derive(Clone, Debug, PartialEq)]
pub enum RebuildAction {
    /// Send `request` (a [`Request::SnapshotRead`]) to the voter `to` and report its fate
    /// under `attempt` ([`Rebuild::handle_reply`] / [`Rebuild::handle_failure`]).
    Send {
        /// Identifies the attempt.
        attempt: AttemptId,
        /// The voter.
        to: NodeId,
        /// The request.
        request: Request,
    },
    /// Apply `records` to this node's own MemStore (`ExecutorCore::apply_snapshot`), its
    /// deletion horizon raised to `horizon` first, and report how many, in order, were
    /// applied with [`Rebuild::applied`].
    Apply {
        /// Identifies the copy they came from.
        source: usize,
        /// The records.
        records: Vec<SnapshotRecord>,
        /// The voter's deletion horizon when it read them (or later).
        horizon: Cts,
    },
    /// Every voter's copy is applied: empty this node's rows of the partition from index
    /// bucket `from_bucket` on that no copy or catch-up refreshed since the copy began
    /// (`ExecutorCore::purge_unrefreshed`), and report with [`Rebuild::purged`].
    Purge {
        /// The index bucket to start at.
        from_bucket: u64,
    },
}

impl Rebuild {
    /// Starts copying `partition` to this node, a learner added in `epoch`, from each of
    /// `voters` (the partition's voters in `epoch`), at `now`; the copies end with the purge
    /// of what they did not refresh (module docs). The driver calls
    /// `ExecutorCore::begin_refresh` before it applies the first chunk.
    pub fn start(
        partition: PartitionId,
        epoch: Epoch,
        voters: &[NodeId],
        options: RebuildOptions,
        now: Instant,
    ) -> Rebuild {
        let sources: Vec<SourceCopy> = voters
            .iter()
            .map(|&node| SourceCopy {
                node,
                next: Some(0),
                leftover: Vec::new(),
                horizon: Cts(0),
                in_flight: false,
                retry_at: Some(now),
                failures: 0,
                dropped: false,
                counted: false,
            })
            .collect();
        let progress = RebuildProgress { sources: sources.len(), ..RebuildProgress::default() };
        let mut r = Rebuild {
            partition,
            epoch,
            sources,
            purge: Some(PurgePass { next: Some(0), in_flight: false, retry_at: None, failures: 0 }),
            attempts: BTreeMap::new(),
            next_attempt: 0,
            options,
            actions: VecDeque::new(),
            progress,
            last_error: None,
        };
        r.handle_timeout(now);
        r
    }

    /// Starts a voter repair: the copy of [`Rebuild::start`] from the other voters `voters`,
    /// without the purge (this node's executor writes the partition meanwhile).
    pub fn start_repair(
        partition: PartitionId,
        epoch: Epoch,
        voters: &[NodeId],
        options: RebuildOptions,
        now: Instant,
    ) -> Rebuild {
        let mut r = Rebuild::start(partition, epoch, voters, options, now);
        r.purge = None;
        r
    }

    /// The partition being rebuilt.
    pub fn partition(&self) -> PartitionId {
        self.partition
    }

    /// The epoch that added the learner (a promotion names it).
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// How far the copy has come.
    pub fn progress(&self) -> RebuildProgress {
        self.progress
    }

    /// Why the last try failed, if one did (for the logs).
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Whether every voter's copy is complete and applied, and the purge after them done: the
    /// learner may be promoted.
    pub fn is_done(&self) -> bool {
        self.copies_done() && self.purge.as_ref().is_none_or(|p| p.next.is_none())
    }

    fn copies_done(&self) -> bool {
        self.sources.iter().all(SourceCopy::done) && self.sources.iter().any(|s| !s.dropped)
    }

    /// The voters copied from.
    pub fn sources(&self) -> Vec<NodeId> {
        self.sources.iter().map(|s| s.node).collect()
    }

    /// Stops copying from `node` (no longer a voter of the partition: its DC was removed). The
    /// other voters' copies still hold every older commit (module docs).
    pub fn drop_source(&mut self, node: NodeId) {
        for i in 0..self.sources.len() {
            let s = &mut self.sources[i];
            if s.node == node && !s.dropped {
                s.dropped = true;
                s.leftover.clear();
                s.retry_at = None;
                self.count_done(i);
            }
        }
        self.advance_purge();
    }

    /// The next action for the driver, if any.
    pub fn poll_action(&mut self) -> Option<RebuildAction> {
        self.actions.pop_front()
    }

    /// When the driver must call [`Rebuild::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.sources.iter().map(|s| s.retry_at).chain([self.purge.as_ref().and_then(|p| p.retry_at)]))
    }

    /// Handles the reply to `attempt` at `now`.
    pub fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant) {
        let Some(i) = self.attempts.remove(&attempt) else { return };
        if self.sources[i].dropped {
            return;
        }
        match reply {
            Reply::Snapshot { records, next, horizon } => {
                let s = &mut self.sources[i];
                s.horizon = s.horizon.max(horizon);
                s.in_flight = false;
                s.failures = 0;
                let busy = records.is_empty() && next.is_some() && next == s.next;
                s.next = next;
                if busy {
                    // The voter's next record is in use: ask again shortly.
                    s.retry_at = Some(now + self.options.retry_base);
                } else {
                    self.apply(i, records, now);
                }
            }
            Reply::Error { message, .. } => self.failed(i, message, now),
            other => self.failed(i, format!("unexpected reply {other:?}"), now),
        }
    }

    /// Handles the failure of `attempt` at `now` (the voter unreachable, or not ready).
    pub fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant) {
        if let Some(i) = self.attempts.remove(&attempt) {
            if !self.sources[i].dropped {
                self.failed(i, error.to_string(), now);
            }
        }
    }

    /// The driver applied the first `count` records of source `source`'s last
    /// [`RebuildAction::Apply`] at `now` (`Err`: applying failed). Records left over (one in
    /// use here) are applied again after a pause; then the next chunk is asked for, after
    /// the bandwidth bound's pause.
    pub fn applied(&mut self, source: usize, count: Result<usize, String>, now: Instant) {
        let Some(s) = self.sources.get_mut(source) else { return };
        if s.dropped {
            return;
        }
        s.in_flight = false;
        let records = std::mem::take(&mut s.leftover);
        let count = match count {
            Ok(n) => n.min(records.len()),
            Err(e) => {
                self.sources[source].leftover = records;
                return self.failed(source, e, now);
            }
        };
        let bytes = records[..count].iter().map(|r| r.encoded_bytes() as u64).sum::<u64>();
        self.progress.records += count as u64;
        self.progress.bytes += bytes;
        let s = &mut self.sources[source];
        if count < records.len() {
            s.leftover = records[count..].to_vec();
            s.retry_at = Some(now + self.options.retry_base);
            return;
        }
        if s.done() {
            self.count_done(source);
            return self.advance_purge();
        }
        let pause = match self.options.bytes_per_sec {
            Some(rate) if rate > 0 => Duration::from_micros(bytes.saturating_mul(1_000_000) / rate),
            _ => Duration::ZERO,
        };
        if pause.is_zero() {
            self.ask(source);
        } else {
            s.retry_at = Some(now + pause);
        }
    }

    /// Handles the timer at `now`: retries what is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.sources.len() {
            let s = &mut self.sources[i];
            if s.in_flight || s.done() || s.retry_at.is_none_or(|t| t > now) {
                continue;
            }
            s.retry_at = None;
            if s.leftover.is_empty() {
                self.ask(i);
            } else {
                let records = s.leftover.clone();
                self.apply(i, records, now);
            }
        }
        if let Some(p) = self.purge.as_mut().filter(|p| p.retry_at.is_some_and(|t| t <= now)) {
            p.retry_at = None;
        }
        self.advance_purge();
    }

    /// The driver ran the last [`RebuildAction::Purge`] at `now`: `Err` when it failed (tried
    /// again after a pause, as a failed chunk is).
    pub fn purged(&mut self, result: Result<Purged, String>, now: Instant) {
        let Some(p) = self.purge.as_mut().filter(|p| p.in_flight) else { return };
        p.in_flight = false;
        match result {
            Ok(step) => {
                self.progress.purged += step.rows;
                let busy = step.rows == 0 && step.next.is_some() && step.next == p.next;
                p.failures = 0;
                p.next = step.next;
                if busy {
                    p.retry_at = Some(now + self.options.retry_base);
                }
            }
            Err(e) => {
                p.failures = p.failures.saturating_add(1);
                p.retry_at = Some(now + backoff(&self.options, p.failures));
                self.last_error = Some(format!("purge: {e}"));
            }
        }
        self.advance_purge();
    }

    /// Asks for the next purge step once every copy is done.
    fn advance_purge(&mut self) {
        if !self.copies_done() {
            return;
        }
        let Some(p) = self.purge.as_mut() else { return };
        if p.in_flight || p.retry_at.is_some() {
            return;
        }
        let Some(from_bucket) = p.next else { return };
        p.in_flight = true;
        self.actions.push_back(RebuildAction::Purge { from_bucket });
    }

    fn count_done(&mut self, i: usize) {
        let s = &mut self.sources[i];
        if s.done() && !s.counted {
            s.counted = true;
            self.progress.sources_done += 1;
        }
    }

    fn failed(&mut self, i: usize, error: String, now: Instant) {
        let s = &mut self.sources[i];
        s.in_flight = false;
        s.failures = s.failures.saturating_add(1);
        s.retry_at = Some(now + backoff(&self.options, s.failures));
        self.last_error = Some(format!("{}: {error}", s.node));
    }

    /// Hands source `i`'s records to the driver to apply (an empty chunk is applied at once).
    fn apply(&mut self, i: usize, records: Vec<SnapshotRecord>, now: Instant) {
        if records.is_empty() {
            return self.applied(i, Ok(0), now);
        }
        let s = &mut self.sources[i];
        s.leftover = records.clone();
        s.in_flight = true;
        let horizon = s.horizon;
        self.actions.push_back(RebuildAction::Apply { source: i, records, horizon });
    }

    fn ask(&mut self, i: usize) {
        let Some(from_bucket) = self.sources[i].next else { return };
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        self.attempts.insert(attempt, i);
        self.sources[i].in_flight = true;
        let request = Request::SnapshotRead(SnapshotRead {
            partition: self.partition,
            epoch: self.epoch,
            from_bucket,
            max_bytes: self.options.chunk_bytes,
        });
        self.actions.push_back(RebuildAction::Send { attempt, to: self.sources[i].node, request });
    }
}

/// The pause before the next try after `failures` failures in a row: `retry_base`, doubling up
/// to `retry_max`.
fn backoff(options: &RebuildOptions, failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(16);
    options.retry_base.saturating_mul(1 << shift).min(options.retry_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one voter's copy answered complete and empty: its `Send` answered.
    fn copied(r: &mut Rebuild, now: Instant) {
        let Some(RebuildAction::Send { attempt, .. }) = r.poll_action() else { panic!("a snapshot read first") };
        r.handle_reply(attempt, Reply::Snapshot { records: Vec::new(), next: None, horizon: Cts(0) }, now);
    }

    #[test]
    fn a_learners_copy_ends_with_the_purge_step_by_step_and_a_repair_without_it() {
        let now = Instant::now();
        let mut r = Rebuild::start(PartitionId(1), Epoch(3), &[NodeId(2)], RebuildOptions::default(), now);
        copied(&mut r, now);
        assert!(!r.is_done(), "copied, not purged yet");
        assert_eq!(r.poll_action(), Some(RebuildAction::Purge { from_bucket: 0 }));
        assert_eq!(r.poll_action(), None, "one step at a time");
        r.purged(Ok(Purged { next: Some(4096), rows: 2 }), now);
        assert_eq!(r.poll_action(), Some(RebuildAction::Purge { from_bucket: 4096 }));
        // A record in use: the same step again after a pause.
        r.purged(Ok(Purged { next: Some(4096), rows: 0 }), now);
        assert_eq!(r.poll_action(), None);
        let later = r.poll_timeout().expect("a retry is due later");
        assert!(later > now);
        r.handle_timeout(later);
        assert_eq!(r.poll_action(), Some(RebuildAction::Purge { from_bucket: 4096 }));
        // A failure: retried after a pause too, and named.
        r.purged(Err("verbs".into()), later);
        assert!(r.last_error().is_some_and(|e| e.contains("verbs")));
        r.handle_timeout(r.poll_timeout().expect("a retry"));
        assert_eq!(r.poll_action(), Some(RebuildAction::Purge { from_bucket: 4096 }));
        r.purged(Ok(Purged { next: None, rows: 1 }), later);
        assert!(r.is_done());
        assert_eq!(r.progress().purged, 3);

        let mut repair = Rebuild::start_repair(PartitionId(1), Epoch(3), &[NodeId(2)], RebuildOptions::default(), now);
        copied(&mut repair, now);
        assert!(repair.is_done(), "a repair does not purge");
        assert_eq!(repair.poll_action(), None);
    }
}

//! The order in which a node's executor thread takes its jobs: short jobs before bulk ones,
//! bulk ones in turn by share, and each lane half of the thread when both wait.
//!
//! A node has one executor thread ([`crate::ExecutorThread`]); a job on it runs to its end.
//! Served first come, first served, a few large sub-transactions (a client's thousand reads)
//! or ring scans (outcome lookups) queued ahead of a small phase 1 would hold that phase 1
//! past its deadline, and every DC's phase 1 with it. So jobs come in two lanes:
//!
//! - [`Lane::Short`]: phase 1 of a sub-transaction of at most [`BULK_WEIGHT`] operations,
//!   decisions, records, catch-up: the work whose latency is the clients'. Taken in arrival
//!   order.
//! - [`Lane::Bulk`]: larger sub-transactions, transaction lookups (a full ring read) and
//!   recovery scans. Queued per *share* (the client identity a transaction was submitted
//!   under, the asking node of a lookup), and the shares take turns one job at a time, so one
//!   client's flood of large calls waits behind itself, not in front of another client's.
//!
//! When both lanes wait, a bulk job runs only once the short lane has had as much of the
//! thread as the previous bulk job took: under contention each lane gets half the thread,
//! a short job waits behind at most one bulk job, and a bulk job is never starved.
//! A bulk job's own length is bounded by the topology's limits (`limits.max_ops_per_txn`).

use std::collections::{HashMap, VecDeque};

/// Sub-transactions with more operations than this (a scan counting its row limit) run in
/// the bulk lane: 64.
pub const BULK_WEIGHT: u64 = 64;

/// Which lane a job is queued in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Latency-sensitive work, in arrival order.
    Short,
    /// Costly work, in turns by share (a client identity's digest, a node's id; 0 for the
    /// node's own background work).
    Bulk(u64),
}

/// The two lanes of an executor's jobs `J` and the turn of the shares (see the module docs).
/// Pure: the caller measures how long each job ran and reports it with [`FairQueue::ran`].
#[derive(Debug)]
pub struct FairQueue<J> {
    short: VecDeque<J>,
    bulk: HashMap<u64, VecDeque<J>>,
    /// Shares with a queued bulk job, the next to run first.
    turn: VecDeque<u64>,
    /// Short-lane time (µs) still owed before the next bulk job may run while short jobs
    /// wait: the length of the last bulk job, less the short work since.
    owed_short_us: u64,
    bulk_len: usize,
}

impl<J> Default for FairQueue<J> {
    fn default() -> Self {
        FairQueue { short: VecDeque::new(), bulk: HashMap::new(), turn: VecDeque::new(), owed_short_us: 0, bulk_len: 0 }
    }
}

impl<J> FairQueue<J> {
    /// Queues `job` in `lane`.
    pub fn push(&mut self, lane: Lane, job: J) {
        match lane {
            Lane::Short => self.short.push_back(job),
            Lane::Bulk(share) => {
                let queue = self.bulk.entry(share).or_default();
                if queue.is_empty() {
                    self.turn.push_back(share);
                }
                queue.push_back(job);
                self.bulk_len += 1;
            }
        }
    }

    /// The next job to run and its lane, `None` when none waits.
    pub fn pop(&mut self) -> Option<(Lane, J)> {
        let bulk_due = self.short.is_empty() || self.owed_short_us == 0;
        if bulk_due {
            if let Some(share) = self.turn.pop_front() {
                let queue = self.bulk.get_mut(&share)?;
                let job = queue.pop_front()?;
                if queue.is_empty() {
                    self.bulk.remove(&share);
                } else {
                    self.turn.push_back(share);
                }
                self.bulk_len -= 1;
                return Some((Lane::Bulk(share), job));
            }
        }
        self.short.pop_front().map(|job| (Lane::Short, job))
    }

    /// Reports that a job of `lane` ran for `us` µs.
    pub fn ran(&mut self, lane: Lane, us: u64) {
        match lane {
            Lane::Short => self.owed_short_us = self.owed_short_us.saturating_sub(us.max(1)),
            Lane::Bulk(_) => self.owed_short_us = us.max(1),
        }
    }

    /// Jobs waiting: (short, bulk).
    pub fn len(&self) -> (usize, usize) {
        (self.short.len(), self.bulk_len)
    }

    /// Whether no job waits.
    pub fn is_empty(&self) -> bool {
        self.short.is_empty() && self.bulk_len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs the queue to empty, each job taking the µs it names; returns the jobs in the
    /// order they ran.
    fn drain(q: &mut FairQueue<(char, u64)>) -> Vec<char> {
        let mut order = Vec::new();
        while let Some((lane, (name, us))) = q.pop() {
            q.ran(lane, us);
            order.push(name);
        }
        order
    }

    #[test]
    fn short_jobs_alone_run_in_arrival_order() {
        let mut q = FairQueue::default();
        for name in ['a', 'b', 'c'] {
            q.push(Lane::Short, (name, 10));
        }
        assert_eq!(drain(&mut q), vec!['a', 'b', 'c']);
    }

    #[test]
    fn shares_take_turns_in_the_bulk_lane() {
        let mut q = FairQueue::default();
        // Share 1 floods first; share 2's one job runs second, not fourth.
        for name in ['a', 'b', 'c'] {
            q.push(Lane::Bulk(1), (name, 1000));
        }
        q.push(Lane::Bulk(2), ('x', 1000));
        assert_eq!(drain(&mut q), vec!['a', 'x', 'b', 'c']);
    }

    #[test]
    fn a_short_job_waits_behind_at_most_one_bulk_job() {
        let mut q = FairQueue::default();
        for name in ['a', 'b', 'c', 'd'] {
            q.push(Lane::Bulk(1), (name, 30_000));
        }
        let (lane, first) = q.pop().expect("a job");
        assert_eq!(first.0, 'a');
        q.ran(lane, 30_000);
        // A short job arrives while 'a' runs: it goes before 'b'.
        q.push(Lane::Short, ('s', 20));
        assert_eq!(drain(&mut q), vec!['s', 'b', 'c', 'd']);
    }

    #[test]
    fn under_contention_the_bulk_lane_still_runs() {
        let mut q = FairQueue::default();
        q.push(Lane::Bulk(1), ('B', 100));
        q.push(Lane::Bulk(1), ('C', 100));
        for _ in 0..20 {
            q.push(Lane::Short, ('s', 25));
        }
        // The first bulk job runs at once (nothing owed); the next after 100 µs of short work.
        let order: String = drain(&mut q).into_iter().collect();
        assert_eq!(order, format!("Bssss{}{}", 'C', "s".repeat(16)));
    }

    proptest! {
        /// Every job runs exactly once, each lane's jobs of one share in arrival order, and
        /// while short jobs wait, no two bulk jobs run back to back.
        #[test]
        fn every_job_runs_once_in_order(jobs in proptest::collection::vec((0u64..4, 1u64..5000), 0..60)) {
            let mut q = FairQueue::default();
            for (i, &(share, us)) in jobs.iter().enumerate() {
                let lane = if share == 0 { Lane::Short } else { Lane::Bulk(share) };
                q.push(lane, (i, us));
            }
            let mut ran = Vec::new();
            let mut last_bulk = false;
            loop {
                let short_waiting = q.len().0 > 0;
                let Some((lane, (i, us))) = q.pop() else { break };
                if matches!(lane, Lane::Bulk(_)) {
                    prop_assert!(!(last_bulk && short_waiting), "two bulk jobs back to back while a short one waited");
                }
                last_bulk = matches!(lane, Lane::Bulk(_));
                q.ran(lane, us);
                ran.push(i);
            }
            prop_assert!(q.is_empty());
            let mut sorted = ran.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..jobs.len()).collect::<Vec<_>>());
            for share in 0..4u64 {
                let of: Vec<usize> = ran.iter().copied().filter(|&i| jobs[i].0 == share).collect();
                let mut in_order = of.clone();
                in_order.sort_unstable();
                prop_assert_eq!(of, in_order);
            }
        }
    }
}

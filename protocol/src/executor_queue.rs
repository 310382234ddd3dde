//! The order in which a node's executor thread takes its jobs: short jobs before bulk ones,
//! bulk ones in turn by share, and each lane half of the thread when both wait.
//!
//! A node's executor core has one thread (`redt_coordinator::ExecutorThread`); a job on it runs
//! to its end. A large phase 1 runs its sub-transaction on a second thread with its own queue of
//! this kind, so there it waits behind other large work only.
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
//! thread as the previous bulk job took: a short job waits behind at most one bulk job, and a
//! bulk job is never starved. And each share's bulk jobs take at most `p`% of the thread's
//! time (`limits.max_bulk_percent`, 5% by default): after a bulk job of `d` µs, its share
//! rests `d (100 − p) / p` µs (19 `d` at 5%) before its next one starts, even on an idle
//! thread. A transaction costs a node far more than its executor work
//! (its coordinator, the transport, the other DCs' messages), so this is what keeps one
//! client's stream of large calls from taking the CPU everyone's transactions need.
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

/// What the executor thread does next ([`FairQueue::pop`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Next<J> {
    /// Run this job of this lane.
    Run(Lane, J),
    /// Only bulk jobs of resting shares wait: ask again at this time (µs, the caller's clock).
    WaitUntil(u64),
    /// No job waits.
    Idle,
}

/// The two lanes of an executor's jobs `J` and the turn of the shares (see the module docs).
/// Pure: the caller gives the time (µs on any monotonic clock) and reports how long each job
/// ran with [`FairQueue::ran`].
#[derive(Debug)]
pub struct FairQueue<J> {
    short: VecDeque<J>,
    bulk: HashMap<u64, VecDeque<J>>,
    /// Shares with a queued bulk job, the next to run first.
    turn: VecDeque<u64>,
    /// Per share that ran a bulk job lately: when its next bulk job may start (µs).
    rest_until: HashMap<u64, u64>,
    /// Short-lane time (µs) still owed before the next bulk job may run while short jobs
    /// wait: the length of the last bulk job, less the short work since.
    owed_short_us: u64,
    bulk_len: usize,
    /// Most of the thread's time, in percent, one share's bulk jobs may take (1–100).
    bulk_percent: u64,
}

impl<J> Default for FairQueue<J> {
    /// A queue whose shares may each take 25% of the thread with bulk jobs.
    fn default() -> Self {
        FairQueue::with_bulk_percent(25)
    }
}

impl<J> FairQueue<J> {
    /// An empty queue whose shares may each take `percent` of the thread's time with bulk jobs
    /// (clamped to 1–100).
    pub fn with_bulk_percent(percent: u64) -> Self {
        FairQueue {
            short: VecDeque::new(),
            bulk: HashMap::new(),
            turn: VecDeque::new(),
            rest_until: HashMap::new(),
            owed_short_us: 0,
            bulk_len: 0,
            bulk_percent: percent.clamp(1, 100),
        }
    }

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

    /// What to do at `now_us`: the next job to run and its lane, or when to ask again.
    pub fn pop(&mut self, now_us: u64) -> Next<J> {
        let rested = |rest: &HashMap<u64, u64>, share: &u64| rest.get(share).is_none_or(|&t| t <= now_us);
        if self.short.is_empty() || self.owed_short_us == 0 {
            if let Some(at) = self.turn.iter().position(|s| rested(&self.rest_until, s)) {
                if let Some(job) = self.take_bulk(at) {
                    return job;
                }
            }
        }
        if let Some(job) = self.short.pop_front() {
            return Next::Run(Lane::Short, job);
        }
        match self.turn.iter().filter_map(|s| self.rest_until.get(s)).min() {
            Some(&t) => Next::WaitUntil(t),
            None => Next::Idle,
        }
    }

    /// The next bulk job of the share at `at` in the turn; the share goes to the back of the
    /// turn if it has more.
    fn take_bulk(&mut self, at: usize) -> Option<Next<J>> {
        let share = self.turn.remove(at)?;
        let queue = self.bulk.get_mut(&share)?;
        let job = queue.pop_front()?;
        if queue.is_empty() {
            self.bulk.remove(&share);
        } else {
            self.turn.push_back(share);
        }
        self.bulk_len -= 1;
        Some(Next::Run(Lane::Bulk(share), job))
    }

    /// Reports that a job of `lane` ran for `us` µs, ending at `end_us`.
    pub fn ran(&mut self, lane: Lane, end_us: u64, us: u64) {
        match lane {
            Lane::Short => self.owed_short_us = self.owed_short_us.saturating_sub(us.max(1)),
            Lane::Bulk(share) => {
                self.owed_short_us = us.max(1);
                self.rest_until.retain(|_, &mut t| t > end_us);
                let rest = us.max(1).saturating_mul(100 - self.bulk_percent) / self.bulk_percent;
                self.rest_until.insert(share, end_us.saturating_add(rest));
            }
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

    /// Runs the queue to empty on a simulated clock, each job taking the µs it names; returns
    /// the jobs in the order they ran and when each started.
    fn drain(q: &mut FairQueue<(char, u64)>) -> Vec<(char, u64)> {
        let mut now = 0;
        let mut order = Vec::new();
        loop {
            match q.pop(now) {
                Next::Run(lane, (name, us)) => {
                    order.push((name, now));
                    now += us;
                    q.ran(lane, now, us);
                }
                Next::WaitUntil(t) => {
                    assert!(t > now, "a wait into the past");
                    now = t;
                }
                Next::Idle => return order,
            }
        }
    }

    fn names(order: &[(char, u64)]) -> String {
        order.iter().map(|(c, _)| c).collect()
    }

    #[test]
    fn short_jobs_alone_run_in_arrival_order() {
        let mut q = FairQueue::default();
        for name in ['a', 'b', 'c'] {
            q.push(Lane::Short, (name, 10));
        }
        assert_eq!(names(&drain(&mut q)), "abc");
    }

    #[test]
    fn shares_take_turns_and_each_rests_three_times_its_job() {
        let mut q = FairQueue::default();
        // Share 1 floods first; share 2's one job runs second, not fourth.
        for name in ['a', 'b', 'c'] {
            q.push(Lane::Bulk(1), (name, 1000));
        }
        q.push(Lane::Bulk(2), ('x', 1000));
        let order = drain(&mut q);
        assert_eq!(names(&order), "axbc");
        // Share 1 runs a quarter of the time: 'b' starts 3 ms after 'a' ended, 'c' 3 ms after 'b'.
        assert_eq!(order.iter().map(|&(_, t)| t).collect::<Vec<_>>(), vec![0, 1000, 4000, 8000]);
    }

    #[test]
    fn a_short_job_waits_behind_at_most_one_bulk_job() {
        let mut q = FairQueue::default();
        for name in ['a', 'b', 'c', 'd'] {
            q.push(Lane::Bulk(1), (name, 30_000));
        }
        let Next::Run(lane, first) = q.pop(0) else { panic!("a job") };
        assert_eq!(first.0, 'a');
        q.ran(lane, 30_000, 30_000);
        // A short job arrives while 'a' runs: it goes before 'b'.
        q.push(Lane::Short, ('s', 20));
        assert_eq!(names(&drain(&mut q)), "sbcd");
    }

    #[test]
    fn under_contention_each_share_keeps_to_its_quarter_and_shorts_fill_the_rest() {
        let mut q = FairQueue::default();
        q.push(Lane::Bulk(1), ('B', 100));
        q.push(Lane::Bulk(1), ('C', 100));
        for _ in 0..20 {
            q.push(Lane::Short, ('s', 25));
        }
        // 'B' runs at once; 'C' after its share rested 300 µs, i.e. after 12 short jobs.
        let order = drain(&mut q);
        assert_eq!(names(&order), format!("B{}C{}", "s".repeat(12), "s".repeat(8)));
    }

    #[test]
    fn the_bulk_percent_sets_the_rest() {
        for (percent, rest) in [(5, 19_000), (50, 1000), (100, 0), (0, 99_000)] {
            let mut q = FairQueue::with_bulk_percent(percent);
            q.push(Lane::Bulk(1), ('a', 1000));
            q.push(Lane::Bulk(1), ('b', 1000));
            let order = drain(&mut q);
            assert_eq!(order[1].1, 1000 + rest, "at {percent}%");
        }
    }

    #[test]
    fn nothing_queued_is_idle_and_a_resting_share_is_waited_for() {
        let mut q: FairQueue<(char, u64)> = FairQueue::default();
        assert_eq!(q.pop(0), Next::Idle);
        q.push(Lane::Bulk(3), ('a', 10));
        q.push(Lane::Bulk(3), ('b', 10));
        let Next::Run(lane, _) = q.pop(0) else { panic!("a job") };
        q.ran(lane, 10, 10);
        assert_eq!(q.pop(10), Next::WaitUntil(40));
        assert!(matches!(q.pop(40), Next::Run(Lane::Bulk(3), ('b', 10))));
    }

    proptest! {
        /// Every job runs exactly once, each lane's jobs of one share in arrival order, while
        /// short jobs wait no two bulk jobs run back to back, and no share's bulk jobs take
        /// more than their quarter of the time from its first bulk job's start to its last's end.
        #[test]
        fn every_job_runs_once_in_order(jobs in proptest::collection::vec((0u64..4, 1u64..5000), 0..60)) {
            let mut q = FairQueue::default();
            for (i, &(share, us)) in jobs.iter().enumerate() {
                let lane = if share == 0 { Lane::Short } else { Lane::Bulk(share) };
                q.push(lane, (i, us));
            }
            let mut ran = Vec::new();
            let mut last_bulk = false;
            let mut now = 0u64;
            let mut spans: HashMap<u64, (u64, u64, u64)> = HashMap::new();
            loop {
                let short_waiting = q.len().0 > 0;
                match q.pop(now) {
                    Next::Run(lane, (i, us)) => {
                        if let Lane::Bulk(share) = lane {
                            prop_assert!(!(last_bulk && short_waiting), "two bulk jobs back to back while a short one waited");
                            let e = spans.entry(share).or_insert((now, now, 0));
                            e.1 = now + us;
                            e.2 += us;
                        }
                        last_bulk = matches!(lane, Lane::Bulk(_));
                        now += us;
                        q.ran(lane, now, us);
                        ran.push(i);
                    }
                    Next::WaitUntil(t) => {
                        prop_assert!(t > now);
                        now = t;
                        last_bulk = false;
                    }
                    Next::Idle => break,
                }
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
            for (share, (first, last, busy)) in spans {
                // Each bulk job but the last is followed by a rest of three times its length.
                let last_job = jobs.iter().rev().find(|j| j.0 == share).map_or(0, |j| j.1);
                prop_assert!((busy - last_job) * 4 <= (last - first - last_job) + 3, "share {} busy {} of {}", share, busy, last - first);
            }
        }
    }
}

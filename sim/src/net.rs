//! The simulated clock, event queue and network.
//!
//! Time is a count of microseconds since the start of the run; the queue orders events by
//! `(time, sequence)` so two events at the same instant run in the order they were scheduled.
//! A message's fate comes from the netem [`WanModel`] of the topology (delay, jitter, loss,
//! partitions; the same model the real socket applies), then from the fault plan: dropped,
//! duplicated, or held back (which reorders it).

use rand::rngs::StdRng;
use rand::Rng;
use redt_netem::{Fate, WanModel};
use redt_proto::DcId;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Simulated time, µs since the start of the run.
pub type Micros = u64;

/// A priority queue of events by time, FIFO among equal times.
pub struct Queue<E> {
    heap: BinaryHeap<Reverse<(Micros, u64)>>,
    events: std::collections::HashMap<u64, E>,
    seq: u64,
}

impl<E> Queue<E> {
    pub fn new() -> Self {
        Queue { heap: BinaryHeap::new(), events: std::collections::HashMap::new(), seq: 0 }
    }

    pub fn push(&mut self, at: Micros, e: E) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, e);
    }

    pub fn pop(&mut self) -> Option<(Micros, E)> {
        let Reverse((at, seq)) = self.heap.pop()?;
        self.events.remove(&seq).map(|e| (at, e))
    }
}

/// Message-level faults, as probabilities per message.
#[derive(Clone, Copy, Debug, Default)]
pub struct MessageFaults {
    /// Probability of dropping a message (on top of the link's own loss).
    pub drop: f64,
    /// Probability of delivering a message twice.
    pub duplicate: f64,
    /// Probability of holding a message back by up to `hold_max` more (reordering it).
    pub hold: f64,
    /// The longest extra hold.
    pub hold_max: Duration,
}

impl MessageFaults {
    /// Whether any message fault is on.
    pub fn any(&self) -> bool {
        self.drop > 0.0 || self.duplicate > 0.0 || self.hold > 0.0
    }

    /// These faults with each one that is on raised to at least `rate`.
    pub fn at_least(self, rate: f64) -> MessageFaults {
        let raise = |p: f64| if p > 0.0 { p.max(rate) } else { p };
        MessageFaults { drop: raise(self.drop), duplicate: raise(self.duplicate), hold: raise(self.hold), ..self }
    }
}

/// The network between nodes: the WAN model and the fault plan.
pub struct Network {
    pub wan: WanModel,
    /// The `Instant` simulated time 0 maps to (the WAN model works in `Instant`s; only
    /// differences matter, so runs stay deterministic).
    base: Instant,
    pub faults: MessageFaults,
    /// One-way delay of a message inside a DC.
    pub in_dc: Duration,
}

impl Network {
    pub fn new(wan: WanModel, in_dc: Duration) -> Network {
        Network { wan, base: Instant::now(), faults: MessageFaults::default(), in_dc }
    }

    /// When each copy of a message sent at `now` from `from` to `to` arrives (none: lost).
    pub fn fate(&mut self, from: DcId, to: DcId, bytes: usize, now: Micros, rng: &mut StdRng) -> Vec<Micros> {
        let at = if from == to {
            now + self.in_dc.as_micros() as u64
        } else {
            let t = self.base + Duration::from_micros(now);
            match self.wan.decide(from, to, bytes, t, rng) {
                Fate::Deliver { at } => at.duration_since(self.base).as_micros() as u64,
                Fate::Drop { .. } => return Vec::new(),
            }
        };
        let f = self.faults;
        if f.drop > 0.0 && rng.gen_bool(f.drop.min(1.0)) {
            return Vec::new();
        }
        let hold = |at: Micros, rng: &mut StdRng| {
            if f.hold > 0.0 && rng.gen_bool(f.hold.min(1.0)) {
                at + rng.gen_range(0..=f.hold_max.as_micros() as u64)
            } else {
                at
            }
        };
        let mut out = vec![hold(at, rng)];
        if f.duplicate > 0.0 && rng.gen_bool(f.duplicate.min(1.0)) {
            out.push(hold(at, rng));
        }
        out
    }
}

//! A hybrid logical clock whose readings fit a 48-bit commit timestamp.
//!
//! A reading is `physical_ms << 8 | logical` truncated to 48 bits (40 bits of
//! milliseconds ≈ 34 years from the clock's origin, 256 ticks per millisecond before the
//! logical part spills into the physical one). Readings are strictly increasing per clock
//! and never below any timestamp the clock has observed (RedT §4.2: the coordinator picks
//! `cts` above the executors' readings; docs/design.md §2).

use redt_proto::Cts;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Bits of logical counter below the milliseconds.
pub const LOGICAL_BITS: u32 = 8;

/// Milliseconds since the Unix epoch at 2026-01-01T00:00:00Z: the clock's origin, so 40
/// bits of milliseconds last until 2060.
pub const ORIGIN_UNIX_MS: u64 = 1_767_225_600_000;

/// Source of physical time in milliseconds since [`ORIGIN_UNIX_MS`] (injected so tests
/// and simulations control time).
pub trait Clock: Send + Sync {
    /// Milliseconds since the clock origin.
    fn now_ms(&self) -> u64;
}

/// The machine's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        unix.saturating_sub(ORIGIN_UNIX_MS)
    }
}

/// A hybrid logical clock (lock-free; shareable between threads).
#[derive(Debug, Default)]
pub struct Hlc {
    last: AtomicU64,
}

impl Hlc {
    /// A clock that has observed nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns a reading above both `now_ms` (physical) and every earlier reading or
    /// observation of this clock.
    pub fn tick(&self, now_ms: u64) -> Cts {
        let phys = (now_ms << LOGICAL_BITS) & Cts::MASK;
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = phys.max(last + 1) & Cts::MASK;
            match self.last.compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Cts(next),
                Err(cur) => last = cur,
            }
        }
    }

    /// Moves the clock up to at least `seen` (a timestamp from another node).
    pub fn observe(&self, seen: Cts) {
        self.last.fetch_max(seen.0 & Cts::MASK, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_increase_and_follow_observations() {
        let h = Hlc::new();
        let a = h.tick(10);
        let b = h.tick(10);
        assert!(b > a);
        assert_eq!(a, Cts(10 << LOGICAL_BITS));
        h.observe(Cts(1 << 30));
        assert!(h.tick(10) > Cts(1 << 30));
        // Physical time moving ahead wins over the logical part.
        assert_eq!(h.tick(1 << 30), Cts((1 << 30) << LOGICAL_BITS));
    }
}

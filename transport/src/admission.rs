//! Who may open one more incoming QUIC connection: the caps on connections open at once, in
//! all and per peer IP address (the topology's `transport.max_connections` and
//! `transport.max_connections_per_peer`), when an address must first prove itself with a QUIC
//! Retry (over half of a cap), and a rate limit on the warnings refusals log.
//!
//! No I/O: the accept loop asks [`Admission::admit`] for each incoming connection before its
//! handshake and holds the returned [`Admitted`] for the connection's life.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why an incoming connection was refused: which cap, with its key and value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// `transport.max_connections` connections are open.
    #[error("too many connections: {open} open, at most {max} (transport.max_connections)")]
    Total {
        /// Connections open now.
        open: usize,
        /// The cap.
        max: usize,
    },
    /// `transport.max_connections_per_peer` connections from this IP address are open.
    #[error("too many connections from {ip}: {open} open, at most {max} (transport.max_connections_per_peer)")]
    PerPeer {
        /// The peer's IP address.
        ip: IpAddr,
        /// Connections open from it now.
        open: usize,
        /// The cap.
        max: usize,
    },
}

/// Connections open at once, in all and by peer IP address. The map holds only addresses
/// with a connection open, so it has at most `max_total` entries.
#[derive(Debug)]
pub(crate) struct Admission {
    max_total: usize,
    max_per_peer: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct Admitted {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Admission {
    /// Caps of `max_total` connections in all and `max_per_peer` per IP address.
    pub(crate) fn new(max_total: usize, max_per_peer: usize) -> Arc<Admission> {
        Arc::new(Admission { max_total, max_per_peer, open: Mutex::new(Open::default()) })
    }

    /// Whether one more connection from `ip` must first prove its address (a QUIC Retry) before
    /// it is counted: once half of either cap is taken (at least one connection in all, or
    /// from `ip`), so a flood from spoofed addresses, which cannot answer a Retry, takes no
    /// place under either cap and costs no handshake.
    pub(crate) fn wants_validation(&self, ip: IpAddr) -> bool {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let from_ip = open.by_ip.get(&ip).copied().unwrap_or(0);
        open.total >= (self.max_total / 2).max(1) || from_ip >= (self.max_per_peer / 2).max(1)
    }

    /// Admits one more connection from `ip`, or says which cap it is over (nothing counted
    /// then).
    ///
    /// # Errors
    /// [`Refusal::Total`] or [`Refusal::PerPeer`].
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refusal> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.max_total {
            return Err(Refusal::Total { open: open.total, max: self.max_total });
        }
        let from_ip = open.by_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_peer {
            return Err(Refusal::PerPeer { ip, open: from_ip, max: self.max_per_peer });
        }
        open.total += 1;
        open.by_ip.insert(ip, from_ip + 1);
        Ok(Admitted { admission: self.clone(), ip })
    }

    /// Connections open now, in all.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).total
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.admission.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_ip.remove(&self.ip);
            }
        }
    }
}

/// Lets a kind of warning through at most once per interval and counts the ones held back,
/// so a flood of refusals logs one line a second, not one per refusal.
#[derive(Debug)]
pub struct WarnEvery {
    every: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl WarnEvery {
    /// At most one warning per `every`.
    pub fn new(every: Duration) -> WarnEvery {
        WarnEvery { every, state: Mutex::new((None, 0)) }
    }

    /// At `now`: `Some(held back since the last one)` if this warning is to be logged, else
    /// `None` (and it is counted as held back).
    pub fn handle_event(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.0.is_some_and(|last| now.saturating_duration_since(last) < self.every) {
            s.1 = s.1.saturating_add(1);
            return None;
        }
        s.0 = Some(now);
        Some(std::mem::take(&mut s.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an IP address")
    }

    #[test]
    fn caps_per_peer_and_in_all_and_frees_on_drop() {
        let a = Admission::new(3, 2);
        let first = a.admit(ip("10.0.0.1")).expect("first");
        let second = a.admit(ip("10.0.0.1")).expect("second");
        assert_eq!(
            a.admit(ip("10.0.0.1")).expect_err("third from one peer"),
            Refusal::PerPeer { ip: ip("10.0.0.1"), open: 2, max: 2 }
        );
        let other = a.admit(ip("10.0.0.2")).expect("another peer");
        assert_eq!(a.admit(ip("10.0.0.3")).expect_err("fourth in all"), Refusal::Total { open: 3, max: 3 });
        drop(first);
        assert_eq!(a.open(), 2);
        let again = a.admit(ip("10.0.0.1")).expect("a freed place is taken again");
        drop((second, other, again));
        assert_eq!(a.open(), 0);
        assert!(a.open.lock().expect("not poisoned").by_ip.is_empty(), "no entry for a peer with none open");
    }

    #[test]
    fn refusals_name_their_key() {
        let a = Admission::new(1, 1);
        let _held = a.admit(ip("10.0.0.1")).expect("first");
        let text = a.admit(ip("10.0.0.1")).expect_err("over").to_string();
        assert!(text.contains("(transport.max_connections)"), "{text}");
    }

    #[test]
    fn warnings_are_held_back_within_the_interval_and_counted() {
        let w = WarnEvery::new(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(w.handle_event(t0), Some(0));
        assert_eq!(w.handle_event(t0 + Duration::from_millis(10)), None);
        assert_eq!(w.handle_event(t0 + Duration::from_millis(20)), None);
        assert_eq!(w.handle_event(t0 + Duration::from_secs(1)), Some(2));
    }
}

//! "Acknowledged commits lost" after a drill (`redt drill`): every YCSB
//! update of `redt bench ycsb --drill` writes a value naming its attempt — a run nonce, the
//! client and the client's sequence number ([`encode`]) — and [`WriteLog`] remembers, per key,
//! what the clients were told about each write of the key's cell 0. After the drill every
//! such key is read back ([`WriteLog::verdict`] judges each value read).
//!
//! # What it checks, exactly
//!
//! Only cell 0: a YCSB call returns no values, and the key/value read that does returns a
//! record's cell 0 (`redt_protocol::call::kv_procedure`). Updates of the other cells carry
//! encoded values too but are not checked.
//!
//! For one cell, let `S` be the latest submission time of the writes acknowledged as
//! committed. An acknowledged write `W` may be the final value iff no acknowledged write was
//! submitted after `W`'s acknowledgement (`ack(W) ≥ S`): otherwise one was certainly
//! serialized after it (real-time order). A write whose outcome was unknown may be the final
//! value whenever it was submitted (it may have committed at any point since, recovery
//! included). An aborted write may never be: the client is told `aborted` only when the
//! transaction certainly did not commit. A key with at least one acknowledged write whose
//! value read is none of the allowed ones (an older acknowledged value, the loaded value, an
//! aborted write's, garbage) counts as **lost**. The check has no false positives under
//! those rules and misses nothing they define; a value of an aborted write counts apart as
//! well (**aborted visible**), whether or not the key had an acknowledged write.

use redt_proto::Outcome;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Bytes of a value taken by its tag: the run nonce (u32), the client (u32) and its sequence
/// number (u64), little-endian.
pub const TAG_BYTES: usize = 16;

/// The value an update of attempt `seq` of `client` writes in a run with `nonce`: the tag,
/// then the sequence number's low byte up to `len` bytes. `len` below [`TAG_BYTES`] gives a
/// value that [`decode`] does not recognize (the check is then skipped).
pub fn encode(nonce: u32, client: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(TAG_BYTES));
    v.extend_from_slice(&nonce.to_le_bytes());
    v.extend_from_slice(&client.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.resize(len.max(TAG_BYTES), seq as u8);
    v.truncate(len);
    v
}

/// The `(client, seq)` a value of this run (`nonce`) names, or `None` (a loaded value, one of
/// another run, a short one).
pub fn decode(nonce: u32, value: &[u8]) -> Option<(u32, u64)> {
    let tag = value.get(..TAG_BYTES)?;
    let n = u32::from_le_bytes(tag[0..4].try_into().ok()?);
    (n == nonce).then(|| {
        (
            u32::from_le_bytes(tag[4..8].try_into().unwrap_or_default()),
            u64::from_le_bytes(tag[8..16].try_into().unwrap_or_default()),
        )
    })
}

/// One attempt: `(client, seq)`.
type Attempt = (u32, u64);

/// The writes of one cell.
#[derive(Clone, Debug, Default)]
struct CellLog {
    /// The latest submission (µs) of an acknowledged write.
    latest_acked_submit_us: Option<u64>,
    /// Acknowledged writes still allowed as the final value, with their acknowledgement (µs).
    allowed: Vec<(Attempt, u64)>,
    /// Writes whose outcome is unknown.
    unknown: Vec<Attempt>,
    /// Acknowledged writes in all.
    acked: u64,
}

impl CellLog {
    fn acked(&mut self, attempt: Attempt, submitted_us: u64, acked_us: u64) {
        self.acked += 1;
        let s = self.latest_acked_submit_us.map_or(submitted_us, |s| s.max(submitted_us));
        self.latest_acked_submit_us = Some(s);
        self.allowed.push((attempt, acked_us));
        self.allowed.retain(|&(_, ack)| ack >= s);
    }
}

/// The judgement of one key's value read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyVerdict {
    /// An acknowledged write no other acknowledged write follows.
    Acked,
    /// A write whose outcome was unknown.
    Unknown,
    /// No acknowledged write, and not an aborted one's value: nothing to check.
    NothingAcked,
    /// A value an acknowledged write should have replaced (see the module docs).
    Lost,
    /// The value of an aborted write, on a key without an acknowledged write.
    AbortedVisible,
    /// The value of an aborted write on a key with an acknowledged write: lost too.
    LostToAborted,
}

/// Counts of a read-back.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LostReport {
    /// Keys whose cell 0 some attempt wrote.
    pub keys_written: u64,
    /// Keys read back.
    pub keys_read: u64,
    /// Keys that could not be read (every attempt aborted or unknown); not judged.
    pub keys_unreadable: u64,
    /// Writes of cell 0 acknowledged as committed.
    pub writes_acked: u64,
    /// … whose outcome stayed unknown.
    pub writes_unknown: u64,
    /// … aborted.
    pub writes_aborted: u64,
    /// Keys whose final value is an acknowledged write that nothing acknowledged follows.
    pub final_acked: u64,
    /// Keys whose final value is a write with an unknown outcome.
    pub final_unknown: u64,
    /// Keys with an acknowledged write whose final value is not allowed: acknowledged
    /// commits lost.
    pub lost: u64,
    /// Keys whose final value is an aborted write's (counted in `lost` too when the key had an
    /// acknowledged write).
    pub aborted_visible: u64,
    /// Up to 10 lost keys, for a look with `redt client`.
    pub lost_keys: Vec<u64>,
}

/// Every write of cell 0 of every key, as the clients were told, in one run (`nonce`).
#[derive(Debug)]
pub struct WriteLog {
    nonce: u32,
    cells: Mutex<HashMap<u64, CellLog>>,
    aborted: Mutex<HashSet<Attempt>>,
    counts: Mutex<[u64; 3]>,
}

impl WriteLog {
    /// An empty log of the run with `nonce` (a random number: values of earlier runs on the
    /// same cluster then do not count as this run's).
    pub fn new(nonce: u32) -> Self {
        WriteLog {
            nonce,
            cells: Mutex::new(HashMap::new()),
            aborted: Mutex::new(HashSet::new()),
            counts: Mutex::new([0; 3]),
        }
    }

    /// The run's nonce.
    pub fn nonce(&self) -> u32 {
        self.nonce
    }

    /// Records attempt `seq` of `client`, which wrote cell 0 of `keys`, submitted and
    /// answered at `submitted_us` and `answered_us` (µs on one clock shared by every client),
    /// and what the client was told.
    pub fn record(&self, client: u32, seq: u64, keys: &[u64], submitted_us: u64, answered_us: u64, told: Outcome) {
        if keys.is_empty() {
            return;
        }
        let attempt = (client, seq);
        {
            let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            c[match told {
                Outcome::Committed => 0,
                Outcome::Unknown => 1,
                Outcome::Aborted => 2,
            }] += keys.len() as u64;
        }
        if told == Outcome::Aborted {
            self.aborted.lock().unwrap_or_else(|p| p.into_inner()).insert(attempt);
        }
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        for &k in keys {
            let cell = cells.entry(k).or_default();
            match told {
                Outcome::Committed => cell.acked(attempt, submitted_us, answered_us),
                Outcome::Unknown => cell.unknown.push(attempt),
                Outcome::Aborted => {}
            }
        }
    }

    /// Every key some attempt wrote, ascending.
    pub fn keys(&self) -> Vec<u64> {
        let mut k: Vec<u64> = self.cells.lock().unwrap_or_else(|p| p.into_inner()).keys().copied().collect();
        k.sort_unstable();
        k
    }

    /// Judges `value`, cell 0 of `key` read after the drill.
    pub fn verdict(&self, key: u64, value: &[u8]) -> KeyVerdict {
        let cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        let cell = cells.get(&key).cloned().unwrap_or_default();
        drop(cells);
        let attempt = decode(self.nonce, value);
        if let Some(a) = attempt {
            if cell.allowed.iter().any(|&(w, _)| w == a) {
                return KeyVerdict::Acked;
            }
            if cell.unknown.contains(&a) {
                return KeyVerdict::Unknown;
            }
        }
        let aborted = attempt.is_some_and(|a| self.aborted.lock().unwrap_or_else(|p| p.into_inner()).contains(&a));
        match (cell.acked > 0, aborted) {
            (true, true) => KeyVerdict::LostToAborted,
            (true, false) => KeyVerdict::Lost,
            (false, true) => KeyVerdict::AbortedVisible,
            (false, false) => KeyVerdict::NothingAcked,
        }
    }

    /// The counts of a read-back in which `read` gives each key's cell 0 (`None`: unreadable).
    pub fn report(&self, read: &[(u64, Option<Vec<u8>>)]) -> LostReport {
        let counts = *self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let mut r = LostReport {
            keys_written: self.cells.lock().unwrap_or_else(|p| p.into_inner()).len() as u64,
            writes_acked: counts[0],
            writes_unknown: counts[1],
            writes_aborted: counts[2],
            ..Default::default()
        };
        for (key, value) in read {
            let Some(value) = value else {
                r.keys_unreadable += 1;
                continue;
            };
            r.keys_read += 1;
            match self.verdict(*key, value) {
                KeyVerdict::Acked => r.final_acked += 1,
                KeyVerdict::Unknown => r.final_unknown += 1,
                KeyVerdict::NothingAcked => {}
                KeyVerdict::AbortedVisible => r.aborted_visible += 1,
                v @ (KeyVerdict::Lost | KeyVerdict::LostToAborted) => {
                    r.lost += 1;
                    r.aborted_visible += u64::from(v == KeyVerdict::LostToAborted);
                    if r.lost_keys.len() < 10 {
                        r.lost_keys.push(*key);
                    }
                }
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const N: u32 = 0xdead_beef;

    fn v(client: u32, seq: u64) -> Vec<u8> {
        encode(N, client, seq, 100)
    }

    #[test]
    fn values_name_their_attempt() {
        let x = encode(N, 7, 123_456_789, 100);
        assert_eq!(x.len(), 100);
        assert_eq!(decode(N, &x), Some((7, 123_456_789)));
        assert_eq!(decode(N + 1, &x), None, "another run's value");
        assert_eq!(decode(N, &[0; 100]), None, "the loaded value");
        assert_eq!(decode(N, &[]), None);
        assert_eq!(encode(N, 1, 2, 8).len(), 8);
        assert_eq!(decode(N, &encode(N, 1, 2, 8)), None, "too short to carry a tag");
        assert_eq!(encode(N, 1, 2, 16).len(), 16);
        assert_eq!(decode(N, &encode(N, 1, 2, 16)), Some((1, 2)));
    }

    #[test]
    fn the_last_acknowledged_write_or_a_concurrent_one_is_the_final_value() {
        let log = WriteLog::new(N);
        // Key 1: w(0,1) acked [0, 10], then w(1,1) submitted at 20, acked at 30: w(0,1) is
        // overwritten in real time.
        log.record(0, 1, &[1], 0, 10, Outcome::Committed);
        log.record(1, 1, &[1], 20, 30, Outcome::Committed);
        assert_eq!(log.verdict(1, &v(1, 1)), KeyVerdict::Acked);
        assert_eq!(log.verdict(1, &v(0, 1)), KeyVerdict::Lost, "an older acknowledged value");
        assert_eq!(log.verdict(1, &[0; 100]), KeyVerdict::Lost, "the loaded value");
        // Key 2: two concurrent acknowledged writes ([0, 50] and [10, 40]): either may be last.
        log.record(0, 2, &[2], 0, 50, Outcome::Committed);
        log.record(1, 2, &[2], 10, 40, Outcome::Committed);
        assert_eq!(log.verdict(2, &v(0, 2)), KeyVerdict::Acked);
        assert_eq!(log.verdict(2, &v(1, 2)), KeyVerdict::Acked);
        // Key 3: an unknown write is allowed whenever it was sent; an aborted one never.
        log.record(0, 3, &[3], 0, 10, Outcome::Unknown);
        log.record(1, 3, &[3], 20, 30, Outcome::Committed);
        log.record(2, 3, &[3], 40, 50, Outcome::Aborted);
        assert_eq!(log.verdict(3, &v(0, 3)), KeyVerdict::Unknown);
        assert_eq!(log.verdict(3, &v(2, 3)), KeyVerdict::LostToAborted);
        assert_eq!(log.verdict(3, &v(9, 9)), KeyVerdict::Lost, "a value nobody wrote to this key");
        // Key 4: nothing acknowledged.
        log.record(0, 4, &[4], 0, 10, Outcome::Aborted);
        assert_eq!(log.verdict(4, &[0; 100]), KeyVerdict::NothingAcked);
        assert_eq!(log.verdict(4, &v(0, 4)), KeyVerdict::AbortedVisible);
        let r =
            log.report(&[(1, Some(v(0, 1))), (2, Some(v(1, 2))), (3, Some(v(0, 3))), (4, Some(v(0, 4))), (5, None)]);
        assert_eq!(
            r,
            LostReport {
                keys_written: 4,
                keys_read: 4,
                keys_unreadable: 1,
                writes_acked: 5,
                writes_unknown: 1,
                writes_aborted: 2,
                final_acked: 1,
                final_unknown: 1,
                lost: 1,
                aborted_visible: 1,
                lost_keys: vec![1],
            }
        );
        assert_eq!(log.keys(), [1, 2, 3, 4]);
    }

    proptest! {
        /// Against a brute force over every pair of acknowledged writes: an acknowledged
        /// write is allowed iff no acknowledged write was submitted after its
        /// acknowledgement, whatever the order the answers are recorded in.
        #[test]
        fn pruning_matches_the_definition(
            writes in proptest::collection::vec((0u64..1000, 1u64..300, 0u8..3), 1..40),
            order in any::<proptest::sample::Index>(),
        ) {
            let log = WriteLog::new(N);
            let attempts: Vec<(u64, u64, Outcome)> = writes
                .iter()
                .map(|&(s, d, t)| (s, s + d, [Outcome::Committed, Outcome::Unknown, Outcome::Aborted][t as usize]))
                .collect();
            // Answers arrive in a rotated order (clients answer out of submission order).
            let k = order.index(attempts.len());
            for i in (k..attempts.len()).chain(0..k) {
                let (s, a, t) = attempts[i];
                log.record(i as u32, 0, &[9], s, a, t);
            }
            for (i, &(_, a, t)) in attempts.iter().enumerate() {
                let verdict = log.verdict(9, &v(i as u32, 0));
                let any_acked = attempts.iter().any(|w| w.2 == Outcome::Committed);
                let expected = match t {
                    Outcome::Committed => {
                        if attempts.iter().any(|w| w.2 == Outcome::Committed && w.0 > a) {
                            KeyVerdict::Lost
                        } else {
                            KeyVerdict::Acked
                        }
                    }
                    Outcome::Unknown => KeyVerdict::Unknown,
                    Outcome::Aborted if any_acked => KeyVerdict::LostToAborted,
                    Outcome::Aborted => KeyVerdict::AbortedVisible,
                };
                prop_assert_eq!(verdict, expected, "attempt {}", i);
            }
        }
    }
}

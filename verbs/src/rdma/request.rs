//! Requests as the RDMA engine sees them: bounds and alignment validation, and the emulation
//! of masked compare-and-swap and masked fetch-and-add with plain CAS loops (the Mellanox
//! extended atomics are not in upstream rdma-core).

use super::backend;
use crate::error::{Error, Result};
use crate::region::masked_add;
use crate::{VerbCounters, WorkRequest};
use redt_proto::{NodeId, Offset};

/// A request as the engine sees it (borrowing write data).
#[derive(Clone, Copy, Debug)]
pub(super) enum Req<'a> {
    Read { offset: Offset, len: usize },
    Write { offset: Offset, data: &'a [u8] },
    Cas { offset: Offset, expected: u64, new: u64 },
    Faa { offset: Offset, add: u64 },
    MaskedCas { offset: Offset, compare: u64, compare_mask: u64, swap: u64, swap_mask: u64 },
    MaskedFaa { offset: Offset, add: u64, boundary: u64 },
}

impl<'a> From<&'a WorkRequest> for Req<'a> {
    fn from(wr: &'a WorkRequest) -> Self {
        match *wr {
            WorkRequest::Read { offset, len } => Req::Read { offset, len: len as usize },
            WorkRequest::Write { offset, ref data } => Req::Write { offset, data },
            WorkRequest::CompareAndSwap { offset, expected, new } => Req::Cas { offset, expected, new },
            WorkRequest::FetchAndAdd { offset, add } => Req::Faa { offset, add },
            WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask } => {
                Req::MaskedCas { offset, compare, compare_mask, swap, swap_mask }
            }
            WorkRequest::MaskedFetchAndAdd { offset, add, boundary } => Req::MaskedFaa { offset, add, boundary },
            // Refused before conversion (`RdmaVerbs::post_batch`): a NIC writes the region
            // behind the node's back, so no disk image could track it.
            WorkRequest::Persist => Req::Read { offset: Offset(0), len: 0 },
        }
    }
}

impl Req<'_> {
    fn offset(&self) -> Offset {
        match *self {
            Req::Read { offset, .. }
            | Req::Write { offset, .. }
            | Req::Cas { offset, .. }
            | Req::Faa { offset, .. }
            | Req::MaskedCas { offset, .. }
            | Req::MaskedFaa { offset, .. } => offset,
        }
    }

    /// Bytes addressed, and whether the request is an 8-byte atomic.
    fn span(&self) -> (u64, bool) {
        match self {
            Req::Read { len, .. } => (*len as u64, false),
            Req::Write { data, .. } => (data.len() as u64, false),
            _ => (8, true),
        }
    }

    /// Bounce-buffer bytes the request needs (8-byte aligned slots).
    pub(super) fn slot_bytes(&self) -> usize {
        (self.span().0 as usize).div_ceil(8) * 8
    }

    pub(super) fn count(&self, c: &VerbCounters) {
        match self {
            Req::Read { len, .. } => c.read(*len),
            Req::Write { data, .. } => c.write(data.len()),
            Req::Cas { .. } => c.cas(),
            Req::Faa { .. } => c.faa(),
            Req::MaskedCas { .. } => c.masked_cas(),
            Req::MaskedFaa { .. } => c.masked_faa(),
        }
    }
}

/// Bounds and alignment check of `req` against a `size`-byte region of `node`, as
/// [`LocalVerbs`] does; also rejects transfers a single work request cannot carry.
///
/// [`LocalVerbs`]: crate::LocalVerbs
pub(super) fn validate(node: NodeId, size: u64, req: &Req<'_>) -> Result<()> {
    let offset = req.offset();
    let (len, atomic) = req.span();
    if atomic && offset.0 % 8 != 0 {
        return Err(Error::Unaligned { node, offset });
    }
    if offset.0.checked_add(len).is_none_or(|end| end > size) {
        return Err(Error::OutOfBounds { node, offset, len, size });
    }
    if len > u64::from(u32::MAX >> 1) {
        return Err(backend(format!("{len}-byte transfer exceeds the 2 GiB RDMA message limit")));
    }
    Ok(())
}

/// The value a masked CAS installs over `old`.
fn masked_swap_value(old: u64, swap: u64, swap_mask: u64) -> u64 {
    (old & !swap_mask) | (swap & swap_mask)
}

/// The first (optimistic) CAS of a masked CAS: guess that the unmasked bits are zero.
pub(super) fn masked_cas_probe(compare: u64, compare_mask: u64, swap: u64, swap_mask: u64) -> (u64, u64) {
    let guess = compare & compare_mask;
    (guess, masked_swap_value(guess, swap, swap_mask))
}

/// Finishes a masked CAS whose probe CAS (expected `guess`) returned `old`: retries plain
/// CASes through `cas(expected, new) -> old` until the word is swapped or stops matching.
/// Returns the old value with the semantics of [`Region::masked_compare_and_swap`].
///
/// [`Region::masked_compare_and_swap`]: crate::Region::masked_compare_and_swap
pub(super) fn resolve_masked_cas(
    mut guess: u64,
    mut old: u64,
    compare: u64,
    compare_mask: u64,
    (swap, swap_mask): (u64, u64),
    mut cas: impl FnMut(u64, u64) -> Result<u64>,
) -> Result<u64> {
    loop {
        if old == guess {
            return Ok(old);
        }
        if old & compare_mask != compare & compare_mask {
            return Ok(old);
        }
        guess = old;
        old = cas(guess, masked_swap_value(guess, swap, swap_mask))?;
    }
}

/// Finishes a masked fetch-and-add whose probe READ saw `seen`: CAS loop installing the
/// field-wise sum. Returns the old value (as [`Region::masked_fetch_and_add`]).
///
/// [`Region::masked_fetch_and_add`]: crate::Region::masked_fetch_and_add
pub(super) fn resolve_masked_faa(
    mut seen: u64,
    add: u64,
    boundary: u64,
    mut cas: impl FnMut(u64, u64) -> Result<u64>,
) -> Result<u64> {
    loop {
        let old = cas(seen, masked_add(seen, add, boundary))?;
        if old == seen {
            return Ok(old);
        }
        seen = old;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::Region;
    use std::sync::Arc;

    #[test]
    fn validation_matches_the_local_backend() {
        let n = NodeId(2);
        assert!(validate(n, 64, &Req::Read { offset: Offset(60), len: 4 }).is_ok());
        assert!(matches!(
            validate(n, 64, &Req::Read { offset: Offset(60), len: 5 }),
            Err(Error::OutOfBounds { len: 5, size: 64, .. })
        ));
        assert!(matches!(
            validate(n, 64, &Req::Write { offset: Offset(u64::MAX), data: &[1] }),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(validate(n, 64, &Req::Faa { offset: Offset(4), add: 1 }), Err(Error::Unaligned { .. })));
        assert!(matches!(
            validate(n, 64, &Req::Cas { offset: Offset(64), expected: 0, new: 1 }),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(validate(n, 64, &Req::MaskedFaa { offset: Offset(56), add: 1, boundary: 0 }).is_ok());
        assert!(validate(n, 64, &Req::Read { offset: Offset(64), len: 0 }).is_ok());
    }

    /// The masked-atomic emulation, driven by CAS on a `Region`, equals the region's own
    /// masked atomics (which follow the Mellanox ExtAtomics semantics).
    #[test]
    fn masked_emulation_matches_region_semantics() {
        let cases = [
            (0u64, 0u64, 0xFFu64, 0x01u64, 0x01u64),
            (0x0100, 0x0000, 0x00FF, 0x0001, 0x00FF),
            (0x0101, 0x0000, 0x00FF, 0x0001, 0x00FF),
            (0xFFFF_0000, 0xFFFF_0000, 0xFFFF_0000, 0x1234, 0xFFFF),
            (0xFFFF_0000, 0xFFFE_0000, 0xFFFF_0000, 0x1234, 0xFFFF),
            (42, 7, 0, 9, u64::MAX),
        ];
        for (init, compare, cmask, swap, smask) in cases {
            let want = Region::new_heap(8);
            want.write(0, &init.to_le_bytes());
            let want_old = want.masked_compare_and_swap(0, compare, cmask, swap, smask);

            let got = Region::new_heap(8);
            got.write(0, &init.to_le_bytes());
            let (guess, new) = masked_cas_probe(compare, cmask, swap, smask);
            let first = got.compare_and_swap(0, guess, new);
            let old = resolve_masked_cas(guess, first, compare, cmask, (swap, smask), |e, n| {
                Ok(got.compare_and_swap(0, e, n))
            })
            .unwrap();
            assert_eq!(old, want_old, "init {init:#x}");
            assert_eq!(
                got.word(0).load(std::sync::atomic::Ordering::SeqCst),
                want.word(0).load(std::sync::atomic::Ordering::SeqCst)
            );
        }
        for (init, add, boundary) in [(0x0Fu64, 0x01u64, 0x88u64), (u64::MAX, 2, 0), (0x1F, 0x11, 0x88)] {
            let want = Region::new_heap(8);
            want.write(0, &init.to_le_bytes());
            let want_old = want.masked_fetch_and_add(0, add, boundary);
            let got = Region::new_heap(8);
            got.write(0, &init.to_le_bytes());
            // A stale probe value forces at least one retry.
            let old = resolve_masked_faa(init ^ 1, add, boundary, |e, n| Ok(got.compare_and_swap(0, e, n))).unwrap();
            assert_eq!(old, want_old);
            assert_eq!(
                got.word(0).load(std::sync::atomic::Ordering::SeqCst),
                want.word(0).load(std::sync::atomic::Ordering::SeqCst)
            );
        }
    }

    #[test]
    fn concurrent_masked_adds_do_not_lose_updates() {
        let r = Arc::new(Region::new_heap(8));
        let threads: Vec<_> =
            (0..4)
                .map(|_| {
                    let r = r.clone();
                    std::thread::spawn(move || {
                        for _ in 0..1000 {
                            let seen = r.word(0).load(std::sync::atomic::Ordering::Relaxed);
                            // Two 32-bit fields, +1 in each.
                            resolve_masked_faa(seen, 0x0000_0001_0000_0001, 1 << 31, |e, n| {
                                Ok(r.compare_and_swap(0, e, n))
                            })
                            .unwrap();
                        }
                    })
                })
                .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.word(0).load(std::sync::atomic::Ordering::SeqCst), 0x0000_0FA0_0000_0FA0);
    }
}

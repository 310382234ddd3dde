//! The operations of a key/value call on the wire ([`KvOpMsg`]): their kinds, and a scan's
//! range and row limit decoded and checked. Read by the call builder (`crate::call`) and by
//! the limits (`crate::limits`), which count a scan by its row limit.

use redt_proto::wire::KvOpMsg;

/// Operation kinds of [`KvOpMsg::kind`].
pub mod kv_kind {
    /// Read cell 0.
    pub const READ: u32 = 0;
    /// Overwrite cell 0.
    pub const WRITE: u32 = 1;
    /// Add an i64.
    pub const ADD: u32 = 2;
    /// Append a u64.
    pub const APPEND: u32 = 3;
    /// Scan cell 0 of a key range: `key` is the first key, `operand` the last
    /// (a `u64` as the same bits), `value` the row limit as a little-endian `u32`.
    pub const SCAN: u32 = 70;
    /// Delete a key (clear cell 0).
    pub const DELETE: u32 = 71;
    /// Check that cell 0 of `key` is still at a version: `operand` is the raw version word
    /// (update counter << 48 | 48-bit commit timestamp) as an `i64` of the same bits, as a
    /// versioned read returned it (0: no record, or a cell never written). The validation of
    /// an optimistic transaction (docs/design.md, "Optimistic transactions: versioned reads
    /// and CHECK"): a read access of the key (cell 0 share-locked until the decision), whose
    /// replicas vote abort ([`redt_dc_executor::AbortReason::StaleRead`]) where the version
    /// under the lock differs. It reads nothing into the answer (its read is `None`, as a
    /// write's) and writes nothing; a call with one never joins a batch.
    pub const CHECK: u32 = 72;
}

/// The scan of a key/value operation message, checked: `(from, to, limit)`.
///
/// # Errors
/// What is wrong, as text: a first key past the last, a limit of 0 or over
/// [`redt_dc_executor::MAX_RANGE_ROWS`], a malformed limit.
pub fn scan_of(o: &KvOpMsg) -> std::result::Result<(u64, u64, u32), String> {
    let (from, to) = (o.key, o.operand as u64);
    let limit = <[u8; 4]>::try_from(o.value.as_slice())
        .map(u32::from_le_bytes)
        .map_err(|_| format!("a scan's limit is 4 bytes, got {}", o.value.len()))?;
    if from > to {
        return Err(format!("scan from key {from} to key {to}: the first key is past the last"));
    }
    if limit == 0 || limit > redt_dc_executor::MAX_RANGE_ROWS {
        return Err(format!(
            "a scan of at most {limit} rows; the limit must be 1 to {}",
            redt_dc_executor::MAX_RANGE_ROWS
        ));
    }
    Ok((from, to, limit))
}

//! The bank workload's invariant: transfers move money between accounts and never create or
//! destroy it, so the balances of every replica sum to the total loaded; [`balance`] reads
//! one account.

/// The balance an account cell holds: its first 8 bytes as a little-endian `i64`, a shorter
/// cell zero-extended (an empty cell holds 0).
pub fn balance(cell: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    let n = cell.len().min(8);
    b[..n].copy_from_slice(&cell[..n]);
    i64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_are_little_endian_and_short_cells_zero_extended() {
        assert_eq!(balance(&(-42i64).to_le_bytes()), -42);
        assert_eq!(balance(&[]), 0);
        assert_eq!(balance(&[7]), 7);
        assert_eq!(balance(&[1, 0, 0, 0, 0, 0, 0, 0, 99]), 1, "bytes past the eighth are ignored");
    }
}

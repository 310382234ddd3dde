//! The bank workload's draws: transfers between two distinct accounts
//! (`KvOp::Add(from, −x)`, `KvOp::Add(to, +x)`; balances may go negative) and reads of every
//! account, whose balances must sum to the total loaded ([`redt_checkers::bank`]).

use rand::Rng;
use redt_dc_executor::KvOp;

/// One drawn bank transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BankTxn {
    /// A read of every account, in the order of the accounts given ([`read_all`]).
    ReadAll(Vec<KvOp>),
    /// A transfer ([`draw_transfer`]).
    Transfer {
        /// The position of the account debited.
        from: usize,
        /// The position of the account credited (never `from`).
        to: usize,
        /// `Add(accounts[from], −x)`, `Add(accounts[to], +x)`.
        ops: [KvOp; 2],
    },
}

impl BankTxn {
    /// Its key/value operations.
    pub fn ops(&self) -> &[KvOp] {
        match self {
            BankTxn::ReadAll(ops) => ops,
            BankTxn::Transfer { ops, .. } => ops,
        }
    }
}

/// Draws one transaction over `accounts` (at least 2): with probability `read_ratio` (no draw
/// at all when it is 0 or less; at most 1) a read of every account, else a transfer of 1 to
/// `max` ([`draw_transfer`]).
pub fn draw(rng: &mut impl Rng, accounts: &[u64], max: i64, read_ratio: f64) -> BankTxn {
    if read_ratio > 0.0 && rng.gen_bool(read_ratio.min(1.0)) {
        return BankTxn::ReadAll(read_all(accounts));
    }
    let (from, to, ops) = draw_transfer(rng, accounts, max);
    BankTxn::Transfer { from, to, ops }
}

/// A read of every account of `accounts`, in order.
pub fn read_all(accounts: &[u64]) -> Vec<KvOp> {
    accounts.iter().map(|&k| KvOp::Read(k)).collect()
}

/// Draws one transfer between two distinct accounts of `accounts` (at least 2) of 1 to `max`
/// (at least 1): the positions of the two accounts (the second one of the others, uniformly,
/// counted on from the first) and the two operations (`Add(from, −x)`, `Add(to, +x)`).
///
/// # Panics
/// If `accounts` holds fewer than 2 accounts.
pub fn draw_transfer(rng: &mut impl Rng, accounts: &[u64], max: i64) -> (usize, usize, [KvOp; 2]) {
    let n = accounts.len();
    let from = rng.gen_range(0..n);
    let to = (from + rng.gen_range(1..n)) % n;
    let x = rng.gen_range(1..=max.max(1));
    (from, to, [KvOp::Add(accounts[from], -x), KvOp::Add(accounts[to], x)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn transfers_are_between_distinct_accounts_and_within_the_maximum() {
        let accounts: Vec<u64> = (10..15).collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut reads = 0;
        for _ in 0..2000 {
            match draw(&mut rng, &accounts, 7, 0.2) {
                BankTxn::ReadAll(ops) => {
                    assert_eq!(ops, read_all(&accounts));
                    reads += 1;
                }
                BankTxn::Transfer { from, to, ops } => {
                    assert_ne!(from, to);
                    let [KvOp::Add(a, d), KvOp::Add(b, c)] = ops else { panic!("{ops:?}") };
                    assert_eq!((a, b), (accounts[from], accounts[to]));
                    assert!((1..=7).contains(&c) && d == -c, "{d} {c}");
                }
            }
        }
        assert!((300..500).contains(&reads), "{reads} read-alls of 2000 at 0.2");
    }

    #[test]
    fn no_read_ratio_draws_no_read() {
        let mut a = rand::rngs::StdRng::seed_from_u64(9);
        let mut b = a.clone();
        for _ in 0..100 {
            let BankTxn::Transfer { ops, .. } = draw(&mut a, &[0, 1, 2], 5, 0.0) else { panic!("a read-all") };
            assert_eq!(ops, draw_transfer(&mut b, &[0, 1, 2], 5).2, "the same draws as a bare transfer");
        }
    }
}

//! YCSB transactions (Cooper et al., SoCC '10) with the RedT paper's knobs (§6): operations
//! per transaction, Zipf θ, write ratio.

use rand::Rng;
use rand_distr::{Distribution, Zipf};
use redt_dc_executor::{YcsbOp, YcsbProcedure};
use redt_proto::TableId;

/// Workload parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct YcsbConfig {
    /// Operations per transaction (RedT default 10).
    pub ops_per_txn: usize,
    /// Zipf skew θ over the key space (RedT default 0.2; 0 = uniform).
    pub theta: f64,
    /// Fraction of operations that update one cell (RedT default 0.5).
    pub write_ratio: f64,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig { ops_per_txn: 10, theta: 0.2, write_ratio: 0.5 }
    }
}

/// Draws YCSB transactions over a list of keys.
///
/// Key ranks follow Zipf(θ); rank `r` maps to `keys[scramble(r)]`, so the hot keys are
/// spread over partitions and nodes rather than clustered (YCSB's scrambled zipfian).
pub struct YcsbGenerator {
    cfg: YcsbConfig,
    table: TableId,
    cells: usize,
    cell_bytes: usize,
    keys: Vec<u64>,
    zipf: Option<Zipf<f64>>,
}

impl YcsbGenerator {
    /// A generator over `keys` of `table` (records of `cells` cells of `cell_bytes`).
    ///
    /// # Panics
    /// If `keys` is empty (a workload needs at least one record).
    pub fn new(cfg: YcsbConfig, table: TableId, cells: usize, cell_bytes: usize, keys: Vec<u64>) -> Self {
        assert!(!keys.is_empty(), "YCSB needs at least one key");
        let zipf = (cfg.theta > 0.0).then(|| Zipf::new(keys.len() as u64, cfg.theta).expect("θ > 0, n ≥ 1"));
        YcsbGenerator { cfg, table, cells, cell_bytes, keys, zipf }
    }

    fn key(&self, rng: &mut impl Rng) -> u64 {
        let n = self.keys.len() as u64;
        let rank = match &self.zipf {
            Some(z) => (z.sample(rng) as u64).saturating_sub(1).min(n - 1),
            None => rng.gen_range(0..n),
        };
        self.keys[(fnv(rank) % n) as usize]
    }

    /// Draws the operations of one transaction: distinct keys, each read (all cells) or
    /// updated (one random cell, a random value).
    pub fn ops(&self, rng: &mut impl Rng) -> Vec<YcsbOp> {
        let want = self.cfg.ops_per_txn.min(self.keys.len());
        let mut keys: Vec<u64> = Vec::with_capacity(want);
        while keys.len() < want {
            let k = self.key(rng);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys.into_iter()
            .map(|key| {
                if rng.gen_bool(self.cfg.write_ratio.clamp(0.0, 1.0)) {
                    let cell = rng.gen_range(0..self.cells) as u16;
                    let byte: u8 = rng.gen();
                    YcsbOp::Update { key, cell, value: vec![byte; self.cell_bytes] }
                } else {
                    YcsbOp::Read { key }
                }
            })
            .collect()
    }

    /// Draws one transaction as a procedure.
    pub fn next(&self, rng: &mut impl Rng) -> YcsbProcedure {
        YcsbProcedure::new(self.table, self.cells, self.ops(rng))
    }
}

/// FNV-1a over the 8 bytes of `x` (YCSB's key scrambling hash).
fn fnv(x: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn transactions_have_distinct_keys_and_the_write_ratio() {
        let g = YcsbGenerator::new(YcsbConfig::default(), TableId(1), 10, 100, (0..1000).collect());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut writes = 0;
        let mut total = 0;
        for _ in 0..500 {
            let ops = g.ops(&mut rng);
            assert_eq!(ops.len(), 10);
            let mut keys: Vec<u64> = ops
                .iter()
                .map(|o| match o {
                    YcsbOp::Read { key } | YcsbOp::Update { key, .. } => *key,
                })
                .collect();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), 10);
            writes += ops.iter().filter(|o| matches!(o, YcsbOp::Update { .. })).count();
            total += ops.len();
        }
        let ratio = writes as f64 / total as f64;
        assert!((0.45..0.55).contains(&ratio), "write ratio {ratio}");
    }

    #[test]
    fn skew_concentrates_accesses() {
        let keys: Vec<u64> = (0..10_000).collect();
        let hot = YcsbConfig { theta: 0.99, ..Default::default() };
        let g = YcsbGenerator::new(hot, TableId(1), 10, 100, keys.clone());
        let u = YcsbGenerator::new(YcsbConfig { theta: 0.0, ..Default::default() }, TableId(1), 10, 100, keys);
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let top = |g: &YcsbGenerator, rng: &mut rand::rngs::StdRng| {
            let mut counts = std::collections::HashMap::new();
            for _ in 0..20_000 {
                *counts.entry(g.key(rng)).or_insert(0u32) += 1;
            }
            counts.values().copied().max().unwrap_or(0)
        };
        assert!(top(&g, &mut rng) > 5 * top(&u, &mut rng));
    }
}

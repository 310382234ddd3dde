//! YCSB transactions (Cooper et al., SoCC '10) with the RedT paper's knobs (§6): operations
//! per transaction, Zipf θ, write ratio — and YCSB's core workloads A, B, C, D and F.
//!
//! | workload | operations | request distribution |
//! |---|---|---|
//! | `paper` (default) | 50% read / 50% update | scrambled zipfian, θ 0.2 |
//! | `a` | 50% read / 50% update | scrambled zipfian, θ 0.99 |
//! | `b` | 95% read / 5% update | scrambled zipfian, θ 0.99 |
//! | `c` | 100% read | scrambled zipfian, θ 0.99 |
//! | `d` | 95% read / 5% insert | latest (zipfian over the newest keys), θ 0.99 |
//! | `e` | 95% scan / 5% insert | scrambled zipfian start, θ 0.99; length uniform 1–100 |
//! | `f` | 50% read / 50% read-modify-write | scrambled zipfian, θ 0.99 |
//!
//! Workload E's scans go through the ordered index: a scan of length `L` from
//! key `k` reads cell 0 of every key in `k..k+L-1`, at most `L` rows (the keys are dense,
//! so that is `L` consecutive records, spread over the partitions by the modulo
//! partitioning); its inserts take new keys as workload D's do. The embedded cluster bench
//! runs it (`redt bench ycsb --workload e`); `redt bench local` does not.
//!
//! Every transaction holds `ops_per_txn` operations on distinct keys; the write ratio is the
//! fraction of operations that are the workload's write kind (update, insert or
//! read-modify-write).

use rand::Rng;
use rand_distr::{Distribution as _, Zipf};
use redt_dc_executor::{YcsbOp, YcsbProcedure};
use redt_proto::TableId;
use serde::Serialize;

/// The YCSB core workloads this bench runs, plus the RedT paper's mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// The RedT paper's mix (§6): 50% updates, zipfian θ 0.2.
    Paper,
    /// Update heavy: 50% reads, 50% updates, zipfian.
    A,
    /// Read mostly: 95% reads, 5% updates, zipfian.
    B,
    /// Read only, zipfian.
    C,
    /// Read latest: 95% reads, 5% inserts, the newest keys favoured.
    D,
    /// Short ranges: 95% scans of 1–100 keys from a zipfian key, 5% inserts.
    E,
    /// Read-modify-write: 50% reads, 50% read-modify-writes, zipfian.
    F,
}

/// Longest scan of workload E, in keys.
pub const MAX_SCAN_LENGTH: u64 = 100;

impl Workload {
    /// Parses `paper` (or `ycsb`), `a`, `b`, `c`, `d`, `e`, `f` (any case, an optional `ycsb-`
    /// prefix).
    ///
    /// # Errors
    /// An unknown name.
    pub fn parse(s: &str) -> Result<Workload, String> {
        let l = s.trim().to_ascii_lowercase();
        let l = l.strip_prefix("ycsb-").unwrap_or(&l);
        Ok(match l {
            "paper" | "ycsb" | "redt" => Workload::Paper,
            "a" => Workload::A,
            "b" => Workload::B,
            "c" => Workload::C,
            "d" => Workload::D,
            "f" => Workload::F,
            "e" => Workload::E,
            _ => return Err(format!("unknown YCSB workload `{s}` (known: paper, a, b, c, d, e, f)")),
        })
    }

    /// `paper`, `a`, …
    pub fn name(self) -> &'static str {
        match self {
            Workload::Paper => "paper",
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::D => "d",
            Workload::E => "e",
            Workload::F => "f",
        }
    }

    /// The Zipf constant: the paper's 0.2, YCSB's 0.99 for the core workloads.
    pub fn default_theta(self) -> f64 {
        match self {
            Workload::Paper => 0.2,
            _ => 0.99,
        }
    }

    /// The fraction of operations of the write kind.
    pub fn default_write_ratio(self) -> f64 {
        match self {
            Workload::Paper | Workload::A | Workload::F => 0.5,
            Workload::B | Workload::D | Workload::E => 0.05,
            Workload::C => 0.0,
        }
    }

    /// The request distribution.
    pub fn default_distribution(self) -> Distribution {
        match self {
            Workload::D => Distribution::Latest,
            _ => Distribution::Zipfian,
        }
    }

    /// What the non-read operations are.
    pub fn write_kind(self) -> OpKind {
        match self {
            Workload::D | Workload::E => OpKind::Insert,
            Workload::F => OpKind::ReadModifyWrite,
            _ => OpKind::Update,
        }
    }
}

/// YCSB's request distributions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Scrambled zipfian with constant θ (θ = 0 is uniform): hot keys spread over the key
    /// space by an FNV hash of the rank.
    Zipfian,
    /// Every key equally likely.
    Uniform,
    /// Zipfian over recency: the most recently inserted key is the most popular.
    Latest,
}

impl Distribution {
    /// Parses `zipfian`, `uniform`, `latest`.
    ///
    /// # Errors
    /// Any other name.
    pub fn parse(s: &str) -> Result<Distribution, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "zipfian" | "zipf" => Ok(Distribution::Zipfian),
            "uniform" => Ok(Distribution::Uniform),
            "latest" => Ok(Distribution::Latest),
            _ => Err(format!("unknown request distribution `{s}` (known: zipfian, uniform, latest)")),
        }
    }

    /// `zipfian`, `uniform`, `latest`.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Zipfian => "zipfian",
            Distribution::Uniform => "uniform",
            Distribution::Latest => "latest",
        }
    }
}

/// One YCSB operation kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Read every cell of a record.
    Read,
    /// Overwrite one cell.
    Update,
    /// Create a new record (workload D).
    Insert,
    /// Read a record, then overwrite one of its cells, in the same transaction.
    ReadModifyWrite,
}

/// Workload parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct YcsbConfig {
    /// Operations per transaction (RedT default 10).
    pub ops_per_txn: usize,
    /// Zipf skew θ over the key space (RedT default 0.2; 0 = uniform).
    pub theta: f64,
    /// Fraction of operations of the workload's write kind (RedT default 0.5 updates).
    pub write_ratio: f64,
    /// The workload (its operation kinds).
    pub workload: Workload,
    /// The request distribution.
    pub distribution: Distribution,
    /// Fraction of transactions whose primary partitions are in more than one DC (RedT
    /// default 1: every transaction is inter-DC); the others touch only partitions whose
    /// primary is in the client's DC.
    pub inter_dc_ratio: f64,
    /// Distinct partitions a transaction touches (RedT default 2).
    pub partitions_per_txn: usize,
    /// DCs holding the primaries of an inter-DC transaction's partitions (default 2).
    pub dcs_per_txn: usize,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig::for_workload(Workload::Paper)
    }
}

impl YcsbConfig {
    /// The standard parameters of `w`, with the RedT transaction shape (10 operations, 2
    /// partitions in 2 DCs, every transaction inter-DC).
    pub fn for_workload(w: Workload) -> Self {
        YcsbConfig {
            ops_per_txn: 10,
            theta: w.default_theta(),
            write_ratio: w.default_write_ratio(),
            workload: w,
            distribution: w.default_distribution(),
            inter_dc_ratio: 1.0,
            partitions_per_txn: 2,
            dcs_per_txn: 2,
        }
    }

    /// Draws the kind of one operation.
    pub fn op_kind(&self, rng: &mut impl Rng) -> OpKind {
        if self.write_ratio > 0.0 && rng.gen_bool(self.write_ratio.clamp(0.0, 1.0)) {
            self.workload.write_kind()
        } else {
            OpKind::Read
        }
    }

    /// Draws a rank in `0..n` (`n` ≥ 1) from the request distribution: rank order is key
    /// order, so under `latest` the highest ranks (the newest keys) are the hottest.
    pub fn rank(&self, n: u64, rng: &mut impl Rng) -> u64 {
        draw_rank(self.distribution, self.theta, n, rng)
    }

    /// The figures a report shows about the mix.
    pub fn summary(&self, cells: usize, cell_bytes: usize) -> MixReport {
        MixReport {
            workload: self.workload.name().into(),
            ops_per_txn: self.ops_per_txn,
            distribution: self.distribution.name().into(),
            theta: self.theta,
            write_ratio: self.write_ratio,
            inter_dc_ratio: self.inter_dc_ratio,
            partitions_per_txn: self.partitions_per_txn,
            dcs_per_txn: self.dcs_per_txn,
            record_cells: cells,
            record_cell_bytes: cell_bytes,
        }
    }
}

/// The mix a report ran.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MixReport {
    /// `paper`, `a`, `b`, `c`, `d`, `f`.
    pub workload: String,
    /// Operations per transaction.
    pub ops_per_txn: usize,
    /// Request distribution.
    pub distribution: String,
    /// Zipf θ.
    pub theta: f64,
    /// Fraction of operations of the write kind.
    pub write_ratio: f64,
    /// Fraction of inter-DC transactions.
    pub inter_dc_ratio: f64,
    /// Partitions per transaction.
    pub partitions_per_txn: usize,
    /// DCs per inter-DC transaction.
    pub dcs_per_txn: usize,
    /// Cells per record.
    pub record_cells: usize,
    /// Bytes per cell.
    pub record_cell_bytes: usize,
}

/// A rank in `0..n` drawn from `dist` with constant `theta`.
pub fn draw_rank(dist: Distribution, theta: f64, n: u64, rng: &mut impl Rng) -> u64 {
    let n = n.max(1);
    let zipf = |rng: &mut _| -> u64 {
        let z = Zipf::new(n, theta).expect("θ > 0 and n ≥ 1");
        (z.sample(rng) as u64).saturating_sub(1).min(n - 1)
    };
    match dist {
        Distribution::Uniform => rng.gen_range(0..n),
        Distribution::Zipfian if theta <= 0.0 => rng.gen_range(0..n),
        Distribution::Zipfian => fnv(zipf(rng)) % n,
        Distribution::Latest if theta <= 0.0 => rng.gen_range(0..n),
        Distribution::Latest => n - 1 - zipf(rng),
    }
}

/// Draws YCSB transactions over a list of keys (the local bench: one DC, keys known).
///
/// Key ranks follow the request distribution; under zipfian rank `r` maps to
/// `keys[scramble(r)]`, so the hot keys are spread over partitions and nodes rather than
/// clustered (YCSB's scrambled zipfian). Inserts (workload D) are not supported here: the
/// local bench loads a fixed key set.
pub struct YcsbGenerator {
    cfg: YcsbConfig,
    table: TableId,
    cells: usize,
    cell_bytes: usize,
    keys: Vec<u64>,
}

impl YcsbGenerator {
    /// A generator over `keys` of `table` (records of `cells` cells of `cell_bytes`).
    ///
    /// # Panics
    /// If `keys` is empty (a workload needs at least one record).
    pub fn new(cfg: YcsbConfig, table: TableId, cells: usize, cell_bytes: usize, keys: Vec<u64>) -> Self {
        assert!(!keys.is_empty(), "YCSB needs at least one key");
        YcsbGenerator { cfg, table, cells, cell_bytes, keys }
    }

    fn key(&self, rng: &mut impl Rng) -> u64 {
        self.keys[self.cfg.rank(self.keys.len() as u64, rng) as usize]
    }

    /// Draws the operations of one transaction: distinct keys, each read (all cells),
    /// updated (one random cell, a random value) or read and updated (workload F).
    pub fn ops(&self, rng: &mut impl Rng) -> Vec<YcsbOp> {
        let want = self.cfg.ops_per_txn.min(self.keys.len());
        let mut keys: Vec<u64> = Vec::with_capacity(want);
        while keys.len() < want {
            let k = self.key(rng);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let mut ops = Vec::with_capacity(want);
        for key in keys {
            match self.cfg.op_kind(rng) {
                OpKind::Read => ops.push(YcsbOp::Read { key }),
                OpKind::Update | OpKind::Insert => ops.push(draw_update(rng, key, self.cells, self.cell_bytes)),
                OpKind::ReadModifyWrite => {
                    ops.push(YcsbOp::Read { key });
                    ops.push(draw_update(rng, key, self.cells, self.cell_bytes));
                }
            }
        }
        ops
    }

    /// Draws one transaction as a procedure.
    pub fn next(&self, rng: &mut impl Rng) -> YcsbProcedure {
        YcsbProcedure::new(self.table, self.cells, self.ops(rng))
    }
}

/// Draws an update of `key`: one of its `cells` cells (at least 1), uniformly, overwritten with
/// `cell_bytes` copies of a random byte.
pub fn draw_update(rng: &mut impl Rng, key: u64, cells: usize, cell_bytes: usize) -> YcsbOp {
    let cell = rng.gen_range(0..cells.max(1)) as u16;
    let byte: u8 = rng.gen();
    YcsbOp::Update { key, cell, value: vec![byte; cell_bytes] }
}

/// FNV-1a over the 8 bytes of `x` (YCSB's key scrambling hash).
pub fn fnv(x: u64) -> u64 {
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

    #[test]
    fn core_workload_mixes_are_within_tolerance() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for (w, read, write) in [
            (Workload::A, 0.5, 0.5),
            (Workload::B, 0.95, 0.05),
            (Workload::C, 1.0, 0.0),
            (Workload::D, 0.95, 0.05),
            (Workload::F, 0.5, 0.5),
            (Workload::Paper, 0.5, 0.5),
        ] {
            let cfg = YcsbConfig::for_workload(w);
            let n = 40_000;
            let mut reads = 0;
            let mut writes = 0;
            for _ in 0..n {
                let k = cfg.op_kind(&mut rng);
                if k == OpKind::Read {
                    reads += 1;
                } else {
                    assert_eq!(k, w.write_kind(), "{w:?}");
                    writes += 1;
                }
            }
            let (r, x) = (reads as f64 / n as f64, writes as f64 / n as f64);
            assert!((r - read).abs() < 0.01, "{w:?}: reads {r}, want {read}");
            assert!((x - write).abs() < 0.01, "{w:?}: writes {x}, want {write}");
        }
        assert_eq!(Workload::D.default_distribution(), Distribution::Latest);
        assert_eq!(Workload::A.default_theta(), 0.99);
    }

    #[test]
    fn read_modify_write_reads_then_updates_the_same_key() {
        let cfg = YcsbConfig::for_workload(Workload::F);
        let g = YcsbGenerator::new(cfg, TableId(1), 10, 100, (0..1000).collect());
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let ops = g.ops(&mut rng);
        let updates: Vec<u64> = ops
            .iter()
            .filter_map(|o| match o {
                YcsbOp::Update { key, .. } => Some(*key),
                _ => None,
            })
            .collect();
        assert!(!updates.is_empty());
        for k in updates {
            assert!(ops.contains(&YcsbOp::Read { key: k }), "RMW of {k} without its read");
        }
    }

    #[test]
    fn latest_favours_recent_keys() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let n = 10_000u64;
        let draws = 20_000;
        let mut newest_tenth = 0;
        let mut newest = 0;
        for _ in 0..draws {
            let r = draw_rank(Distribution::Latest, 0.99, n, &mut rng);
            assert!(r < n);
            if r >= n - n / 10 {
                newest_tenth += 1;
            }
            if r == n - 1 {
                newest += 1;
            }
        }
        // Zipf(0.99) over 10,000 ranks: the top 10% of ranks draw ~75% of requests and
        // rank 1 alone ~10%; uniform would give 10% and 0.01%.
        assert!(newest_tenth as f64 / draws as f64 > 0.6, "newest 10%: {newest_tenth} of {draws}");
        assert!(newest as f64 / draws as f64 > 0.05, "newest key: {newest} of {draws}");
        // Uniform and zipfian do not favour the end of the key space.
        let tail = (0..draws).filter(|_| draw_rank(Distribution::Zipfian, 0.99, n, &mut rng) >= n - n / 10).count();
        assert!((tail as f64 / draws as f64) < 0.3, "zipfian tail {tail}");
    }

    #[test]
    fn parses_names() {
        assert_eq!(Workload::parse("A").unwrap(), Workload::A);
        assert_eq!(Workload::parse("ycsb-d").unwrap(), Workload::D);
        assert_eq!(Workload::parse("ycsb").unwrap(), Workload::Paper);
        assert_eq!(Workload::parse("E").unwrap(), Workload::E);
        assert!(Workload::parse("g").is_err());
    }
}

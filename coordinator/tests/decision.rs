//! Exhaustive checks of the coordinator's decision rule (RedT §4.2 "¾ quorum"; docs/design.md §2,
//! "Decision") against an oracle written here, straight from the spec, that calls none of the
//! implementation's helpers (only its input and output types).
//!
//! Every replica's vote is one of four labels: commit up-to-date (`Fresh`), commit stale (an
//! older version of one or both items of the same partition), abort, or missing. For `n` = 2..=5
//! replicas per partition and `P` = 1..=3 partitions:
//! - when `4^(n·P) ≤ 2^22` every label of every replica is enumerated (every vote vector);
//! - otherwise (`n` = 4 and 5 with `P` = 3) partition 0's vote vector is enumerated fully and
//!   every other partition ranges over all count tuples `(fresh, stale, abort, missing)` that
//!   sum to `n`, laid out in that order. The rule is symmetric in the replicas of a partition
//!   (it counts up-to-date and missing votes; positions do not matter), so one layout stands for
//!   every ordering of the tuple; the fully enumerated partition 0 checks that positions indeed
//!   do not matter, and `cts_is_order_independent` permutes votes explicitly.
//!
//! Each case is decided with `final_round` false and true. The votes are concrete: two items per
//! partition, stale votes in three variants (item 0 older, item 1 older with a *higher* wrapped
//! update counter, both older; mixed by replica in partition 0, one variant per partition
//! elsewhere, where stale votes without a fresh one are the newest and may commit), executor
//! clock readings that are sometimes above and sometimes below the versions, and the item order
//! reversed on odd replicas. Run in release mode in CI;
//! all cases together take a few seconds.

use redt_dc_executor::CellVersion;
use redt_proto::{Cts, Decision};
use redt_protocol::decision::{decide, majority, quorum, ItemKey, PartitionVotes, ReplicaVote, Ruling, Why};
use std::time::Instant;

/// Q(n) = ceil(3n/4) for n = 0..=8, as a literal table (RedT §4.2 "¾ quorum"; docs/design.md §2).
const Q_TABLE: [usize; 9] = [0, 1, 2, 3, 3, 4, 5, 6, 6];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Label {
    Fresh,
    Stale,
    Abort,
    Missing,
}

const LABELS: [Label; 4] = [Label::Fresh, Label::Stale, Label::Abort, Label::Missing];

fn item(p: usize, i: usize) -> ItemKey {
    ItemKey::new(10 * p as u32 + i as u32, 3 * i as u16)
}

/// The newest version of item `i` of partition `p`. Item 1's update counter has wrapped to 0.
fn fresh_version(p: usize, i: usize) -> CellVersion {
    match i {
        0 => CellVersion::new(7, Cts(1000 + 100 * p as u64)),
        _ => CellVersion::new(0, Cts(1010 + 100 * p as u64)),
    }
}

/// An older version of item `i` of partition `p`.
fn old_version(p: usize, i: usize) -> CellVersion {
    match i {
        0 => CellVersion::new(6, Cts(1000 + 100 * p as u64 - 37)),
        // Older cts, higher (pre-wrap) update counter: versions order by cts first.
        _ => CellVersion::new(0xFFFF, Cts(1010 + 100 * p as u64 - 1)),
    }
}

fn hlc(p: usize, r: usize) -> Cts {
    Cts(900 + ((7 * p + 5 * r) % 12) as u64 * 50)
}

/// The concrete vote of replica `r` of partition `p` for `label`.
fn vote(p: usize, r: usize, label: Label) -> ReplicaVote {
    // Partition 0 mixes the three stale variants, so its stale votes disagree with each other;
    // in partitions 1 and 2 every stale vote is the same, so with no fresh vote they are the
    // newest and count.
    let variant = if p == 0 { r % 3 } else { p % 3 };
    let stale_items: [bool; 2] = match variant {
        0 => [true, false],
        1 => [false, true],
        _ => [true, true],
    };
    let mut versions: Vec<(ItemKey, CellVersion)> = (0..2)
        .map(|i| {
            let old = label == Label::Stale && stale_items[i];
            (item(p, i), if old { old_version(p, i) } else { fresh_version(p, i) })
        })
        .collect();
    if r % 2 == 1 {
        versions.reverse();
    }
    match label {
        Label::Fresh | Label::Stale => ReplicaVote::Commit { versions, hlc: hlc(p, r) },
        Label::Abort => ReplicaVote::Abort,
        Label::Missing => ReplicaVote::Missing,
    }
}

/// The oracle's reading of one partition.
struct OraclePartition {
    q: usize,
    up_to_date: Vec<bool>,
    missing: usize,
}

fn newer(a: CellVersion, b: CellVersion) -> bool {
    (a.cts().0, a.update_counter()) > (b.cts().0, b.update_counter())
}

/// docs/design.md §2, read literally, for one partition.
fn oracle_partition(replicas: &[ReplicaVote]) -> OraclePartition {
    let n = replicas.len();
    let mut q = 0;
    while 4 * q < 3 * n {
        q += 1;
    }
    let mut newest: Vec<(ItemKey, CellVersion)> = Vec::new();
    for r in replicas {
        if let ReplicaVote::Commit { versions, .. } = r {
            for &(k, v) in versions {
                match newest.iter_mut().find(|(k2, _)| *k2 == k) {
                    Some(e) if newer(v, e.1) => e.1 = v,
                    Some(_) => {}
                    None => newest.push((k, v)),
                }
            }
        }
    }
    let up_to_date = replicas
        .iter()
        .map(|r| match r {
            ReplicaVote::Commit { versions, .. } => newest.iter().all(|&(k, nv)| {
                versions.iter().any(|&(k2, _)| k2 == k)
                    && versions.iter().filter(|&&(k2, _)| k2 == k).all(|&(_, v)| v == nv)
            }),
            _ => false,
        })
        .collect();
    let missing = replicas.iter().filter(|r| matches!(r, ReplicaVote::Missing)).count();
    OraclePartition { q, up_to_date, missing }
}

/// A commit at `cts`, for a quorum in every partition.
fn commit_at(cts: Cts) -> Ruling {
    Ruling::Decide { decision: Decision::Commit(cts), why: Why::Quorum }
}

/// An abort for `why`.
fn abort(why: Why) -> Ruling {
    Ruling::Decide { decision: Decision::Abort, why }
}

/// The expected ruling, and each partition's up-to-date flags.
fn oracle(parts: &[PartitionVotes], final_round: bool) -> (Ruling, Vec<OraclePartition>) {
    let o: Vec<OraclePartition> = parts.iter().map(|p| oracle_partition(&p.replicas)).collect();
    let up = |op: &OraclePartition| op.up_to_date.iter().filter(|&&b| b).count();
    if let Some(i) = o.iter().position(|op| up(op) + op.missing < op.q) {
        return (abort(Why::CommitImpossible { partition: i }), o);
    }
    let d = match o.iter().position(|op| up(op) < op.q) {
        Some(i) if final_round => abort(Why::Timeout { partition: i }),
        Some(_) => Ruling::Wait,
        None => {
            let mut max = 0u64;
            for (p, op) in parts.iter().zip(&o) {
                for (r, _) in op.up_to_date.iter().enumerate().filter(|(_, &u)| u) {
                    if let ReplicaVote::Commit { versions, hlc } = &p.replicas[r] {
                        max = max.max(hlc.0);
                        for (_, v) in versions {
                            max = max.max(v.cts().0);
                        }
                    }
                }
            }
            commit_at(Cts((max + 1).min(Cts::MASK)))
        }
    };
    (d, o)
}

#[derive(Debug, Default)]
struct Stats {
    cases: u64,
    commit: u64,
    proven_abort: u64,
    wait: u64,
}

/// Checks one case against the oracle and the label-level consequences of the rule.
fn check(parts: &[PartitionVotes], labels: &[Vec<Label>], stats: &mut Stats) {
    let got = decide(parts, false);
    let got_final = decide(parts, true);
    let (want, o) = oracle(parts, false);
    let (want_final, _) = oracle(parts, true);
    let ctx = || format!("labels {labels:?}");
    assert_eq!(got, want, "final_round = false, {}", ctx());
    assert_eq!(got_final, want_final, "final_round = true, {}", ctx());
    // The final round changes only a wait, into an unproven abort.
    match got {
        Ruling::Wait => assert!(
            matches!(got_final, Ruling::Decide { decision: Decision::Abort, why: Why::Timeout { .. } }),
            "{}",
            ctx()
        ),
        _ => assert_eq!(got, got_final, "{}", ctx()),
    }

    let n = labels[0].len();
    let q = Q_TABLE[n];
    let count = |ls: &[Label], l: Label| ls.iter().filter(|&&x| x == l).count();
    // Where every partition has an up-to-date-by-construction vote, the labels alone decide.
    if labels.iter().all(|ls| count(ls, Label::Fresh) >= 1) {
        let impossible = labels.iter().position(|ls| count(ls, Label::Fresh) + count(ls, Label::Missing) < q);
        match (impossible, got) {
            (Some(i), Ruling::Decide { decision: Decision::Abort, why: Why::CommitImpossible { partition } }) => {
                assert_eq!(i, partition, "{}", ctx())
            }
            (None, Ruling::Decide { decision: Decision::Commit(_), why: Why::Quorum }) => {
                assert!(labels.iter().all(|ls| count(ls, Label::Fresh) >= q), "labels: {}", ctx())
            }
            (None, Ruling::Wait) => {
                assert!(labels.iter().any(|ls| count(ls, Label::Fresh) < q), "labels: {}", ctx())
            }
            (i, d) => panic!("labels say impossible = {i:?}, got {d:?}: {}", ctx()),
        }
        for (ls, op) in labels.iter().zip(&o) {
            for (&l, &u) in ls.iter().zip(&op.up_to_date) {
                assert_eq!(u, l == Label::Fresh, "a stale commit never counts: {}", ctx());
            }
        }
    }

    stats.cases += 1;
    match got {
        Ruling::Decide { decision: Decision::Commit(cts), why } => {
            assert_eq!(why, Why::Quorum, "{}", ctx());
            stats.commit += 1;
            for (pi, (p, (ls, op))) in parts.iter().zip(labels.iter().zip(&o)).enumerate() {
                let fresh = count(ls, Label::Fresh);
                assert!(fresh == 0 || fresh >= q, "stale votes never complete a quorum: {}", ctx());
                assert!(count(ls, Label::Fresh) + count(ls, Label::Stale) >= q, "{}", ctx());
                let ups = op.up_to_date.iter().filter(|&&u| u).count();
                assert!(ups >= 1 && ups >= q, "commit has up-to-date votes: {}", ctx());
                for (r, _) in op.up_to_date.iter().enumerate().filter(|(_, &u)| u) {
                    let ReplicaVote::Commit { versions, hlc } = &p.replicas[r] else {
                        panic!("an up-to-date vote is a commit vote");
                    };
                    assert!(cts.0 > hlc.0, "cts above the executor clocks: {}", ctx());
                    assert!(versions.iter().all(|(_, v)| cts > v.cts()), "cts above versions: {}", ctx());
                }
                for i in 0..2 {
                    assert!(fresh == 0 || cts > fresh_version(pi, i).cts(), "cts above the newest: {}", ctx());
                }
            }
        }
        Ruling::Decide { decision: Decision::Abort, why } => {
            assert!(matches!(why, Why::CommitImpossible { .. }), "final_round = false never aborts unproven");
            stats.proven_abort += 1;
        }
        Ruling::Wait => stats.wait += 1,
    }
}

/// One dimension of the enumeration: its choices, each a list of `(partition, replica, label)`.
type Dim = Vec<Vec<(usize, usize, Label)>>;

fn single(p: usize, r: usize) -> Dim {
    LABELS.iter().map(|&l| vec![(p, r, l)]).collect()
}

/// Every count tuple (fresh, stale, abort, missing) summing to `n`, laid out in that order.
fn compositions(p: usize, n: usize) -> Dim {
    let mut out = Vec::new();
    for f in 0..=n {
        for s in 0..=n - f {
            for a in 0..=n - f - s {
                let counts = [f, s, a, n - f - s - a];
                let mut r = 0;
                let mut choice = Vec::new();
                for (&l, &c) in LABELS.iter().zip(&counts) {
                    for _ in 0..c {
                        choice.push((p, r, l));
                        r += 1;
                    }
                }
                out.push(choice);
            }
        }
    }
    out
}

/// Runs every case for `n` replicas per partition and `np` partitions; returns the stats and
/// whether the full enumeration was used.
fn run(n: usize, np: usize) -> (Stats, bool) {
    let full = 2 * n * np <= 22; // 4^(n·P) ≤ 2^22
    let mut dims: Vec<Dim> = Vec::new();
    if full {
        for p in 0..np {
            for r in 0..n {
                dims.push(single(p, r));
            }
        }
    } else {
        for r in 0..n {
            dims.push(single(0, r));
        }
        for p in 1..np {
            dims.push(compositions(p, n));
        }
    }
    let table: Vec<Vec<[ReplicaVote; 4]>> =
        (0..np).map(|p| (0..n).map(|r| LABELS.map(|l| vote(p, r, l))).collect()).collect();
    let mut parts: Vec<PartitionVotes> = (0..np).map(|_| PartitionVotes::missing(n)).collect();
    let mut labels = vec![vec![Label::Missing; n]; np];
    let apply = |parts: &mut [PartitionVotes], labels: &mut [Vec<Label>], choice: &[(usize, usize, Label)]| {
        for &(p, r, l) in choice {
            labels[p][r] = l;
            let li = LABELS.iter().position(|&x| x == l).expect("l is a label");
            parts[p].replicas[r] = table[p][r][li].clone();
        }
    };
    let mut idx = vec![0usize; dims.len()];
    for d in &dims {
        apply(&mut parts, &mut labels, &d[0]);
    }
    let mut stats = Stats::default();
    loop {
        check(&parts, &labels, &mut stats);
        let mut d = 0;
        loop {
            if d == dims.len() {
                return (stats, full);
            }
            idx[d] += 1;
            if idx[d] == dims[d].len() {
                idx[d] = 0;
                apply(&mut parts, &mut labels, &dims[d][0]);
                d += 1;
            } else {
                apply(&mut parts, &mut labels, &dims[d][idx[d]]);
                break;
            }
        }
    }
}

fn exhaustive(n: usize) {
    for np in 1..=3 {
        let t = Instant::now();
        let (s, full) = run(n, np);
        println!(
            "n={n} P={np} {}: {} cases ({} commit, {} proven abort, {} wait) in {:?}",
            if full { "full" } else { "partition 0 full, others by count tuple" },
            s.cases,
            s.commit,
            s.proven_abort,
            s.wait,
            t.elapsed()
        );
        assert!(s.commit > 0 && s.proven_abort > 0 && s.wait > 0, "every outcome is reached");
        let expected = if full {
            4u64.pow((n * np) as u32)
        } else {
            let tuples = ((n + 1) * (n + 2) * (n + 3) / 6) as u64;
            4u64.pow(n as u32) * tuples.pow(np as u32 - 1)
        };
        assert_eq!(s.cases, expected);
    }
}

/// RedT §4.2 "¾ quorum", docs/design.md §2: every vote vector, n = 2, P = 1..=3.
#[test]
fn exhaustive_n2() {
    exhaustive(2);
}

/// RedT §4.2 "¾ quorum", docs/design.md §2: every vote vector, n = 3, P = 1..=3.
#[test]
fn exhaustive_n3() {
    exhaustive(3);
}

/// RedT §4.2 "¾ quorum", docs/design.md §2: every vote vector for P = 1, 2; P = 3 by count tuples.
#[test]
fn exhaustive_n4() {
    exhaustive(4);
}

/// RedT §4.2 "¾ quorum", docs/design.md §2: every vote vector for P = 1, 2; P = 3 by count tuples.
#[test]
fn exhaustive_n5() {
    exhaustive(5);
}

/// RedT §4.2 "¾ quorum", docs/design.md §2: Q(n) matches the literal table, and M(n) = floor(n/2)+1.
#[test]
fn quorum_table() {
    for (n, &q) in Q_TABLE.iter().enumerate() {
        assert_eq!(quorum(n), q, "Q({n})");
    }
    for n in 1..=8 {
        assert_eq!(majority(n), [1, 2, 2, 3, 3, 4, 4, 5][n - 1], "M({n})");
    }
}

/// RedT §4.2 "¾ quorum": two commit quorums of one partition always
/// share a replica (2Q > n), so two conflicting transactions cannot both commit: the shared
/// replica's No-Wait lock let at most one of them vote commit. Also Q ≥ M, and Q ≤ n.
#[test]
fn quorums_intersect() {
    for n in 1..=10_000 {
        assert!(2 * quorum(n) > n, "2·Q({n}) > {n}");
        assert!(quorum(n) >= majority(n) && quorum(n) <= n, "M({n}) ≤ Q({n}) ≤ {n}");
        assert!(2 * majority(n) > n, "2·M({n}) > {n}");
    }
    // The same, by sets: every pair of Q-subsets of n ≤ 8 replicas intersects.
    for n in 1..=8usize {
        let q = quorum(n) as u32;
        let sets: Vec<u32> = (0u32..1 << n).filter(|s| s.count_ones() == q).collect();
        for &a in &sets {
            for &b in &sets {
                assert_ne!(a & b, 0, "n={n}: quorums {a:b} and {b:b} are disjoint");
            }
        }
    }
}

/// RedT §4.2, docs/design.md §2: Q commit votes of which one is stale never commit. With no missing
/// vote the abort is proven; with a missing vote the coordinator waits (and aborts unproven on
/// the final round).
#[test]
fn stale_commit_never_counts() {
    for n in 2..=8 {
        let q = quorum(n);
        let mut labels = vec![Label::Fresh; q - 1];
        labels.push(Label::Stale);
        labels.resize(n, Label::Abort);
        let part = |ls: &[Label]| PartitionVotes::new(ls.iter().enumerate().map(|(r, &l)| vote(0, r, l)).collect());
        let d = decide(&[part(&labels)], false);
        assert_eq!(d, abort(Why::CommitImpossible { partition: 0 }), "n={n} {labels:?}");
        if q < n {
            labels[q] = Label::Missing;
            assert_eq!(decide(&[part(&labels)], false), Ruling::Wait, "n={n} {labels:?}");
            assert_eq!(decide(&[part(&labels)], true), abort(Why::Timeout { partition: 0 }));
            labels[q] = Label::Fresh;
            assert!(
                matches!(decide(&[part(&labels)], false), Ruling::Decide { decision: Decision::Commit(_), .. }),
                "n={n} {labels:?}"
            );
        }
    }
}

/// docs/design.md §2: cts is a pure function of the up-to-date votes: permuting the votes of a
/// partition, or the partitions, changes neither the decision's kind nor cts.
#[test]
fn cts_is_order_independent() {
    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for i in 0..n {
                let mut q = p.clone();
                q.insert(i, n - 1);
                out.push(q);
            }
        }
        out
    }
    let n = 4;
    let perms = permutations(n);
    let mut commits = 0;
    for code in 0u32..1 << (2 * 2 * n) {
        let labels: Vec<Vec<Label>> =
            (0..2).map(|p| (0..n).map(|r| LABELS[(code >> (2 * (p * n + r)) & 3) as usize]).collect()).collect();
        let parts: Vec<PartitionVotes> = labels
            .iter()
            .enumerate()
            .map(|(p, ls)| PartitionVotes::new(ls.iter().enumerate().map(|(r, &l)| vote(p, r, l)).collect()))
            .collect();
        let base = decide(&parts, false);
        commits += matches!(base, Ruling::Decide { decision: Decision::Commit(_), .. }) as u32;
        // Partitions swapped: same kind, same cts, same proven flag.
        let swapped = [parts[1].clone(), parts[0].clone()];
        let d = decide(&swapped, false);
        match (base, d) {
            (
                Ruling::Decide { decision: Decision::Commit(a), why: Why::Quorum },
                Ruling::Decide { decision: Decision::Commit(b), why: Why::Quorum },
            ) => assert_eq!(a, b),
            (
                Ruling::Decide { decision: Decision::Abort, why: Why::CommitImpossible { .. } },
                Ruling::Decide { decision: Decision::Abort, why: Why::CommitImpossible { .. } },
            )
            | (
                Ruling::Decide { decision: Decision::Abort, why: Why::Timeout { .. } },
                Ruling::Decide { decision: Decision::Abort, why: Why::Timeout { .. } },
            ) => {}
            (Ruling::Wait, Ruling::Wait) => {}
            (a, b) => panic!("{labels:?}: {a:?} vs swapped {b:?}"),
        }
        // Replicas of each partition permuted (a sample of the 24 × 24 pairs, all 24 each).
        for (i, perm) in perms.iter().enumerate() {
            let other = &perms[(i * 7 + 3) % perms.len()];
            let permuted: Vec<PartitionVotes> = [perm, other]
                .iter()
                .zip(&parts)
                .map(|(pm, p)| PartitionVotes::new(pm.iter().map(|&r| p.replicas[r].clone()).collect()))
                .collect();
            assert_eq!(decide(&permuted, false), base, "{labels:?} permuted by {perm:?}, {other:?}");
        }
    }
    assert!(commits > 0);
}

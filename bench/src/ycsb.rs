//! YCSB for the harness: the mixes, request distributions and transaction draws of
//! [`redt_workload::ycsb`] (the RedT paper's mix and YCSB's core workloads A–F), and what only
//! the command line needs: record sizes and the refusal of a property file's scans.

pub use redt_workload::ycsb::{
    draw_rank, draw_update, fnv, Distribution, MixReport, OpKind, Workload, YcsbConfig, YcsbGenerator, MAX_SCAN_LENGTH,
};

/// Why a YCSB property file's `scanproportion` is refused: scans run only as workload E.
pub const WORKLOAD_E_REFUSED: &str = "a YCSB property file's `scanproportion` is not supported: scans run as \
     workload E (`--workload e`: 95% scans of 1-100 keys, 5% inserts; see docs/workloads.md)";

/// Parses a record size `CELLSxBYTES` (`10x100`); BYTES is a size as the topology file
/// writes one ([`redt_proto::parse_size`]: `100`, `1KiB`).
///
/// # Errors
/// Anything else, or cells outside 1–64, bytes outside 1–65536.
pub fn parse_record_size(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("record size `{s}` must be CELLSxBYTES, e.g. 10x100 or 4x1KiB");
    let (c, b) = s
        .trim()
        .to_ascii_lowercase()
        .split_once(['x', '×'])
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .ok_or_else(bad)?;
    let cells: usize = c.trim().parse().map_err(|_| bad())?;
    let bytes = redt_proto::parse_size(&b).map_err(|e| format!("record size `{s}`: {e}"))?;
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    if !(1..=64).contains(&cells) {
        return Err(format!("record size `{s}`: 1 to 64 cells"));
    }
    if !(1..=65536).contains(&bytes) {
        return Err(format!("record size `{s}`: 1 to 65536 bytes per cell"));
    }
    Ok((cells, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_record_sizes() {
        assert_eq!(parse_record_size("10x100").unwrap(), (10, 100));
        assert_eq!(parse_record_size("1X2048").unwrap(), (1, 2048));
        assert!(parse_record_size("0x100").is_err());
        assert!(parse_record_size("10").is_err());
        assert_eq!(parse_record_size("4x1KiB").unwrap(), (4, 1024), "BYTES is a size");
        let e = parse_record_size("4x-1").unwrap_err();
        assert!(e.contains("invalid size `-1`: negative"), "{e}");
    }
}

//! YCSB property files (`-P FILE`, as YCSB's `workloads/workloada` and go-ycsb read them): Java
//! properties (`key=value` or `key: value` lines, `#` and `!` comments, `\` continuations),
//! parsed by the `java-properties` crate, then mapped onto redt's YCSB flags.
//!
//! | key | redt |
//! |---|---|
//! | `recordcount` | `--records-per-partition` = ⌈recordcount / partitions⌉ |
//! | `readproportion`, `updateproportion`, `insertproportion`, `readmodifywriteproportion` | the workload (`a` for updates, `c` read-only, `d` for inserts, `f` for read-modify-writes) and `--write-ratio` = the write proportion; they must add up to 1 with one write kind |
//! | `scanproportion` | must be 0 (scans run as `--workload e`) |
//! | `requestdistribution` | `--distribution` (`zipfian`, `uniform`, `latest`) |
//! | `zipfianconstant` | `--theta` |
//! | `fieldcount`, `fieldlength` | `--record-size FIELDCOUNTxFIELDLENGTH` (`fieldlength` in bytes, or a size as the topology file takes it: `1KiB`) |
//! | `threadcount` | `--clients-per-node` = ⌈threadcount / nodes⌉ |
//! | `maxexecutiontime` | `--duration` (seconds, or a duration as `--duration` takes it: `2m`) |
//!
//! Keys YCSB files commonly carry that do not change what redt runs are accepted with a
//! warning (`operationcount`: redt runs for a duration; `workload`, `db`, `table`,
//! `readallfields=true`, `writeallfields=false`, `insertorder`, `maxscanlength`,
//! `scanlengthdistribution`, `fieldlengthdistribution=constant`, measurement and status
//! settings). Any other key, or a value redt cannot honour (`readallfields=false`, a hotspot
//! distribution, a throughput `target`, …), is refused naming the key. Keys missing from the
//! file take the mapped workload's defaults (zipfian θ 0.99; `latest` for inserts); flags
//! given on the command line override the file.

use crate::ycsb::{Distribution, Workload, WORKLOAD_E_REFUSED};
use std::time::Duration;

/// Why a property file is refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PropsError {
    /// Not Java properties syntax.
    #[error("{file}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message (with the line).
        message: String,
    },
    /// A key redt does not know.
    #[error(
        "{file} line {line}: unknown YCSB property `{key}` (redt maps recordcount, readproportion, updateproportion, \
         insertproportion, scanproportion, readmodifywriteproportion, requestdistribution, zipfianconstant, \
         fieldcount, fieldlength, threadcount, maxexecutiontime; see `redt bench ycsb --help`)"
    )]
    Unknown {
        /// The file.
        file: String,
        /// Its line.
        line: usize,
        /// The key.
        key: String,
    },
    /// A value redt cannot use.
    #[error("{file} line {line}: {key}={value}: {why}")]
    Value {
        /// The file.
        file: String,
        /// Its line.
        line: usize,
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Why.
        why: String,
    },
    /// The operation proportions do not make one redt mix.
    #[error("{file}: {why}")]
    Mix {
        /// The file.
        file: String,
        /// Why.
        why: String,
    },
}

/// What a property file asks for, in redt's terms (`None`: the file does not say).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct YcsbProps {
    /// `recordcount`: records in all.
    pub record_count: Option<u64>,
    /// The workload the proportions make.
    pub workload: Option<Workload>,
    /// The fraction of the workload's write kind.
    pub write_ratio: Option<f64>,
    /// `requestdistribution`.
    pub distribution: Option<Distribution>,
    /// `zipfianconstant`.
    pub theta: Option<f64>,
    /// `fieldcount`.
    pub field_count: Option<usize>,
    /// `fieldlength`.
    pub field_length: Option<usize>,
    /// `threadcount`: clients in all.
    pub threads: Option<usize>,
    /// `maxexecutiontime`.
    pub max_execution_time: Option<Duration>,
    /// Keys accepted without effect, one line each (`line N: key=value: why`).
    pub warnings: Vec<String>,
}

impl YcsbProps {
    /// `--records-per-partition` for `partitions` partitions: ⌈recordcount / partitions⌉.
    pub fn records_per_partition(&self, partitions: usize) -> Option<u64> {
        self.record_count.map(|n| n.div_ceil(partitions.max(1) as u64))
    }

    /// `--clients-per-node` for `nodes` nodes: ⌈threadcount / nodes⌉.
    pub fn clients_per_node(&self, nodes: usize) -> Option<usize> {
        self.threads.map(|n| n.div_ceil(nodes.max(1)))
    }

    /// `--record-size` as `CELLSxBYTES`, when the file gives either (the other: `default`).
    pub fn record_size(&self, default: (usize, usize)) -> Option<String> {
        if self.field_count.is_none() && self.field_length.is_none() {
            return None;
        }
        Some(format!("{}x{}", self.field_count.unwrap_or(default.0), self.field_length.unwrap_or(default.1)))
    }
}

/// Reads and maps the property file `path`.
///
/// # Errors
/// An unreadable file, and everything [`parse`] refuses.
pub fn load(path: &std::path::Path) -> Result<YcsbProps, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, &path.display().to_string()).map_err(|e| e.to_string())
}

/// Parses property-file text (`file` names it in errors) and maps its keys.
///
/// # Errors
/// [`PropsError`]: bad syntax, an unknown key, a value redt cannot honour, proportions that do
/// not make one mix.
pub fn parse(text: &[u8], file: &str) -> Result<YcsbProps, PropsError> {
    let mut p = YcsbProps::default();
    let mut props: Vec<(usize, String, String)> = Vec::new();
    for line in java_properties::PropertiesIter::new(text) {
        let line = line.map_err(|e| PropsError::Syntax { file: file.into(), message: e.to_string() })?;
        let n = line.line_number();
        if let java_properties::LineContent::KVPair(k, v) = line.consume_content() {
            props.push((n, k.trim().to_string(), v.trim().to_string()));
        }
    }
    let mut proportions: [Option<f64>; 5] = [None; 5];
    for (line, key, value) in props {
        let bad = |why: &str| PropsError::Value {
            file: file.into(),
            line,
            key: key.clone(),
            value: value.clone(),
            why: why.into(),
        };
        let number = || value.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
        let count = || value.parse::<u64>().ok();
        let mut warn = |why: &str| p.warnings.push(format!("line {line}: {key}={value}: {why}"));
        match key.as_str() {
            "recordcount" => {
                p.record_count = Some(count().filter(|&n| n > 0).ok_or_else(|| bad("must be a count above 0"))?)
            }
            "readproportion"
            | "updateproportion"
            | "insertproportion"
            | "scanproportion"
            | "readmodifywriteproportion" => {
                let i = [
                    "readproportion",
                    "updateproportion",
                    "insertproportion",
                    "scanproportion",
                    "readmodifywriteproportion",
                ]
                .iter()
                .position(|k| *k == key)
                .expect("matched above");
                let x = number().filter(|x| *x <= 1.0).ok_or_else(|| bad("must be a number from 0 to 1"))?;
                if i == 3 && x > 0.0 {
                    return Err(bad(WORKLOAD_E_REFUSED));
                }
                proportions[i] = Some(x);
            }
            "requestdistribution" => {
                p.distribution = Some(Distribution::parse(&value).map_err(|_| {
                    bad("redt draws keys zipfian, uniform or latest (no hotspot, sequential or exponential)")
                })?)
            }
            "zipfianconstant" => p.theta = Some(number().ok_or_else(|| bad("must be a number ≥ 0"))?),
            "fieldcount" => {
                p.field_count = Some(
                    count().filter(|n| (1..=64).contains(n)).ok_or_else(|| bad("must be 1 to 64 fields"))? as usize,
                )
            }
            "fieldlength" => {
                // Bytes as YCSB writes it (`100`), or any size the topology file takes (`1KiB`).
                let bytes = redt_proto::parse_size(&value).map_err(|e| bad(&e))?;
                p.field_length = Some(
                    usize::try_from(bytes)
                        .ok()
                        .filter(|n| (1..=65536).contains(n))
                        .ok_or_else(|| bad("must be 1 to 65536 bytes"))?,
                )
            }
            "threadcount" => {
                p.threads = Some(count().filter(|&n| n > 0).ok_or_else(|| bad("must be a count above 0"))? as usize)
            }
            "maxexecutiontime" => {
                // Seconds as YCSB writes it (`30`), or a duration as every flag takes it (`2m`).
                let d = match count() {
                    Some(secs) => Duration::from_secs(secs),
                    None => redt_proto::parse_duration(&value).map_err(|e| bad(&e))?,
                };
                if d.is_zero() {
                    return Err(bad("must be seconds above 0"));
                }
                p.max_execution_time = Some(d)
            }
            "operationcount" => {
                warn("redt runs for a duration (--duration, or maxexecutiontime), not a number of operations; ignored")
            }
            "workload" => {
                if !value.ends_with("CoreWorkload") {
                    return Err(bad("redt runs YCSB's core workload only"));
                }
                warn("the core workload is what redt runs; ignored")
            }
            "db"
            | "exporter"
            | "exportfile"
            | "measurementtype"
            | "measurement.interval"
            | "histogram.buckets"
            | "hdrhistogram.percentiles"
            | "status.interval"
            | "timeseries.granularity" => warn("a YCSB client setting; redt reports its own figures; ignored"),
            "table" => warn("redt's YCSB table is the topology's first; ignored"),
            "readallfields" => match value.as_str() {
                "true" => warn("redt reads every field; ignored"),
                _ => return Err(bad("redt's reads read every field (readallfields=true only)")),
            },
            "writeallfields" => match value.as_str() {
                "false" => warn("redt's updates write one field; ignored"),
                _ => return Err(bad("redt's updates write one field (writeallfields=false only)")),
            },
            "fieldlengthdistribution" => match value.as_str() {
                "constant" => warn("redt's fields have a constant length; ignored"),
                _ => return Err(bad("redt's fields have a constant length (fieldlengthdistribution=constant only)")),
            },
            "insertorder" => warn("redt places keys by partition; ignored"),
            "maxscanlength" | "scanlengthdistribution" | "minscanlength" => {
                warn("scans are refused (scanproportion must be 0); ignored")
            }
            _ => return Err(PropsError::Unknown { file: file.into(), line, key }),
        }
    }
    mix(&mut p, proportions, file)?;
    Ok(p)
}

/// The workload and write ratio the proportions (read, update, insert, scan,
/// read-modify-write) make, if the file gives any.
fn mix(p: &mut YcsbProps, proportions: [Option<f64>; 5], file: &str) -> Result<(), PropsError> {
    if proportions.iter().all(Option::is_none) {
        return Ok(());
    }
    let [read, update, insert, _scan, rmw] = proportions.map(|x| x.unwrap_or(0.0));
    let err = |why: String| PropsError::Mix { file: file.into(), why };
    let sum = read + update + insert + rmw;
    if (sum - 1.0).abs() > 1e-6 {
        return Err(err(format!(
            "the operation proportions add up to {sum} (read {read}, update {update}, insert {insert}, \
             readmodifywrite {rmw}); they must add up to 1"
        )));
    }
    let writes: Vec<(Workload, f64)> = [(Workload::A, update), (Workload::D, insert), (Workload::F, rmw)]
        .into_iter()
        .filter(|(_, x)| *x > 0.0)
        .collect();
    let (workload, ratio) = match writes[..] {
        [] => (Workload::C, 0.0),
        [one] => one,
        _ => {
            return Err(err(format!(
                "redt's mix has reads and one write kind; this file has updates {update}, inserts {insert} and \
                 read-modify-writes {rmw}"
            )))
        }
    };
    p.workload = Some(workload);
    p.write_ratio = Some(ratio);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<YcsbProps, PropsError> {
        parse(s.as_bytes(), "w.properties")
    }

    /// YCSB's own workloads/workloada, as it ships (its comment block shortened).
    const WORKLOAD_A: &str = "# Yahoo! Cloud System Benchmark\n\
        # Workload A: Update heavy workload\n\
        #   Application example: Session store recording recent actions\n\
        #\n\
        recordcount=1000\n\
        operationcount=1000\n\
        workload=site.ycsb.workloads.CoreWorkload\n\
        \n\
        readallfields=true\n\
        \n\
        readproportion=0.5\n\
        updateproportion=0.5\n\
        scanproportion=0\n\
        insertproportion=0\n\
        \n\
        requestdistribution=zipfian\n";

    #[test]
    fn ycsb_workload_a_maps_onto_the_flags() {
        let p = parse_str(WORKLOAD_A).unwrap();
        assert_eq!(p.record_count, Some(1000));
        assert_eq!(p.records_per_partition(8), Some(125));
        assert_eq!(p.records_per_partition(3), Some(334), "rounded up");
        assert_eq!(p.workload, Some(Workload::A));
        assert_eq!(p.write_ratio, Some(0.5));
        assert_eq!(p.distribution, Some(Distribution::Zipfian));
        assert_eq!(p.theta, None);
        assert_eq!(p.warnings.len(), 3, "{:?}", p.warnings);
        assert!(p.warnings[0].starts_with("line 6: operationcount=1000: redt runs for a duration"), "{:?}", p.warnings);
    }

    #[test]
    fn the_other_core_workloads_and_the_rest_of_the_keys() {
        let d = parse_str("readproportion=0.95\ninsertproportion=0.05\nrequestdistribution=latest\n").unwrap();
        assert_eq!(
            (d.workload, d.write_ratio, d.distribution),
            (Some(Workload::D), Some(0.05), Some(Distribution::Latest))
        );
        let f = parse_str("readproportion: 0.5\nreadmodifywriteproportion = 0.5\n").unwrap();
        assert_eq!((f.workload, f.write_ratio), (Some(Workload::F), Some(0.5)));
        let c = parse_str("readproportion=1\n! a comment\nupdateproportion=0\n").unwrap();
        assert_eq!((c.workload, c.write_ratio), (Some(Workload::C), Some(0.0)));
        let all = parse_str(
            "fieldcount=20\nfieldlength=50\nthreadcount=10\nmaxexecutiontime=12\nzipfianconstant=0.5\n\
             requestdistribution=uniform\nrecordcount=\\\n  64\n",
        )
        .unwrap();
        assert_eq!(all.record_size((10, 100)), Some("20x50".into()));
        assert_eq!(all.clients_per_node(4), Some(3));
        assert_eq!(all.max_execution_time, Some(Duration::from_secs(12)));
        assert_eq!(all.theta, Some(0.5));
        assert_eq!(all.distribution, Some(Distribution::Uniform));
        assert_eq!(all.record_count, Some(64), "a continued line");
        assert_eq!(all.workload, None, "no proportions: the flags' workload");
        assert_eq!(parse_str("fieldlength=10\n").unwrap().record_size((10, 100)), Some("10x10".into()));
        // The one size and duration parser: units too.
        assert_eq!(parse_str("fieldlength=1KiB\n").unwrap().record_size((10, 100)), Some("10x1024".into()));
        assert_eq!(parse_str("maxexecutiontime=2m\n").unwrap().max_execution_time, Some(Duration::from_secs(120)));
        assert_eq!(parse_str("").unwrap(), YcsbProps::default());
    }

    #[test]
    fn unknown_keys_and_values_redt_cannot_honour_are_refused_naming_them() {
        let e = parse_str("recordcount=10\nhotspotdatafraction=0.2\n").unwrap_err();
        assert_eq!(e, PropsError::Unknown { file: "w.properties".into(), line: 2, key: "hotspotdatafraction".into() });
        assert!(e.to_string().contains("unknown YCSB property `hotspotdatafraction`"), "{e}");
        for (text, key, why) in [
            ("scanproportion=0.95\n", "scanproportion", "workload E"),
            ("requestdistribution=hotspot\n", "requestdistribution", "no hotspot"),
            ("readallfields=false\n", "readallfields", "every field"),
            ("writeallfields=true\n", "writeallfields", "one field"),
            ("recordcount=0\n", "recordcount", "above 0"),
            ("recordcount=lots\n", "recordcount", "above 0"),
            ("readproportion=1.5\n", "readproportion", "0 to 1"),
            ("zipfianconstant=-1\n", "zipfianconstant", "≥ 0"),
            ("fieldcount=65\n", "fieldcount", "1 to 64"),
            ("maxexecutiontime=0\n", "maxexecutiontime", "above 0"),
            ("maxexecutiontime=-5\n", "maxexecutiontime", "invalid duration `-5`: negative"),
            ("maxexecutiontime=abc\n", "maxexecutiontime", "invalid duration `abc`: not a number and a unit"),
            ("fieldlength=-1\n", "fieldlength", "invalid size `-1`: negative"),
            ("fieldlength=1MiB\n", "fieldlength", "1 to 65536 bytes"),
            ("workload=site.ycsb.workloads.TimeSeriesWorkload\n", "workload", "core workload"),
            ("fieldlengthdistribution=zipfian\n", "fieldlengthdistribution", "constant"),
        ] {
            let e = parse_str(text).unwrap_err();
            let PropsError::Value { key: k, line: 1, why: w, .. } = &e else { panic!("{text}: {e:?}") };
            assert_eq!(k, key);
            assert!(w.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn proportions_must_make_one_mix() {
        let e = parse_str("readproportion=0.5\nupdateproportion=0.4\n").unwrap_err();
        assert!(e.to_string().contains("add up to 0.9"), "{e}");
        let e = parse_str("readproportion=0.5\nupdateproportion=0.25\ninsertproportion=0.25\n").unwrap_err();
        assert!(e.to_string().contains("one write kind"), "{e}");
    }
}

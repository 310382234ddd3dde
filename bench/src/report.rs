//! Figures shared by every report: latency percentiles, verbs per transaction, MemStore
//! footprint.

use hdrhistogram::Histogram;
use redt_dc_executor::VerbCounts;
use serde::Serialize;

/// Latency percentiles (unit given by the field holding it: µs or ms).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
}

impl Latency {
    /// A histogram with 3 significant digits, auto-resizing.
    pub fn histogram() -> Histogram<u64> {
        Histogram::new(3).expect("3 significant digits is valid")
    }

    /// Percentiles of `h` (zero if empty).
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            p50: h.value_at_quantile(0.5) as f64,
            p99: h.value_at_quantile(0.99) as f64,
            p999: h.value_at_quantile(0.999) as f64,
            mean: h.mean(),
        }
    }
}

/// Verbs per committed transaction, by kind.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct VerbsPerTxn {
    /// RDMA READs.
    pub read: f64,
    /// RDMA WRITEs.
    pub write: f64,
    /// Compare-and-swaps (plain).
    pub cas: f64,
    /// Fetch-and-adds (plain).
    pub faa: f64,
    /// Masked compare-and-swaps.
    pub masked_cas: f64,
    /// Masked fetch-and-adds.
    pub masked_faa: f64,
    /// Doorbells (batches and lone verbs): the round trips a NIC would make.
    pub doorbells: f64,
    /// Every verb.
    pub total: f64,
}

impl VerbsPerTxn {
    /// `counts` divided by `committed` (zero when nothing committed).
    pub fn new(counts: &VerbCounts, committed: u64) -> Self {
        let d = |x: u64| if committed == 0 { 0.0 } else { x as f64 / committed as f64 };
        VerbsPerTxn {
            read: d(counts.read),
            write: d(counts.write),
            cas: d(counts.cas),
            faa: d(counts.faa),
            masked_cas: d(counts.masked_cas),
            masked_faa: d(counts.masked_faa),
            doorbells: d(counts.doorbells),
            total: d(counts.total()),
        }
    }
}

/// MemStore bytes spent per record.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct MemStoreFootprint {
    /// Heap bytes per record (header, versions, padding, 64-byte allocation rounding).
    pub record_bytes: u64,
    /// Payload bytes per record (the cell values).
    pub payload_bytes: u64,
    /// Index bytes per record (the node's index area over the records it holds).
    pub index_bytes_per_record: f64,
    /// (record + index bytes) / payload bytes.
    pub bytes_per_payload_byte: f64,
}

impl MemStoreFootprint {
    /// Footprint of `records_per_node` records of `record_bytes` each with `payload_bytes`
    /// of values, and an index area of `index_bytes` per node.
    pub fn new(record_bytes: u64, payload_bytes: u64, index_bytes: u64, records_per_node: u64) -> Self {
        let idx = if records_per_node == 0 { 0.0 } else { index_bytes as f64 / records_per_node as f64 };
        MemStoreFootprint {
            record_bytes,
            payload_bytes,
            index_bytes_per_record: idx,
            bytes_per_payload_byte: (record_bytes as f64 + idx) / payload_bytes.max(1) as f64,
        }
    }
}

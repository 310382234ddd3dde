//! redt's workloads, drivers, checks and reports. The binary exposes them as
//! `redt bench …`.

#![forbid(unsafe_code)]

pub mod api;
pub mod append;
pub mod bank;
pub mod chart;
pub mod clients;
pub mod cluster;
pub mod compare;
pub mod cpu;
pub mod csv;
pub mod dex;
pub mod drill;
pub mod drill_bench;
pub mod drill_embedded;
pub mod drill_plan;
pub mod interval;
pub mod jepsen;
pub mod local;
mod progress;
pub mod report;
pub mod sweep;
pub mod topo;
pub mod tpcc;
pub mod workload;
pub mod ycsb;
pub mod ycsb_props;

pub use append::{run_append, AppendConfig, AppendReport};
pub use bank::{run_bank, BankConfig, BankReport};
pub use cluster::{run_cluster_ycsb, run_remote_ycsb, ClusterConfig, ClusterReport, RemoteReport};
pub use compare::{run_compare, CompareConfig, CompareReport, CompareWorkload};
pub use drill_bench::{run_drill_ycsb, run_embedded_drill_ycsb, DrillBenchReport, EmbeddedDrillBenchReport};
pub use local::{run_local_ycsb, LocalConfig, LocalReport};
pub use sweep::{run_sweep, SweepConfig, SweepReport};
pub use ycsb::{Distribution, Workload, YcsbConfig, YcsbGenerator};

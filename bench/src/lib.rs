//! redt's workloads, drivers, checks and reports. The binary exposes them as
//! `redt bench …`.

pub mod cluster;
pub mod jepsen;
pub mod local;
pub mod report;
pub mod ycsb;

pub use cluster::{run_cluster_ycsb, run_remote_ycsb, ClusterConfig, ClusterReport, RemoteReport};
pub use local::{run_local_ycsb, LocalConfig, LocalReport};
pub use ycsb::{YcsbConfig, YcsbGenerator};

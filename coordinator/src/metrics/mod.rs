//! A node's Prometheus metrics: what its coordinators answered (per class, aborts
//! per cause, commit latency), its recoveries, ring, epoch and suspects (what `redt status`
//! shows), its traffic and QUIC-measured round trip per peer DC, its verbs per kind, and its
//! process's CPU time and resident memory (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`; [`crate::process`]).
//!
//! Most figures are counters that already exist, read at scrape time ([`NodeSample::gather`]:
//! [`crate::Node::status`], whose ring figures come from a sample at most
//! [`crate::SAMPLE_MAX_AGE`] (1 s) old shared with every status request, the transport's
//! counters, the data path's verb counts); the
//! answers are counted per node in [`AnswerCounters`] (one relaxed add per answer). A scrape
//! encodes its sample with `prometheus-client` into a registry of its own, so any number of
//! nodes share a process (the embedded cluster) without a global recorder.
//! [`MetricsServer`] serves it over HTTP, or HTTPS with the node's own certificate
//! ([`MetricsTls`], `metrics.tls`), within the caps and the timeouts of the topology file's
//! `metrics:` section (by default 32 connections, 4 from one client IP address, 5 s to send a
//! request's headers, 5 s for a stalled write of a response); `redt node --metrics-addr`,
//! the file (its `metrics:` port, or a node's own `metrics` address) and `redt cluster up`
//! say where.

mod answers;
mod encode;
mod sample;
mod server;
mod tls;
mod write_deadline;

pub use answers::{AnswerCounters, AnswersSnapshot, LATENCY_BUCKETS_SECONDS};
pub use encode::{encode, Format};
pub use sample::{LinkSample, NodeSample};
pub use server::{MetricsServer, NodeSource, CONNECTION_LIFETIME};
pub use tls::MetricsTls;

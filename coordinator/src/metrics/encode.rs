//! A [`NodeSample`] in the Prometheus text formats, through `prometheus-client`: one registry
//! per scrape, the node's `node` and `dc` as labels on every sample, the sample itself as the
//! collector of its `redt_` families, and the process's CPU time and resident memory under the
//! standard unprefixed names every Prometheus client library exports
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`). The metric names and their
//! help texts are here and in docs/operations.md, "Metrics".

use super::answers::LATENCY_BUCKETS_SECONDS;
use super::sample::NodeSample;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use redt_protocol::stats::{AbortCause, Class};
use std::borrow::Cow;
use std::fmt;

/// A text exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text (with `# UNIT` lines and the closing `# EOF`).
    OpenMetrics,
    /// The classic Prometheus text format, version 0.0.4.
    Prometheus,
}

impl Format {
    /// The format a scraper asks for in its `Accept` header: OpenMetrics if it names
    /// `application/openmetrics-text`, else the classic text format (curl, browsers).
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }
}

/// `sample` as a text exposition in `format`.
pub fn encode(sample: NodeSample, format: Format) -> String {
    let labels = [("node", sample.node.clone()), ("dc", sample.dc.clone())]
        .into_iter()
        .map(|(k, v)| (Cow::Borrowed(k), Cow::Owned(v)));
    let mut registry = Registry::with_labels(labels);
    registry.register_collector(Box::new(ProcessFigures {
        cpu_seconds: sample.status.process_cpu_us.map(|us| us as f64 / 1e6),
        resident_bytes: sample.status.process_resident_bytes,
    }));
    registry.sub_registry_with_prefix("redt").register_collector(Box::new(sample));
    let mut text = String::new();
    let written = match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, &registry),
        Format::Prometheus => prometheus_client::encoding::prometheus_text::encode(&mut text, &registry),
    };
    // Writing to a String fails only if a value's `Display` does, and ours are numbers and
    // label texts.
    written.expect("encoding metrics into a String");
    text
}

/// The node process's figures, under the names Prometheus client libraries give them (no
/// `redt_` prefix); a figure the node did not report is left out.
#[derive(Clone, Copy, Debug)]
struct ProcessFigures {
    /// CPU time (user + system) since the process started, in seconds.
    cpu_seconds: Option<f64>,
    /// Resident memory, in bytes.
    resident_bytes: Option<u64>,
}

impl Collector for ProcessFigures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        if let Some(cpu) = self.cpu_seconds {
            let m = encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent in seconds (by every node sharing the process).",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            ConstCounter::new(cpu).encode(m)?;
        }
        if let Some(bytes) = self.resident_bytes {
            let m = encoder.encode_descriptor(
                "process_resident_memory",
                "Resident memory size in bytes.",
                Some(&Unit::Bytes),
                MetricType::Gauge,
            )?;
            ConstGauge::new(bytes).encode(m)?;
        }
        Ok(())
    }
}

/// Writes one metric family: its descriptor, then one sample per `(labels, value)`.
struct Writer<'a, 'b> {
    encoder: &'a mut DescriptorEncoder<'b>,
}

impl Writer<'_, '_> {
    fn counter<V: prometheus_client::encoding::EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        value: V,
    ) -> fmt::Result {
        let m = self.encoder.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
        ConstCounter::new(value).encode(m)
    }

    fn gauge<V: prometheus_client::encoding::EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        value: V,
    ) -> fmt::Result {
        let m = self.encoder.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
        ConstGauge::new(value).encode(m)
    }

    fn counters<'l>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        key: &'static str,
        values: impl IntoIterator<Item = (&'l str, u64)>,
    ) -> fmt::Result {
        let mut m = self.encoder.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
        for (label, v) in values {
            let labels = [(key, label)];
            ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

impl Collector for NodeSample {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let mut w = Writer { encoder: &mut encoder };
        let s = &self.status;
        let a = &self.answers;
        let classes = Class::all().map(|c| c.name());
        let by_class = |v: &[u64; 4]| classes.iter().copied().zip(v.iter().copied()).collect::<Vec<_>>();

        // Transactions this node coordinated.
        w.counters(
            "txn_committed",
            "Transactions this node's coordinators answered committed, by class.",
            None,
            "class",
            by_class(&a.committed),
        )?;
        w.counters(
            "txn_aborted",
            "Transactions this node's coordinators answered aborted (certainly not committed), by class.",
            None,
            "class",
            by_class(&a.aborted),
        )?;
        w.counters(
            "txn_unknown",
            "Transactions whose client was told the outcome is unknown, by class.",
            None,
            "class",
            by_class(&a.unknown),
        )?;
        w.counters(
            "txn_aborted_by_cause",
            "Aborted answers by cause: the first abort vote's reason, else no_vote, else the rule's case.",
            None,
            "cause",
            AbortCause::ALL.iter().map(|c| c.name()).zip(a.causes.iter().copied()),
        )?;
        {
            let m = w.encoder.encode_descriptor(
                "txn_commit_latency",
                "From a transaction's submission to its committed answer at the coordinator.",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            );
            let mut m = m?;
            let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS_SECONDS
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(a.latency_buckets.iter().copied())
                .collect();
            let count = a.latency_buckets.iter().sum();
            m.encode_histogram::<NoLabelSet>(a.latency_sum_seconds, count, &buckets, None)?;
        }
        w.counter(
            "requests_refused_over_limit",
            "Requests refused for being over a limit: of the topology's limits section, or a connection's outcome queries in flight.",
            None,
            s.refused_over_limit,
        )?;
        w.counter(
            "requests_refused_role",
            "Requests refused because the caller's certificate lacked the role they need (operator, node).",
            None,
            s.refused_role,
        )?;
        w.counter(
            "raft_messages_wrong_sender",
            "Raft messages dropped because they named another sender than the node whose certificate sent them.",
            None,
            s.raft_wrong_sender,
        )?;
        w.counter(
            "executor_heap_full_votes",
            "Abort votes this node's executor side gave because a record heap was full.",
            None,
            s.heap_full_votes,
        )?;

        // Recovery.
        w.counter("recoveries_started", "Recoveries this node started.", None, s.recoveries_started)?;
        w.counters(
            "recoveries_decided",
            "Recoveries of this node that recorded a decision, by decision.",
            None,
            "decision",
            [("commit", s.recoveries_committed), ("abort", s.recoveries_aborted)],
        )?;
        w.gauge("recoveries_running", "Recoveries running now.", None, s.recoveries_running)?;
        w.gauge(
            "recoveries_blocked",
            "Recoveries running now that cannot decide (they wait for DCs).",
            None,
            s.recoveries_blocked,
        )?;

        // The executor thread.
        let e = s.executor;
        w.counters(
            "executor_jobs",
            "Jobs this node's executor thread ran, by lane: short (phase 1 of small sub-transactions, \
             decisions, records) and bulk (large sub-transactions, lookups, scans).",
            None,
            "lane",
            [("short", e.short_jobs), ("bulk", e.bulk_jobs)],
        )?;
        w.counter(
            "executor_busy",
            "Time this node's executor thread spent running jobs.",
            Some(Unit::Seconds),
            e.busy_us as f64 / 1e6,
        )?;
        w.gauge(
            "executor_longest_job",
            "The longest one job held this node's executor thread since it started.",
            Some(Unit::Seconds),
            e.longest_job_us as f64 / 1e6,
        )?;
        w.gauge(
            "executor_longest_short_wait",
            "The longest a short job waited for this node's executor thread since it started.",
            Some(Unit::Seconds),
            e.longest_short_wait_us as f64 / 1e6,
        )?;

        // The record heap, when the node reports it.
        if let Some(h) = s.record_heap {
            w.gauge("record_heap_size", "Bytes of this node's record heap.", Some(Unit::Bytes), h.size_bytes)?;
            w.gauge(
                "record_heap_used",
                "Bytes of this node's record heap in use: records, B+-tree nodes and directories, less the \
                 retired records on its free lists.",
                Some(Unit::Bytes),
                h.used_bytes,
            )?;
            w.gauge(
                "record_heap_free",
                "Bytes of retired records (aborted inserts) on this node's free lists, waiting for the next \
                 insert of their size.",
                Some(Unit::Bytes),
                h.free_bytes,
            )?;
        }

        // The redo ring and its replay.
        w.gauge(
            "ring_used_slots",
            "Slots of this node's redo ring between head and tail: written or reserved, not yet released \
             by replay (the replay backlog).",
            None,
            s.replay_backlog_slots,
        )?;
        w.gauge("ring_capacity_slots", "Slots of this node's redo ring.", None, self.ring_capacity_slots)?;
        w.gauge(
            "ring_undecided_entries",
            "Phase-1 entries of this node's ring still waiting for their decision.",
            None,
            s.undecided_entries,
        )?;
        let oldest_age = match s.oldest_undecided_unix_ms {
            0 => 0.0,
            t => self.now_unix_ms.saturating_sub(t) as f64 / 1e3,
        };
        w.gauge(
            "ring_oldest_undecided_age",
            "Age of the oldest undecided entry of this node's ring (0 without one).",
            Some(Unit::Seconds),
            oldest_age,
        )?;
        w.gauge(
            "ring_catch_ups_owed",
            "Entries of this node's ring still owing a catch-up to a replica left behind.",
            None,
            s.catch_ups_owed,
        )?;
        w.counter(
            "ring_gap_slots_filled",
            "Ring slots this node covered with fillers for writers that died.",
            None,
            s.gap_slots_filled,
        )?;
        w.counter(
            "replay_invalid_entries",
            "Committed redo entries replay could not apply and passed over.",
            None,
            s.replay_invalid_entries,
        )?;
        w.counter(
            "deleted_records_freed",
            "Records committed deletes emptied that the executor freed once their grace passed.",
            None,
            s.deleted_records_freed,
        )?;
        w.gauge(
            "deleted_records_waiting",
            "Records committed deletes emptied that wait for their grace before they are freed.",
            None,
            s.deleted_records_waiting,
        )?;
        w.counter(
            "executor_pending_votes_forgotten",
            "Commit votes the executor side forgot over limits.max_pending_votes (their entries wait in the ring).",
            None,
            s.pending_votes_forgotten,
        )?;
        w.counter(
            "executor_accepted_redo_forgotten",
            "Accepted replica redo the executor side forgot over limits.max_accepted_redo (found by a ring scan).",
            None,
            s.accepted_redo_forgotten,
        )?;
        w.gauge(
            "background_retries_waiting",
            "Background retries (catch-ups, recoverers) waiting for a slot under limits.max_background_retries.",
            None,
            s.background_retries_waiting,
        )?;
        w.counter(
            "background_retries_waited",
            "Background retries that had to wait for a slot under limits.max_background_retries.",
            None,
            s.background_retries_waited,
        )?;

        // Membership and failure detection.
        w.gauge("epoch", "The placement epoch this node is at.", None, u64::from(s.epoch.0))?;
        w.gauge("removed_dcs", "DCs this node's current placement has removed.", None, s.removed_dcs.len() as u64)?;
        w.gauge(
            "under_replicated_partitions",
            "Partitions this node's placement holds below the replication factor.",
            None,
            u64::from(s.under_replicated),
        )?;
        w.gauge(
            "suspected_nodes",
            "Nodes this node's failure detector suspects now.",
            None,
            s.suspected_nodes.len() as u64,
        )?;
        w.counter("suspicions", "Suspicions of a node this node's failure detector raised.", None, s.suspicions_total)?;
        w.gauge("node_uptime", "Time since this node started.", Some(Unit::Seconds), s.uptime_ms as f64 / 1e3)?;

        // Links to the other DCs (and to the other nodes of this one).
        let link = |f: fn(&super::sample::LinkSample) -> u64| {
            self.links.iter().map(move |l| (l.peer_dc.as_str(), f(l))).collect::<Vec<_>>()
        };
        w.counters(
            "link_messages_sent",
            "QUIC frames (requests and responses) and heartbeat datagrams this node sent to the nodes of a DC.",
            None,
            "peer_dc",
            link(|l| l.messages_sent),
        )?;
        w.counters(
            "link_sent",
            "Bytes of those frames and datagrams, length prefixes included.",
            Some(Unit::Bytes),
            "peer_dc",
            link(|l| l.bytes_sent),
        )?;
        w.counters(
            "link_messages_received",
            "QUIC frames (requests and responses) and heartbeat datagrams this node received from the nodes of a DC.",
            None,
            "peer_dc",
            link(|l| l.messages_received),
        )?;
        w.counters(
            "link_received",
            "Bytes of those frames and datagrams, length prefixes included.",
            Some(Unit::Bytes),
            "peer_dc",
            link(|l| l.bytes_received),
        )?;
        {
            let mut m = w.encoder.encode_descriptor(
                "link_rtt",
                "Round-trip time QUIC measures to a DC (smoothed; the smallest over this node's live \
                 connections to its nodes).",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            for l in &self.links {
                if let Some(rtt) = l.rtt {
                    let labels = [("peer_dc", l.peer_dc.as_str())];
                    ConstGauge::new(rtt.as_secs_f64()).encode(m.encode_family(&labels)?)?;
                }
            }
        }
        let t = &self.transport;
        w.counter("transport_rpcs_sent", "RPC requests this node's transport sent.", None, t.rpcs_sent)?;
        w.counter("transport_rpcs_served", "RPC responses this node's transport served.", None, t.rpcs_served)?;
        w.counters(
            "transport_frames_refused",
            "Frames this node's transport refused, by reason.",
            None,
            "reason",
            [("malformed", t.malformed_frames), ("oversized", t.oversized_frames)],
        )?;
        w.counter(
            "transport_handshakes_refused",
            "Incoming QUIC connections refused at the handshake.",
            None,
            t.refused_handshakes,
        )?;
        w.counter(
            "transport_retries_sent",
            "QUIC Retry packets sent to incoming connections whose address was not yet validated, once \
             half of transport.max_connections or transport.max_connections_per_peer is taken.",
            None,
            t.retries_sent,
        )?;
        w.counters(
            "transport_over_limit",
            "QUIC refusals and cancellations over the topology's transport: limits, by limit (the key).",
            None,
            "limit",
            [
                ("max_connections", t.refused_connections_total),
                ("max_connections_per_peer", t.refused_connections_per_peer),
                ("handler_timeout", t.handler_timeouts),
                ("write_timeout", t.write_timeouts),
                ("call_slot_timeout", t.call_slot_timeouts),
            ],
        )?;

        // Verbs inside the DC.
        let v = &self.verbs;
        w.counters(
            "verbs",
            "One-sided verbs issued by this node's data path, by kind (embedded cluster: by its DC's).",
            None,
            "kind",
            [
                ("read", v.read),
                ("write", v.write),
                ("cas", v.cas),
                ("faa", v.faa),
                ("masked_cas", v.masked_cas),
                ("masked_faa", v.masked_faa),
            ],
        )?;
        w.counter("verbs_doorbells", "Doorbells rung (one per batch or lone verb).", None, v.doorbells)?;
        if let Some(c) = &self.verbs_server {
            w.counters(
                "verbs_server_connections",
                "Connections the TCP verbs server serving this node's MemStore accepted, by what became of them \
                 (refusals name the verbs: limit or the check that failed).",
                None,
                "outcome",
                [
                    ("accepted", c.accepted),
                    ("refused_max_connections", c.refused_total_cap),
                    ("refused_max_connections_per_peer", c.refused_peer_cap),
                    ("handshake_failed", c.handshake_failed),
                    ("handshake_timed_out", c.handshake_timed_out),
                    ("refused_identity", c.refused_identity),
                    ("authenticated", c.authenticated),
                    ("first_frame_timed_out", c.first_frame_timed_out),
                ],
            )?;
        }
        w.counters(
            "verbs_moved",
            "Bytes moved by READs and WRITEs.",
            Some(Unit::Bytes),
            "direction",
            [("read", v.bytes_read), ("written", v.bytes_written)],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{AnswerCounters, LinkSample};
    use crate::status::StatusBoard;
    use redt_proto::{Epoch, NodeId};
    use redt_protocol::machine::TxnStatus;
    use std::time::Duration;

    fn sample() -> NodeSample {
        let answers = AnswerCounters::default();
        let rw_inter = Class { read_write: true, inter_dc: true };
        for ms in [41, 43, 120] {
            answers.record(rw_inter, &TxnStatus::Committed, None, Duration::from_millis(ms));
        }
        answers.record(rw_inter, &TxnStatus::Aborted("x".into()), Some(AbortCause::LockConflict), Duration::ZERO);
        let mut status = StatusBoard::default().snapshot(NodeId(0), &[], 0, 0, 0, None);
        status.epoch = Epoch(3);
        status.replay_backlog_slots = 5;
        status.record_heap =
            Some(redt_dc_executor::RecordHeapUsage { size_bytes: 1 << 20, used_bytes: 4096, free_bytes: 128 });
        status.process_cpu_us = Some(12_345_678);
        status.process_resident_bytes = Some(256 << 20);
        NodeSample {
            node: "dc1-n1".into(),
            dc: "dc1".into(),
            status,
            answers: answers.snapshot(),
            transport: redt_transport::CountersSnapshot { refused_connections_per_peer: 2, ..Default::default() },
            links: vec![LinkSample {
                peer_dc: "dc2".into(),
                messages_sent: 7,
                bytes_sent: 700,
                rtt: Some(Duration::from_millis(40)),
                ..LinkSample::default()
            }],
            verbs: Default::default(),
            verbs_server: Some(redt_dc_executor::ServerCounts {
                accepted: 9,
                refused_peer_cap: 4,
                ..Default::default()
            }),
            ring_capacity_slots: 1024,
            now_unix_ms: 0,
        }
    }

    #[test]
    fn the_classic_text_format_names_units_and_labels_every_sample() {
        let text = encode(sample(), Format::Prometheus);
        for line in [
            "# TYPE redt_txn_committed_total counter",
            "redt_txn_committed_total{node=\"dc1-n1\",dc=\"dc1\",class=\"rw-inter\"} 3",
            "redt_txn_committed_total{node=\"dc1-n1\",dc=\"dc1\",class=\"ro-intra\"} 0",
            "redt_txn_aborted_by_cause_total{node=\"dc1-n1\",dc=\"dc1\",cause=\"lock_conflict\"} 1",
            "# TYPE redt_txn_commit_latency_seconds histogram",
            "redt_txn_commit_latency_seconds_bucket{node=\"dc1-n1\",dc=\"dc1\",le=\"0.05\"} 2",
            "redt_txn_commit_latency_seconds_bucket{node=\"dc1-n1\",dc=\"dc1\",le=\"+Inf\"} 3",
            "redt_txn_commit_latency_seconds_count{node=\"dc1-n1\",dc=\"dc1\"} 3",
            "redt_epoch{node=\"dc1-n1\",dc=\"dc1\"} 3",
            "redt_ring_used_slots{node=\"dc1-n1\",dc=\"dc1\"} 5",
            "redt_record_heap_used_bytes{node=\"dc1-n1\",dc=\"dc1\"} 4096",
            "redt_record_heap_free_bytes{node=\"dc1-n1\",dc=\"dc1\"} 128",
            "redt_record_heap_size_bytes{node=\"dc1-n1\",dc=\"dc1\"} 1048576",
            "redt_link_sent_bytes_total{node=\"dc1-n1\",dc=\"dc1\",peer_dc=\"dc2\"} 700",
            "redt_link_rtt_seconds{node=\"dc1-n1\",dc=\"dc1\",peer_dc=\"dc2\"} 0.04",
            "redt_transport_over_limit_total{node=\"dc1-n1\",dc=\"dc1\",limit=\"max_connections_per_peer\"} 2",
            "redt_transport_over_limit_total{node=\"dc1-n1\",dc=\"dc1\",limit=\"handler_timeout\"} 0",
            "redt_verbs_server_connections_total{node=\"dc1-n1\",dc=\"dc1\",outcome=\"accepted\"} 9",
            "redt_verbs_server_connections_total{node=\"dc1-n1\",dc=\"dc1\",outcome=\"refused_max_connections_per_peer\"} 4",
            "# TYPE process_cpu_seconds_total counter",
            "process_cpu_seconds_total{node=\"dc1-n1\",dc=\"dc1\"} 12.345678",
            "# TYPE process_resident_memory_bytes gauge",
            "process_resident_memory_bytes{node=\"dc1-n1\",dc=\"dc1\"} 268435456",
        ] {
            assert!(text.lines().any(|l| l == line), "no line `{line}` in:\n{text}");
        }
        assert!(!text.contains("# EOF"));
        assert!(!text.contains("redt_process"), "the process's figures keep their standard names:\n{text}");
    }

    #[test]
    fn process_figures_a_node_did_not_report_are_left_out() {
        let mut s = sample();
        s.status.process_cpu_us = None;
        s.status.process_resident_bytes = None;
        let text = encode(s, Format::Prometheus);
        assert!(!text.contains("process_cpu_seconds"), "{text}");
        assert!(!text.contains("process_resident_memory_bytes"), "{text}");
        assert!(text.contains("redt_epoch{node=\"dc1-n1\",dc=\"dc1\"} 3"), "{text}");
    }

    #[test]
    fn openmetrics_is_served_to_who_asks_for_it() {
        assert_eq!(Format::from_accept(None), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("text/plain;version=0.0.4")), Format::Prometheus);
        let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
        assert_eq!(Format::from_accept(Some(accept)), Format::OpenMetrics);
        let text = encode(sample(), Format::OpenMetrics);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("# UNIT redt_txn_commit_latency_seconds seconds"), "{text}");
        assert!(text.contains("# UNIT process_cpu_seconds seconds"), "{text}");
        assert!(text.contains("process_cpu_seconds_total{node=\"dc1-n1\",dc=\"dc1\"} 12.345678"), "{text}");
        assert!(text.contains("# UNIT process_resident_memory_bytes bytes"), "{text}");
        assert!(text.contains("redt_txn_committed_total{node=\"dc1-n1\",dc=\"dc1\",class=\"rw-inter\"} 3"), "{text}");
    }
}

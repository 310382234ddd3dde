//! Reading a run's CPU time ([`crate::report::CpuCost`]): this process's for an embedded run
//! (every node, client and replay thread is in it), the sum of the nodes' processes for a run
//! against a running cluster, each node's read through its status
//! (`StatusReply::process_cpu_us`). The embedded runs also measure the idle CPU of their
//! cluster over a short window before the warm-up ([`idle_cpu_cores`]).

use redt_coordinator::process::{cores, cpu_time, CpuWindow};
use redt_coordinator::Client;
use redt_proto::NodeId;
use std::sync::Arc;
use std::time::Duration;

/// How long [`CpuSource::read`] waits for the nodes' answers (a node that does not answer
/// within it leaves the reading without a figure).
pub const NODES_WAIT: Duration = Duration::from_secs(2);

/// Where a run's CPU time is read.
#[derive(Clone)]
pub enum CpuSource {
    /// This process: an embedded cluster, its clients and its replay threads.
    Process,
    /// The processes of a running cluster's `nodes`, each asked for its status through
    /// `client`; their CPU times add up.
    Nodes(Arc<Client>, Vec<NodeId>),
}

/// One node's process CPU time as its status reported it, with its uptime (to tell a
/// restart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeCpu {
    /// The node.
    pub node: NodeId,
    /// Ms since the node process started.
    pub uptime_ms: u64,
    /// CPU time of its process since it started, in µs.
    pub cpu_us: u64,
}

/// One reading of a [`CpuSource`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuReading {
    /// This process's CPU time.
    Process(Duration),
    /// Every node's (`None`: a node did not answer, or does not report its CPU time).
    Nodes(Option<Vec<NodeCpu>>),
}

impl CpuSource {
    /// Reads the CPU time now (for [`CpuSource::Nodes`], one status call to every node at
    /// once, waiting at most [`NODES_WAIT`] for all of them).
    pub async fn read(&self) -> CpuReading {
        match self {
            CpuSource::Process => CpuReading::Process(cpu_time()),
            CpuSource::Nodes(client, nodes) => {
                let Ok(answers) = tokio::time::timeout(NODES_WAIT, client.status_of(nodes, false)).await else {
                    return CpuReading::Nodes(None);
                };
                let all = answers
                    .into_iter()
                    .map(|(node, s)| {
                        let s = s.ok()?;
                        Some(NodeCpu { node, uptime_ms: s.uptime_ms, cpu_us: s.process_cpu_us? })
                    })
                    .collect::<Option<Vec<_>>>()
                    .filter(|all| all.len() == nodes.len());
                CpuReading::Nodes(all)
            }
        }
    }
}

impl CpuReading {
    /// The CPU time spent from this reading to `later` (a reading of the same source):
    /// `None` if either misses a node, a node restarted in between (its uptime or CPU time
    /// went back), or the readings are of different sources.
    pub fn until(&self, later: &CpuReading) -> Option<Duration> {
        match (self, later) {
            (CpuReading::Process(a), CpuReading::Process(b)) => Some(b.saturating_sub(*a)),
            (CpuReading::Nodes(Some(a)), CpuReading::Nodes(Some(b))) if a.len() == b.len() => {
                let mut us = 0u64;
                for (x, y) in a.iter().zip(b) {
                    if x.node != y.node || y.uptime_ms < x.uptime_ms {
                        return None;
                    }
                    us = us.saturating_add(y.cpu_us.checked_sub(x.cpu_us)?);
                }
                Some(Duration::from_micros(us))
            }
            _ => None,
        }
    }
}

/// The idle CPU of this process over `window` (tokio's timer; an embedded cluster up and
/// loaded, its clients not started): CPU seconds per wall-clock second. `None` for a zero
/// window, which is not measured.
pub async fn idle_cpu_cores(window: Duration) -> Option<f64> {
    if window.is_zero() {
        return None;
    }
    let w = CpuWindow::start();
    tokio::time::sleep(window).await;
    let (cpu, wall) = w.read();
    Some(cores(cpu, wall))
}

/// As [`idle_cpu_cores`], sleeping this thread (a run without a tokio runtime).
pub fn idle_cpu_cores_blocking(window: Duration) -> Option<f64> {
    if window.is_zero() {
        return None;
    }
    let w = CpuWindow::start();
    std::thread::sleep(window);
    let (cpu, wall) = w.read();
    Some(cores(cpu, wall))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(node: u16, uptime_ms: u64, cpu_us: u64) -> NodeCpu {
        NodeCpu { node: NodeId(node), uptime_ms, cpu_us }
    }

    #[test]
    fn the_nodes_cpu_times_add_up_between_two_readings() {
        let a = CpuReading::Nodes(Some(vec![n(0, 1_000, 500_000), n(1, 1_000, 200_000)]));
        let b = CpuReading::Nodes(Some(vec![n(0, 3_000, 1_700_000), n(1, 3_000, 500_000)]));
        assert_eq!(a.until(&b), Some(Duration::from_micros(1_500_000)));
    }

    #[test]
    fn a_missing_or_restarted_node_leaves_the_cpu_time_unknown() {
        let a = CpuReading::Nodes(Some(vec![n(0, 1_000, 500_000), n(1, 1_000, 200_000)]));
        // dc1-n2 restarted: its uptime went back (its CPU time happens to be higher).
        let restarted = CpuReading::Nodes(Some(vec![n(0, 3_000, 1_700_000), n(1, 900, 300_000)]));
        assert_eq!(a.until(&restarted), None);
        // Its CPU time went back with a later uptime: not the same process either.
        let back = CpuReading::Nodes(Some(vec![n(0, 3_000, 1_700_000), n(1, 3_000, 100_000)]));
        assert_eq!(a.until(&back), None);
        assert_eq!(a.until(&CpuReading::Nodes(None)), None, "a node did not answer");
        assert_eq!(CpuReading::Nodes(None).until(&a), None);
        let other = CpuReading::Nodes(Some(vec![n(0, 3_000, 1_700_000), n(2, 3_000, 500_000)]));
        assert_eq!(a.until(&other), None, "not the same nodes");
        assert_eq!(a.until(&CpuReading::Process(Duration::from_secs(9))), None, "not the same source");
    }

    #[tokio::test]
    async fn this_process_is_read_directly() {
        let src = CpuSource::Process;
        let a = src.read().await;
        let mut x = 0u64;
        let (start, deadline) = (cpu_time(), std::time::Instant::now() + Duration::from_secs(10));
        while cpu_time().saturating_sub(start) < Duration::from_millis(20) && std::time::Instant::now() < deadline {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spent = a.until(&src.read().await).expect("the same source");
        assert!(spent >= Duration::from_millis(20), "{spent:?}");
        assert_eq!(idle_cpu_cores(Duration::ZERO).await, None);
        assert_eq!(idle_cpu_cores_blocking(Duration::ZERO), None);
        assert!(idle_cpu_cores_blocking(Duration::from_millis(20)).is_some_and(|c| c >= 0.0));
    }
}

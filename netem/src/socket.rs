//! [`NetemSocket`]: a quinn UDP socket that applies the [`WanModel`] to every datagram it sends.
//!
//! The thin driver around the model: `try_send` asks the model for each
//! datagram's [`Fate`] and either sends it at once, drops it, or puts it on a per-socket delay
//! line, a tokio task that sends each datagram through the real socket at its instant. Receiving
//! is untouched: every direction has a sender, and the sender applies that direction's delay
//! (docs/design.md §4).

use crate::model::{DropCause, Fate, WanModel};
use quinn::udp::{EcnCodepoint, RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, Runtime, TokioRuntime, UdpPoller};
use rand::rngs::StdRng;
use rand::SeedableRng;
use redt_proto::DcId;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Bound on the bytes waiting on one socket's delay line (64 MiB); a datagram that would
/// exceed it is dropped and counted in [`NetemStats::dropped_overflow`].
pub const QUEUE_LIMIT_BYTES: usize = 64 << 20;

/// Counters of one [`NetemSocket`], as returned by [`NetemSocket::stats`]. All are datagram
/// counts since the socket was bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetemStats {
    /// Datagrams written to the real socket (at once or from the delay line).
    pub sent: u64,
    /// Datagrams put on the delay line.
    pub delayed: u64,
    /// Datagrams dropped by the link's random loss.
    pub dropped_loss: u64,
    /// Datagrams dropped because their link is partitioned.
    pub dropped_partition: u64,
    /// Datagrams dropped because the delay line was full ([`QUEUE_LIMIT_BYTES`]) or their
    /// delivery instant was beyond the clock's range.
    pub dropped_overflow: u64,
    /// Delayed datagrams the real socket refused with an error other than "would block".
    pub send_errors: u64,
}

/// Live counters behind [`NetemStats`].
#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    delayed: AtomicU64,
    dropped_loss: AtomicU64,
    dropped_partition: AtomicU64,
    dropped_overflow: AtomicU64,
    send_errors: AtomicU64,
}

impl Counters {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> NetemStats {
        NetemStats {
            sent: self.sent.load(Ordering::Relaxed),
            delayed: self.delayed.load(Ordering::Relaxed),
            dropped_loss: self.dropped_loss.load(Ordering::Relaxed),
            dropped_partition: self.dropped_partition.load(Ordering::Relaxed),
            dropped_overflow: self.dropped_overflow.load(Ordering::Relaxed),
            send_errors: self.send_errors.load(Ordering::Relaxed),
        }
    }
}

/// One datagram waiting on the delay line.
#[derive(Debug)]
struct Pending {
    at: Instant,
    seq: u64,
    destination: SocketAddr,
    ecn: Option<EcnCodepoint>,
    src_ip: Option<IpAddr>,
    contents: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The timer-ordered queue of the delay line.
#[derive(Debug, Default)]
struct Queue {
    /// Earliest `(at, seq)` first; `seq` keeps equal instants in send order.
    heap: BinaryHeap<Reverse<Pending>>,
    next_seq: u64,
    /// Set when the socket is dropped: the task drains the queue, then ends.
    closed: bool,
}

/// State shared by a [`NetemSocket`] and its delay-line task.
#[derive(Debug)]
struct DelayLine {
    inner: Arc<dyn AsyncUdpSocket>,
    queue: Mutex<Queue>,
    /// Bytes currently on the queue.
    queued_bytes: AtomicUsize,
    /// Wakes the delay thread when a new earliest datagram arrives or the socket closes.
    wake: Condvar,
    counters: Counters,
}

impl DelayLine {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.queue)
    }
}

/// Locks `m`, recovering the data if another thread panicked while holding it (the guarded
/// state stays consistent across every critical section in this crate).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A UDP socket for quinn that emulates the WAN on its sending side: per destination DC
/// one-way delay, jitter, loss, rate limit and partition, as decided by a shared
/// [`WanModel`] (docs/design.md §4).
///
/// Build it with [`NetemSocket::bind`] and give it to quinn with [`endpoint`]. Every socket of
/// a process usually shares one `Arc<Mutex<WanModel>>`; changing a link through it affects the
/// next datagram sent.
///
/// GSO is not advertised (`max_transmit_segments() == 1`), so each datagram gets its own fate;
/// a batch handed over anyway is split. Datagrams due at once while nothing waits on the delay
/// line go straight to the real socket (keeping its back-pressure); all others are copied onto
/// the delay line. Dropping the last handle lets the delay line deliver what it holds, then
/// closes the real socket (so its port stays bound for at most the longest pending delay).
pub struct NetemSocket {
    local_dc: DcId,
    model: Arc<Mutex<WanModel>>,
    rng: Mutex<StdRng>,
    line: Arc<DelayLine>,
}

impl fmt::Debug for NetemSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetemSocket")
            .field("inner", &self.line.inner)
            .field("local_dc", &self.local_dc)
            .field("queued_bytes", &self.queued_bytes())
            .finish_non_exhaustive()
    }
}

impl NetemSocket {
    /// Binds a UDP socket on `addr` for a node in `local_dc` whose sends follow `model`, with
    /// a random number generator seeded from the bound address and `local_dc` (so a rerun
    /// with the same fixed addresses draws the same losses and jitter; see
    /// [`NetemSocket::bind_with_seed`] to choose the seed).
    ///
    /// # Errors
    ///
    /// An `io::Error` if binding fails or if called outside a tokio runtime.
    ///
    /// # Panics
    ///
    /// As `tokio::net::UdpSocket` and `tokio::time::sleep`: if the current tokio runtime was
    /// built without its I/O or time driver.
    pub fn bind(addr: SocketAddr, local_dc: DcId, model: Arc<Mutex<WanModel>>) -> io::Result<Arc<NetemSocket>> {
        let socket = std::net::UdpSocket::bind(addr)?;
        let seed = seed_from(socket.local_addr()?, local_dc);
        Self::from_std(socket, local_dc, model, seed)
    }

    /// Like [`NetemSocket::bind`], with the random number generator seeded from `seed`.
    ///
    /// # Errors
    ///
    /// As [`NetemSocket::bind`].
    ///
    /// # Panics
    ///
    /// As [`NetemSocket::bind`].
    pub fn bind_with_seed(
        addr: SocketAddr,
        local_dc: DcId,
        model: Arc<Mutex<WanModel>>,
        seed: u64,
    ) -> io::Result<Arc<NetemSocket>> {
        Self::from_std(std::net::UdpSocket::bind(addr)?, local_dc, model, seed)
    }

    /// Wraps an already bound socket (see [`NetemSocket::bind`]).
    fn from_std(
        socket: std::net::UdpSocket,
        local_dc: DcId,
        model: Arc<Mutex<WanModel>>,
        seed: u64,
    ) -> io::Result<Arc<NetemSocket>> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| io::Error::other("NetemSocket must be created inside a tokio runtime"))?;
        let inner = TokioRuntime.wrap_udp_socket(socket)?;
        let line = Arc::new(DelayLine {
            inner,
            queue: Mutex::new(Queue::default()),
            queued_bytes: AtomicUsize::new(0),
            wake: Condvar::new(),
            counters: Counters::default(),
        });
        // The delay line runs on its own thread: a condition-variable wait has microsecond
        // precision where tokio's timer wheel rounds every delay up to whole milliseconds.
        let thread_line = line.clone();
        std::thread::Builder::new()
            .name(format!("netem-{}", socket_addr_label(&line)))
            .spawn(move || run_delay_line(thread_line))?;
        let _ = handle;
        Ok(Arc::new(NetemSocket { local_dc, model, rng: Mutex::new(StdRng::seed_from_u64(seed)), line }))
    }

    /// Returns the DC this socket sends from.
    pub fn local_dc(&self) -> DcId {
        self.local_dc
    }

    /// Returns the shared model this socket follows (lock it to change conditions).
    pub fn model(&self) -> &Arc<Mutex<WanModel>> {
        &self.model
    }

    /// Returns a snapshot of this socket's counters.
    pub fn stats(&self) -> NetemStats {
        self.line.counters.snapshot()
    }

    /// Returns the bytes currently waiting on the delay line.
    pub fn queued_bytes(&self) -> usize {
        self.line.queued_bytes.load(Ordering::Relaxed)
    }

    /// Applies the model to one datagram of `transmit` (`contents`, one segment): sends it
    /// directly if it is due at once, nothing is queued and `direct_ok`; else drops or queues
    /// it. Returns `Err` only for an error of a direct send (including "would block").
    fn send_one(&self, transmit: &Transmit, contents: &[u8], now: Instant, direct_ok: bool) -> io::Result<()> {
        let counters = &self.line.counters;
        let fate = {
            let mut rng = lock(&self.rng);
            lock(&self.model).decide_to_addr(self.local_dc, transmit.destination, contents.len(), now, &mut *rng)
        };
        let at = match fate {
            Fate::Deliver { at } => at,
            Fate::Drop { cause } => {
                Counters::bump(match cause {
                    DropCause::Loss => &counters.dropped_loss,
                    DropCause::Partition => &counters.dropped_partition,
                    DropCause::Unschedulable => &counters.dropped_overflow,
                });
                return Ok(());
            }
        };
        if direct_ok && at <= now && self.queued_bytes() == 0 {
            let single = Transmit {
                destination: transmit.destination,
                ecn: transmit.ecn,
                contents,
                segment_size: None,
                src_ip: transmit.src_ip,
            };
            self.line.inner.try_send(&single)?;
            Counters::bump(&counters.sent);
            return Ok(());
        }
        let len = contents.len();
        if self.queued_bytes().saturating_add(len) > QUEUE_LIMIT_BYTES {
            Counters::bump(&counters.dropped_overflow);
            return Ok(());
        }
        let is_head = {
            let mut q = self.line.queue();
            let seq = q.next_seq;
            q.next_seq = q.next_seq.wrapping_add(1);
            self.line.queued_bytes.fetch_add(len, Ordering::Relaxed);
            q.heap.push(Reverse(Pending {
                at,
                seq,
                destination: transmit.destination,
                ecn: transmit.ecn,
                src_ip: transmit.src_ip,
                contents: contents.to_vec(),
            }));
            q.heap.peek().is_some_and(|Reverse(head)| head.seq == seq)
        };
        Counters::bump(&counters.delayed);
        if is_head {
            self.line.wake.notify_one();
        }
        Ok(())
    }
}

impl Drop for NetemSocket {
    fn drop(&mut self) {
        self.line.queue().closed = true;
        self.line.wake.notify_one();
    }
}

impl AsyncUdpSocket for NetemSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.line.inner.clone().create_io_poller()
    }

    /// Never blocks: datagrams are dropped, queued, or (when due at once) sent with the real
    /// socket's `try_send`, whose "would block" is passed on for quinn to wait for
    /// writability.
    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let now = tokio::time::Instant::now().into_std();
        match transmit.segment_size {
            Some(size) if size > 0 && size < transmit.contents.len() => {
                // A GSO batch (not requested, but handled): split it, never sending directly so
                // that a "would block" halfway cannot make quinn resend earlier segments.
                for segment in transmit.contents.chunks(size) {
                    self.send_one(transmit, segment, now, false)?;
                }
                Ok(())
            }
            _ => self.send_one(transmit, transmit.contents, now, true),
        }
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.line.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.line.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        1
    }

    fn max_receive_segments(&self) -> usize {
        self.line.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.line.inner.may_fragment()
    }
}

/// Builds a quinn endpoint on `socket` (tokio runtime), accepting connections if
/// `server_config` is given.
///
/// # Errors
///
/// As `quinn::Endpoint::new_with_abstract_socket` (reading the local address).
pub fn endpoint(
    socket: Arc<NetemSocket>,
    endpoint_config: quinn::EndpointConfig,
    server_config: Option<quinn::ServerConfig>,
) -> io::Result<quinn::Endpoint> {
    quinn::Endpoint::new_with_abstract_socket(endpoint_config, server_config, socket, Arc::new(TokioRuntime))
}

/// A label for the delay thread's name.
fn socket_addr_label(line: &DelayLine) -> String {
    line.inner.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| "socket".into())
}

/// How far ahead of its instant the delay line may release a datagram together with one
/// due now (250 µs; a datagram alone is never sent early): datagrams due within one tick of each other (the heartbeats a node
/// sends to all its peers at once, the messages of one transaction to several DCs) leave in
/// one wake-up of the thread instead of one each. Well under the 1 ms granularity of the
/// delays the model is given.
pub const RELEASE_TICK: Duration = Duration::from_micros(250);

/// The delay-line thread: sends each queued datagram at its instant, or up to
/// [`RELEASE_TICK`] before it together with one due; ends once the socket is dropped and the
/// queue is empty.
fn run_delay_line(line: Arc<DelayLine>) {
    let mut q = line.queue();
    loop {
        let now = Instant::now();
        let mut due = Vec::new();
        let head_due = q.heap.peek().is_some_and(|Reverse(p)| p.at <= now);
        while head_due && q.heap.peek().is_some_and(|Reverse(p)| p.at <= now + RELEASE_TICK) {
            if let Some(Reverse(p)) = q.heap.pop() {
                due.push(p);
            }
        }
        if !due.is_empty() {
            drop(q);
            for p in due {
                send_pending(&line, &p);
                line.queued_bytes.fetch_sub(p.contents.len(), Ordering::Relaxed);
            }
            q = line.queue();
            continue;
        }
        match q.heap.peek().map(|Reverse(p)| p.at) {
            Some(at) => {
                let wait = at.saturating_duration_since(now);
                q = line.wake.wait_timeout(q, wait).unwrap_or_else(PoisonError::into_inner).0;
            }
            None if q.closed => return,
            None => q = line.wake.wait(q).unwrap_or_else(PoisonError::into_inner),
        }
    }
}

/// Sends one delayed datagram through the real socket, retrying briefly while it would
/// block.
fn send_pending(line: &DelayLine, p: &Pending) {
    let transmit = Transmit {
        destination: p.destination,
        ecn: p.ecn,
        contents: &p.contents,
        segment_size: None,
        src_ip: p.src_ip,
    };
    for _ in 0..1000 {
        match line.inner.try_send(&transmit) {
            Ok(()) => {
                Counters::bump(&line.counters.sent);
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_micros(20)),
            Err(e) => {
                tracing::debug!(error = %e, destination = %p.destination, "netem: delayed send failed");
                Counters::bump(&line.counters.send_errors);
                return;
            }
        }
    }
    Counters::bump(&line.counters.send_errors);
}

/// Derives a generator seed from a bound address and DC (SplitMix64 finalizer over both).
fn seed_from(addr: SocketAddr, dc: DcId) -> u64 {
    let ip = match addr.ip() {
        IpAddr::V4(v4) => u32::from(v4) as u128,
        IpAddr::V6(v6) => u128::from(v6),
    };
    let mut z = (ip as u64) ^ ((ip >> 64) as u64) ^ ((addr.port() as u64) << 32) ^ ((dc.0 as u64) << 48);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::LinkConditions;
    use std::time::Duration;

    const HERE: DcId = DcId(0);
    const THERE: DcId = DcId(1);

    /// A netem socket in `HERE` and a plain receiver registered in `THERE`, with `link` both
    /// ways.
    async fn pair(link: LinkConditions) -> (Arc<NetemSocket>, tokio::net::UdpSocket) {
        let model = Arc::new(Mutex::new(WanModel::new(2)));
        let sender = NetemSocket::bind_with_seed("127.0.0.1:0".parse().unwrap(), HERE, model.clone(), 7).unwrap();
        let receiver = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        {
            let mut m = lock(&model);
            m.set_link(HERE, THERE, link).unwrap();
            m.set_link(THERE, HERE, link).unwrap();
            m.register_addr(sender.local_addr().unwrap(), HERE);
            m.register_addr(receiver.local_addr().unwrap(), THERE);
        }
        (sender, receiver)
    }

    fn rtt(ms: u64) -> LinkConditions {
        LinkConditions { rtt: Duration::from_millis(ms), ..LinkConditions::default() }
    }

    fn transmit(to: SocketAddr, contents: &[u8]) -> Transmit<'_> {
        Transmit { destination: to, ecn: None, contents, segment_size: None, src_ip: None }
    }

    /// Sends as quinn does: on "would block", waits for writability and retries.
    async fn send(s: &Arc<NetemSocket>, t: &Transmit<'_>) {
        let mut poller = s.clone().create_io_poller();
        loop {
            match s.try_send(t) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::future::poll_fn(|cx| poller.as_mut().poll_writable(cx)).await.unwrap()
                }
                other => return other.unwrap(),
            }
        }
    }

    /// The socket's counters once `sent` has reached `sent` and the delay line is empty:
    /// the delay-line thread updates both just after the datagram leaves, so a receiver
    /// can see the datagram first.
    async fn stats_after_sent(s: &NetemSocket, sent: u64) -> NetemStats {
        for _ in 0..1000 {
            let st = s.stats();
            if st.sent >= sent && s.queued_bytes() == 0 {
                return st;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        s.stats()
    }

    async fn recv(r: &tokio::net::UdpSocket) -> Vec<u8> {
        let mut buf = vec![0u8; 70_000];
        let n = tokio::time::timeout(Duration::from_secs(10), r.recv(&mut buf)).await.unwrap().unwrap();
        buf.truncate(n);
        buf
    }

    #[tokio::test]
    async fn delayed_datagram_arrives_after_its_one_way_delay() {
        let (s, r) = pair(rtt(60)).await;
        let start = tokio::time::Instant::now();
        s.try_send(&transmit(r.local_addr().unwrap(), b"hello")).unwrap();
        assert_eq!(recv(&r).await, b"hello");
        // A lower bound by construction (the delay line never sends early).
        assert!(start.elapsed() >= Duration::from_millis(30));
        let st = stats_after_sent(&s, 1).await;
        assert_eq!((st.delayed, st.sent), (1, 1));
        assert_eq!(s.queued_bytes(), 0);
    }

    #[tokio::test]
    async fn same_dc_and_unknown_destinations_go_out_directly() {
        let (s, r) = pair(rtt(60)).await;
        lock(s.model()).register_addr(r.local_addr().unwrap(), HERE);
        send(&s, &transmit(r.local_addr().unwrap(), b"local")).await;
        assert_eq!(recv(&r).await, b"local");
        let unknown = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        send(&s, &transmit(unknown.local_addr().unwrap(), b"unknown")).await;
        assert_eq!(recv(&unknown).await, b"unknown");
        let st = s.stats();
        assert_eq!((st.delayed, st.sent), (0, 2));
    }

    #[tokio::test]
    async fn loss_and_partition_drop_and_count() {
        let (s, r) = pair(LinkConditions { loss: 1.0, ..rtt(2) }).await;
        let to = r.local_addr().unwrap();
        for _ in 0..10 {
            s.try_send(&transmit(to, b"lost")).unwrap();
        }
        {
            let mut m = lock(s.model());
            m.set_link(HERE, THERE, rtt(2)).unwrap();
            m.set_partitioned(HERE, THERE, true).unwrap();
        }
        for _ in 0..5 {
            s.try_send(&transmit(to, b"cut")).unwrap();
        }
        lock(s.model()).set_partitioned(HERE, THERE, false).unwrap();
        s.try_send(&transmit(to, b"through")).unwrap();
        // Nothing dropped reached the receiver: the first datagram it sees is the last one.
        assert_eq!(recv(&r).await, b"through");
        let st = stats_after_sent(&s, 1).await;
        assert_eq!((st.dropped_loss, st.dropped_partition, st.delayed, st.sent), (10, 5, 1, 1));
    }

    #[tokio::test]
    async fn gso_batches_are_split_into_datagrams_in_order() {
        let (s, r) = pair(rtt(4)).await;
        let contents: Vec<u8> = (0..350u32).map(|i| i as u8).collect();
        let t = Transmit { segment_size: Some(100), ..transmit(r.local_addr().unwrap(), &contents) };
        s.try_send(&t).unwrap();
        for chunk in contents.chunks(100) {
            assert_eq!(recv(&r).await, chunk);
        }
        assert_eq!(s.stats().delayed, 4);
        assert_eq!(s.max_transmit_segments(), 1);
    }

    #[tokio::test]
    async fn many_datagrams_keep_fifo_order() {
        let (s, r) = pair(rtt(10)).await;
        let to = r.local_addr().unwrap();
        for i in 0..200u32 {
            s.try_send(&transmit(to, &i.to_le_bytes())).unwrap();
        }
        for i in 0..200u32 {
            assert_eq!(recv(&r).await, i.to_le_bytes());
        }
    }

    #[tokio::test]
    async fn a_full_delay_line_drops_and_counts() {
        let (s, r) = pair(rtt(20_000)).await;
        let to = r.local_addr().unwrap();
        let big = vec![0u8; 64_000];
        for _ in 0..1100 {
            s.try_send(&transmit(to, &big)).unwrap();
        }
        let st = s.stats();
        assert_eq!(st.delayed as usize, QUEUE_LIMIT_BYTES / big.len());
        assert_eq!(st.delayed + st.dropped_overflow, 1100);
        assert!(s.queued_bytes() <= QUEUE_LIMIT_BYTES);
    }

    #[test]
    fn bind_outside_a_runtime_is_an_error() {
        let model = Arc::new(Mutex::new(WanModel::new(1)));
        let err = NetemSocket::bind("127.0.0.1:0".parse().unwrap(), HERE, model).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Other);
    }

    #[test]
    fn seeds_differ_by_address_and_dc() {
        let a: SocketAddr = "127.0.1.1:7100".parse().unwrap();
        let b: SocketAddr = "127.0.1.2:7100".parse().unwrap();
        assert_ne!(seed_from(a, HERE), seed_from(b, HERE));
        assert_ne!(seed_from(a, HERE), seed_from(a, THERE));
        assert_eq!(seed_from(a, HERE), seed_from(a, HERE));
    }
}

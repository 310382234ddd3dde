//! The real one-sided RDMA backend of [`Verbs`], on the verbs C API through `ibverbs-sys`
//! (cargo feature `rdma`; see `docs/rdma.md`).
//!
//! One [`RdmaVerbs`] per node process: it opens an RDMA device, registers the node's own
//! [`Region`] as a memory region that the other nodes of the DC may READ, WRITE and update
//! atomically, and connects one reliable-connected (RC) queue pair to every node of the DC
//! — including itself, through a loopback QP, so that every atomic on a region is made by
//! the NIC and NIC atomics never race CPU atomics. Queue-pair numbers, LIDs, GIDs, PSNs,
//! addresses and rkeys are exchanged over a small TCP bootstrap ([`RdmaVerbs::connect`]).
//!
//! Each verb copies its operands into a registered bounce buffer of the connection, posts
//! its work requests with one `ibv_post_send` (one doorbell; only the last one signaled)
//! and busy-polls the connection's completion queue. Masked compare-and-swap and masked
//! fetch-and-add are emulated with a CAS loop: the Mellanox "extended atomics" are not in
//! upstream rdma-core.
//!
//! On a host without an RDMA device every constructor fails with [`Error::Backend`] saying
//! "no RDMA device found"; nothing panics.

mod bootstrap;
mod conn;
mod device;
mod request;

pub use device::RdmaDevice;

use self::bootstrap::{exchange, io_err, Deadlines, Hello};
use self::conn::{reg_mr, Conn, Prim, Shared, ACCESS_ALL};
use self::request::{masked_cas_probe, resolve_masked_cas, resolve_masked_faa, validate, Req};
use super::{Completion, DoorbellBatch, VerbCounters, Verbs, VerbsTls};
use crate::error::{Error, Result};
use crate::region::Region;
use ibverbs_sys as ffi;
use redt_proto::{NodeId, Offset};
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Settings of the RDMA backend. [`RdmaConfig::default`] suits one NIC per host, port 1.
#[derive(Clone, Debug)]
pub struct RdmaConfig {
    /// Device to open (`mlx5_0`, `rxe0`…); `None` opens the first device listed.
    pub device: Option<String>,
    /// Physical port of the device (1-based).
    pub port: u8,
    /// GID table index. The GID is exchanged always and used (as a GRH) on RoCE ports, where
    /// it selects RoCE v1/v2 and the IP address; InfiniBand ports route by LID.
    pub gid_index: u8,
    /// Send queue depth requested for every queue pair (clamped to the device's limit).
    /// A longer batch is posted with several doorbells.
    pub max_send_wr: u32,
    /// Initial size in bytes of each connection's registered bounce buffer; it grows on
    /// demand to fit the largest batch.
    pub bounce_bytes: usize,
    /// Access the own node's region through a loopback QP (true, the default) so that its
    /// atomics are NIC atomics like everybody else's; false uses CPU atomics on the region,
    /// which are NOT atomic with respect to the other nodes' NIC atomics (see docs/rdma.md).
    pub loopback: bool,
    /// How long [`RdmaVerbs::connect`] waits for every peer to show up and answer.
    pub connect_timeout: Duration,
    /// How long one connection accepted by the bootstrap may take for its TLS handshake
    /// (default 2 s, as the TCP verbs server's `verbs.handshake_timeout`); a connection
    /// still handshaking then is dropped and the bootstrap goes on waiting for the peers.
    pub handshake_timeout: Duration,
    /// How long a posted verb may wait for its completion before the connection is declared
    /// broken.
    pub completion_timeout: Duration,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            device: None,
            port: 1,
            gid_index: 0,
            max_send_wr: 256,
            bounce_bytes: 64 << 10,
            loopback: true,
            connect_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(2),
            completion_timeout: Duration::from_secs(10),
        }
    }
}

fn backend(msg: impl Into<String>) -> Error {
    Error::Backend(msg.into())
}

fn no_device(why: impl std::fmt::Display) -> Error {
    backend(format!(
        "no RDMA device found (ibv_get_device_list: {why}): give the DC `backend: tcp` or `shm` in the \
         topology, or run it on hosts with an RNIC"
    ))
}

/// The result of one request, handed to the caller while the connection is still locked.
enum Outcome<'b> {
    Read(&'b [u8]),
    Written,
    Atomic(u64),
}

/// How the backend reaches one node.
enum Target {
    /// An RC queue pair (a peer, or the own node through loopback).
    Qp(Mutex<Conn>),
    /// The own region, with CPU atomics (`RdmaConfig::loopback == false`).
    Cpu,
}

/// The RDMA backend of [`Verbs`] for one node process: one RC queue pair per node of the DC.
///
/// Verbs to one node are serialised on that node's queue pair (each call posts and waits
/// for its completions); calls to different nodes proceed in parallel.
pub struct RdmaVerbs {
    local: NodeId,
    targets: HashMap<NodeId, Target>,
    shared: Arc<Shared>,
    counters: VerbCounters,
}

impl std::fmt::Debug for RdmaVerbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut nodes: Vec<_> = self.targets.keys().copied().collect();
        nodes.sort();
        f.debug_struct("RdmaVerbs")
            .field("local", &self.local)
            .field("device", &self.shared.dev.name)
            .field("nodes", &nodes)
            .finish_non_exhaustive()
    }
}

impl RdmaVerbs {
    /// Opens the RDMA device called `name`, or the first one listed when `None`.
    ///
    /// # Errors
    /// [`Error::Backend`] — "no RDMA device found (ibv_get_device_list: …): give the DC
    /// `backend: tcp` or `shm` in the topology, or run it on hosts with an RNIC" when the host
    /// has none (as in CI), or a message naming the devices present when `name` is not one of
    /// them.
    pub fn open_device(name: Option<&str>) -> Result<RdmaDevice> {
        RdmaDevice::open(name)
    }

    /// [`RdmaVerbs::connect_with`] with [`RdmaConfig::default`].
    ///
    /// # Errors
    /// As [`RdmaVerbs::connect_with`].
    pub fn connect(
        local: NodeId,
        region: Arc<Region>,
        peers: &[(NodeId, SocketAddr)],
        listen: SocketAddr,
        tls: &VerbsTls,
    ) -> Result<RdmaVerbs> {
        Self::connect_with(&RdmaConfig::default(), local, region, peers, listen, tls)
    }

    /// Opens the device, registers `region` (this node's MemStore) for remote READ, WRITE and
    /// atomics, creates one RC queue pair per node of `peers` (plus a loopback one for
    /// `local`), and connects them: listening on `listen`, dialing the peers with a larger
    /// id and accepting those with a smaller one, exchanging a 64-byte little-endian hello
    /// {from, to, lid, qpn, psn, rkey, region address, region length, gid, mtu} per pair,
    /// then INIT → RTR → RTS and a one-byte ready barrier. `peers` may include `local`
    /// (ignored). Returns once every peer is connected.
    ///
    /// The bootstrap runs over TLS with `tls`: the hello, which hands out the
    /// region's address and rkey, goes only to a peer whose certificate is that peer node's
    /// of this DC; a connection that is not (a client certificate, another DC's node, no
    /// certificate, a foreign CA, no handshake within `cfg.handshake_timeout`) is dropped
    /// and logged, and the bootstrap goes on waiting for the real peer.
    ///
    /// # Errors
    /// [`Error::Backend`] when there is no device (see [`RdmaVerbs::open_device`]), the port
    /// is down, registration or QP setup fails, a dialed peer fails the TLS check, or a peer
    /// does not answer within `cfg.connect_timeout`; [`Error::UnknownNode`] for a peer `tls`
    /// does not name.
    pub fn connect_with(
        cfg: &RdmaConfig,
        local: NodeId,
        region: Arc<Region>,
        peers: &[(NodeId, SocketAddr)],
        listen: SocketAddr,
        tls: &VerbsTls,
    ) -> Result<RdmaVerbs> {
        let dev = Self::open_device(cfg.device.as_deref())?;
        if dev.attr.atomic_cap == ffi::IBV_ATOMIC_NONE {
            return Err(backend(format!("RDMA device {} supports no atomic operations", dev.name)));
        }
        let port = dev.port(cfg.port, cfg.gid_index)?;
        let mut seen = HashSet::new();
        let peers: Vec<(NodeId, SocketAddr)> = peers.iter().copied().filter(|p| p.0 != local).collect();
        for &(n, _) in &peers {
            if !seen.insert(n) {
                return Err(backend(format!("RDMA bootstrap: {} is listed twice", tls.label(n))));
            }
        }

        // SAFETY: the context is open.
        let pd = unsafe { ffi::ibv_alloc_pd(dev.ctx) };
        if pd.is_null() {
            return Err(backend(format!("ibv_alloc_pd({}): {}", dev.name, io::Error::last_os_error())));
        }
        let mut shared = Shared { pd, region_mr: ptr::null_mut(), region, dev };
        shared.region_mr = reg_mr(&shared, shared.region.base_ptr(), shared.region.len() as usize, ACCESS_ALL)?;
        let shared = Arc::new(shared);
        // SAFETY: the region MR was just registered.
        let (region_rkey, region_addr) = unsafe { ((*shared.region_mr).rkey, (*shared.region_mr).addr as u64) };

        let mut conns = HashMap::new();
        let mut mine = HashMap::new();
        let nodes = peers.iter().map(|p| p.0).chain(cfg.loopback.then_some(local));
        for node in nodes {
            let conn = Conn::create(&shared, cfg, node)?;
            let hello = Hello {
                from: local,
                to: node,
                lid: port.lid,
                qpn: conn.qpn(),
                psn: conn.psn,
                rkey: region_rkey,
                addr: region_addr,
                len: shared.region.len(),
                gid: port.gid,
                mtu: port.mtu as u8,
            };
            mine.insert(node, hello);
            conns.insert(node, conn);
        }
        if cfg.loopback {
            let me = mine[&local];
            conns.get_mut(&local).expect("loopback conn").connect_to(cfg, &port, &me)?;
        }

        let deadlines = Deadlines { total: cfg.connect_timeout, handshake: cfg.handshake_timeout };
        let mut streams = exchange(local, &peers, listen, &mine, deadlines, tls)?;
        for (node, hello, _) in &streams {
            conns.get_mut(node).expect("a conn per peer").connect_to(cfg, &port, hello)?;
        }
        // Ready barrier: nobody posts before every peer's QP has reached RTR.
        for (node, _, s) in &mut streams {
            s.write_all(b"R")
                .and_then(|()| s.flush())
                .map_err(io_err(format!("RDMA bootstrap: ready to {}", tls.label(*node))))?;
        }
        let ready_by = std::time::Instant::now() + cfg.connect_timeout;
        for (node, _, s) in &mut streams {
            s.set_deadline(Some(ready_by));
            let mut b = [0u8; 1];
            s.read_exact(&mut b).map_err(io_err(format!(
                "RDMA bootstrap: {} never became ready (its QP setup failed?)",
                tls.label(*node)
            )))?;
        }
        tracing::info!(
            node = %tls.name(),
            device = %shared.dev.name,
            peers = streams.len(),
            loopback = cfg.loopback,
            "RDMA verbs connected"
        );

        let mut targets: HashMap<NodeId, Target> =
            conns.into_iter().map(|(n, c)| (n, Target::Qp(Mutex::new(c)))).collect();
        if !cfg.loopback {
            targets.insert(local, Target::Cpu);
        }
        Ok(RdmaVerbs { local, targets, shared, counters: VerbCounters::default() })
    }

    /// This node's id.
    pub fn local(&self) -> NodeId {
        self.local
    }

    /// Name of the open device.
    pub fn device_name(&self) -> &str {
        &self.shared.dev.name
    }

    /// This node's own region (registered with the NIC), for local tasks such as replay.
    /// CPU atomics on it are not atomic with respect to NIC atomics (see docs/rdma.md).
    pub fn region(&self) -> &Arc<Region> {
        &self.shared.region
    }

    /// Runs `reqs` in order against `node` and hands each result to `deliver`.
    fn run(&self, node: NodeId, reqs: &[Req<'_>], mut deliver: impl FnMut(usize, Outcome<'_>)) -> Result<()> {
        let conn = match self.targets.get(&node).ok_or(Error::UnknownNode(node))? {
            Target::Cpu => return self.run_cpu(node, reqs, deliver),
            Target::Qp(m) => m,
        };
        let mut conn: MutexGuard<'_, Conn> = conn.lock().unwrap_or_else(|e| e.into_inner());
        let size = conn.remote.len;
        for r in reqs {
            validate(node, size, r)?;
        }
        conn.check_usable()?;
        // Lay out one 8-aligned bounce slot per request; stage the WRITE payloads.
        let mut slots = Vec::with_capacity(reqs.len());
        let mut total = 0usize;
        for r in reqs {
            slots.push(total);
            total += r.slot_bytes();
        }
        conn.ensure_bounce(total)?;
        let base = conn.bounce.ptr();
        for (r, &slot) in reqs.iter().zip(&slots) {
            if let Req::Write { data, .. } = r {
                // SAFETY: `slot + data.len() <= total <= bounce size`; the bounce buffer does
                // not overlap `data` (it is ours), and no work request is outstanding.
                unsafe { ptr::copy_nonoverlapping(data.as_ptr(), base.add(slot), data.len()) };
            }
        }

        let mut old = vec![0u64; reqs.len()];
        let mut chain: Vec<Prim> = Vec::with_capacity(reqs.len());
        for (i, r) in reqs.iter().enumerate() {
            let local = slots[i];
            match *r {
                Req::Read { offset, len } if len > 0 => {
                    chain.push(Prim::Read { remote: offset.0, len: len as u32, local })
                }
                Req::Write { offset, data } if !data.is_empty() => {
                    chain.push(Prim::Write { remote: offset.0, len: data.len() as u32, local })
                }
                Req::Read { .. } | Req::Write { .. } => {}
                Req::Cas { offset, expected, new } => chain.push(Prim::Cas { remote: offset.0, expected, new, local }),
                Req::Faa { offset, add } => chain.push(Prim::Faa { remote: offset.0, add, local }),
                Req::MaskedCas { offset, compare, compare_mask, swap, swap_mask } => {
                    // The probe CAS ends the chain so far (one doorbell); retries follow alone.
                    let (guess, new) = masked_cas_probe(compare, compare_mask, swap, swap_mask);
                    chain.push(Prim::Cas { remote: offset.0, expected: guess, new, local });
                    conn.execute(&chain, &self.counters)?;
                    chain.clear();
                    let first = conn.bounce_word(local);
                    let c = &mut *conn;
                    old[i] = resolve_masked_cas(guess, first, compare, compare_mask, (swap, swap_mask), |e, n| {
                        c.cas(offset.0, e, n, local, &self.counters)
                    })?;
                }
                Req::MaskedFaa { offset, add, boundary } => {
                    // The probe READ ends the chain so far; the CAS loop follows.
                    chain.push(Prim::Read { remote: offset.0, len: 8, local });
                    conn.execute(&chain, &self.counters)?;
                    chain.clear();
                    let seen = conn.bounce_word(local);
                    let c = &mut *conn;
                    old[i] =
                        resolve_masked_faa(seen, add, boundary, |e, n| c.cas(offset.0, e, n, local, &self.counters))?;
                }
            }
        }
        if !chain.is_empty() {
            conn.execute(&chain, &self.counters)?;
        }

        let base = conn.bounce.ptr();
        for (i, r) in reqs.iter().enumerate() {
            r.count(&self.counters);
            let outcome = match r {
                // SAFETY: the READ completed, so its slot holds `len` bytes written by the
                // NIC; `slot + len <= bounce size`; nothing writes the buffer while we hold
                // the connection lock and no work request is outstanding.
                Req::Read { len, .. } => Outcome::Read(unsafe { std::slice::from_raw_parts(base.add(slots[i]), *len) }),
                Req::Write { .. } => Outcome::Written,
                // SAFETY: the atomic completed, so its 8-aligned slot holds the old value the
                // NIC wrote (host byte order); in bounds as above.
                Req::Cas { .. } | Req::Faa { .. } => {
                    Outcome::Atomic(unsafe { ptr::read_volatile(base.add(slots[i]).cast::<u64>()) })
                }
                Req::MaskedCas { .. } | Req::MaskedFaa { .. } => Outcome::Atomic(old[i]),
            };
            deliver(i, outcome);
        }
        Ok(())
    }

    /// Own-node requests with CPU atomics on the region (loopback disabled).
    fn run_cpu(&self, node: NodeId, reqs: &[Req<'_>], mut deliver: impl FnMut(usize, Outcome<'_>)) -> Result<()> {
        let r = &self.shared.region;
        for q in reqs {
            validate(node, r.len(), q)?;
        }
        self.counters.doorbell();
        let mut buf = Vec::new();
        for (i, q) in reqs.iter().enumerate() {
            q.count(&self.counters);
            match *q {
                Req::Read { offset, len } => {
                    buf.resize(len, 0);
                    r.read(offset.0, &mut buf);
                    deliver(i, Outcome::Read(&buf));
                }
                Req::Write { offset, data } => {
                    r.write(offset.0, data);
                    deliver(i, Outcome::Written);
                }
                Req::Cas { offset, expected, new } => {
                    deliver(i, Outcome::Atomic(r.compare_and_swap(offset.0, expected, new)))
                }
                Req::Faa { offset, add } => deliver(i, Outcome::Atomic(r.fetch_and_add(offset.0, add))),
                Req::MaskedCas { offset, compare, compare_mask, swap, swap_mask } => deliver(
                    i,
                    Outcome::Atomic(r.masked_compare_and_swap(offset.0, compare, compare_mask, swap, swap_mask)),
                ),
                Req::MaskedFaa { offset, add, boundary } => {
                    deliver(i, Outcome::Atomic(r.masked_fetch_and_add(offset.0, add, boundary)))
                }
            }
        }
        Ok(())
    }

    fn atomic(&self, node: NodeId, req: Req<'_>) -> Result<u64> {
        let mut v = 0;
        self.run(node, &[req], |_, o| {
            if let Outcome::Atomic(x) = o {
                v = x;
            }
        })?;
        Ok(v)
    }
}

impl Verbs for RdmaVerbs {
    fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> Result<()> {
        self.run(node, &[Req::Read { offset, len: buf.len() }], |_, o| {
            if let Outcome::Read(b) = o {
                buf.copy_from_slice(b);
            }
        })
    }

    fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> Result<()> {
        self.run(node, &[Req::Write { offset, data }], |_, _| {})
    }

    fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> Result<u64> {
        self.atomic(node, Req::Cas { offset, expected, new })
    }

    fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> Result<u64> {
        self.atomic(node, Req::Faa { offset, add })
    }

    fn masked_compare_and_swap(
        &self,
        node: NodeId,
        offset: Offset,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Result<u64> {
        self.atomic(node, Req::MaskedCas { offset, compare, compare_mask, swap, swap_mask })
    }

    fn masked_fetch_and_add(&self, node: NodeId, offset: Offset, add: u64, boundary: u64) -> Result<u64> {
        self.atomic(node, Req::MaskedFaa { offset, add, boundary })
    }

    fn post_batch(&self, node: NodeId, batch: &mut DoorbellBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        if batch.requests().iter().any(|r| matches!(r, crate::WorkRequest::Persist)) {
            return Err(backend(
                "the rdma backend cannot persist a MemStore (the NIC writes it behind the node's back): \
                 durability: disk needs the shm or tcp verbs backend",
            ));
        }
        let mut done = Vec::with_capacity(batch.len());
        {
            let reqs: Vec<Req<'_>> = batch.requests().iter().map(Req::from).collect();
            self.run(node, &reqs, |_, o| {
                done.push(match o {
                    Outcome::Read(b) => Completion::Read(b.to_vec()),
                    Outcome::Written => Completion::Written,
                    Outcome::Atomic(v) => Completion::Atomic(v),
                })
            })?;
        }
        for (i, c) in done.into_iter().enumerate() {
            batch.complete(i, c);
        }
        Ok(())
    }

    fn counters(&self) -> &VerbCounters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_device_without_a_device_fails_clearly() {
        match RdmaVerbs::open_device(None) {
            // A host with an RNIC (or SoftRoCE) opens it; nothing more to check here.
            Ok(dev) => eprintln!("RDMA device {} present", dev.name()),
            Err(e) => {
                let msg = e.to_string();
                eprintln!("as expected without a device: {msg}");
                assert!(msg.contains("no RDMA device"), "{msg}");
                assert!(msg.contains("ibv_get_device_list"), "{msg}");
                assert!(msg.contains("without the `rdma` feature"), "{msg}");
            }
        }
    }

    #[test]
    fn connect_without_a_device_fails_before_listening() {
        if RdmaVerbs::open_device(None).is_ok() {
            return; // with a device the bootstrap would wait for the (absent) peer
        }
        let region = Arc::new(Region::new_heap(4096));
        let peer = (NodeId(1), "127.0.0.1:9".parse().unwrap());
        let ca = crate::tls::test_pki::TestCa::new("t");
        let tls = crate::tls::tests::tls(ca.node("dc1", "a1")).unwrap();
        let err = RdmaVerbs::connect(NodeId(0), region, &[peer], "127.0.0.1:0".parse().unwrap(), &tls).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("no RDMA device"), "{msg}");
        assert!(matches!(err, Error::Backend(_)));
    }
}

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

use super::{Completion, DoorbellBatch, VerbCounters, Verbs, WorkRequest};
use crate::error::{Error, Result};
use crate::region::{masked_add, Region};
use ibverbs_sys as ffi;
use redt_proto::{NodeId, Offset};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, CStr};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
            completion_timeout: Duration::from_secs(10),
        }
    }
}

fn backend(msg: impl Into<String>) -> Error {
    Error::Backend(msg.into())
}

fn no_device(why: impl std::fmt::Display) -> Error {
    backend(format!(
        "no RDMA device found (ibv_get_device_list: {why}): build without the `rdma` feature or use the shm backend"
    ))
}

/// An open RDMA device (an `ibv_context`), closed on drop.
pub struct RdmaDevice {
    ctx: *mut ffi::ibv_context,
    name: String,
    attr: ffi::ibv_device_attr,
}

// SAFETY: libibverbs objects may be used from any thread and every verbs call is
// thread-safe; the context pointer itself is never mutated after opening.
unsafe impl Send for RdmaDevice {}
// SAFETY: as above; `&RdmaDevice` only reads the context pointer and the cached attributes.
unsafe impl Sync for RdmaDevice {}

impl std::fmt::Debug for RdmaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaDevice").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Drop for RdmaDevice {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from `ibv_open_device` and every object created on it (PD, MRs,
        // CQs, QPs) is owned by structures that are dropped before this device.
        unsafe { ffi::ibv_close_device(self.ctx) };
    }
}

/// What a port of the device reports (the parts the connection setup needs).
#[derive(Clone, Copy, Debug)]
struct PortInfo {
    lid: u16,
    mtu: ffi::ibv_mtu,
    ethernet: bool,
    gid: [u8; 16],
}

impl RdmaDevice {
    /// Name of the device (`mlx5_0`, …).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Queries `port`: it must be ACTIVE. Also reads GID `gid_index`.
    fn port(&self, port: u8, gid_index: u8) -> Result<PortInfo> {
        let mut attr = ffi::ibv_port_attr::default();
        // SAFETY: `ctx` is open; the exported `ibv_query_port` symbol writes at most a full
        // `ibv_port_attr` (the `_compat` struct is a prefix of it), which `attr` is — this is
        // what verbs.h's inline wrapper does when the provider has no extended op.
        let rc = unsafe { ffi::ibv_query_port(self.ctx, port, ptr::addr_of_mut!(attr).cast()) };
        if rc != 0 {
            return Err(backend(format!(
                "ibv_query_port({}, port {port}): {}",
                self.name,
                io::Error::from_raw_os_error(rc)
            )));
        }
        if attr.state != ffi::ibv_port_state::IBV_PORT_ACTIVE {
            return Err(backend(format!(
                "port {port} of RDMA device {} is not ACTIVE (state {}): check the link / subnet manager",
                self.name, attr.state
            )));
        }
        let mut gid = ffi::ibv_gid::default();
        // SAFETY: `ctx` is open and `gid` is a valid out-pointer.
        let rc = unsafe { ffi::ibv_query_gid(self.ctx, port, c_int::from(gid_index), &mut gid) };
        if rc != 0 {
            return Err(backend(format!(
                "ibv_query_gid({}, port {port}, index {gid_index}): {}",
                self.name,
                io::Error::last_os_error()
            )));
        }
        // SAFETY: every bit pattern of the union is a valid `[u8; 16]`.
        let gid = unsafe { gid.raw };
        Ok(PortInfo {
            lid: attr.lid,
            mtu: attr.active_mtu,
            ethernet: u32::from(attr.link_layer) == ffi::IBV_LINK_LAYER_ETHERNET,
            gid,
        })
    }
}

/// Protection domain, the registered region and the device, shared by every connection.
struct Shared {
    pd: *mut ffi::ibv_pd,
    region_mr: *mut ffi::ibv_mr,
    region: Arc<Region>,
    dev: RdmaDevice,
}

// SAFETY: the pointers are created once and only used in (thread-safe) verbs calls; the
// region is `Sync` itself.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: every connection (QP, CQ, bounce MR) holds an `Arc<Shared>`, so they are all
        // gone; the region MR and the PD are not used any more. `dev` closes afterwards.
        unsafe {
            if !self.region_mr.is_null() {
                ffi::ibv_dereg_mr(self.region_mr);
            }
            ffi::ibv_dealloc_pd(self.pd);
        }
    }
}

/// The remote end of a connection, from its hello.
#[derive(Clone, Copy, Debug, Default)]
struct Remote {
    addr: u64,
    rkey: u32,
    len: u64,
}

/// A registered, 8-byte aligned local buffer that work requests gather from and scatter to.
struct Bounce {
    buf: Box<[u64]>,
    mr: *mut ffi::ibv_mr,
}

impl Bounce {
    fn ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().cast()
    }
    fn bytes(&self) -> usize {
        self.buf.len() * 8
    }
}

/// One primitive work request, as posted (masked verbs become several of these).
#[derive(Clone, Copy, Debug)]
enum Prim {
    Read { remote: u64, len: u32, local: usize },
    Write { remote: u64, len: u32, local: usize },
    Cas { remote: u64, expected: u64, new: u64, local: usize },
    Faa { remote: u64, add: u64, local: usize },
}

impl Prim {
    fn name(&self) -> &'static str {
        match self {
            Prim::Read { .. } => "RDMA READ",
            Prim::Write { .. } => "RDMA WRITE",
            Prim::Cas { .. } => "ATOMIC CMP_AND_SWP",
            Prim::Faa { .. } => "ATOMIC FETCH_AND_ADD",
        }
    }
}

type PostSendFn = unsafe extern "C" fn(*mut ffi::ibv_qp, *mut ffi::ibv_send_wr, *mut *mut ffi::ibv_send_wr) -> c_int;
type PollCqFn = unsafe extern "C" fn(*mut ffi::ibv_cq, c_int, *mut ffi::ibv_wc) -> c_int;

/// One RC queue pair to one node, with its own CQ and bounce buffer. Used under a mutex:
/// at most one chain of work requests is outstanding on it.
struct Conn {
    node: NodeId,
    qp: *mut ffi::ibv_qp,
    cq: *mut ffi::ibv_cq,
    post_send: PostSendFn,
    poll_cq: PollCqFn,
    bounce: Bounce,
    remote: Remote,
    psn: u32,
    max_send_wr: usize,
    completion_timeout: Duration,
    /// Why the QP is unusable (it went to the error state, or a completion never came).
    broken: Option<String>,
    wrs: Vec<ffi::ibv_send_wr>,
    sges: Vec<ffi::ibv_sge>,
    shared: Arc<Shared>,
}

// SAFETY: the verbs objects may be used from any thread; a `Conn` is only ever used by the
// thread holding its mutex, and the NIC only touches the bounce buffer while that thread
// waits for the completion.
unsafe impl Send for Conn {}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: destroying the QP first stops the NIC from touching the bounce buffer; the
        // CQ is no longer attached to any QP afterwards; the bounce MR is deregistered before
        // its buffer is freed (the `Box` is dropped after this function).
        unsafe {
            ffi::ibv_destroy_qp(self.qp);
            ffi::ibv_destroy_cq(self.cq);
            if !self.bounce.mr.is_null() {
                ffi::ibv_dereg_mr(self.bounce.mr);
            }
        }
    }
}

const ACCESS_ALL: ffi::ibv_access_flags = ffi::ibv_access_flags(
    ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0,
);

fn reg_mr(shared: &Shared, addr: *mut u8, len: usize, access: ffi::ibv_access_flags) -> Result<*mut ffi::ibv_mr> {
    // SAFETY: the PD is valid; the caller guarantees `[addr, addr+len)` is memory it owns and
    // keeps alive (and does not move) until the MR is deregistered.
    let mr = unsafe { ffi::ibv_reg_mr(shared.pd, addr.cast(), len, access.0 as c_int) };
    if mr.is_null() {
        return Err(backend(format!(
            "ibv_reg_mr({len} bytes on {}): {} (is the memlock ulimit high enough?)",
            shared.dev.name,
            io::Error::last_os_error()
        )));
    }
    Ok(mr)
}

impl Conn {
    /// Creates the CQ and the QP to `node` and moves the QP to INIT.
    fn create(shared: &Arc<Shared>, cfg: &RdmaConfig, node: NodeId) -> Result<Conn> {
        let dev = &shared.dev;
        // SAFETY: `ctx` is open; its ops table is filled in by the provider at open time.
        // `ibv_post_send`/`ibv_poll_cq` are static inline in verbs.h and just call these.
        let (post_send, poll_cq) = unsafe { ((*dev.ctx).ops.post_send, (*dev.ctx).ops.poll_cq) };
        let post_send = post_send.ok_or_else(|| backend(format!("{}: provider has no post_send op", dev.name)))?;
        let poll_cq = poll_cq.ok_or_else(|| backend(format!("{}: provider has no poll_cq op", dev.name)))?;
        let max_wr = cfg.max_send_wr.clamp(1, dev.attr.max_qp_wr.max(1) as u32);
        let cqe = (2 * max_wr).min(dev.attr.max_cqe.max(1) as u32) as c_int;
        // SAFETY: the context is open; no completion channel, no CQ context.
        let cq = unsafe { ffi::ibv_create_cq(dev.ctx, cqe, ptr::null_mut(), ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(backend(format!("ibv_create_cq({}): {}", dev.name, io::Error::last_os_error())));
        }
        let mut init = ffi::ibv_qp_init_attr {
            send_cq: cq,
            recv_cq: cq,
            cap: ffi::ibv_qp_cap {
                max_send_wr: max_wr,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
            ..Default::default()
        };
        // SAFETY: PD and CQ are valid; `init` is a valid in/out attribute struct.
        let qp = unsafe { ffi::ibv_create_qp(shared.pd, &mut init) };
        if qp.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: the CQ was just created and nothing uses it.
            unsafe { ffi::ibv_destroy_cq(cq) };
            return Err(backend(format!("ibv_create_qp(RC, {}): {e}", dev.name)));
        }
        let mut conn = Conn {
            node,
            qp,
            cq,
            post_send,
            poll_cq,
            bounce: Bounce { buf: Box::new([]), mr: ptr::null_mut() },
            remote: Remote::default(),
            psn: initial_psn(node),
            max_send_wr: init.cap.max_send_wr.max(1) as usize,
            completion_timeout: cfg.completion_timeout,
            broken: None,
            wrs: Vec::new(),
            sges: Vec::new(),
            shared: shared.clone(),
        };
        conn.ensure_bounce(cfg.bounce_bytes.max(64))?;
        let mut attr = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: cfg.port,
            qp_access_flags: ACCESS_ALL.0,
            ..Default::default()
        };
        let mask = ffi::ibv_qp_attr_mask::IBV_QP_STATE
            | ffi::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
            | ffi::ibv_qp_attr_mask::IBV_QP_PORT
            | ffi::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
        conn.modify(&mut attr, mask, "INIT")?;
        Ok(conn)
    }

    fn modify(&mut self, attr: &mut ffi::ibv_qp_attr, mask: ffi::ibv_qp_attr_mask, state: &str) -> Result<()> {
        // SAFETY: the QP is valid and `attr` is a valid attribute struct for `mask`.
        let rc = unsafe { ffi::ibv_modify_qp(self.qp, attr, mask.0 as c_int) };
        if rc != 0 {
            return Err(backend(format!(
                "ibv_modify_qp(QP to {} -> {state}): {}",
                self.node,
                io::Error::from_raw_os_error(rc)
            )));
        }
        Ok(())
    }

    /// The QP number (for the hello).
    fn qpn(&self) -> u32 {
        // SAFETY: the QP is valid; `qp_num` is immutable after creation.
        unsafe { (*self.qp).qp_num }
    }

    /// INIT -> RTR -> RTS towards `peer`, whose hello says where its QP and region are.
    fn connect_to(&mut self, cfg: &RdmaConfig, me: &PortInfo, peer: &Hello) -> Result<()> {
        let attr = self.shared.dev.attr;
        let rd_atomic = attr.max_qp_rd_atom.clamp(1, 16) as u8;
        let init_rd_atomic = attr.max_qp_init_rd_atom.clamp(1, 16) as u8;
        let grh = me.ethernet || peer.lid == 0;
        let mut rtr = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_RTR,
            path_mtu: me.mtu.min(peer.mtu.into()),
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            max_dest_rd_atomic: rd_atomic,
            min_rnr_timer: 12,
            ..Default::default()
        };
        rtr.ah_attr.dlid = peer.lid;
        rtr.ah_attr.sl = 0;
        rtr.ah_attr.src_path_bits = 0;
        rtr.ah_attr.port_num = cfg.port;
        if grh {
            rtr.ah_attr.is_global = 1;
            rtr.ah_attr.grh.dgid.raw = peer.gid;
            rtr.ah_attr.grh.sgid_index = cfg.gid_index;
            rtr.ah_attr.grh.hop_limit = 64;
        }
        let mask = ffi::ibv_qp_attr_mask::IBV_QP_STATE
            | ffi::ibv_qp_attr_mask::IBV_QP_AV
            | ffi::ibv_qp_attr_mask::IBV_QP_PATH_MTU
            | ffi::ibv_qp_attr_mask::IBV_QP_DEST_QPN
            | ffi::ibv_qp_attr_mask::IBV_QP_RQ_PSN
            | ffi::ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
            | ffi::ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
        self.modify(&mut rtr, mask, "RTR")?;
        let mut rts = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_RTS,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            sq_psn: self.psn,
            max_rd_atomic: init_rd_atomic,
            ..Default::default()
        };
        let mask = ffi::ibv_qp_attr_mask::IBV_QP_STATE
            | ffi::ibv_qp_attr_mask::IBV_QP_TIMEOUT
            | ffi::ibv_qp_attr_mask::IBV_QP_RETRY_CNT
            | ffi::ibv_qp_attr_mask::IBV_QP_RNR_RETRY
            | ffi::ibv_qp_attr_mask::IBV_QP_SQ_PSN
            | ffi::ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(&mut rts, mask, "RTS")?;
        self.remote = Remote { addr: peer.addr, rkey: peer.rkey, len: peer.len };
        Ok(())
    }

    /// Makes the bounce buffer at least `bytes` long (re-registering it when it grows).
    /// Only called with no work request outstanding.
    fn ensure_bounce(&mut self, bytes: usize) -> Result<()> {
        if bytes <= self.bounce.bytes() && !self.bounce.mr.is_null() {
            return Ok(());
        }
        let words = bytes.max(64).next_power_of_two() / 8;
        let mut buf = vec![0u64; words].into_boxed_slice();
        let mr =
            reg_mr(&self.shared, buf.as_mut_ptr().cast(), words * 8, ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE)?;
        if !self.bounce.mr.is_null() {
            // SAFETY: no work request is outstanding, so the NIC no longer uses the old MR.
            unsafe { ffi::ibv_dereg_mr(self.bounce.mr) };
        }
        self.bounce = Bounce { buf, mr };
        Ok(())
    }

    fn check_usable(&self) -> Result<()> {
        match &self.broken {
            Some(why) => Err(backend(format!(
                "RDMA connection to {} is unusable after an earlier failure ({why}); reconnect",
                self.node
            ))),
            None => Ok(()),
        }
    }

    /// Posts `prims` in order with as few doorbells as the send queue allows (one, unless
    /// longer than the queue), only the last of each post signaled, and waits for them.
    fn execute(&mut self, prims: &[Prim], counters: &VerbCounters) -> Result<()> {
        self.check_usable()?;
        for chunk in prims.chunks(self.max_send_wr) {
            self.post_chain(chunk)?;
            counters.doorbell();
            self.wait(chunk)?;
        }
        Ok(())
    }

    fn post_chain(&mut self, chunk: &[Prim]) -> Result<()> {
        // SAFETY: the bounce MR is registered (ensure_bounce ran at creation).
        let lkey = unsafe { (*self.bounce.mr).lkey };
        let base = self.bounce.ptr() as u64;
        let remote = self.remote;
        self.sges.clear();
        self.wrs.clear();
        for (i, p) in chunk.iter().enumerate() {
            let mut wr = ffi::ibv_send_wr { wr_id: i as u64, num_sge: 1, ..Default::default() };
            let (local, len) = match *p {
                Prim::Read { remote: off, len, local } | Prim::Write { remote: off, len, local } => {
                    wr.opcode = if matches!(p, Prim::Read { .. }) {
                        ffi::ibv_wr_opcode::IBV_WR_RDMA_READ
                    } else {
                        ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE
                    };
                    wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                        remote_addr: remote.addr + off,
                        rkey: remote.rkey,
                    };
                    (local, len)
                }
                Prim::Cas { remote: off, expected, new, local } => {
                    wr.opcode = ffi::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP;
                    wr.wr.atomic = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                        remote_addr: remote.addr + off,
                        compare_add: expected,
                        swap: new,
                        rkey: remote.rkey,
                    };
                    (local, 8)
                }
                Prim::Faa { remote: off, add, local } => {
                    wr.opcode = ffi::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD;
                    wr.wr.atomic = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                        remote_addr: remote.addr + off,
                        compare_add: add,
                        swap: 0,
                        rkey: remote.rkey,
                    };
                    (local, 8)
                }
            };
            self.sges.push(ffi::ibv_sge { addr: base + local as u64, length: len, lkey });
            self.wrs.push(wr);
        }
        // Link the list only now: the vectors no longer reallocate.
        let n = self.wrs.len();
        let sges = self.sges.as_mut_ptr();
        let wrs = self.wrs.as_mut_ptr();
        for i in 0..n {
            // SAFETY: `i` and `i + 1` are in bounds of the two vectors (which have `n` items),
            // and both stay alive and unmoved until `ibv_post_send` returns (the provider
            // copies work requests into the send queue; it keeps no pointer to them).
            unsafe {
                let wr = &mut *wrs.add(i);
                wr.sg_list = sges.add(i);
                wr.next = if i + 1 < n { wrs.add(i + 1) } else { ptr::null_mut() };
            }
        }
        self.wrs[n - 1].send_flags = ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
        let mut bad: *mut ffi::ibv_send_wr = ptr::null_mut();
        // SAFETY: the QP is in RTS, the list is well formed (see above), every SGE lies in
        // the registered bounce buffer (callers size it), and remote ranges were bounds-checked
        // against the peer's region by the caller.
        let rc = unsafe { (self.post_send)(self.qp, wrs, &mut bad) };
        if rc != 0 {
            let e = io::Error::from_raw_os_error(rc);
            if bad != wrs {
                // Part of the list went out without its signaled tail: its send-queue slots
                // would never be reclaimed. Give the connection up.
                self.broken = Some(format!("partial ibv_post_send: {e}"));
            }
            return Err(backend(format!("ibv_post_send to {}: {e}", self.node)));
        }
        Ok(())
    }

    /// Polls the CQ until the signaled tail of `chunk` completes (or an error does).
    fn wait(&mut self, chunk: &[Prim]) -> Result<()> {
        let last = (chunk.len() - 1) as u64;
        let mut wcs = [ffi::ibv_wc::default(); 16];
        let start = Instant::now();
        let mut failure: Option<(String, Instant)> = None;
        let mut spins = 0u32;
        loop {
            // SAFETY: the CQ is valid and `wcs` has room for `wcs.len()` completions.
            let n = unsafe { (self.poll_cq)(self.cq, wcs.len() as c_int, wcs.as_mut_ptr()) };
            if n < 0 {
                let why = format!("ibv_poll_cq failed ({n})");
                self.broken = Some(why.clone());
                return Err(backend(format!("{why} on the connection to {}", self.node)));
            }
            for wc in &wcs[..n as usize] {
                if let Some((status, vendor)) = wc.error() {
                    if failure.is_none() {
                        let i = (wc.wr_id() as usize).min(chunk.len() - 1);
                        let why = format!(
                            "{} to {} failed: {} (status {status}, vendor error {vendor:#x}, request {} of {})",
                            chunk[i].name(),
                            self.node,
                            status_str(status),
                            wc.wr_id(),
                            chunk.len()
                        );
                        failure = Some((why, Instant::now()));
                    }
                }
                if wc.wr_id() == last {
                    return match failure {
                        None => Ok(()),
                        Some((why, _)) => {
                            self.broken = Some(why.clone());
                            Err(backend(why))
                        }
                    };
                }
            }
            if n == 0 {
                spins = spins.wrapping_add(1);
                if spins & 1023 == 0 {
                    let waited = start.elapsed();
                    // After an error the rest of the chain is flushed; give the flush
                    // completions a moment, then give up on the connection.
                    let flushed = failure.as_ref().is_some_and(|f| f.1.elapsed() > Duration::from_millis(100));
                    if waited >= self.completion_timeout || flushed {
                        let why = failure.map(|f| f.0).unwrap_or_else(|| {
                            format!("no completion from {} within {:?}", self.node, self.completion_timeout)
                        });
                        self.broken = Some(why.clone());
                        return Err(backend(why));
                    }
                }
                std::hint::spin_loop();
            }
        }
    }

    /// Reads the 8 bytes at bounce offset `local` (an atomic's returned old value).
    fn bounce_word(&mut self, local: usize) -> u64 {
        assert!(local % 8 == 0 && local + 8 <= self.bounce.bytes(), "bounce slot {local} out of range");
        // SAFETY: in bounds and 8-aligned (checked above; the buffer is made of u64). Volatile
        // because the NIC, not Rust code, wrote the word.
        unsafe { ptr::read_volatile(self.bounce.ptr().add(local).cast::<u64>()) }
    }

    /// A lone compare-and-swap through bounce slot `local`.
    fn cas(&mut self, remote: u64, expected: u64, new: u64, local: usize, counters: &VerbCounters) -> Result<u64> {
        self.execute(&[Prim::Cas { remote, expected, new, local }], counters)?;
        Ok(self.bounce_word(local))
    }
}

fn status_str(status: ffi::ibv_wc_status::Type) -> String {
    // SAFETY: `ibv_wc_status_str` returns a pointer to a static NUL-terminated string (or
    // "unknown") for any value.
    let s = unsafe { ffi::ibv_wc_status_str(status) };
    if s.is_null() {
        return format!("status {status}");
    }
    // SAFETY: non-null, static and NUL-terminated (see above).
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

fn initial_psn(node: NodeId) -> u32 {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let mut z =
        (t ^ (u64::from(node.0) << 40) ^ (u64::from(std::process::id()) << 20)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) & 0x00FF_FFFF) as u32
}

// ---------------------------------------------------------------------------------------
// Bootstrap: a fixed-size little-endian hello per QP, over std TCP.

const HELLO_MAGIC: [u8; 4] = *b"RDTQ";
const HELLO_VERSION: u16 = 1;
const HELLO_LEN: usize = 64;

/// What one node tells another about the QP it created for it and about its region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hello {
    from: NodeId,
    to: NodeId,
    lid: u16,
    qpn: u32,
    psn: u32,
    rkey: u32,
    addr: u64,
    len: u64,
    gid: [u8; 16],
    mtu: u8,
}

impl Hello {
    /// Layout: magic[4] version:u16 from:u16 to:u16 lid:u16 qpn:u32 psn:u32 rkey:u32
    /// addr:u64 len:u64 gid[16] mtu:u8, zero-padded to 64 bytes; little-endian.
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC);
        b[4..6].copy_from_slice(&HELLO_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.from.0.to_le_bytes());
        b[8..10].copy_from_slice(&self.to.0.to_le_bytes());
        b[10..12].copy_from_slice(&self.lid.to_le_bytes());
        b[12..16].copy_from_slice(&self.qpn.to_le_bytes());
        b[16..20].copy_from_slice(&self.psn.to_le_bytes());
        b[20..24].copy_from_slice(&self.rkey.to_le_bytes());
        b[24..32].copy_from_slice(&self.addr.to_le_bytes());
        b[32..40].copy_from_slice(&self.len.to_le_bytes());
        b[40..56].copy_from_slice(&self.gid);
        b[56] = self.mtu;
        b
    }

    fn decode(b: &[u8; HELLO_LEN]) -> std::result::Result<Hello, String> {
        if b[0..4] != HELLO_MAGIC {
            return Err(format!("not a redt RDMA hello (magic {:02x?})", &b[0..4]));
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let version = u16_at(4);
        if version != HELLO_VERSION {
            return Err(format!("hello version {version}, this build speaks {HELLO_VERSION}"));
        }
        Ok(Hello {
            from: NodeId(u16_at(6)),
            to: NodeId(u16_at(8)),
            lid: u16_at(10),
            qpn: u32_at(12),
            psn: u32_at(16),
            rkey: u32_at(20),
            addr: u64_at(24),
            len: u64_at(32),
            gid: b[40..56].try_into().expect("16 bytes"),
            mtu: b[56],
        })
    }
}

fn read_hello(s: &mut TcpStream) -> std::result::Result<Hello, String> {
    let mut b = [0u8; HELLO_LEN];
    s.read_exact(&mut b).map_err(|e| format!("reading hello: {e}"))?;
    Hello::decode(&b)
}

fn io_err(what: String) -> impl FnOnce(io::Error) -> Error {
    move |e| backend(format!("{what}: {e}"))
}

/// Exchanges hellos with every peer: the node with the smaller id dials, the other accepts.
/// Returns, per peer, its hello and the open stream (kept for the ready barrier).
fn exchange(
    local: NodeId,
    peers: &[(NodeId, SocketAddr)],
    listen: SocketAddr,
    mine: &HashMap<NodeId, Hello>,
    timeout: Duration,
) -> Result<Vec<(NodeId, Hello, TcpStream)>> {
    if peers.is_empty() {
        return Ok(Vec::new()); // a one-node DC: nothing to exchange, no port to bind
    }
    let deadline = Instant::now() + timeout;
    let listener = TcpListener::bind(listen).map_err(io_err(format!("RDMA bootstrap: binding {listen}")))?;
    listener.set_nonblocking(true).map_err(io_err("RDMA bootstrap: listener".into()))?;
    let lower: HashSet<NodeId> = peers.iter().map(|p| p.0).filter(|&n| n < local).collect();
    let accept_mine = mine.clone();
    let acceptor = std::thread::Builder::new()
        .name(format!("rdma-bootstrap-{}", local.0))
        .spawn(move || accept_peers(local, listener, lower, &accept_mine, deadline))
        .map_err(io_err("RDMA bootstrap: spawning the acceptor".into()))?;

    let mut out = Vec::new();
    let mut dial_err = None;
    for &(peer, addr) in peers.iter().filter(|p| p.0 > local) {
        match dial_peer(local, peer, addr, &mine[&peer], deadline) {
            Ok((hello, s)) => out.push((peer, hello, s)),
            Err(e) => {
                dial_err = Some(e);
                break;
            }
        }
    }
    let accepted = acceptor.join().map_err(|_| backend("RDMA bootstrap: acceptor thread panicked"))?;
    if let Some(e) = dial_err {
        return Err(e);
    }
    out.extend(accepted?);
    Ok(out)
}

fn accept_peers(
    local: NodeId,
    listener: TcpListener,
    mut expected: HashSet<NodeId>,
    mine: &HashMap<NodeId, Hello>,
    deadline: Instant,
) -> Result<Vec<(NodeId, Hello, TcpStream)>> {
    let mut out = Vec::new();
    while !expected.is_empty() {
        match listener.accept() {
            Ok((mut s, from_addr)) => {
                let setup = s.set_nonblocking(false).and_then(|_| s.set_nodelay(true)).and_then(|_| {
                    s.set_read_timeout(Some(
                        deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100)),
                    ))
                });
                if let Err(e) = setup {
                    tracing::warn!(%from_addr, "RDMA bootstrap: dropping connection: {e}");
                    continue;
                }
                let hello = match read_hello(&mut s) {
                    Ok(h) if h.to == local && expected.contains(&h.from) => h,
                    Ok(h) => {
                        tracing::warn!(%from_addr, "RDMA bootstrap: unexpected hello from {} to {}", h.from, h.to);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(%from_addr, "RDMA bootstrap: {e}");
                        continue;
                    }
                };
                s.write_all(&mine[&hello.from].encode())
                    .map_err(io_err(format!("RDMA bootstrap: answering {}", hello.from)))?;
                expected.remove(&hello.from);
                out.push((hello.from, hello, s));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let mut missing: Vec<_> = expected.iter().map(|n| n.to_string()).collect();
                    missing.sort();
                    return Err(backend(format!(
                        "RDMA bootstrap: {} did not connect in time ({})",
                        missing.join(", "),
                        local
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(backend(format!("RDMA bootstrap: accept: {e}"))),
        }
    }
    Ok(out)
}

fn dial_peer(
    local: NodeId,
    peer: NodeId,
    addr: SocketAddr,
    mine: &Hello,
    deadline: Instant,
) -> Result<(Hello, TcpStream)> {
    let mut backoff = Duration::from_millis(50);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(backend(format!("RDMA bootstrap: {peer} at {addr} did not answer {local} in time")));
        }
        match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(1))) {
            Ok(mut s) => {
                let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
                s.set_nodelay(true)
                    .and_then(|_| s.set_read_timeout(Some(left)))
                    .and_then(|_| s.write_all(&mine.encode()))
                    .map_err(io_err(format!("RDMA bootstrap: sending hello to {peer} at {addr}")))?;
                let hello =
                    read_hello(&mut s).map_err(|e| backend(format!("RDMA bootstrap: {peer} at {addr}: {e}")))?;
                if hello.from != peer || hello.to != local {
                    return Err(backend(format!(
                        "RDMA bootstrap: {addr} answered as {} (to {}), expected {peer} (to {local}): check the peer list",
                        hello.from, hello.to
                    )));
                }
                return Ok((hello, s));
            }
            Err(_) => {
                std::thread::sleep(backoff.min(left));
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Requests, validation, masked-atomic emulation.

/// A request as the engine sees it (borrowing write data).
#[derive(Clone, Copy, Debug)]
enum Req<'a> {
    Read { offset: Offset, len: usize },
    Write { offset: Offset, data: &'a [u8] },
    Cas { offset: Offset, expected: u64, new: u64 },
    Faa { offset: Offset, add: u64 },
    MaskedCas { offset: Offset, compare: u64, compare_mask: u64, swap: u64, swap_mask: u64 },
    MaskedFaa { offset: Offset, add: u64, boundary: u64 },
}

impl<'a> From<&'a WorkRequest> for Req<'a> {
    fn from(wr: &'a WorkRequest) -> Self {
        match *wr {
            WorkRequest::Read { offset, len } => Req::Read { offset, len: len as usize },
            WorkRequest::Write { offset, ref data } => Req::Write { offset, data },
            WorkRequest::CompareAndSwap { offset, expected, new } => Req::Cas { offset, expected, new },
            WorkRequest::FetchAndAdd { offset, add } => Req::Faa { offset, add },
            WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask } => {
                Req::MaskedCas { offset, compare, compare_mask, swap, swap_mask }
            }
            WorkRequest::MaskedFetchAndAdd { offset, add, boundary } => Req::MaskedFaa { offset, add, boundary },
        }
    }
}

impl Req<'_> {
    fn offset(&self) -> Offset {
        match *self {
            Req::Read { offset, .. }
            | Req::Write { offset, .. }
            | Req::Cas { offset, .. }
            | Req::Faa { offset, .. }
            | Req::MaskedCas { offset, .. }
            | Req::MaskedFaa { offset, .. } => offset,
        }
    }

    /// Bytes addressed, and whether the request is an 8-byte atomic.
    fn span(&self) -> (u64, bool) {
        match self {
            Req::Read { len, .. } => (*len as u64, false),
            Req::Write { data, .. } => (data.len() as u64, false),
            _ => (8, true),
        }
    }

    /// Bounce-buffer bytes the request needs (8-byte aligned slots).
    fn slot_bytes(&self) -> usize {
        (self.span().0 as usize).div_ceil(8) * 8
    }

    fn count(&self, c: &VerbCounters) {
        match self {
            Req::Read { len, .. } => c.read(*len),
            Req::Write { data, .. } => c.write(data.len()),
            Req::Cas { .. } => c.cas(),
            Req::Faa { .. } => c.faa(),
            Req::MaskedCas { .. } => c.masked_cas(),
            Req::MaskedFaa { .. } => c.masked_faa(),
        }
    }
}

/// Bounds and alignment check of `req` against a `size`-byte region of `node`, as
/// [`super::LocalVerbs`] does; also rejects transfers a single work request cannot carry.
fn validate(node: NodeId, size: u64, req: &Req<'_>) -> Result<()> {
    let offset = req.offset();
    let (len, atomic) = req.span();
    if atomic && offset.0 % 8 != 0 {
        return Err(Error::Unaligned { node, offset });
    }
    if offset.0.checked_add(len).is_none_or(|end| end > size) {
        return Err(Error::OutOfBounds { node, offset, len, size });
    }
    if len > u64::from(u32::MAX >> 1) {
        return Err(backend(format!("{len}-byte transfer exceeds the 2 GiB RDMA message limit")));
    }
    Ok(())
}

/// The value a masked CAS installs over `old`.
fn masked_swap_value(old: u64, swap: u64, swap_mask: u64) -> u64 {
    (old & !swap_mask) | (swap & swap_mask)
}

/// The first (optimistic) CAS of a masked CAS: guess that the unmasked bits are zero.
fn masked_cas_probe(compare: u64, compare_mask: u64, swap: u64, swap_mask: u64) -> (u64, u64) {
    let guess = compare & compare_mask;
    (guess, masked_swap_value(guess, swap, swap_mask))
}

/// Finishes a masked CAS whose probe CAS (expected `guess`) returned `old`: retries plain
/// CASes through `cas(expected, new) -> old` until the word is swapped or stops matching.
/// Returns the old value with the semantics of [`Region::masked_compare_and_swap`].
fn resolve_masked_cas(
    mut guess: u64,
    mut old: u64,
    compare: u64,
    compare_mask: u64,
    (swap, swap_mask): (u64, u64),
    mut cas: impl FnMut(u64, u64) -> Result<u64>,
) -> Result<u64> {
    loop {
        if old == guess {
            return Ok(old);
        }
        if old & compare_mask != compare & compare_mask {
            return Ok(old);
        }
        guess = old;
        old = cas(guess, masked_swap_value(guess, swap, swap_mask))?;
    }
}

/// Finishes a masked fetch-and-add whose probe READ saw `seen`: CAS loop installing the
/// field-wise sum. Returns the old value (as [`Region::masked_fetch_and_add`]).
fn resolve_masked_faa(
    mut seen: u64,
    add: u64,
    boundary: u64,
    mut cas: impl FnMut(u64, u64) -> Result<u64>,
) -> Result<u64> {
    loop {
        let old = cas(seen, masked_add(seen, add, boundary))?;
        if old == seen {
            return Ok(old);
        }
        seen = old;
    }
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
    /// [`Error::Backend`] — "no RDMA device found (ibv_get_device_list: …): build without the
    /// `rdma` feature or use the shm backend" when the host has none (as in CI), or a message
    /// naming the devices present when `name` is not one of them.
    pub fn open_device(name: Option<&str>) -> Result<RdmaDevice> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-pointer; the list is freed below.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(no_device(io::Error::last_os_error()));
        }
        let mut names = Vec::new();
        let mut chosen = None;
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds `n` device pointers (NULL-terminated after them).
            let dev = unsafe { *list.add(i) };
            // SAFETY: `dev` is a listed device; its name is a NUL-terminated string owned by
            // the device list, copied out before the list is freed.
            let dev_name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(dev)) }.to_string_lossy().into_owned();
            if chosen.is_none() && name.is_none_or(|want| want == dev_name) {
                chosen = Some((dev, dev_name.clone()));
            }
            names.push(dev_name);
        }
        let result = match chosen {
            None if names.is_empty() => Err(no_device("0 devices")),
            None => Err(backend(format!(
                "RDMA device `{}` not found; present: {}",
                name.unwrap_or_default(),
                names.join(", ")
            ))),
            Some((dev, dev_name)) => open_listed(dev, dev_name),
        };
        // SAFETY: the list came from `ibv_get_device_list`; an opened context stays valid
        // after the list is freed (verbs(3): free the list once the devices are opened).
        unsafe { ffi::ibv_free_device_list(list) };
        result
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
    ) -> Result<RdmaVerbs> {
        Self::connect_with(&RdmaConfig::default(), local, region, peers, listen)
    }

    /// Opens the device, registers `region` (this node's MemStore) for remote READ, WRITE and
    /// atomics, creates one RC queue pair per node of `peers` (plus a loopback one for
    /// `local`), and connects them: listening on `listen`, dialing the peers with a larger
    /// id and accepting those with a smaller one, exchanging a 64-byte little-endian hello
    /// {from, to, lid, qpn, psn, rkey, region address, region length, gid, mtu} per pair,
    /// then INIT → RTR → RTS and a one-byte ready barrier. `peers` may include `local`
    /// (ignored). Returns once every peer is connected.
    ///
    /// # Errors
    /// [`Error::Backend`] when there is no device (see [`RdmaVerbs::open_device`]), the port
    /// is down, registration or QP setup fails, or a peer does not answer within
    /// `cfg.connect_timeout`.
    pub fn connect_with(
        cfg: &RdmaConfig,
        local: NodeId,
        region: Arc<Region>,
        peers: &[(NodeId, SocketAddr)],
        listen: SocketAddr,
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
                return Err(backend(format!("RDMA bootstrap: {n} is listed twice")));
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

        let mut streams = exchange(local, &peers, listen, &mine, cfg.connect_timeout)?;
        for (node, hello, _) in &streams {
            conns.get_mut(node).expect("a conn per peer").connect_to(cfg, &port, hello)?;
        }
        // Ready barrier: nobody posts before every peer's QP has reached RTR.
        for (node, _, s) in &mut streams {
            s.write_all(b"R").map_err(io_err(format!("RDMA bootstrap: ready to {node}")))?;
        }
        for (node, _, s) in &mut streams {
            let mut b = [0u8; 1];
            s.read_exact(&mut b)
                .map_err(io_err(format!("RDMA bootstrap: {node} never became ready (its QP setup failed?)")))?;
        }
        tracing::info!(
            node = %local,
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

fn open_listed(dev: *mut ffi::ibv_device, name: String) -> Result<RdmaDevice> {
    // SAFETY: `dev` is an entry of a live device list.
    let ctx = unsafe { ffi::ibv_open_device(dev) };
    if ctx.is_null() {
        return Err(backend(format!("ibv_open_device({name}): {}", io::Error::last_os_error())));
    }
    // From here on, dropping `device` closes the context.
    let mut device = RdmaDevice { ctx, name, attr: ffi::ibv_device_attr::default() };
    // SAFETY: the context is open and `device.attr` is a valid out-pointer.
    let rc = unsafe { ffi::ibv_query_device(device.ctx, &mut device.attr) };
    if rc != 0 {
        return Err(backend(format!("ibv_query_device({}): {}", device.name, io::Error::from_raw_os_error(rc))));
    }
    Ok(device)
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
        let err = RdmaVerbs::connect(NodeId(0), region, &[peer], "127.0.0.1:0".parse().unwrap()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("no RDMA device"), "{msg}");
        assert!(matches!(err, Error::Backend(_)));
    }

    #[test]
    fn hello_round_trips_and_rejects_garbage() {
        let h = Hello {
            from: NodeId(3),
            to: NodeId(7),
            lid: 0x1234,
            qpn: 0x00ab_cdef,
            psn: 0x0012_3456,
            rkey: 0xdead_beef,
            addr: 0x7f00_1234_5678_9000,
            len: 1 << 30,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            mtu: ffi::IBV_MTU_4096 as u8,
        };
        let b = h.encode();
        assert_eq!(&b[0..4], b"RDTQ");
        assert_eq!(Hello::decode(&b), Ok(h));
        let mut bad = b;
        bad[0] = b'X';
        assert!(Hello::decode(&bad).is_err());
        let mut newer = b;
        newer[4] = 9;
        assert!(Hello::decode(&newer).unwrap_err().contains("version"));
    }

    #[test]
    fn validation_matches_the_local_backend() {
        let n = NodeId(2);
        assert!(validate(n, 64, &Req::Read { offset: Offset(60), len: 4 }).is_ok());
        assert!(matches!(
            validate(n, 64, &Req::Read { offset: Offset(60), len: 5 }),
            Err(Error::OutOfBounds { len: 5, size: 64, .. })
        ));
        assert!(matches!(
            validate(n, 64, &Req::Write { offset: Offset(u64::MAX), data: &[1] }),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(validate(n, 64, &Req::Faa { offset: Offset(4), add: 1 }), Err(Error::Unaligned { .. })));
        assert!(matches!(
            validate(n, 64, &Req::Cas { offset: Offset(64), expected: 0, new: 1 }),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(validate(n, 64, &Req::MaskedFaa { offset: Offset(56), add: 1, boundary: 0 }).is_ok());
        assert!(validate(n, 64, &Req::Read { offset: Offset(64), len: 0 }).is_ok());
    }

    /// The masked-atomic emulation, driven by CAS on a `Region`, equals the region's own
    /// masked atomics (which follow the Mellanox ExtAtomics semantics).
    #[test]
    fn masked_emulation_matches_region_semantics() {
        let cases = [
            (0u64, 0u64, 0xFFu64, 0x01u64, 0x01u64),
            (0x0100, 0x0000, 0x00FF, 0x0001, 0x00FF),
            (0x0101, 0x0000, 0x00FF, 0x0001, 0x00FF),
            (0xFFFF_0000, 0xFFFF_0000, 0xFFFF_0000, 0x1234, 0xFFFF),
            (0xFFFF_0000, 0xFFFE_0000, 0xFFFF_0000, 0x1234, 0xFFFF),
            (42, 7, 0, 9, u64::MAX),
        ];
        for (init, compare, cmask, swap, smask) in cases {
            let want = Region::new_heap(8);
            want.write(0, &init.to_le_bytes());
            let want_old = want.masked_compare_and_swap(0, compare, cmask, swap, smask);

            let got = Region::new_heap(8);
            got.write(0, &init.to_le_bytes());
            let (guess, new) = masked_cas_probe(compare, cmask, swap, smask);
            let first = got.compare_and_swap(0, guess, new);
            let old = resolve_masked_cas(guess, first, compare, cmask, (swap, smask), |e, n| {
                Ok(got.compare_and_swap(0, e, n))
            })
            .unwrap();
            assert_eq!(old, want_old, "init {init:#x}");
            assert_eq!(
                got.word(0).load(std::sync::atomic::Ordering::SeqCst),
                want.word(0).load(std::sync::atomic::Ordering::SeqCst)
            );
        }
        for (init, add, boundary) in [(0x0Fu64, 0x01u64, 0x88u64), (u64::MAX, 2, 0), (0x1F, 0x11, 0x88)] {
            let want = Region::new_heap(8);
            want.write(0, &init.to_le_bytes());
            let want_old = want.masked_fetch_and_add(0, add, boundary);
            let got = Region::new_heap(8);
            got.write(0, &init.to_le_bytes());
            // A stale probe value forces at least one retry.
            let old = resolve_masked_faa(init ^ 1, add, boundary, |e, n| Ok(got.compare_and_swap(0, e, n))).unwrap();
            assert_eq!(old, want_old);
            assert_eq!(
                got.word(0).load(std::sync::atomic::Ordering::SeqCst),
                want.word(0).load(std::sync::atomic::Ordering::SeqCst)
            );
        }
    }

    #[test]
    fn concurrent_masked_adds_do_not_lose_updates() {
        let r = Arc::new(Region::new_heap(8));
        let threads: Vec<_> =
            (0..4)
                .map(|_| {
                    let r = r.clone();
                    std::thread::spawn(move || {
                        for _ in 0..1000 {
                            let seen = r.word(0).load(std::sync::atomic::Ordering::Relaxed);
                            // Two 32-bit fields, +1 in each.
                            resolve_masked_faa(seen, 0x0000_0001_0000_0001, 1 << 31, |e, n| {
                                Ok(r.compare_and_swap(0, e, n))
                            })
                            .unwrap();
                        }
                    })
                })
                .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.word(0).load(std::sync::atomic::Ordering::SeqCst), 0x0000_0FA0_0000_0FA0);
    }
}

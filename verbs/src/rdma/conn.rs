//! One reliable-connected queue pair to one node: its completion queue and registered bounce
//! buffer, the QP state changes INIT → RTR → RTS, and the engine that posts a chain of work
//! requests with one doorbell and busy-polls for its completion.

use super::bootstrap::Hello;
use super::device::{PortInfo, RdmaDevice};
use super::{backend, RdmaConfig};
use crate::error::Result;
use crate::region::Region;
use crate::VerbCounters;
use ibverbs_sys as ffi;
use redt_proto::NodeId;
use std::ffi::{c_int, CStr};
use std::io;
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Protection domain, the registered region and the device, shared by every connection.
pub(super) struct Shared {
    pub(super) pd: *mut ffi::ibv_pd,
    pub(super) region_mr: *mut ffi::ibv_mr,
    pub(super) region: Arc<Region>,
    pub(super) dev: RdmaDevice,
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
pub(super) struct Remote {
    pub(super) addr: u64,
    pub(super) rkey: u32,
    pub(super) len: u64,
}

/// A registered, 8-byte aligned local buffer that work requests gather from and scatter to.
pub(super) struct Bounce {
    buf: Box<[u64]>,
    mr: *mut ffi::ibv_mr,
}

impl Bounce {
    pub(super) fn ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().cast()
    }
    fn bytes(&self) -> usize {
        self.buf.len() * 8
    }
}

/// One primitive work request, as posted (masked verbs become several of these).
#[derive(Clone, Copy, Debug)]
pub(super) enum Prim {
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
pub(super) struct Conn {
    node: NodeId,
    qp: *mut ffi::ibv_qp,
    cq: *mut ffi::ibv_cq,
    post_send: PostSendFn,
    poll_cq: PollCqFn,
    pub(super) bounce: Bounce,
    pub(super) remote: Remote,
    pub(super) psn: u32,
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

pub(super) const ACCESS_ALL: ffi::ibv_access_flags = ffi::ibv_access_flags(
    ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0,
);

pub(super) fn reg_mr(
    shared: &Shared,
    addr: *mut u8,
    len: usize,
    access: ffi::ibv_access_flags,
) -> Result<*mut ffi::ibv_mr> {
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
    pub(super) fn create(shared: &Arc<Shared>, cfg: &RdmaConfig, node: NodeId) -> Result<Conn> {
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
    pub(super) fn qpn(&self) -> u32 {
        // SAFETY: the QP is valid; `qp_num` is immutable after creation.
        unsafe { (*self.qp).qp_num }
    }

    /// INIT -> RTR -> RTS towards `peer`, whose hello says where its QP and region are.
    pub(super) fn connect_to(&mut self, cfg: &RdmaConfig, me: &PortInfo, peer: &Hello) -> Result<()> {
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
    pub(super) fn ensure_bounce(&mut self, bytes: usize) -> Result<()> {
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

    pub(super) fn check_usable(&self) -> Result<()> {
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
    pub(super) fn execute(&mut self, prims: &[Prim], counters: &VerbCounters) -> Result<()> {
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
    pub(super) fn bounce_word(&mut self, local: usize) -> u64 {
        assert!(local % 8 == 0 && local + 8 <= self.bounce.bytes(), "bounce slot {local} out of range");
        // SAFETY: in bounds and 8-aligned (checked above; the buffer is made of u64). Volatile
        // because the NIC, not Rust code, wrote the word.
        unsafe { ptr::read_volatile(self.bounce.ptr().add(local).cast::<u64>()) }
    }

    /// A lone compare-and-swap through bounce slot `local`.
    pub(super) fn cas(
        &mut self,
        remote: u64,
        expected: u64,
        new: u64,
        local: usize,
        counters: &VerbCounters,
    ) -> Result<u64> {
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

//! An open RDMA device: listing and opening it, and querying the port the queue pairs use.

use super::{backend, no_device};
use crate::error::Result;
use ibverbs_sys as ffi;
use std::ffi::{c_int, CStr};
use std::io;
use std::ptr;

/// An open RDMA device (an `ibv_context`), closed on drop.
pub struct RdmaDevice {
    pub(super) ctx: *mut ffi::ibv_context,
    pub(super) name: String,
    pub(super) attr: ffi::ibv_device_attr,
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
pub(super) struct PortInfo {
    pub(super) lid: u16,
    pub(super) mtu: ffi::ibv_mtu,
    pub(super) ethernet: bool,
    pub(super) gid: [u8; 16],
}

impl RdmaDevice {
    /// Name of the device (`mlx5_0`, …).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Opens the RDMA device called `name`, or the first one listed when `None` (see
    /// [`RdmaVerbs::open_device`](super::RdmaVerbs::open_device)).
    pub(super) fn open(name: Option<&str>) -> Result<RdmaDevice> {
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

    /// Queries `port`: it must be ACTIVE. Also reads GID `gid_index`.
    pub(super) fn port(&self, port: u8, gid_index: u8) -> Result<PortInfo> {
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

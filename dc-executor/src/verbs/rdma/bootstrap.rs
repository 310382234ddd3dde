//! The TCP bootstrap of the RDMA backend: a fixed-size little-endian hello per queue pair
//! (QP number, LID, GID, PSN, region address, length and rkey), exchanged over std TCP; the
//! node with the smaller id dials, the other accepts.

use super::backend;
use crate::error::{Error, Result};
use redt_proto::NodeId;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const HELLO_MAGIC: [u8; 4] = *b"RDTQ";
const HELLO_VERSION: u16 = 1;
const HELLO_LEN: usize = 64;

/// What one node tells another about the QP it created for it and about its region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hello {
    pub(super) from: NodeId,
    pub(super) to: NodeId,
    pub(super) lid: u16,
    pub(super) qpn: u32,
    pub(super) psn: u32,
    pub(super) rkey: u32,
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) gid: [u8; 16],
    pub(super) mtu: u8,
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

pub(super) fn io_err(what: String) -> impl FnOnce(io::Error) -> Error {
    move |e| backend(format!("{what}: {e}"))
}

/// Exchanges hellos with every peer: the node with the smaller id dials, the other accepts.
/// Returns, per peer, its hello and the open stream (kept for the ready barrier).
pub(super) fn exchange(
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

#[cfg(test)]
mod tests {
    use super::*;
    use ibverbs_sys as ffi;

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
}

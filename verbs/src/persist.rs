//! Durability of a MemStore on disk (`durability: disk`; RedT §5's non-NVM mode:
//! "otherwise, logs are persisted in the disk before committing").
//!
//! The MemStore a node's executors read and write with one-sided verbs stays where it is
//! (in `/dev/shm` or on the heap): memory that a power loss or a reboot wipes. Beside it a
//! [`Persistence`] keeps a **disk image** of the same layout, byte for byte, in a file on a
//! real filesystem, and a **dirty-page bitmap** (one bit per [`PAGE_BYTES`] page of the
//! region). Every write to the region through the region's methods sets the bits of the
//! pages it touched, *after* the write (so a sync that clears a bit has copied the page with
//! the write in it, or the bit is set again and the next sync copies it).
//!
//! [`Persistence::sync`] makes every write completed before the call durable: it clears the
//! bitmap word by word, copies each dirty page from the region to the disk image at the same
//! offset (`pwrite`), then `fdatasync`s the image. Syncs are **group commits**: a call waits
//! for a sync that *started* after it was made, and one sync serves every caller waiting for
//! it, so concurrent votes share one `fdatasync`. Across processes mapping one region (the
//! `shm` backend) the bitmap lives in shared memory beside the region, and an exclusive
//! `flock` on the image serialises the syncs, so a sync never returns while another
//! process's copy of a page it cleared is not yet on disk.
//!
//! Where durability is needed (docs/design.md §2; `docs/durability.md`):
//! - before a commit vote is sent: the pre-write (the `Logged` entry and its vote word, the
//!   locks, the records it created) — `Executor::execute`;
//! - before a recorded decision, a recovery promise, an accepted redo or a snapshot chunk is
//!   acknowledged;
//! - before replay releases ring slots: the records it applied, then the new head (the
//!   ring's durable head word, `ring_off + 16`), in two syncs (`replay.rs`).
//!
//! After a power loss the node finds its `/dev/shm` file gone, loads the disk image into a
//! fresh region and reconciles it (`restore.rs`): the image holds every write some sync
//! covered plus any subset of later ones.
//!
//! The [`DiskFile`] trait is the image's storage: a real [`std::fs::File`], or in tests a
//! [`VolatileDisk`] that models a power loss exactly (only what `fdatasync` covered survives,
//! plus any subset of the sectors written since).

use crate::error::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex};

/// Bytes per dirty-tracking page: the kernel's page size on every machine redt targets.
pub const PAGE_BYTES: u64 = 4096;

/// Largest run of consecutive dirty pages copied with one `pwrite`, in bytes.
const MAX_RUN_BYTES: u64 = 1 << 20;

/// Where a disk image lives: an append-free, fixed-size file read and written at offsets.
pub trait DiskFile: Send + Sync {
    /// Writes `data` at byte `offset` (not yet durable).
    ///
    /// # Errors
    /// The OS error.
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()>;
    /// Makes every write before the call durable (`fdatasync`).
    ///
    /// # Errors
    /// The OS error: the writes since the last successful sync may or may not be durable.
    fn sync_data(&self) -> std::io::Result<()>;
    /// Reads `buf.len()` bytes at `offset`.
    ///
    /// # Errors
    /// The OS error, or an unexpected end of file.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// Takes the image's cross-process sync lock (exclusive `flock`); released by
    /// [`DiskFile::unlock`].
    ///
    /// # Errors
    /// The OS error.
    fn lock(&self) -> std::io::Result<()> {
        Ok(())
    }
    /// Releases [`DiskFile::lock`].
    fn unlock(&self) {}
}

impl DiskFile for File {
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        FileExt::write_all_at(self, data, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        File::sync_data(self)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn lock(&self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock on a file descriptor this File owns; no memory is passed.
            let r = unsafe { libc::flock(self.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
    fn unlock(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as in `lock`; an unlock that fails leaves the lock to the file's close.
        unsafe { libc::flock(self.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Memory reached as aligned 8-byte atomic words: a dirty-page bitmap (a MemStore `Region`
/// in shared memory when several processes write the region, or [`HeapWords`]).
pub trait Words: Send + Sync {
    /// Size in bytes (a multiple of 8).
    fn len(&self) -> u64;
    /// Whether it has no words.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The word at byte `offset` (a multiple of 8, below `len`).
    fn word(&self, offset: u64) -> &AtomicU64;
}

/// The memory a disk image copies and restores: a node's MemStore region.
pub trait ImagedMemory: Words {
    /// Reads `buf.len()` bytes at `offset`.
    fn read(&self, offset: u64, buf: &mut [u8]);
    /// Writes `data` at `offset` without marking pages dirty (a restore from the image).
    fn write_untracked(&self, offset: u64, data: &[u8]);
}

/// Zeroed words on the heap: the bitmap of a region only this process writes.
pub struct HeapWords(Box<[AtomicU64]>);

impl HeapWords {
    /// `len` bytes of zero words (rounded up to whole words, at least one).
    pub fn new(len: u64) -> HeapWords {
        HeapWords((0..len.div_ceil(8).max(1)).map(|_| AtomicU64::new(0)).collect())
    }
}

impl Words for HeapWords {
    fn len(&self) -> u64 {
        self.0.len() as u64 * 8
    }
    fn word(&self, offset: u64) -> &AtomicU64 {
        &self.0[(offset / 8) as usize]
    }
}

/// Group-commit bookkeeping of one [`Persistence`] within this process.
#[derive(Debug, Default)]
struct SyncState {
    /// Syncs started so far.
    started: u64,
    /// The newest sync (by start order) that completed successfully.
    done: u64,
    /// Whether a sync is running now.
    running: bool,
}

/// The disk image and dirty-page bitmap of one node's MemStore region (see the module docs).
pub struct Persistence {
    disk: Box<dyn DiskFile>,
    /// One bit per page of the region, set after a write to the page, cleared by a sync.
    dirty: Box<dyn Words>,
    /// Region size in bytes.
    len: u64,
    /// Where the image lives, for messages.
    name: String,
    state: Mutex<SyncState>,
    synced: Condvar,
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence").field("image", &self.name).field("len", &self.len).finish()
    }
}

/// Bytes of the dirty-page bitmap of a region of `len` bytes (whole 8-byte words).
pub fn bitmap_bytes(len: u64) -> u64 {
    len.div_ceil(PAGE_BYTES).div_ceil(64).max(1) * 8
}

impl Persistence {
    /// The persistence of a region of `len` bytes with its image in `disk` and its bitmap in
    /// `dirty` (at least [`bitmap_bytes`]`(len)` bytes, zero for a fresh start; shared memory
    /// when several processes write the region). `name` names the image in errors.
    ///
    /// # Errors
    /// [`Error::Backend`] if `dirty` is too small.
    pub fn new(
        disk: Box<dyn DiskFile>,
        dirty: impl Words + 'static,
        len: u64,
        name: impl Into<String>,
    ) -> Result<Persistence> {
        let name = name.into();
        if dirty.len() < bitmap_bytes(len) {
            return Err(Error::Backend(format!(
                "{name}: dirty-page bitmap of {} bytes, a {len}-byte region needs {}",
                dirty.len(),
                bitmap_bytes(len)
            )));
        }
        Ok(Persistence { disk, dirty: Box::new(dirty), len, name, state: Mutex::default(), synced: Condvar::new() })
    }

    /// Opens (creating it, mode 0600, if missing) the disk image at `path` for a region of
    /// `len` bytes, with a bitmap on the heap (one process writes the region). Returns it
    /// and whether the file already held an image (it is `len` bytes long).
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; [`Error::Backend`] for a file of another size or owner,
    /// or a symbolic link.
    pub fn open_file(path: &Path, len: u64) -> Result<(Persistence, bool)> {
        Persistence::open_file_with_bitmap(path, len, HeapWords::new(bitmap_bytes(len)))
    }

    /// [`Persistence::open_file`] with the bitmap in `dirty` (the shared-memory bitmap of a
    /// region several processes write).
    ///
    /// # Errors
    /// As [`Persistence::open_file`].
    pub fn open_file_with_bitmap(path: &Path, len: u64, dirty: impl Words + 'static) -> Result<(Persistence, bool)> {
        let io = |error| Error::Io { path: path.display().to_string(), error };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|source| Error::Io { path: dir.display().to_string(), error: source })?;
        }
        let file = crate::open_private_file(path)?;
        let size = file.metadata().map_err(io)?.len();
        let existed = size == len;
        if size == 0 {
            file.set_len(len).map_err(io)?;
        } else if size != len {
            return Err(Error::Backend(format!(
                "{}: disk image is {size} bytes, the MemStore is {len}; remove it or fix the config",
                path.display()
            )));
        }
        Ok((Persistence::new(Box::new(file), dirty, len, path.display().to_string())?, existed))
    }

    /// Where the image lives (its path), for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Marks the pages of `[offset, offset + len)` dirty. Called by the region after every
    /// write; out-of-range parts are ignored.
    pub fn mark(&self, offset: u64, len: u64) {
        if len == 0 || offset >= self.len {
            return;
        }
        let first = offset / PAGE_BYTES;
        let last = (offset.saturating_add(len).min(self.len) - 1) / PAGE_BYTES;
        let mut page = first;
        while page <= last {
            let word = page / 64;
            let bit = page % 64;
            let n = (64 - bit).min(last - page + 1);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << bit };
            let w = self.dirty.word(word * 8);
            if w.load(Ordering::Relaxed) & mask != mask {
                w.fetch_or(mask, Ordering::AcqRel);
            }
            page += n;
        }
    }

    /// Pages marked dirty and not yet copied by a sync.
    pub fn dirty_pages(&self) -> u64 {
        let words = bitmap_bytes(self.len) / 8;
        (0..words).map(|w| u64::from(self.dirty.word(w * 8).load(Ordering::Acquire).count_ones())).sum()
    }

    /// Makes every write to `region` completed before this call durable (group commit; see
    /// the module docs). `region` must be the region this persistence images.
    ///
    /// # Errors
    /// [`Error::Io`] naming the image when a `pwrite` or `fdatasync` fails: nothing written
    /// since the last successful sync may be counted on (its pages are marked dirty again).
    pub fn sync(&self, region: &dyn ImagedMemory) -> Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let need = s.started + 1;
        loop {
            if s.done >= need {
                return Ok(());
            }
            if s.running {
                s = self.synced.wait(s).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            s.running = true;
            s.started += 1;
            let generation = s.started;
            drop(s);
            let result = self.sync_now(region);
            s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.running = false;
            if result.is_ok() {
                s.done = s.done.max(generation);
            }
            self.synced.notify_all();
            result?;
        }
    }

    /// One sync: under the image's lock, copy every dirty page, then `fdatasync`.
    fn sync_now(&self, region: &dyn ImagedMemory) -> Result<()> {
        let io = |error| Error::Io { path: self.name.clone(), error };
        self.disk.lock().map_err(io)?;
        let result = self.copy_dirty(region).and_then(|()| self.disk.sync_data().map_err(io));
        self.disk.unlock();
        result
    }

    /// Copies the dirty pages to the image, clearing their bits; on a failed write the bits
    /// of the pages not yet written are set again.
    fn copy_dirty(&self, region: &dyn ImagedMemory) -> Result<()> {
        let words = bitmap_bytes(self.len) / 8;
        let mut buf = Vec::new();
        // The run of consecutive dirty pages being gathered: (first page, pages).
        let mut run: Option<(u64, u64)> = None;
        for w in 0..words {
            let bits = self.dirty.word(w * 8).swap(0, Ordering::AcqRel);
            if bits == 0 {
                continue;
            }
            for bit in 0..64 {
                if bits >> bit & 1 == 0 {
                    continue;
                }
                let page = w * 64 + bit;
                match run {
                    Some((first, n)) if first + n == page && (n + 1) * PAGE_BYTES <= MAX_RUN_BYTES => {
                        run = Some((first, n + 1));
                    }
                    Some((first, n)) => {
                        self.write_run(region, first, n, &mut buf)?;
                        run = Some((page, 1));
                    }
                    None => run = Some((page, 1)),
                }
            }
        }
        if let Some((first, n)) = run {
            self.write_run(region, first, n, &mut buf)?;
        }
        Ok(())
    }

    /// Copies pages `[first, first + n)` from `region` to the image.
    fn write_run(&self, region: &dyn ImagedMemory, first: u64, n: u64, buf: &mut Vec<u8>) -> Result<()> {
        let start = first * PAGE_BYTES;
        let end = ((first + n) * PAGE_BYTES).min(self.len).min(region.len());
        if end <= start {
            return Ok(());
        }
        buf.resize((end - start) as usize, 0);
        region.read(start, buf);
        if let Err(source) = self.disk.write_at(start, buf) {
            // Not on disk: copy these pages again next time.
            self.mark(start, end - start);
            return Err(Error::Io { path: self.name.clone(), error: source });
        }
        Ok(())
    }

    /// Copies the whole disk image into `region` (restoring after a power loss; nothing
    /// else may use the region meanwhile) and clears the bitmap.
    ///
    /// # Errors
    /// [`Error::Io`] naming the image.
    pub fn load_into(&self, region: &dyn ImagedMemory) -> Result<()> {
        let len = self.len.min(region.len());
        let mut buf = vec![0u8; MAX_RUN_BYTES as usize];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(MAX_RUN_BYTES) as usize;
            self.disk
                .read_at(off, &mut buf[..n])
                .map_err(|source| Error::Io { path: self.name.clone(), error: source })?;
            region.write_untracked(off, &buf[..n]);
            off += n as u64;
        }
        for w in 0..bitmap_bytes(self.len) / 8 {
            self.dirty.word(w * 8).store(0, Ordering::Release);
        }
        Ok(())
    }

    /// Reads 8 bytes of the image at `offset` (the superblock's magic, say).
    ///
    /// # Errors
    /// [`Error::Io`] naming the image.
    pub fn read_word(&self, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.disk.read_at(offset, &mut b).map_err(|source| Error::Io { path: self.name.clone(), error: source })?;
        Ok(u64::from_le_bytes(b))
    }
}

/// Path of the disk image of `node`'s MemStore in `dir` (the same name as its shared-memory
/// file, so the two are easy to pair).
pub fn image_file(dir: &Path, prefix: &str, node: redt_proto::NodeId) -> PathBuf {
    dir.join(format!("{prefix}-node{}.memstore", node.0))
}

/// A [`DiskFile`] in memory that models a power loss (for tests of what `disk` durability
/// guarantees): writes go to a cache; [`DiskFile::sync_data`] makes them durable; after
/// [`VolatileDisk::fail_at_sync`]'s count of syncs, the next one "loses power" (fails, and
/// the disk takes no more writes); [`VolatileDisk::after_power_loss`] then gives what a real
/// disk could hold: everything synced plus any subset of the 512-byte sectors written since,
/// chosen by the caller.
#[derive(Debug)]
pub struct VolatileDisk {
    inner: Mutex<VolatileInner>,
}

#[derive(Debug)]
struct VolatileInner {
    durable: Vec<u8>,
    /// Sector writes since the last sync, oldest first: (sector index, bytes).
    pending: Vec<(u64, Vec<u8>)>,
    /// Syncs still allowed to succeed (`None`: all).
    syncs_left: Option<u64>,
    dead: bool,
}

/// Sector size of [`VolatileDisk`]: the unit a power loss keeps or loses.
pub const SECTOR_BYTES: u64 = 512;

impl VolatileDisk {
    /// An empty (zeroed) disk of `len` bytes, or one holding `image`.
    pub fn new(len: u64, image: Option<Vec<u8>>) -> VolatileDisk {
        let mut durable = image.unwrap_or_default();
        durable.resize(len as usize, 0);
        VolatileDisk {
            inner: Mutex::new(VolatileInner { durable, pending: Vec::new(), syncs_left: None, dead: false }),
        }
    }

    /// Lets `n` more syncs succeed; the one after loses power.
    pub fn fail_at_sync(&self, n: u64) {
        self.lock().syncs_left = Some(n);
    }

    /// Loses power now: the disk takes no more writes or syncs.
    pub fn power_off(&self) {
        self.lock().dead = true;
    }

    /// Whether the disk has lost power.
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// What the disk holds after a power loss: the synced bytes, then each sector written
    /// since for which `keep(i)` (i counting those sector writes from 0, oldest first) is
    /// true, applied in the order written.
    pub fn after_power_loss(&self, keep: &mut dyn FnMut(usize) -> bool) -> Vec<u8> {
        let g = self.lock();
        let mut image = g.durable.clone();
        for (i, (sector, bytes)) in g.pending.iter().enumerate() {
            if keep(i) {
                let at = (sector * SECTOR_BYTES) as usize;
                image[at..at + bytes.len()].copy_from_slice(bytes);
            }
        }
        image
    }

    /// Sector writes made since the last sync.
    pub fn pending_sectors(&self) -> usize {
        self.lock().pending.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VolatileInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn power_lost() -> std::io::Error {
    std::io::Error::other("power lost (VolatileDisk)")
}

impl DiskFile for VolatileDisk {
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut g = self.lock();
        if g.dead {
            return Err(power_lost());
        }
        if offset as usize + data.len() > g.durable.len() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "write past the disk's end"));
        }
        // Split into sectors (writes are page-aligned, so sector-aligned).
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let in_sector = (SECTOR_BYTES - at % SECTOR_BYTES) as usize;
            let n = in_sector.min(rest.len());
            let sector = at / SECTOR_BYTES;
            // A partial sector keeps the rest of the sector's newest bytes.
            let mut bytes = g.durable[(sector * SECTOR_BYTES) as usize..][..SECTOR_BYTES as usize].to_vec();
            for (s, b) in g.pending.iter().rev() {
                if *s == sector {
                    bytes.clone_from(b);
                    break;
                }
            }
            let skip = (at % SECTOR_BYTES) as usize;
            bytes[skip..skip + n].copy_from_slice(&rest[..n]);
            g.pending.push((sector, bytes));
            at += n as u64;
            rest = &rest[n..];
        }
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        let mut g = self.lock();
        if g.dead {
            return Err(power_lost());
        }
        if let Some(left) = g.syncs_left {
            if left == 0 {
                g.dead = true;
                return Err(power_lost());
            }
            g.syncs_left = Some(left - 1);
        }
        let pending = std::mem::take(&mut g.pending);
        for (sector, bytes) in pending {
            let at = (sector * SECTOR_BYTES) as usize;
            g.durable[at..at + bytes.len()].copy_from_slice(&bytes);
        }
        Ok(())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let g = self.lock();
        let at = offset as usize;
        let src =
            g.durable.get(at..at + buf.len()).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl DiskFile for std::sync::Arc<VolatileDisk> {
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.as_ref().write_at(offset, data)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.as_ref().sync_data()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.as_ref().read_at(offset, buf)
    }
}

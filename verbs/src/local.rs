//! Verbs on regions this process can address directly: heap regions (in-process backend)
//! or shared-memory files that every node process of a DC maps (cross-process backend).

use super::{Completion, DoorbellBatch, VerbCounters, Verbs, WorkRequest};
use crate::error::{Error, Result};
use crate::region::Region;
use redt_proto::{NodeId, Offset};
use rustc_hash::FxHashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Verbs over regions mapped in this process, one per node of the DC.
///
/// The atomics are real atomic instructions on the (possibly shared) mapping, so processes
/// mapping the same files see each other's atomics, and a node process can be killed and
/// restarted without the others noticing more than a pause.
pub struct LocalVerbs {
    regions: FxHashMap<NodeId, Arc<Region>>,
    /// Other nodes' shared files, mapped when first used ([`LocalVerbs::open_dc_shared`]).
    later: FxHashMap<NodeId, Later>,
    /// Where the disk images are, once [`LocalVerbs::attach_disk_images`] ran: a region mapped
    /// later gets its image then.
    disk: OnceLock<DiskDirs>,
    counters: VerbCounters,
}

/// Another node's shared MemStore file, mapped once its node has made it.
struct Later {
    /// The node's name, as errors name it.
    name: String,
    path: PathBuf,
    size_bytes: u64,
    mapped: OnceLock<Arc<Region>>,
    /// Held while mapping, so two verbs do not map (and attach) it twice.
    mapping: Mutex<()>,
}

/// The directories and file prefix of [`LocalVerbs::attach_disk_images`].
struct DiskDirs {
    shm_dir: PathBuf,
    disk_dir: PathBuf,
    prefix: String,
}

impl LocalVerbs {
    /// A backend over already-built regions (e.g. heap regions of an embedded cluster).
    pub fn new(regions: impl IntoIterator<Item = (NodeId, Arc<Region>)>) -> Self {
        LocalVerbs {
            regions: regions.into_iter().collect(),
            later: FxHashMap::default(),
            disk: OnceLock::new(),
            counters: VerbCounters::default(),
        }
    }

    /// The verbs of node `own` of a DC whose nodes share this host (the `shm` backend):
    /// its own shared file is mapped (created if absent, as
    /// [`LocalVerbs::open_shared`] does), and each node of `peers` (id, name) is mapped from
    /// its file the first time a verb or [`LocalVerbs::region`] needs it, once that node's
    /// process has created and sized it ([`LocalVerbs::map_existing`]). A node never creates
    /// another node's file: two hosts of one DC used to make a copy each of the other's, and
    /// nothing noticed. Until a peer's file is there, verbs to it fail with
    /// [`Error::Backend`] naming the peer, the file and the cause, as verbs to a peer that is
    /// down do over the network. Returns the backend and the peers whose files were not there
    /// yet.
    ///
    /// # Errors
    /// As [`LocalVerbs::open_shared`] for the own file and for peers' files that are there.
    pub fn open_dc_shared(
        dir: &Path,
        prefix: &str,
        own: NodeId,
        peers: impl IntoIterator<Item = (NodeId, String)>,
        size_bytes: u64,
    ) -> Result<(Self, Vec<(NodeId, String)>)> {
        let mut verbs = Self::open_shared(dir, prefix, [own], size_bytes)?;
        let mut missing = Vec::new();
        for (node, name) in peers {
            if node == own {
                continue;
            }
            let later = Later {
                name: name.clone(),
                path: shared_file(dir, prefix, node),
                size_bytes,
                mapped: OnceLock::new(),
                mapping: Mutex::new(()),
            };
            if let Some(region) = Self::map_existing(dir, prefix, node, size_bytes)? {
                let _ = later.mapped.set(region);
            } else {
                missing.push((node, name));
            }
            verbs.later.insert(node, later);
        }
        Ok((verbs, missing))
    }

    /// A backend over heap regions of `size_bytes` each for `nodes` (zeroed).
    pub fn in_process(nodes: impl IntoIterator<Item = NodeId>, size_bytes: u64) -> Self {
        Self::new(nodes.into_iter().map(|n| (n, Arc::new(Region::new_heap(size_bytes)))))
    }

    /// Maps (creating if absent) the shared-memory file of each of `nodes`, named
    /// `{dir}/{prefix}-node{N}.memstore`, each `size_bytes` long. A file that exists with
    /// a different size is an error, never truncated.
    ///
    /// A file is never opened through a symbolic link (`O_NOFOLLOW`), is created only if
    /// absent (`O_EXCL`, so a file another user plants between the two steps is not taken
    /// over) with mode 0600, and must be a regular file owned by this process's effective
    /// user; an existing one readable or writable by others is narrowed to 0600.
    ///
    /// # Errors
    /// [`Error::Io`] when a file cannot be created, sized or mapped;
    /// [`Error::Backend`] when an existing file has the wrong size, is a symbolic link, is
    /// not a regular file or belongs to another user.
    pub fn open_shared(
        dir: &Path,
        prefix: &str,
        nodes: impl IntoIterator<Item = NodeId>,
        size_bytes: u64,
    ) -> Result<Self> {
        let mut regions = Vec::new();
        for n in nodes {
            let path = shared_file(dir, prefix, n);
            regions.push((n, Arc::new(map_shared(&path, size_bytes)?)));
        }
        Ok(Self::new(regions))
    }

    /// Maps the shared-memory file of `node` (named as [`LocalVerbs::open_shared`] names it)
    /// if it exists and its creator has sized it to `size_bytes`; never creates or sizes it.
    /// This is how a node maps another node's file of its DC under the `shm` backend: each
    /// node creates only its own, so a missing file means its node has not started
    /// on this host yet (`Ok(None)`: wait, or refuse with a reason).
    ///
    /// The file is opened with the checks of [`LocalVerbs::open_shared`].
    ///
    /// # Errors
    /// As [`LocalVerbs::open_shared`], except that a missing or still empty file is
    /// `Ok(None)`.
    pub fn map_existing(dir: &Path, prefix: &str, node: NodeId, size_bytes: u64) -> Result<Option<Arc<Region>>> {
        let path = shared_file(dir, prefix, node);
        let Some(file) = open_file(&path, false)? else { return Ok(None) };
        Ok(map_file(&path, file, size_bytes, false)?.map(Arc::new))
    }

    /// The region of `node`, for local access by that node's own tasks (replay); a peer's of
    /// [`LocalVerbs::open_dc_shared`] once its file is there (mapped now if need be).
    pub fn region(&self, node: NodeId) -> Option<&Arc<Region>> {
        self.mapped(node).ok()
    }

    /// The region of `node`: built in, or a peer's file mapped now if its node has made it.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] for a node this backend does not reach; [`Error::Backend`] for
    /// a peer whose file is not there yet; as [`LocalVerbs::map_existing`] and
    /// [`LocalVerbs::attach_disk_images`] when mapping it fails.
    fn mapped(&self, node: NodeId) -> Result<&Arc<Region>> {
        if let Some(r) = self.regions.get(&node) {
            return Ok(r);
        }
        let later = self.later.get(&node).ok_or(Error::UnknownNode(node))?;
        if let Some(r) = later.mapped.get() {
            return Ok(r);
        }
        let _mapping = later.mapping.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = later.mapped.get() {
            return Ok(r);
        }
        let Some(file) = open_file(&later.path, false)? else {
            return Err(Error::Backend(format!(
                "{}'s MemStore file {} does not exist yet: with the shm backend {} creates it when it \
                 starts on this host (no other node creates it)",
                later.name,
                later.path.display(),
                later.name
            )));
        };
        let Some(region) = map_file(&later.path, file, later.size_bytes, false)? else {
            return Err(Error::Backend(format!(
                "{}'s MemStore file {} is still empty: {} is starting",
                later.name,
                later.path.display(),
                later.name
            )));
        };
        let region = Arc::new(region);
        if let Some(d) = self.disk.get() {
            attach_image(&d.shm_dir, &d.disk_dir, &d.prefix, node, &region)?;
        }
        Ok(later.mapped.get_or_init(|| region))
    }

    fn target(&self, node: NodeId, offset: Offset, len: u64) -> Result<&Region> {
        let r = self.mapped(node)?;
        if !r.contains(offset.0, len) {
            return Err(Error::OutOfBounds { node, offset, len, size: r.len() });
        }
        Ok(r)
    }

    fn atomic_target(&self, node: NodeId, offset: Offset) -> Result<&Region> {
        if offset.0 % 8 != 0 {
            return Err(Error::Unaligned { node, offset });
        }
        self.target(node, offset, 8)
    }

    fn execute(&self, node: NodeId, wr: &WorkRequest) -> Result<Completion> {
        Ok(match *wr {
            WorkRequest::Read { offset, len } => {
                let r = self.target(node, offset, len as u64)?;
                let mut buf = vec![0; len as usize];
                r.read(offset.0, &mut buf);
                self.counters.read(buf.len());
                Completion::Read(buf)
            }
            WorkRequest::Write { offset, ref data } => {
                self.target(node, offset, data.len() as u64)?.write(offset.0, data);
                self.counters.write(data.len());
                Completion::Written
            }
            WorkRequest::CompareAndSwap { offset, expected, new } => {
                let r = self.atomic_target(node, offset)?;
                self.counters.cas();
                Completion::Atomic(r.compare_and_swap(offset.0, expected, new))
            }
            WorkRequest::FetchAndAdd { offset, add } => {
                let r = self.atomic_target(node, offset)?;
                self.counters.faa();
                Completion::Atomic(r.fetch_and_add(offset.0, add))
            }
            WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask } => {
                let r = self.atomic_target(node, offset)?;
                self.counters.masked_cas();
                Completion::Atomic(r.masked_compare_and_swap(offset.0, compare, compare_mask, swap, swap_mask))
            }
            WorkRequest::MaskedFetchAndAdd { offset, add, boundary } => {
                let r = self.atomic_target(node, offset)?;
                self.counters.masked_faa();
                Completion::Atomic(r.masked_fetch_and_add(offset.0, add, boundary))
            }
            WorkRequest::Persist => {
                let r = self.mapped(node)?;
                if r.persistence().is_some() {
                    self.counters.persist();
                }
                r.sync()?;
                Completion::Written
            }
        })
    }

    fn single(&self, node: NodeId, wr: WorkRequest) -> Result<Completion> {
        let c = self.execute(node, &wr)?;
        self.counters.doorbell();
        Ok(c)
    }
}

impl LocalVerbs {
    /// Under `durability: disk`: gives each mapped region its disk image in `disk_dir`
    /// ([`crate::persist::image_file`]) and a dirty-page bitmap in a shared-memory file
    /// beside the region's own in `shm_dir` (`<region file>.dirty`), so every process of the
    /// host that writes the region marks the same bits (`persist.rs`). A peer's file of
    /// [`LocalVerbs::open_dc_shared`] not mapped yet gets its image when it is mapped. Call
    /// it once, before any verb. Returns, per node mapped now, whether its image file already
    /// held an image of this size.
    ///
    /// # Errors
    /// [`Error::Io`] naming a path; [`Error::Backend`] for a file of another size or owner.
    pub fn attach_disk_images(&self, shm_dir: &Path, disk_dir: &Path, prefix: &str) -> Result<Vec<(NodeId, bool)>> {
        let mut out = Vec::new();
        let later = self.later.iter().filter_map(|(n, l)| l.mapped.get().map(|r| (n, r)));
        for (&node, region) in self.regions.iter().chain(later) {
            out.push((node, attach_image(shm_dir, disk_dir, prefix, node, region)?));
        }
        // Peers' files mapped from now on get theirs when mapped.
        let dirs = DiskDirs { shm_dir: shm_dir.to_path_buf(), disk_dir: disk_dir.to_path_buf(), prefix: prefix.into() };
        let _ = self.disk.set(dirs);
        Ok(out)
    }
}

/// Attaches `node`'s disk image (in `disk_dir`) to `region`, with the dirty bitmap every
/// process of the host shares (beside the MemStore file in `shm_dir`). Returns whether the
/// image file already held an image of this size.
fn attach_image(shm_dir: &Path, disk_dir: &Path, prefix: &str, node: NodeId, region: &Region) -> Result<bool> {
    let mut bitmap_path = shared_file(shm_dir, prefix, node).into_os_string();
    bitmap_path.push(".dirty");
    let bitmap = map_shared(Path::new(&bitmap_path), crate::persist::bitmap_bytes(region.len()))?;
    let image = crate::persist::image_file(disk_dir, prefix, node);
    let (p, existed) = crate::persist::Persistence::open_file_with_bitmap(&image, region.len(), bitmap)?;
    region.attach(Arc::new(p))?;
    Ok(existed)
}

/// Path of the shared-memory file of `node`.
pub fn shared_file(dir: &Path, prefix: &str, node: NodeId) -> PathBuf {
    dir.join(format!("{prefix}-node{}.memstore", node.0))
}

/// Opens the private file at `path` (a MemStore file or its disk image) for reading and
/// writing, creating it if absent: [`open_file`] with `create`.
pub(crate) fn open_private_file(path: &Path) -> Result<File> {
    Ok(open_file(path, true)?.expect("open_file creates a missing file when asked to"))
}

/// Opens the MemStore file at `path` for reading and writing: an existing one without
/// following a symbolic link, else (with `create`) a new one created exclusively with mode
/// 0600; then checks that it is a regular file of this user and narrows its mode to 0600.
/// `Ok(None)`: the file does not exist and `create` is off.
fn open_file(path: &Path, create: bool) -> Result<Option<File>> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let io = |error| Error::Io { path: path.display().to_string(), error };
    let refuse = |why: String| Error::Backend(format!("{}: {why}", path.display()));
    let existing = || OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW).open(path);
    let opened = match existing() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
            {
                // Another process created it first (a restarted node racing its old self's
                // cleanup): open theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => existing(),
                other => other,
            }
        }
        other => other,
    };
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refuse("is a symbolic link; a MemStore file is never opened through one".into()))
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(refuse("is not a regular file".into()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(refuse(format!(
            "belongs to uid {}, not to this process's uid {me}: remove it or run as its owner",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        tracing::info!(path = %path.display(), "MemStore file was mode {:o}: narrowed to 0600", meta.mode() & 0o777);
    }
    Ok(Some(file))
}

/// Maps `file` (at `path`), which is `size_bytes` long or empty (then sized here when `size`
/// is on; `Ok(None)` otherwise: its creator has not sized it yet).
fn map_file(path: &Path, file: File, size_bytes: u64, size: bool) -> Result<Option<Region>> {
    let io = |error| Error::Io { path: path.display().to_string(), error };
    let len = file.metadata().map_err(io)?.len();
    if len == 0 && !size {
        return Ok(None);
    }
    if len == 0 {
        file.set_len(size_bytes).map_err(io)?;
    } else if len != size_bytes {
        return Err(Error::Backend(format!(
            "{}: shared MemStore file is {len} bytes, config says {size_bytes}; remove it or fix the config",
            path.display()
        )));
    }
    // SAFETY: the mapping is shared with other processes on purpose; this crate only ever
    // accesses it through atomic word operations (see `Region`), so concurrent changes by
    // other processes are not undefined behaviour for us.
    let map = unsafe { memmap2::MmapOptions::new().len(size_bytes as usize).map_mut(&file) }.map_err(io)?;
    Ok(Some(Region::from_mmap(map)))
}

fn map_shared(path: &Path, size_bytes: u64) -> Result<Region> {
    let file = open_private_file(path)?;
    Ok(map_file(path, file, size_bytes, true)?.expect("map_file sizes an empty file when asked to"))
}

impl Verbs for LocalVerbs {
    fn read(&self, node: NodeId, offset: Offset, buf: &mut [u8]) -> Result<()> {
        self.target(node, offset, buf.len() as u64)?.read(offset.0, buf);
        self.counters.read(buf.len());
        self.counters.doorbell();
        Ok(())
    }

    fn write(&self, node: NodeId, offset: Offset, data: &[u8]) -> Result<()> {
        self.target(node, offset, data.len() as u64)?.write(offset.0, data);
        self.counters.write(data.len());
        self.counters.doorbell();
        Ok(())
    }

    fn compare_and_swap(&self, node: NodeId, offset: Offset, expected: u64, new: u64) -> Result<u64> {
        match self.single(node, WorkRequest::CompareAndSwap { offset, expected, new })? {
            Completion::Atomic(v) => Ok(v),
            _ => unreachable!("an atomic work request completes with Atomic"),
        }
    }

    fn fetch_and_add(&self, node: NodeId, offset: Offset, add: u64) -> Result<u64> {
        match self.single(node, WorkRequest::FetchAndAdd { offset, add })? {
            Completion::Atomic(v) => Ok(v),
            _ => unreachable!("an atomic work request completes with Atomic"),
        }
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
        let wr = WorkRequest::MaskedCompareAndSwap { offset, compare, compare_mask, swap, swap_mask };
        match self.single(node, wr)? {
            Completion::Atomic(v) => Ok(v),
            _ => unreachable!("an atomic work request completes with Atomic"),
        }
    }

    fn masked_fetch_and_add(&self, node: NodeId, offset: Offset, add: u64, boundary: u64) -> Result<u64> {
        match self.single(node, WorkRequest::MaskedFetchAndAdd { offset, add, boundary })? {
            Completion::Atomic(v) => Ok(v),
            _ => unreachable!("an atomic work request completes with Atomic"),
        }
    }

    fn post_batch(&self, node: NodeId, batch: &mut DoorbellBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.counters.doorbell();
        for i in 0..batch.len() {
            let c = self.execute(node, &batch.requests()[i])?;
            batch.complete(i, c);
        }
        Ok(())
    }

    fn counters(&self) -> &VerbCounters {
        &self.counters
    }
}

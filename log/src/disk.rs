//! The disk seam: every file of a node's durable state (the WAL's
//! segments, the atomic small files: vote, purge mark, snapshots, cluster
//! id, node record) is created, written, synced, renamed, listed and read
//! through one [`Disk`].
//!
//! Production uses [`StdDisk`] (`std::fs`, real `fsync`). The deterministic
//! simulation installs a model of a disk once per process, before any node
//! starts: writes not yet synced are lost when it crashes a node, the last
//! one may be torn, a sync may fail and a disk may be full. The WAL's code
//! is the same either way; only what lies under these calls differs.
//!
//! Decision: a process-wide trait object, as the network seam
//! (`lockd_net::socket`) is, rather than a parameter threaded through the
//! log, the atomic files and every caller of them: a process runs on real
//! disks or on a simulated one, never both.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A file opened for writing.
pub trait DiskFile: Send + Sync {
    /// Write all of `bytes` at the end of what this handle wrote so far.
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Make what was written durable (`fdatasync`).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Make what was written and the file's metadata durable (`fsync`).
    fn sync_all(&mut self) -> io::Result<()>;
    /// Lay `bytes` zeros from where the next write goes, durably, and stay
    /// there: the writes after it overwrite them. Why: a sync after a write
    /// that grows the file must also record the new length (a journal
    /// commit on ext4); one that only overwrites need not, and takes about
    /// a third less time here (docs/performance.md, "The log's padding").
    fn reserve(&mut self, bytes: u64) -> io::Result<()>;
}

/// Something held while a directory is locked; dropping it unlocks.
pub trait Held: Send + Sync {}

impl Held for File {}

/// Where files live.
pub trait Disk: Send + Sync + 'static {
    /// Create `dir` and its missing ancestors (not yet durable: sync the
    /// parents).
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Whether `path` names a file or a directory.
    fn exists(&self, path: &Path) -> bool;
    /// The names in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>>;
    /// The whole content of the file at `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Open `path` for writing from its start: created if missing, emptied
    /// if present.
    fn create(&self, path: &Path) -> io::Result<Box<dyn DiskFile>>;
    /// Open the existing file at `path` to write after its end.
    fn append(&self, path: &Path) -> io::Result<Box<dyn DiskFile>>;
    /// Cut the file at `path` to `len` bytes, durably.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Rename `from` to `to`, replacing `to` (durable once the directory is
    /// synced).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Remove the file at `path` (durable once the directory is synced).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Make the creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Lock the file at `path` (created if missing) exclusively for as long
    /// as the returned value lives; `Ok(None)` when someone else holds it.
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn Held>>>;
}

/// The real disk: `std::fs`.
pub struct StdDisk;

impl DiskFile for File {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        Write::write_all(self, bytes)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn sync_all(&mut self) -> io::Result<()> {
        File::sync_all(self)
    }

    fn reserve(&mut self, bytes: u64) -> io::Result<()> {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let at = self.stream_position()?;
        let mut left = bytes;
        while left > 0 {
            let n = left.min(ZEROS.len() as u64) as usize;
            Write::write_all(self, &ZEROS[..n])?;
            left -= n as u64;
        }
        File::sync_data(self)?;
        self.seek(SeekFrom::Start(at)).map(|_| ())
    }
}

impl Disk for StdDisk {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(f))
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        // Not O_APPEND: [`DiskFile::reserve`] writes ahead of the next write.
        let mut f = OpenOptions::new().write(true).open(path)?;
        f.seek(SeekFrom::End(0))?;
        Ok(Box::new(f))
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn Held>>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Box::new(file))),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

static DISK: OnceLock<Arc<dyn Disk>> = OnceLock::new();

/// Make `disk` this process's, before any file is opened. `false` (and
/// nothing changes) if a disk was already chosen.
pub fn install(disk: Arc<dyn Disk>) -> bool {
    DISK.set(disk).is_ok()
}

/// The disk of this process ([`StdDisk`] unless [`install`]ed otherwise).
pub fn disk() -> &'static dyn Disk {
    DISK.get_or_init(|| Arc::new(StdDisk)).as_ref()
}

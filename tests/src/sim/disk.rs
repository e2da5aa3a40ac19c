//! A simulated disk behind lockd's disk seam (`lockd_log::disk`): the
//! nodes' files live in memory, and the model keeps apart what a running
//! node sees from what a crash leaves.
//!
//! * A file's bytes survive a crash only as of its last sync; of the
//!   writes after it (appends, or overwrites of the zeros the log lays
//!   ahead), a crash keeps a random prefix in byte order (a torn write),
//!   whose end may read back as zeros (blocks allocated, data never
//!   written).
//! * A name (a file created, renamed, removed; a directory made) survives
//!   a crash only once its directory was synced; an entry whose directory
//!   did not survive is gone with it.
//! * A disk can be made full (every write fails with "no space") or
//!   failing (every sync fails with an I/O error). Either stops the node
//!   that meets it: the log refuses writes after a failed one and
//!   openraft stops on a storage error. The nemesis then restarts the
//!   node on its disk as a crash left it.
//!
//! A sync takes no time here; the log's writer waits before each batch
//! instead (`super::nodes::log_writer`), so a crash can fall while a batch
//! waits. Not modelled: reads that fail, and bits that rot at rest (the
//! log's own tests damage real files for that).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use lockd_log::disk::{Disk, DiskFile, Held};

use super::coverage::Coverage;
use crate::jepsen::rng::Rng;

mod file;
mod inode;
use file::{Lock, SimFile};
use inode::Inode;

/// How a node's disk is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Broken {
    /// Every write fails: no space left.
    Full,
    /// Every sync fails with an I/O error.
    SyncFails,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Dir,
    File(usize),
}

#[derive(Default)]
struct State {
    inodes: Vec<Inode>,
    /// What running code sees.
    names: BTreeMap<PathBuf, Entry>,
    /// What a crash leaves: the names as of each directory's last sync.
    durable: BTreeMap<PathBuf, Entry>,
    locks: BTreeSet<PathBuf>,
    /// Broken disks, by node directory.
    broken: BTreeMap<PathBuf, Broken>,
    /// Node directories whose broken disk refused an operation.
    tripped: BTreeSet<PathBuf>,
    /// Torn writes, segments made and removed ([`super::coverage`]).
    coverage: Coverage,
}

/// The simulated disk of every node of a run.
#[derive(Default)]
pub struct SimDisk {
    state: Mutex<State>,
}

/// The root every run's node directories live under.
pub const ROOT: &str = "/sim";

/// Make the simulated disk this process's, empty but for [`ROOT`]. One run
/// at a time per process (the simulation's binary runs one seed per
/// process).
pub fn install() -> Arc<SimDisk> {
    let disk = this();
    let _ = lockd_log::disk::install(disk.clone());
    let mut s = disk.state();
    *s = State::default();
    s.names.insert(PathBuf::from("/"), Entry::Dir);
    s.durable.insert(PathBuf::from("/"), Entry::Dir);
    s.names.insert(PathBuf::from(ROOT), Entry::Dir);
    s.durable.insert(PathBuf::from(ROOT), Entry::Dir);
    drop(s);
    disk
}

/// The sequence number of a log segment's path (`0000000000000002.wal`).
fn segment_seq(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(".wal")?.parse().ok()
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl SimDisk {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Break the disk of the node whose files are under `dir`.
    pub fn break_disk(&self, dir: &Path, how: Broken) {
        self.state().broken.insert(dir.to_path_buf(), how);
    }

    /// What the disk saw: torn writes, log segments rotated and purged.
    pub fn coverage(&self) -> Coverage {
        self.state().coverage.clone()
    }

    /// Whether the node under `dir` met its broken disk.
    pub fn tripped(&self, dir: &Path) -> bool {
        self.state().tripped.contains(dir)
    }

    /// The node under `dir` crashed: what was not synced is lost, the
    /// appends after a file's last sync torn at a random point, and the
    /// disk mended (a node restarts on a working disk).
    pub fn crash(&self, dir: &Path, rng: &mut Rng) {
        let mut s = self.state();
        let s = &mut *s;
        s.broken.remove(dir);
        s.tripped.remove(dir);
        s.locks.retain(|p| !p.starts_with(dir));
        s.names.retain(|p, _| !p.starts_with(dir));
        let kept: Vec<(PathBuf, Entry)> = s
            .durable
            .range(dir.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(dir))
            .map(|(p, e)| (p.clone(), *e))
            .collect();
        for (path, entry) in kept {
            // An entry lives only if its directory does.
            let parent_lives = path
                .parent()
                .is_none_or(|d| s.names.get(d) == Some(&Entry::Dir) || !d.starts_with(dir));
            if !parent_lives {
                s.durable.remove(&path);
                continue;
            }
            if let Entry::File(i) = entry {
                let inode = &mut s.inodes[i];
                if let Some(before) = inode.before.take() {
                    inode.data = before;
                    inode.sync();
                } else {
                    let extra = inode.unsynced_bytes() as u64;
                    let torn = rng.below(extra + 1) as usize;
                    let zeros =
                        (torn > 0 && rng.below(4) == 0).then(|| rng.below(torn as u64) as usize);
                    inode.tear(torn, zeros);
                    if torn > 0 && (torn as u64) < extra {
                        s.coverage.add("disk.torn-write", 1);
                    }
                }
            }
            s.names.insert(path, entry);
        }
    }

    /// Fail with `how`'s error if the disk under `path` is broken that way.
    fn check(s: &mut State, path: &Path, how: Broken) -> io::Result<()> {
        let hit = s
            .broken
            .iter()
            .find(|(dir, b)| **b == how && path.starts_with(dir))
            .map(|(dir, _)| dir.clone());
        let Some(dir) = hit else { return Ok(()) };
        s.tripped.insert(dir);
        Err(match how {
            Broken::Full => io::Error::new(io::ErrorKind::StorageFull, "no space left on device"),
            Broken::SyncFails => io::Error::other("input/output error (simulated)"),
        })
    }

    fn parent_is_dir(s: &State, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(d) if s.names.get(d) == Some(&Entry::Dir) => Ok(()),
            _ => Err(not_found(path)),
        }
    }

    fn file(s: &State, path: &Path) -> io::Result<usize> {
        match s.names.get(path) {
            Some(Entry::File(i)) => Ok(*i),
            _ => Err(not_found(path)),
        }
    }
}

/// The process's simulated disk (its open files and locks hold it too).
fn this() -> Arc<SimDisk> {
    static DISK: OnceLock<Arc<SimDisk>> = OnceLock::new();
    DISK.get_or_init(Arc::default).clone()
}

impl Disk for SimDisk {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.state();
        for d in dir.ancestors().collect::<Vec<_>>().into_iter().rev() {
            match s.names.get(d) {
                Some(Entry::Dir) => {}
                Some(Entry::File(_)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{}: a file", d.display()),
                    ))
                }
                None => {
                    s.names.insert(d.to_path_buf(), Entry::Dir);
                }
            }
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        self.state().names.contains_key(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let s = self.state();
        if s.names.get(dir) != Some(&Entry::Dir) {
            return Err(not_found(dir));
        }
        Ok(s.names
            .range(dir.to_path_buf()..)
            .skip(1)
            .take_while(|(p, _)| p.starts_with(dir))
            .filter(|(p, _)| p.parent() == Some(dir))
            .filter_map(|(p, _)| p.file_name().map(|n| n.to_os_string()))
            .collect())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let s = self.state();
        let i = SimDisk::file(&s, path)?;
        Ok(s.inodes[i].data.clone())
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        let mut s = self.state();
        SimDisk::parent_is_dir(&s, path)?;
        let inode = match s.names.get(path) {
            Some(Entry::File(i)) => {
                let i = *i;
                s.inodes[i].empty();
                i
            }
            Some(Entry::Dir) => {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!("{}: a directory", path.display()),
                ))
            }
            None => {
                s.inodes.push(Inode::default());
                let i = s.inodes.len() - 1;
                s.names.insert(path.to_path_buf(), Entry::File(i));
                i
            }
        };
        Ok(Box::new(SimFile {
            disk: this(),
            inode,
            path: path.to_path_buf(),
            at: 0,
        }))
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        let s = self.state();
        let inode = SimDisk::file(&s, path)?;
        Ok(Box::new(SimFile {
            disk: this(),
            inode,
            path: path.to_path_buf(),
            at: s.inodes[inode].data.len(),
        }))
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut s = self.state();
        let i = SimDisk::file(&s, path)?;
        SimDisk::check(&mut s, path, Broken::SyncFails)?;
        let inode = &mut s.inodes[i];
        inode.data.truncate(len as usize);
        inode.sync();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state();
        SimDisk::parent_is_dir(&s, to)?;
        let i = SimDisk::file(&s, from)?;
        if segment_seq(to).is_some_and(|seq| seq > 1) {
            s.coverage.add("log.segment-rotated", 1);
        }
        s.names.remove(from);
        s.names.insert(to.to_path_buf(), Entry::File(i));
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state();
        SimDisk::file(&s, path)?;
        if segment_seq(path).is_some() {
            s.coverage.add("log.segment-purged", 1);
        }
        s.names.remove(path);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.state();
        if s.names.get(dir) != Some(&Entry::Dir) {
            return Err(not_found(dir));
        }
        SimDisk::check(&mut s, dir, Broken::SyncFails)?;
        let in_dir = |p: &Path| p.parent() == Some(dir);
        s.durable.retain(|p, _| !in_dir(p));
        let now: Vec<(PathBuf, Entry)> = s
            .names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, e)| (p.clone(), *e))
            .collect();
        s.durable.extend(now);
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn Held>>> {
        let mut s = self.state();
        SimDisk::parent_is_dir(&s, path)?;
        if !s.locks.insert(path.to_path_buf()) {
            return Ok(None);
        }
        Ok(Some(Box::new(Lock {
            disk: this(),
            path: path.to_path_buf(),
        })))
    }
}

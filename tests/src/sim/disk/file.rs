//! An open file of the simulated disk, and a held lock file.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use lockd_log::disk::{DiskFile, Held};

use super::{Broken, SimDisk};

pub(super) struct SimFile {
    pub(super) disk: Arc<SimDisk>,
    pub(super) inode: usize,
    pub(super) path: PathBuf,
    /// Where the next write goes.
    pub(super) at: usize,
}

impl DiskFile for SimFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut s = self.disk.state();
        SimDisk::check(&mut s, &self.path, Broken::Full)?;
        s.inodes[self.inode].write_at(self.at, bytes);
        self.at += bytes.len();
        Ok(())
    }

    fn reserve(&mut self, bytes: u64) -> io::Result<()> {
        let at = self.at;
        let zeros = vec![0; usize::try_from(bytes).map_err(io::Error::other)?];
        self.write_all(&zeros)?;
        self.sync_data()?;
        self.at = at;
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let mut s = self.disk.state();
        SimDisk::check(&mut s, &self.path, Broken::SyncFails)?;
        s.inodes[self.inode].sync();
        Ok(())
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.sync_data()
    }
}

pub(super) struct Lock {
    pub(super) disk: Arc<SimDisk>,
    pub(super) path: PathBuf,
}

impl Held for Lock {}

impl Drop for Lock {
    fn drop(&mut self) {
        self.disk.state().locks.remove(&self.path);
    }
}

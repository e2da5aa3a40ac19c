//! `lockd-log`: the durable write-ahead log under the Raft log store.
//!
//! # Layout
//!
//! * `lib.rs`: [`Wal`] (open, write a batch, purge, stats) and its options.
//! * [`disk`]: the disk seam ([`disk::Disk`], [`DiskFile`]): real files, or
//!   the simulation's disk that loses what was not synced.
//! * `segment`, `record`: the segment header and the records' framing
//!   (length, CRC32C); `record` also scans a segment and finds a valid
//!   record after a torn one within a budget.
//! * `recovery`: reading the segments back at open (torn tails cut,
//!   corruption named), `meta`: small files written atomically (the vote,
//!   the purge point), `error`: [`WalError`].
//!
//! May import: `std`, `crc32c`, `tracing`, `thiserror`; `lockd-core`
//! only for its test-only faults (feature `faults`). Nothing of Raft, the
//! lock service or the node: the payloads are opaque bytes.
//!
//! The WAL stores opaque payloads keyed by a `u64` log index. Each
//! [`Wal::write_batch`] call writes all of its [`WalOp`]s (appends and
//! truncates) as **one** checksummed record followed by **one** `fdatasync`,
//! and returns only once the batch is durable; a caller thread does group
//! commit on top by putting many appends into one batch. Opening a [`Wal`]
//! replays every record in order and hands back what survives as
//! [`Recovered`]. Everything is synchronous `std::fs`.
//!
//! The design follows etcd's WAL: a directory of numbered segment files,
//! length + CRC framed records, rotation to a new segment when the active
//! one grows past [`WalOptions::segment_bytes`], and deletion of whole old
//! segments once the state machine has a snapshot covering them.
//!
//! # Crash safety
//!
//! * Only the last record of the last segment can be torn by a crash (it is
//!   the only write not yet fsynced). Recovery cuts such a tail, reports it
//!   in [`Recovered::torn_tail`] and opens normally: the batch was never
//!   acknowledged.
//! * The last segment is laid with zeros ahead of its records (a sync that
//!   only overwrites is faster than one that grows the file,
//!   [`DiskFile::reserve`]). Zeros to the end of the last segment are that
//!   padding: recovery cuts them without a word. A segment is cut to its
//!   last record before the next one is created, so an older segment
//!   never ends in zeros.
//! * Any other record that fails verification is corruption of
//!   acknowledged data, and [`Wal::open`] fails with [`WalError::Corrupt`]
//!   naming the file and byte offset. Nothing is ever skipped silently.
//! * After a failed write or fsync a [`Wal`] refuses further writes
//!   ([`WalError::Poisoned`]): the page cache may no longer match the disk,
//!   so the only safe way on is to reopen, which re-verifies the files. The
//!   failed batch may or may not survive that reopen.
//!
//! # On-disk format
//!
//! A WAL directory holds `LOCK` (held with an exclusive file lock while a
//! [`Wal`] is open) and segments named by a zero-padded sequence number,
//! `0000000000000001.wal`, `0000000000000002.wal`, …, contiguous from the
//! oldest one not yet purged. All integers are little-endian.
//!
//! ```text
//! segment := header record* zero*        (zeros only in the last segment)
//! header  := "LOCKDWAL" | version: u32 (= 1) | seq: u64 | crc32c(previous 20 bytes): u32
//! record  := payload_len: u32 | crc32c(payload): u32 | payload        (payload_len <= 256 MiB)
//! payload := op_count: u32 (>= 1) | op*
//! op      := 0x01 | index: u64 | len: u32 | bytes[len]                 (Append)
//!          | 0x02 | since: u64                                         (Truncate: drop index >= since)
//! ```
//!
//! # Layout
//!
//! * `mod.rs`: the [`Wal`] handle: open, write, rotate, purge, stats.
//! * `record`: record framing, the batch encoding and the record scanner
//!   that classifies a bad record as torn tail or corruption.
//! * `segment`: segment names, the file header, listing the directory,
//!   durable creation of a new segment, per-segment index ranges.
//! * `recovery`: replaying the segments on open and the torn-tail rules.
//! * `meta`: [`write_atomic`] / [`read_atomic`], checksummed small files
//!   replaced atomically (the Raft vote, the purge mark, snapshots).
//! * `error`: [`WalError`].
//! * `tests`: the log as a whole, including files damaged the ways crashes
//!   and bad disks damage them.

pub mod disk;
mod error;
mod meta;
mod record;
mod recovery;
mod segment;
mod write;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use error::WalError;
pub use meta::{read_atomic, write_atomic};

use disk::{disk, DiskFile, Held};
use error::io_err;
use segment::{SegmentInfo, HEADER_LEN};

/// Name of the lock file inside a WAL directory.
const LOCK_FILE: &str = "LOCK";
/// Above this the encode buffer is released after a batch, so one huge
/// batch does not pin its size in memory for the life of the log.
const KEEP_BUFFER_BYTES: usize = 8 << 20;
/// How far ahead of its records the active segment is laid with zeros
/// (see [`DiskFile::reserve`]): one sync that grows the file per this many
/// bytes of records, instead of one per batch.
const RESERVE_BYTES: u64 = 1 << 20;

/// Tuning of a [`Wal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalOptions {
    /// Start a new segment file before the next batch once the active one
    /// has reached this many bytes. A segment can exceed it by one batch.
    pub segment_bytes: u64,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_bytes: 64 << 20,
        }
    }
}

/// One operation inside a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalOp<'a> {
    /// Store `payload` at `index` (replacing any earlier payload there).
    Append { index: u64, payload: &'a [u8] },
    /// Drop every entry with index `>= since`.
    Truncate { since: u64 },
}

/// What [`Wal::open`] found on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// What survives after replaying every append and truncate in order.
    /// Entries at or below the caller's purge mark may still be present (a
    /// segment is deleted only once all of it is purgeable): filter them.
    pub entries: BTreeMap<u64, Vec<u8>>,
    /// Set when a torn tail was found and cut.
    pub torn_tail: Option<TornTail>,
}

/// A torn final write that recovery cut away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The segment that was cut.
    pub file: PathBuf,
    /// Where the torn record started; the file's new length.
    pub offset: u64,
    /// How many bytes were removed.
    pub dropped_bytes: u64,
}

/// Counters since [`Wal::open`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Batches written (one record each).
    pub batches: u64,
    /// `fdatasync`s of batch data: exactly one per batch. The rarer syncs
    /// of segment creation and purge (file + directory) are not counted.
    pub fsyncs: u64,
    /// Ops written, over all batches.
    pub ops: u64,
    /// Record bytes written (framing included, segment headers excluded).
    pub bytes: u64,
}

/// An open write-ahead log. Holds the directory lock until dropped.
pub struct Wal {
    dir: PathBuf,
    opts: WalOptions,
    /// Every segment in order; the last is the active one.
    segments: Vec<SegmentInfo>,
    /// The last segment, opened to write after its last record.
    active: Box<dyn DiskFile>,
    /// The active segment's length on disk: its records, then zeros
    /// (`RESERVE_BYTES`) that the next records overwrite.
    reserved: u64,
    stats: WalStats,
    /// Why the log refuses writes, after a write or fsync failed.
    poisoned: Option<String>,
    /// Reused encode buffer.
    buf: Vec<u8>,
    _lock: Box<dyn Held>,
}

impl Wal {
    /// Open the log in `dir`, creating the directory if it is missing, and
    /// recover it (see the module documentation for the rules).
    pub fn open(dir: &Path, opts: WalOptions) -> Result<(Wal, Recovered), WalError> {
        create_dir_durably(dir)?;
        let lock = lock_dir(dir)?;
        let recovery::Outcome {
            mut segments,
            recovered,
        } = recovery::recover(dir)?;
        let active = match segments.last() {
            Some(last) => segment::open_for_append(&last.path)?,
            None => {
                let (file, path) = segment::create_segment(dir, 1)?;
                segments.push(SegmentInfo::new(1, path, HEADER_LEN as u64));
                file
            }
        };
        tracing::info!(
            dir = %dir.display(),
            segments = segments.len(),
            entries = recovered.entries.len(),
            torn_tail = recovered.torn_tail.is_some(),
            "opened WAL"
        );
        // Recovery cut the active segment after its last record.
        let reserved = segments.last().map_or(HEADER_LEN as u64, |s| s.len);
        let wal = Wal {
            dir: dir.to_path_buf(),
            opts,
            segments,
            active,
            reserved,
            stats: WalStats::default(),
            poisoned: None,
            buf: Vec::new(),
            _lock: lock,
        };
        Ok((wal, recovered))
    }

    /// Write all `ops` as one record, then `fdatasync` once. Returns only
    /// after the batch is durable. An empty batch writes nothing.
    ///
    /// A batch over the record size limit is refused with
    /// [`WalError::TooLarge`] before anything is written. Any other error
    /// poisons the log (see [`WalError::Poisoned`]).
    pub fn write_batch(&mut self, ops: &[WalOp<'_>]) -> Result<(), WalError> {
        self.check_usable()?;
        if ops.is_empty() {
            return Ok(());
        }
        record::encode_record(ops, record::MAX_PAYLOAD_LEN, &mut self.buf).map_err(|len| {
            WalError::TooLarge {
                file: self.active_path().to_path_buf(),
                len,
                max: record::MAX_PAYLOAD_LEN as u64,
            }
        })?;
        let result = self.append_encoded(ops);
        if self.buf.capacity() > KEEP_BUFFER_BYTES {
            self.buf = Vec::new();
        }
        if let Err(e) = &result {
            tracing::error!(error = %e, "WAL write failed; refusing further writes until reopened");
            self.poisoned = Some(e.to_string());
        }
        result
    }

    /// Delete whole segment files, oldest first, while every Append in the
    /// file has an index `<= upto`. The active segment is never deleted.
    /// Returns how many files were removed.
    ///
    /// Only a prefix of the log is deleted, so replaying what remains gives
    /// the same entries above `upto` as replaying everything.
    pub fn purge(&mut self, upto: u64) -> Result<usize, WalError> {
        self.check_usable()?;
        let mut removed = 0;
        while self.segments.len() > 1 && self.segments[0].all_at_or_below(upto) {
            disk()
                .remove_file(&self.segments[0].path)
                .map_err(io_err(&self.segments[0].path))?;
            let seg = self.segments.remove(0);
            // One directory sync per file keeps the deletions ordered, so a
            // crash can never leave a gap in the sequence.
            meta::sync_dir(&self.dir)?;
            tracing::debug!(file = %seg.path.display(), max_index = ?seg.max_index, upto, "purged WAL segment");
            removed += 1;
        }
        if removed > 0 {
            tracing::info!(removed, upto, "purged WAL segments");
        }
        Ok(removed)
    }

    /// Counters since open.
    pub fn stats(&self) -> WalStats {
        self.stats
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> WalOptions {
        self.opts
    }

    /// Paths of the segment files, oldest first; the last is the active one.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments.iter().map(|s| s.path.clone()).collect()
    }

    fn active_path(&self) -> &Path {
        self.segments.last().map_or(&self.dir, |s| &s.path)
    }

    fn check_usable(&self) -> Result<(), WalError> {
        match &self.poisoned {
            None => Ok(()),
            Some(reason) => Err(WalError::Poisoned {
                file: self.active_path().to_path_buf(),
                reason: reason.clone(),
            }),
        }
    }
}

impl fmt::Debug for Wal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.dir)
            .field("opts", &self.opts)
            .field("segments", &self.segments.len())
            .field("active", &self.active_path())
            .field("stats", &self.stats)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

/// Create `dir` (and missing ancestors) if needed, and make each new
/// directory entry durable by syncing its parent.
pub fn create_dir_durably(dir: &Path) -> Result<(), WalError> {
    let mut missing = Vec::new();
    let mut p = dir;
    while !disk().exists(p) {
        missing.push(p);
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent,
            _ => break,
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    disk().create_dir_all(dir).map_err(io_err(dir))?;
    for created in missing {
        meta::sync_dir(meta::parent_dir(created))?;
    }
    Ok(())
}

/// Take the exclusive lock on `dir`, so two `Wal`s never append to the same
/// files (it is released when the returned file is closed).
fn lock_dir(dir: &Path) -> Result<Box<dyn Held>, WalError> {
    let path = dir.join(LOCK_FILE);
    match disk().lock(&path) {
        Ok(Some(held)) => Ok(held),
        Ok(None) => Err(WalError::Locked { file: path }),
        Err(e) => Err(io_err(&path)(e)),
    }
}

//! `RaftLogStorage` over the on-disk log, with group commit.
//!
//! Entries are kept in memory (everything after the last purge: bounded by
//! the snapshot policy) so reads never touch the disk; the disk is for
//! durability and recovery. Appends are made readable at once and handed to
//! a **writer thread** that drains every append waiting in its queue, writes
//! them as one record and fsyncs once, then completes all their callbacks:
//! under load many appends share one fsync (see `fsyncs` vs `entries` in
//! [`LogStats`]). openraft acknowledges an entry only after its callback, so
//! nothing is acknowledged before it is durable.
//!
//! The vote is a separate small file written atomically (tmp, fsync, rename,
//! fsync dir) before `save_vote` returns. The purge point is a small file
//! too, written before whole segments are deleted.

use std::collections::BTreeMap;
use std::fmt::Debug;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};

use openraft::{AnyError, StorageIOError};
use tokio::sync::oneshot;

use super::{Entry, LogId, StorageError, Vote};
use lockd_log::{Wal, WalError, WalOptions};

mod storage;
mod writer;

use lockd_core::precompile::Precompiler;
use writer::{write, writer, Sink, WriteReq};
pub use writer::{SyncTime, Writer};

/// Counters of the log, for metrics and the benchmark.
#[derive(Default, Debug)]
pub struct LogStats {
    /// Entries appended since start.
    pub entries: AtomicU64,
    /// Records written (one per group-commit batch).
    pub batches: AtomicU64,
    /// fsyncs issued by the log (one per batch).
    pub fsyncs: AtomicU64,
    /// Bytes written to the log since start (records and their framing).
    pub bytes: AtomicU64,
    /// Torn tails cut when the log was opened (0 or 1 per process).
    pub torn_tails_cut: AtomicU64,
    /// How long each group-commit record took to write and fsync.
    pub fsync_latency: crate::telemetry::Latency,
    /// Each entry stamped as taken and as synced, and the commit index
    /// (`telemetry::stages`).
    pub stages: Arc<crate::telemetry::Stages>,
}

struct Shared {
    entries: RwLock<BTreeMap<u64, Entry>>,
    purged: RwLock<Option<LogId>>,
    committed: Mutex<Option<LogId>>,
    vote: Mutex<Option<Vote>>,
    stats: LogStats,
}

/// The log store openraft owns; its reader is a clone.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
    tx: Sink,
    dir: PathBuf,
    /// Modules in upgrade and shadow entries start compiling on append.
    precompiler: Option<Arc<Precompiler>>,
}

#[derive(Debug, thiserror::Error)]
pub enum LogOpenError {
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error("log entry {index} in {dir} does not decode: {reason}")]
    BadEntry {
        dir: String,
        index: u64,
        reason: String,
    },
    #[error("{path} does not decode: {reason}")]
    BadMeta { path: String, reason: String },
    #[error("cannot start the log writer: {0}")]
    Writer(std::io::Error),
}

impl LogStore {
    /// Open (and recover) the log in `dir`.
    pub fn open(
        dir: &Path,
        options: WalOptions,
        precompiler: Option<Arc<Precompiler>>,
        by: Writer,
        stages: Arc<crate::telemetry::Stages>,
    ) -> Result<LogStore, LogOpenError> {
        let (wal, recovered) = Wal::open(&dir.join("wal"), options)?;
        let torn_tails_cut = u64::from(recovered.torn_tail.is_some());
        if let Some(t) = &recovered.torn_tail {
            tracing::warn!(file = %t.file.display(), offset = t.offset, dropped = t.dropped_bytes, "cut a torn tail from the log (an unacknowledged batch)");
        }
        let purged: Option<LogId> = read_meta(&dir.join("purged"))?;
        let vote: Option<Vote> = read_meta(&dir.join("vote"))?;
        let mut entries = BTreeMap::new();
        for (index, bytes) in recovered.entries {
            if purged.is_some_and(|p| index <= p.index) {
                continue;
            }
            let entry: Entry =
                postcard::from_bytes(&bytes).map_err(|e| LogOpenError::BadEntry {
                    dir: dir.display().to_string(),
                    index,
                    reason: e.to_string(),
                })?;
            entries.insert(index, entry);
        }
        tracing::info!(entries = entries.len(), purged = ?purged, vote = ?vote, "opened log");
        let shared = Arc::new(Shared {
            entries: RwLock::new(entries),
            purged: RwLock::new(purged),
            committed: Mutex::new(None),
            vote: Mutex::new(vote),
            stats: LogStats {
                stages,
                torn_tails_cut: AtomicU64::new(torn_tails_cut),
                ..LogStats::default()
            },
        });
        let tx = match by {
            Writer::Thread => {
                let (tx, rx) = mpsc::channel();
                let writer_shared = shared.clone();
                std::thread::Builder::new()
                    .name("wal-writer".into())
                    .spawn(move || writer(wal, rx, writer_shared))
                    .map_err(LogOpenError::Writer)?;
                Sink::Thread(tx)
            }
            Writer::Inline => Sink::Inline(Arc::new(Mutex::new(wal))),
            Writer::Task(sync_time) => {
                let runtime = tokio::runtime::Handle::try_current()
                    .map_err(|e| LogOpenError::Writer(std::io::Error::other(e)))?;
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                runtime.spawn(writer::task_writer(wal, rx, shared.clone(), sync_time));
                Sink::Task(tx)
            }
        };
        Ok(LogStore {
            shared,
            tx,
            dir: dir.to_path_buf(),
            precompiler,
        })
    }

    pub fn stats(&self) -> &LogStats {
        &self.shared.stats
    }

    /// The id of the last entry in the log (or of the last purged one),
    /// as openraft's `get_log_state` reports it; a pre-vote compares it
    /// (`raft::prevote`).
    pub fn last_log_id(&self) -> Option<LogId> {
        let last = self
            .shared
            .entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .next_back()
            .map(|e| e.log_id);
        last.or(*self.shared.purged.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Forget that this node (`id`) led: a committed vote of its own, as
    /// read back at start, is handed to openraft as an uncommitted one
    /// (the same term, the same choice), so a restarted leader starts as a
    /// follower and must win an election under a new term.
    ///
    /// Why: a leader replicates while its own sync runs (openraft is
    /// patched for it, vendor/openraft/PATCHED.md), so a quorum of
    /// followers may commit an entry that the leader's disk lost in a
    /// crash. Restored as its term's leader (what openraft 0.9 does with a
    /// committed vote of its own), it would write other entries under the
    /// log ids its followers already hold, and they would take them for
    /// the same. Under a new term its entries have new ids, and its
    /// election needs a quorum whose logs are no longer than its own.
    /// Safety is unchanged: a vote remembers whom a term was given to, and
    /// that is kept.
    pub fn forget_leadership(&self, id: super::NodeId) {
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().restore_leader {
            return;
        }
        let mut vote = self.shared.vote.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = vote.as_mut() {
            if v.is_committed() && v.leader_id().voted_for() == Some(id) {
                tracing::info!(vote = %v, "this node led before it stopped: it stands again under a new term");
                *v = Vote::new(v.leader_id().term, id);
            }
        }
    }

    /// Every entry held (all after the last purge), as its log id and
    /// its bytes as the log writes them.
    pub fn entries_encoded(&self) -> Vec<(LogId, Vec<u8>)> {
        let entries = self
            .shared
            .entries
            .read()
            .unwrap_or_else(|p| p.into_inner());
        entries
            .values()
            // An entry that would not encode was refused at its append.
            .map(|e| (e.log_id, postcard::to_allocvec(e).unwrap_or_default()))
            .collect()
    }

    /// The last committed log id openraft reported.
    pub fn committed(&self) -> Option<LogId> {
        *self
            .shared
            .committed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Hand a request to the writer thread and wait until it is durable.
    async fn round_trip(
        &self,
        req: impl FnOnce(oneshot::Sender<Result<(), String>>) -> WriteReq,
    ) -> Result<(), StorageError> {
        let (done, wait) = oneshot::channel();
        self.send(req(done))?;
        wait.await
            .map_err(|_| AnyError::error("the log writer thread has stopped"))
            .and_then(|r| r.map_err(AnyError::error))
            .map_err(|e| StorageIOError::write_logs(e).into())
    }

    fn send(&self, req: WriteReq) -> Result<(), StorageError> {
        match &self.tx {
            Sink::Thread(tx) => tx.send(req).map_err(|_| {
                StorageIOError::write_logs(AnyError::error("the log writer thread has stopped"))
                    .into()
            }),
            Sink::Task(tx) => tx.send(req).map_err(|_| {
                StorageIOError::write_logs(AnyError::error("the log writer task has stopped"))
                    .into()
            }),
            Sink::Inline(wal) => {
                write(
                    &mut wal.lock().unwrap_or_else(|p| p.into_inner()),
                    &self.shared,
                    req,
                );
                Ok(())
            }
        }
    }
}

/// Read a small postcard-encoded meta file (vote, purge point), if present.
pub fn read_meta<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, LogOpenError> {
    match lockd_log::read_atomic(path)? {
        None => Ok(None),
        Some(bytes) => postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| LogOpenError::BadMeta {
                path: path.display().to_string(),
                reason: e.to_string(),
            }),
    }
}

#[cfg(test)]
mod tests;

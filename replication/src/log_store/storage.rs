//! openraft's storage traits over [`LogStore`]: reading entries, and the
//! vote, the commit index, appends, truncation and purges, each carried
//! out by the writer ([`super::writer`]).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, EntryPayload, RaftLogReader, StorageIOError};

use super::writer::WriteReq;
use super::LogStore;
use crate::{Entry, LogId, StorageError, TypeConfig, Vote};

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let entries = self
            .shared
            .entries
            .read()
            .unwrap_or_else(|p| p.into_inner());
        Ok(in_range(&entries, range))
    }
}

/// The entries in `range`, cloned: the run of consecutive indexes from the
/// range's start, so the answer is always a prefix of what was asked.
/// openraft's replication takes the first entry it gets to be the one at
/// the start and sends it after the entry before the start: an answer that
/// began later (the start purged meanwhile by a snapshot) put a gap in a
/// follower's log (found by the simulation). Nothing, for a purged start,
/// is what openraft handles: it sends that follower a snapshot instead.
/// A range that holds no index (inverted, or empty at either end) yields
/// none, where `BTreeMap::range` would panic; a node whose log lost entries
/// can be asked for one like that, and its own checks then stop it.
pub(super) fn in_range(entries: &BTreeMap<u64, Entry>, range: impl RangeBounds<u64>) -> Vec<Entry> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let lo = match range.start_bound() {
        Included(&a) => Some(a),
        Excluded(&a) => a.checked_add(1),
        // From the first there is.
        Unbounded => entries.keys().next().copied(),
    };
    let hi = match range.end_bound() {
        Included(&b) => Some(b),
        Excluded(&b) => b.checked_sub(1),
        Unbounded => Some(u64::MAX),
    };
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo <= hi => entries
            .range(lo..=hi)
            .zip(lo..)
            .take_while(|((index, _), want)| **index == *want)
            .map(|((_, e), _)| e.clone())
            .collect(),
        _ => Vec::new(),
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let purged = *self.shared.purged.read().unwrap_or_else(|p| p.into_inner());
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: self.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let bytes = postcard::to_allocvec(vote)
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)))?;
        let path = self.dir.join("vote");
        crate::state_machine::off_runtime(|| lockd_log::write_atomic(&path, &bytes))
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)))?;
        *self.shared.vote.lock().unwrap_or_else(|p| p.into_inner()) = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(*self.shared.vote.lock().unwrap_or_else(|p| p.into_inner()))
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        *self
            .shared
            .committed
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = committed;
        if let Some(c) = committed {
            self.shared.stats.stages.committed(c.index);
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.committed())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut encoded = Vec::new();
        let mut modules = Vec::new();
        {
            let mut log = self
                .shared
                .entries
                .write()
                .unwrap_or_else(|p| p.into_inner());
            for entry in entries {
                let bytes = postcard::to_allocvec(&entry).map_err(|e| {
                    StorageIOError::write_log_entry(entry.log_id, AnyError::new(&e))
                })?;
                encoded.push((entry.log_id.index, bytes));
                if let EntryPayload::Normal(r) = &entry.payload {
                    if let Some(m) = r.module_bytes() {
                        modules.push(m.to_vec());
                    }
                }
                log.insert(entry.log_id.index, entry);
            }
        }
        self.shared
            .stats
            .stages
            .appended(encoded.iter().map(|(index, _)| *index));
        // Outside the lock: hashing and spawning a compile do not hold up
        // readers of the log.
        if let Some(p) = &self.precompiler {
            for m in &modules {
                p.prepare(m);
            }
        }
        self.send(WriteReq::Append {
            entries: encoded,
            callback,
        })
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(since = log_id.index, "truncate log");
        self.shared
            .entries
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .split_off(&log_id.index);
        self.round_trip(|done| WriteReq::Truncate {
            since: log_id.index,
            done,
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(upto = log_id.index, "purge log");
        let bytes = postcard::to_allocvec(&log_id)
            .map_err(|e| StorageIOError::write_logs(AnyError::new(&e)))?;
        let path = self.dir.join("purged");
        crate::state_machine::off_runtime(|| lockd_log::write_atomic(&path, &bytes))
            .map_err(|e| StorageIOError::write_logs(AnyError::new(&e)))?;
        *self
            .shared
            .purged
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(log_id);
        {
            let mut log = self
                .shared
                .entries
                .write()
                .unwrap_or_else(|p| p.into_inner());
            let keep = log.split_off(&(log_id.index + 1));
            *log = keep;
        }
        self.round_trip(|done| WriteReq::Purge {
            upto: log_id.index,
            done,
        })
        .await
    }
}

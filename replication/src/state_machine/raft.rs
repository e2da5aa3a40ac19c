//! openraft's storage traits on [`StateMachineStore`]: the applied state,
//! applying committed ranges, and receiving, installing and building
//! snapshots.

use std::io::Cursor;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::RaftSnapshotBuilder;

use super::{off_runtime, sm_err, StateMachineStore};
use crate::{
    convert, Entry, LogId, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok(self.with(|r| {
            let membership = convert::to_stored_membership(r.membership().clone());
            (r.last_applied().map(convert::to_log_id), membership)
        }))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        // Off the runtime only when an entry may run long (one carrying a
        // module: a migration, a shadow's start): handing the worker off costs more than a whole
        // batch of lock commands, which is bounded (see
        // `replica::capacity::MAX_COMMANDS_PER_CALL`).
        let entries: Vec<Entry> = entries.into_iter().collect();
        let first = entries.first().map(|e| e.log_id.index);
        let last = entries.last().map(|e| e.log_id.index);
        // A rollback swaps without carrying a module; so may a batch that
        // reaches the index where the active module would be left for the
        // previous one (lockd_core::way_back, "On failure").
        let long = entries.iter().any(
            |e| matches!(&e.payload, openraft::EntryPayload::Normal(r) if r.module_bytes().is_some() || r.swaps_module()),
        ) || matches!((first, last), (Some(a), Some(b)) if self.with(|r| r.may_fall_back(a, b)));
        // Only a long batch can swap: lock batches are walked once.
        let swap = long
            && entries.iter().any(
                |e| matches!(&e.payload, openraft::EntryPayload::Normal(r) if r.swaps_module()),
            );
        let started = std::time::Instant::now();
        let applied = if long {
            off_runtime(|| {
                self.replica()
                    .apply(entries.into_iter().map(convert::entry))
            })
            .map_err(sm_err)
        } else {
            self.replica()
                .apply(entries.into_iter().map(convert::entry))
                .map_err(sm_err)
        };
        let l = self.latency();
        l.apply.since(started);
        if let (Some(a), Some(b)) = (first, last) {
            l.stages.applied(a..=b);
        }
        if swap {
            l.swap.since(started);
        }
        if let Some(first) = first {
            self.publish_changes(first);
        }
        applied
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        off_runtime(|| self.install_blob(meta, bytes))
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.current().as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.as_ref().clone())),
        }))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        off_runtime(|| self.build())
    }
}

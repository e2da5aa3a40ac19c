//! Building and installing snapshots, and what they cost (status and
//! `/metrics` show the last of each).

use std::io::Cursor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use openraft::storage::Snapshot;

use super::{sm_err, snap_err, StateMachineStore};
use crate::snapshot::{self, SnapshotBlob};
use crate::{convert, SnapshotMeta, StorageError, TypeConfig};
use lockd_core::replica::Replica;

/// What this node did with snapshots since it started.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotStats {
    pub built: u64,
    pub installed: u64,
    /// Bytes of the last snapshot built or installed.
    pub last_bytes: u64,
    /// The last log index it covers.
    pub last_index: u64,
    /// How long building the last snapshot took (guest call, encoding and
    /// fsync), µs.
    pub last_build_us: u64,
    /// How long installing the last snapshot from a leader took (decoding,
    /// the guest's restore, fsync), µs.
    pub last_install_us: u64,
    /// The guest state's bytes in the last snapshot.
    pub last_state_bytes: u64,
}

impl StateMachineStore {
    /// Snapshots built and installed since start, and what the last cost.
    pub fn snapshot_stats(&self) -> SnapshotStats {
        let s = &self.shared;
        SnapshotStats {
            built: s.snapshots_built.load(Ordering::Relaxed),
            installed: s.snapshots_installed.load(Ordering::Relaxed),
            last_bytes: s.last_snapshot_bytes.load(Ordering::Relaxed),
            last_index: s.last_snapshot_index.load(Ordering::Relaxed),
            last_build_us: s.last_build_us.load(Ordering::Relaxed),
            last_install_us: s.last_install_us.load(Ordering::Relaxed),
            last_state_bytes: s.last_state_bytes.load(Ordering::Relaxed),
        }
    }

    /// Record the snapshot now current (built or installed): its index,
    /// size and state size, and how long it took into `took`.
    fn record(
        &self,
        meta: &SnapshotMeta,
        bytes: usize,
        state_bytes: usize,
        took: &AtomicU64,
        started: Instant,
    ) -> u64 {
        let s = &self.shared;
        let us = started.elapsed().as_micros() as u64;
        took.store(us, Ordering::Relaxed);
        s.last_snapshot_bytes.store(bytes as u64, Ordering::Relaxed);
        s.last_state_bytes
            .store(state_bytes as u64, Ordering::Relaxed);
        let index = meta.last_log_id.map_or(0, |l| l.index);
        s.last_snapshot_index.store(index, Ordering::Relaxed);
        us / 1000
    }
}

impl StateMachineStore {
    /// Install a snapshot received from the leader (blocking: see
    /// [`super::off_runtime`]).
    pub(super) fn install_blob(
        &self,
        meta: &SnapshotMeta,
        bytes: Vec<u8>,
    ) -> Result<(), StorageError> {
        let started = Instant::now();
        let blob = SnapshotBlob::decode(&bytes).map_err(|e| snap_err(Some(meta), e))?;
        if blob.meta.last_log_id != meta.last_log_id.map(convert::log_id) {
            return Err(snap_err(
                Some(meta),
                "snapshot body names a different last log id than its metadata",
            ));
        }
        // A module this node cannot run: it stops rather than run it
        // (lockd_core::replica, "Cannot run").
        let index = meta.last_log_id.map_or(0, |l| l.index);
        self.replica()
            .runnable_snapshot(index, &blob.module)
            .map_err(|e| snap_err(Some(meta), e))?;
        // Build the new state fully before touching the live one.
        let loader = self.shared.precompiler.clone();
        let mut installed =
            Replica::from_snapshot(self.shared.id, loader, &blob, self.shared.audit_interval)
                .map_err(|e| snap_err(Some(meta), e))?;
        let hash = installed
            .state_hash()
            .map_err(|e| snap_err(Some(meta), e))?;
        // The file and `current` change together, under `current`'s lock
        // (see `build`).
        let mut current = self.current();
        snapshot::write(&self.shared.dir, &bytes).map_err(|e| snap_err(Some(meta), e))?;
        let n = bytes.len();
        let mut r = self.replica();
        r.install(installed, hash);
        *current = Some((meta.clone(), Arc::new(bytes)));
        drop(current);
        let s = &self.shared;
        let ms = self.record(meta, n, blob.guest_state.len(), &s.last_install_us, started);
        s.snapshots_installed.fetch_add(1, Ordering::Relaxed);
        if let Some(hub) = s.watch.get() {
            hub.restart_at(meta.last_log_id.map_or(0, |l| l.index), true);
        }
        tracing::info!(node = s.id, term = meta.last_log_id.map(|l| l.leader_id.term), index = meta.last_log_id.map(|l| l.index), module = %r.module_hash(), bytes = n, ms, "installed snapshot from leader");
        Ok(())
    }
}

impl StateMachineStore {
    /// Build and store a snapshot of the state now (blocking: see
    /// [`super::off_runtime`]).
    /// The applied state as a snapshot file's bytes, for a backup: built
    /// like [`StateMachineStore::build`] but neither stored nor counted.
    /// Returns the index it is the state at.
    pub fn export(&self) -> Result<(u64, Vec<u8>), String> {
        let blob = {
            let mut r = self.replica();
            let index = r.last_applied().map_or(0, |l| l.index);
            let meta = r.snapshot_meta(format!("backup-{index}"));
            r.snapshot_blob(meta).map_err(|e| e.to_string())?
        };
        let index = blob.meta.last_log_id.map_or(0, |l| l.index);
        Ok((index, blob.encode().map_err(|e| e.to_string())?))
    }

    pub(super) fn build(&self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let started = Instant::now();
        // Counted once built: a waiter on the count then sees its figures.
        let n = self.shared.snapshots_built.load(Ordering::Relaxed) + 1;
        // Only the guest's snapshot call holds the replica's lock: encoding
        // and writing the file (hundreds of ms for a big table) happen
        // while the node applies on. With a million locks, holding it
        // throughout cost serving up to 40 % in rounds with a build
        // (`scale-bench`).
        let (meta, blob) = {
            let mut r = self.replica();
            let snapshot_id = match r.last_applied() {
                Some(l) => format!("{}-{}-{n}", l.leader_id.term, l.index),
                None => format!("0-0-{n}"),
            };
            let meta = r.snapshot_meta(snapshot_id);
            let blob = r.snapshot_blob(meta.clone()).map_err(sm_err)?;
            (convert::to_snapshot_meta(meta), blob)
        };
        let state_bytes = blob.guest_state.len();
        let bytes = blob.encode().map_err(|e| snap_err(None, e))?;
        drop(blob);
        // One writer of the file at a time: `current`'s lock. A snapshot
        // installed from the leader while this one was encoded is newer:
        // it stays, on disk and in memory, and is the answer.
        let mut current = self.current();
        if let Some((newer, newer_bytes)) = current
            .as_ref()
            .filter(|(m, _)| m.last_log_id > meta.last_log_id)
        {
            return Ok(Snapshot {
                meta: newer.clone(),
                snapshot: Box::new(Cursor::new(newer_bytes.as_ref().clone())),
            });
        }
        snapshot::write(&self.shared.dir, &bytes).map_err(|e| snap_err(Some(&meta), e))?;
        let s = &self.shared;
        let ms = self.record(&meta, bytes.len(), state_bytes, &s.last_build_us, started);
        s.snapshots_built.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            node = s.id,
            term = meta.last_log_id.map(|l| l.leader_id.term),
            index = meta.last_log_id.map(|l| l.index),
            bytes = bytes.len(),
            ms,
            "built snapshot"
        );
        let bytes = Arc::new(bytes);
        *current = Some((meta.clone(), bytes.clone()));
        drop(current);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes.as_ref().clone())),
        })
    }
}

//! The openraft state-machine adapter around a [`Replica`].
//!
//! openraft hands every committed range to
//! [`StateMachineStore::apply`](StateMachineStore#method.apply),
//! which passes it to the replica (one guest call per range; see
//! [`lockd_core::replica`]). The guest state lives only in wasm memory;
//! durability comes from snapshots plus the log: on start the last snapshot
//! is restored and openraft re-applies the log after it. The current
//! snapshot is kept on disk ([`super::snapshot`], `snapshot/current`, written
//! atomically) and in memory for sending to peers.
//!
//! Everything else reads the replica through the query methods here, each
//! under the state lock for one short call.

mod queries;
mod raft;
mod snapshots;

pub use snapshots::SnapshotStats;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use lockd_core::builtin::InitialModule;
use lockd_proto::{AuditReport, DivergenceSeen};
use openraft::{AnyError, StorageIOError};

use super::snapshot::{self, SnapshotFileError};
use super::{convert, SnapshotMeta, StorageError};
use lockd_core::engine::{EngineError, WasmEngine};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::{Replica, ReplicaView};

use crate::watch::WatchHub;

struct SmShared {
    id: u64,
    precompiler: Arc<Precompiler>,
    audit_interval: u64,
    /// What a new cluster records as its first module.
    first_module: InitialModule,
    dir: PathBuf,
    replica: Mutex<Replica>,
    /// The last snapshot built or installed, for sending to peers.
    current: Mutex<Option<(SnapshotMeta, Arc<Vec<u8>>)>>,
    snapshots_built: AtomicU64,
    snapshots_installed: AtomicU64,
    /// The last snapshot built or installed: its size, and how long the
    /// last build and the last install took (µs).
    last_snapshot_bytes: AtomicU64,
    last_snapshot_index: AtomicU64,
    last_build_us: AtomicU64,
    last_install_us: AtomicU64,
    /// The guest state's bytes in the last snapshot built or installed:
    /// what [`super::snapshot_policy`] weighs the log against.
    last_state_bytes: AtomicU64,
    divergences: AtomicU64,
    last_divergence: Mutex<Option<DivergenceSeen>>,
    latency: SmLatency,
    /// Where applied changes go for watchers, once attached.
    watch: OnceLock<Arc<WatchHub>>,
}

/// How long applies and module swaps take, for metrics.
#[derive(Default)]
pub struct SmLatency {
    /// Each batch of committed entries openraft hands over.
    pub apply: crate::telemetry::Latency,
    /// Each batch that carried an upgrade: the pause a swap costs
    /// (validation, migration, swap).
    pub swap: crate::telemetry::Latency,
    /// The stamps and stages of each write (shared with the log store
    /// and the proposer).
    pub stages: Arc<crate::telemetry::Stages>,
}

/// The handle openraft owns; clones share the same state.
#[derive(Clone)]
pub struct StateMachineStore {
    shared: Arc<SmShared>,
}

fn sm_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

fn snap_err(meta: Option<&SnapshotMeta>, e: impl ToString) -> StorageError {
    StorageIOError::write_snapshot(meta.map(|m| m.signature()), AnyError::error(e)).into()
}

#[derive(Debug, thiserror::Error)]
pub enum SmOpenError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotFileError),
    #[error("cannot create {path}: {reason}")]
    Dir { path: String, reason: String },
    #[error("module of snapshot {path}: {source}")]
    Module { path: String, source: EngineError },
    #[error("built-in module: {0}")]
    Builtin(EngineError),
}

impl StateMachineStore {
    /// Open the state machine in `dir`: restore the last snapshot if there is
    /// one, otherwise start empty on `initial_module`.
    pub fn open(
        id: u64,
        precompiler: Arc<Precompiler>,
        dir: &Path,
        initial_module: &[u8],
        first_module: InitialModule,
        audit_interval: u64,
    ) -> Result<StateMachineStore, SmOpenError> {
        let engine = precompiler.engine().clone();
        lockd_log::create_dir_durably(dir).map_err(|e| SmOpenError::Dir {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let loader = precompiler.clone();
        let mut state_bytes = 0;
        let (replica, current) = match snapshot::read_blob(dir)? {
            Some((blob, bytes)) => {
                let replica = Replica::from_snapshot(id, loader, &blob, audit_interval).map_err(
                    |source| SmOpenError::Module {
                        path: dir.join("current").display().to_string(),
                        source,
                    },
                )?;
                tracing::info!(last_log_id = ?blob.meta.last_log_id, module = %replica.module_hash(), "restored state machine from snapshot");
                state_bytes = blob.guest_state.len() as u64;
                (
                    replica,
                    Some((convert::to_snapshot_meta(blob.meta), Arc::new(bytes))),
                )
            }
            None => {
                let module = engine.load(initial_module).map_err(SmOpenError::Builtin)?;
                let replica = Replica::new(id, loader, module, audit_interval)
                    .map_err(SmOpenError::Builtin)?;
                (replica, None)
            }
        };
        Ok(StateMachineStore {
            shared: Arc::new(SmShared {
                id,
                precompiler,
                audit_interval,
                first_module,
                dir: dir.to_path_buf(),
                replica: Mutex::new(replica),
                current: Mutex::new(current),
                snapshots_built: AtomicU64::new(0),
                snapshots_installed: AtomicU64::new(0),
                last_snapshot_bytes: AtomicU64::new(0),
                last_snapshot_index: AtomicU64::new(0),
                last_build_us: AtomicU64::new(0),
                last_install_us: AtomicU64::new(0),
                last_divergence: Mutex::new(None),
                latency: SmLatency::default(),
                last_state_bytes: AtomicU64::new(state_bytes),
                divergences: AtomicU64::new(0),
                watch: OnceLock::new(),
            }),
        })
    }

    /// Run `f` on the replica, off the async runtime (see [`off_runtime`]):
    /// the lock may be held by a long guest call, and `f` may make one.
    /// When the lock is free, `f` runs at once: the reads are short and
    /// handing the worker off costs more than they do (lock-bench); only a
    /// wait behind a long guest call is moved off the runtime.
    fn with<R>(&self, f: impl FnOnce(&mut Replica) -> R) -> R {
        match self.shared.replica.try_lock() {
            Ok(mut r) => f(&mut r),
            Err(std::sync::TryLockError::Poisoned(p)) => f(&mut p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => off_runtime(|| f(&mut self.replica())),
        }
    }

    fn replica(&self) -> MutexGuard<'_, Replica> {
        // A panic while holding the lock leaves nothing half-done that a
        // reader could trip on: every mutation is a single guest call.
        self.shared
            .replica
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn current(&self) -> MutexGuard<'_, Option<(SnapshotMeta, Arc<Vec<u8>>)>> {
        self.shared
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub fn engine(&self) -> &Arc<WasmEngine> {
        self.shared.precompiler.engine()
    }

    pub fn precompiler(&self) -> &Arc<Precompiler> {
        &self.shared.precompiler
    }

    /// Count one audit divergence (seen by the background checker).
    /// The audit found `node`'s state hash different at `index`.
    pub fn count_divergence(&self, node: u64, index: u64) {
        self.shared.divergences.fetch_add(1, Ordering::Relaxed);
        *self
            .shared
            .last_divergence
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(DivergenceSeen { node, index });
    }

    pub fn last_divergence(&self) -> Option<DivergenceSeen> {
        *self
            .shared
            .last_divergence
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub fn divergences(&self) -> u64 {
        self.shared.divergences.load(Ordering::Relaxed)
    }

    pub fn latency(&self) -> &SmLatency {
        &self.shared.latency
    }

    /// What a signature for `purpose` must be bound to at the applied
    /// index (see [`Replica::binding`]).
    pub fn binding(
        &self,
        purpose: lockd_proto::signature::Purpose,
    ) -> lockd_proto::signature::Binding {
        self.with(|r| r.binding(purpose))
    }

    /// Name this node's cluster, which bound signatures name.
    pub fn bind_cluster(&self, cluster: Arc<crate::cluster_id::ClusterIdentity>) {
        self.replica().bind_cluster(cluster);
    }

    /// Publish what every entry applied from now on changes to `hub`
    /// (once; before Raft starts re-applying the log).
    pub fn attach_watch(&self, hub: Arc<WatchHub>) {
        let mut r = self.replica();
        r.record_changes();
        hub.restart_at(r.last_applied().map_or(0, |l| l.index), false);
        drop(r);
        let _ = self.shared.watch.set(hub);
    }

    /// The hub changes are published to, if attached.
    pub fn watch(&self) -> Option<&Arc<WatchHub>> {
        self.shared.watch.get()
    }

    /// Hand the changes of the entries applied from `first` on to the
    /// watch hub.
    fn publish_changes(&self, first: u64) {
        let Some(hub) = self.shared.watch.get() else {
            return;
        };
        let (changes, applied) =
            self.with(|r| (r.take_changes(), r.last_applied().map_or(0, |l| l.index)));
        if applied >= first {
            hub.publish(first, applied, changes);
        }
    }

    /// The capacity bounds and their use at the applied index (no guest
    /// call).
    pub fn capacity(&self) -> lockd_proto::CapacityStatus {
        self.with(|r| r.capacity())
    }

    /// This node's audit points.
    pub fn audit_report(&self) -> AuditReport {
        self.with(|r| r.audit_report())
    }

    /// What status shows; `hash` adds the state hash (O(1) in both
    /// reference modules, but a module may walk its table for it, under the
    /// lock: frequent readers skip it).
    pub fn view(&self, hash: bool) -> ReplicaView {
        self.with(|r| r.view(hash))
    }

    /// The entry that records the configured first module as the
    /// cluster's, when one is due (see [`Replica::genesis_needed`]).
    pub fn genesis_needed(&self) -> Option<lockd_core::upgrade::Genesis> {
        let first = lockd_core::builtin::first_module(self.shared.first_module);
        self.with(|r| r.genesis_needed(&first))
    }
}

/// Run `f` (guest calls, or a wait for the lock a guest call holds) so that
/// it does not stall the async runtime: on a multi-thread runtime the
/// worker first hands its queued tasks to another thread
/// (`block_in_place`), so Raft's heartbeats, peers' RPCs and other requests
/// go on while, say, a migration runs for seconds. Elsewhere (a
/// current-thread runtime in a test, no runtime) it just runs `f`.
pub(crate) fn off_runtime<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

//! The Raft state machine: committed entries → one batched guest call.
//!
//! Every committed range openraft hands to [`StateMachineStore::apply`] goes
//! to the guest in **one** call ([`GuestInstance::apply_entries`]); blank and
//! membership entries are answered `Noop` by the host, without entering the
//! guest. The guest state lives only in wasm memory; durability comes from
//! snapshots plus the log: on start the last snapshot is restored and
//! openraft re-applies the log after it.
//!
//! A snapshot is the guest's own `snapshot()` bytes, the **active module's
//! component bytes**, and the Raft metadata (last log id, membership), so a
//! node that installs it runs exactly the module that was active at that
//! index. The current snapshot is kept on disk (`snapshot/current`, written
//! atomically) and in memory for sending to peers.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};

use super::{
    Entry, LogId, Request, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::command::Command;
use crate::engine::{EngineError, GuestInstance, GuestModule, ModuleHash, WasmEngine};

/// The snapshot blob: what is stored on disk and sent to peers.
#[derive(Serialize, Deserialize)]
struct SnapshotBlob {
    meta: SnapshotMeta,
    /// Component bytes of the module active at `meta.last_log_id`.
    module: Vec<u8>,
    /// The guest's `snapshot()` output.
    guest_state: Vec<u8>,
}

const SNAPSHOT_MAGIC: &[u8; 8] = b"LKDSNAP1";

impl SnapshotBlob {
    fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = SNAPSHOT_MAGIC.to_vec();
        out.extend(postcard::to_allocvec(self)?);
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<SnapshotBlob, String> {
        let body = bytes
            .strip_prefix(SNAPSHOT_MAGIC.as_slice())
            .ok_or("not a lockd snapshot (bad magic)")?;
        postcard::from_bytes(body).map_err(|e| format!("snapshot does not decode: {e}"))
    }
}

/// The live state: the active module, its instance, and Raft's bookkeeping.
pub struct SmState {
    pub module: GuestModule,
    pub guest: GuestInstance,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    current: Option<(SnapshotMeta, Arc<Vec<u8>>)>,
}

pub struct SmShared {
    id: u64,
    engine: Arc<WasmEngine>,
    dir: PathBuf,
    state: Mutex<SmState>,
    snapshots_built: AtomicU64,
    snapshots_installed: AtomicU64,
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
    #[error("cannot read snapshot {path}: {reason}")]
    Snapshot { path: String, reason: String },
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
        engine: Arc<WasmEngine>,
        dir: &Path,
        initial_module: &[u8],
    ) -> Result<StateMachineStore, SmOpenError> {
        std::fs::create_dir_all(dir).map_err(|e| SmOpenError::Snapshot {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let path = dir.join("current");
        let stored = crate::log::read_atomic(&path).map_err(|e| SmOpenError::Snapshot {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let state = match stored {
            Some(bytes) => {
                let blob =
                    SnapshotBlob::decode(&bytes).map_err(|reason| SmOpenError::Snapshot {
                        path: path.display().to_string(),
                        reason,
                    })?;
                let module_err = |source| SmOpenError::Module {
                    path: path.display().to_string(),
                    source,
                };
                let module = engine.load(&blob.module).map_err(module_err)?;
                let mut guest = engine.instantiate(&module).map_err(module_err)?;
                guest.restore(&blob.guest_state).map_err(module_err)?;
                tracing::info!(last_log_id = ?blob.meta.last_log_id, module = %module.hash(), "restored state machine from snapshot");
                SmState {
                    module,
                    guest,
                    last_applied: blob.meta.last_log_id,
                    membership: blob.meta.last_membership.clone(),
                    current: Some((blob.meta, Arc::new(bytes))),
                }
            }
            None => {
                let module = engine.load(initial_module).map_err(SmOpenError::Builtin)?;
                let guest = engine.instantiate(&module).map_err(SmOpenError::Builtin)?;
                SmState {
                    module,
                    guest,
                    last_applied: None,
                    membership: StoredMembership::default(),
                    current: None,
                }
            }
        };
        Ok(StateMachineStore {
            shared: Arc::new(SmShared {
                id,
                engine,
                dir: dir.to_path_buf(),
                state: Mutex::new(state),
                snapshots_built: AtomicU64::new(0),
                snapshots_installed: AtomicU64::new(0),
            }),
        })
    }

    /// Lock the live state (for reads by the service and status).
    pub fn state(&self) -> MutexGuard<'_, SmState> {
        // A panic while holding the lock leaves nothing half-done that a
        // reader could trip on: every mutation is a single guest call.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// (snapshots built, snapshots installed from a leader) since start.
    pub fn snapshot_counts(&self) -> (u64, u64) {
        (
            self.shared.snapshots_built.load(Ordering::Relaxed),
            self.shared.snapshots_installed.load(Ordering::Relaxed),
        )
    }

    fn persist(&self, bytes: &[u8]) -> Result<(), crate::log::WalError> {
        crate::log::write_atomic(&self.shared.dir.join("current"), bytes)
    }
}

impl SmState {
    pub fn module_hash(&self) -> ModuleHash {
        self.module.hash()
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let st = self.state();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut st = self.state();
        // Flatten the range into one guest batch: an entry's commands, or one
        // `None` (answered Noop) for a blank or membership entry. `sizes`
        // regroups the outcomes per entry.
        let mut batch: Vec<Option<Command>> = Vec::new();
        let mut sizes = Vec::new();
        let mut last = None;
        for entry in entries {
            last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Normal(Request::Lock(commands)) => {
                    sizes.push(commands.len());
                    batch.extend(commands.into_iter().map(Some));
                }
                EntryPayload::Membership(m) => {
                    st.membership = StoredMembership::new(Some(entry.log_id), m);
                    sizes.push(1);
                    batch.push(None);
                }
                EntryPayload::Blank => {
                    sizes.push(1);
                    batch.push(None);
                }
            }
        }
        let span = tracing::debug_span!(
            "apply",
            node = self.shared.id,
            term = last.map(|l: LogId| l.leader_id.term),
            index = last.map(|l: LogId| l.index),
            entries = sizes.len(),
            commands = batch.len()
        );
        let _enter = span.enter();
        let mut outcomes = st.guest.apply_entries(batch).map_err(sm_err)?.into_iter();
        if last.is_some() {
            st.last_applied = last;
        }
        Ok(sizes
            .into_iter()
            .map(|n| Response::Lock(outcomes.by_ref().take(n).collect()))
            .collect())
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
        let blob = SnapshotBlob::decode(&bytes).map_err(|e| snap_err(Some(meta), e))?;
        if blob.meta.last_log_id != meta.last_log_id {
            return Err(snap_err(
                Some(meta),
                "snapshot body names a different last log id than its metadata",
            ));
        }
        // Build the new state fully before touching the live one.
        let engine = &self.shared.engine;
        let module = engine
            .load(&blob.module)
            .map_err(|e| snap_err(Some(meta), e))?;
        let mut guest = engine
            .instantiate(&module)
            .map_err(|e| snap_err(Some(meta), e))?;
        guest
            .restore(&blob.guest_state)
            .map_err(|e| snap_err(Some(meta), e))?;
        self.persist(&bytes).map_err(|e| snap_err(Some(meta), e))?;
        let mut st = self.state();
        st.module = module;
        st.guest = guest;
        st.last_applied = meta.last_log_id;
        st.membership = meta.last_membership.clone();
        st.current = Some((meta.clone(), Arc::new(bytes)));
        self.shared
            .snapshots_installed
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(node = self.shared.id, term = meta.last_log_id.map(|l| l.leader_id.term), index = meta.last_log_id.map(|l| l.index), module = %st.module.hash(), "installed snapshot from leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let st = self.state();
        Ok(st.current.as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.as_ref().clone())),
        }))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let n = self.shared.snapshots_built.fetch_add(1, Ordering::Relaxed) + 1;
        // All under the lock: a snapshot installed from the leader cannot
        // interleave with this one, on disk or in memory.
        let mut st = self.state();
        let guest_state = st.guest.snapshot().map_err(sm_err)?;
        let snapshot_id = match st.last_applied {
            Some(l) => format!("{}-{}-{n}", l.leader_id.term, l.index),
            None => format!("0-0-{n}"),
        };
        let meta = SnapshotMeta {
            last_log_id: st.last_applied,
            last_membership: st.membership.clone(),
            snapshot_id,
        };
        let blob = SnapshotBlob {
            meta: meta.clone(),
            module: st.module.bytes().to_vec(),
            guest_state,
        };
        let bytes = blob.encode().map_err(|e| snap_err(None, e))?;
        self.persist(&bytes).map_err(|e| snap_err(Some(&meta), e))?;
        tracing::info!(
            node = self.shared.id,
            term = meta.last_log_id.map(|l| l.leader_id.term),
            index = meta.last_log_id.map(|l| l.index),
            bytes = bytes.len(),
            "built snapshot"
        );
        let bytes = Arc::new(bytes);
        st.current = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes.as_ref().clone())),
        })
    }
}

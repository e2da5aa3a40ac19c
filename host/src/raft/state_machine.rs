//! The Raft state machine: committed entries → one batched guest call.
//!
//! Every committed range openraft hands to [`StateMachineStore::apply`] goes
//! to the guest in **one** call ([`GuestInstance::apply`]) — split only where
//! noted below; blank and membership entries are answered `Noop` by the
//! host, without entering the guest. The guest state lives only in wasm memory; durability comes from
//! snapshots plus the log: on start the last snapshot is restored and
//! openraft re-applies the log after it.
//!
//! A snapshot is the guest's own `snapshot()` bytes, the **active module's
//! component bytes**, and the Raft metadata (last log id, membership), so a
//! node that installs it runs exactly the module that was active at that
//! index. The current snapshot is kept on disk (`snapshot/current`, written
//! atomically) and in memory for sending to peers.
//!
//! A range is split where it must be: at an upgrade or shadow entry (applied
//! by the host, see [`crate::upgrade`]) and at every audit point (a multiple
//! of the audit interval, where the state hash is recorded). Between those,
//! lock commands still go to the guest in one call; when a shadow module is
//! running, the same batch goes to it next and the outcomes are compared.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};

use std::collections::VecDeque;

use lockd_client::proto::{AuditReport, UpgradeRecord};

use super::{
    Entry, LogId, Request, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::command::{Command, Outcome};
use crate::engine::{EngineError, GuestInstance, GuestModule, ModuleHash, WasmEngine};
use crate::upgrade::audit::AuditLog;
use crate::upgrade::precompile::Precompiler;
use crate::upgrade::shadow::Shadow;
use crate::upgrade::{
    apply_upgrade, switch_to, ShadowEntry, ShadowOutcome, UpgradeEntry, UpgradeOutcome,
};

/// Upgrade records kept (in status and in snapshots).
const KEEP_UPGRADES: usize = 32;

/// The snapshot blob: what is stored on disk and sent to peers.
#[derive(Serialize, Deserialize)]
struct SnapshotBlob {
    meta: SnapshotMeta,
    /// Component bytes of the module active at `meta.last_log_id`.
    module: Vec<u8>,
    /// The guest's `snapshot()` output.
    guest_state: Vec<u8>,
    /// The index at which `module` became active (0: from the start).
    module_since: u64,
    /// The most recent upgrade entries applied.
    upgrades: Vec<UpgradeRecord>,
}

/// Format 1, before upgrades existed: read, never written.
#[derive(Deserialize)]
struct SnapshotBlobV1 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
}

const SNAPSHOT_MAGIC_V1: &[u8; 8] = b"LKDSNAP1";
const SNAPSHOT_MAGIC: &[u8; 8] = b"LKDSNAP2";

impl SnapshotBlob {
    fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = SNAPSHOT_MAGIC.to_vec();
        out.extend(postcard::to_allocvec(self)?);
        Ok(out)
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<SnapshotBlob, String> {
        if let Some(body) = bytes.strip_prefix(SNAPSHOT_MAGIC_V1.as_slice()) {
            let v1: SnapshotBlobV1 =
                postcard::from_bytes(body).map_err(|e| format!("snapshot does not decode: {e}"))?;
            return Ok(SnapshotBlob {
                meta: v1.meta,
                module: v1.module,
                guest_state: v1.guest_state,
                module_since: 0,
                upgrades: Vec::new(),
            });
        }
        let body = bytes
            .strip_prefix(SNAPSHOT_MAGIC.as_slice())
            .ok_or("not a lockd snapshot (bad magic)")?;
        postcard::from_bytes(body).map_err(|e| format!("snapshot does not decode: {e}"))
    }
}

/// A stored snapshot, opened for `lockd replay`.
pub struct StoredSnapshot {
    pub last_log_id: Option<LogId>,
    pub module: Vec<u8>,
    pub guest_state: Vec<u8>,
}

/// Read and decode `snapshot/current` in `dir`, if there is one; also
/// returns the raw bytes (kept for sending to peers).
fn read_blob(dir: &Path) -> Result<Option<(SnapshotBlob, Vec<u8>)>, SmOpenError> {
    let path = dir.join("current");
    let snapshot_err = |reason: String| SmOpenError::Snapshot {
        path: path.display().to_string(),
        reason,
    };
    let Some(bytes) = crate::log::read_atomic(&path).map_err(|e| snapshot_err(e.to_string()))?
    else {
        return Ok(None);
    };
    let blob = SnapshotBlob::decode(&bytes).map_err(snapshot_err)?;
    Ok(Some((blob, bytes)))
}

/// Read `snapshot/current` in `dir`, if there is one.
pub fn read_snapshot(dir: &Path) -> Result<Option<StoredSnapshot>, SmOpenError> {
    Ok(read_blob(dir)?.map(|(blob, _)| StoredSnapshot {
        last_log_id: blob.meta.last_log_id,
        module: blob.module,
        guest_state: blob.guest_state,
    }))
}

/// The live state: the active module, its instance, and Raft's bookkeeping.
pub struct SmState {
    pub module: GuestModule,
    pub guest: GuestInstance,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    current: Option<(SnapshotMeta, Arc<Vec<u8>>)>,
    /// The index at which the active module became active.
    pub module_since: u64,
    pub upgrades: VecDeque<UpgradeRecord>,
    pub shadow: Option<Shadow>,
    pub audit: AuditLog,
}

pub struct SmShared {
    id: u64,
    engine: Arc<WasmEngine>,
    precompiler: Arc<Precompiler>,
    dir: PathBuf,
    state: Mutex<SmState>,
    snapshots_built: AtomicU64,
    snapshots_installed: AtomicU64,
    divergences: AtomicU64,
    upgrades_swapped: AtomicU64,
    upgrades_rejected: AtomicU64,
    #[cfg(feature = "fault-diverge")]
    fault_done: std::sync::atomic::AtomicBool,
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
        precompiler: Arc<Precompiler>,
        dir: &Path,
        initial_module: &[u8],
        audit_interval: u64,
    ) -> Result<StateMachineStore, SmOpenError> {
        let engine = precompiler.engine().clone();
        std::fs::create_dir_all(dir).map_err(|e| SmOpenError::Snapshot {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let path = dir.join("current");
        let state = match read_blob(dir)? {
            Some((blob, bytes)) => {
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
                    module_since: blob.module_since,
                    upgrades: blob.upgrades.into_iter().collect(),
                    shadow: None,
                    audit: AuditLog::new(audit_interval),
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
                    module_since: 0,
                    upgrades: VecDeque::new(),
                    shadow: None,
                    audit: AuditLog::new(audit_interval),
                    current: None,
                }
            }
        };
        Ok(StateMachineStore {
            shared: Arc::new(SmShared {
                id,
                engine,
                precompiler,
                dir: dir.to_path_buf(),
                state: Mutex::new(state),
                snapshots_built: AtomicU64::new(0),
                snapshots_installed: AtomicU64::new(0),
                divergences: AtomicU64::new(0),
                upgrades_swapped: AtomicU64::new(0),
                upgrades_rejected: AtomicU64::new(0),
                #[cfg(feature = "fault-diverge")]
                fault_done: std::sync::atomic::AtomicBool::new(false),
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

    pub fn precompiler(&self) -> &Arc<Precompiler> {
        &self.shared.precompiler
    }

    /// This node's audit points.
    pub fn audit_report(&self) -> AuditReport {
        self.state().audit.report(self.shared.id)
    }

    /// Count one audit divergence (seen by the background checker).
    pub fn count_divergence(&self) {
        self.shared.divergences.fetch_add(1, Ordering::Relaxed);
    }

    pub fn divergences(&self) -> u64 {
        self.shared.divergences.load(Ordering::Relaxed)
    }

    /// (upgrade entries that swapped, that were rejected) applied since start.
    pub fn upgrade_counts(&self) -> (u64, u64) {
        (
            self.shared.upgrades_swapped.load(Ordering::Relaxed),
            self.shared.upgrades_rejected.load(Ordering::Relaxed),
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
        let mut guard = self.state();
        let st = &mut *guard;
        let mut run = Run::default();
        let mut responses: Vec<Option<Response>> = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            let slot = responses.len();
            match entry.payload {
                EntryPayload::Normal(Request::Lock(commands)) => {
                    run.push(slot, log_id, commands);
                    responses.push(None);
                }
                EntryPayload::Membership(m) => {
                    st.membership = StoredMembership::new(Some(log_id), m);
                    run.push_empty(slot, log_id);
                    responses.push(None);
                }
                EntryPayload::Blank => {
                    run.push_empty(slot, log_id);
                    responses.push(None);
                }
                EntryPayload::Normal(Request::Upgrade(up)) => {
                    self.flush(st, &mut run, &mut responses)?;
                    let outcome = self.upgrade(st, log_id, up);
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                EntryPayload::Normal(Request::Shadow(sh)) => {
                    self.flush(st, &mut run, &mut responses)?;
                    let outcome = self.shadow(st, log_id, sh);
                    responses.push(Some(Response::Shadow(outcome)));
                }
            }
            st.last_applied = Some(log_id);
            if st.audit.due(log_id.index) {
                self.flush(st, &mut run, &mut responses)?;
                self.audit_point(st, log_id.index);
            }
        }
        self.flush(st, &mut run, &mut responses)?;
        Ok(responses
            .into_iter()
            .map(|r| r.unwrap_or(Response::Lock(vec![Outcome::Noop])))
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
        let hash = guest.state_hash().map_err(|e| snap_err(Some(meta), e))?;
        let mut st = self.state();
        st.module = module;
        st.guest = guest;
        st.last_applied = meta.last_log_id;
        st.membership = meta.last_membership.clone();
        st.module_since = blob.module_since;
        st.upgrades = blob.upgrades.into_iter().collect();
        // The shadow was compared against a state this node no longer has.
        st.shadow = None;
        let module_hash = st.module.hash();
        if let Some(l) = meta.last_log_id {
            st.audit.record(l.index, &hash, module_hash, "snapshot");
        }
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
            module_since: st.module_since,
            upgrades: st.upgrades.iter().cloned().collect(),
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

/// Lock commands of consecutive entries, waiting for one guest call.
#[derive(Default)]
struct Run {
    commands: Vec<Command>,
    /// Per entry: (response slot, number of commands (0 = answered Noop),
    /// log index).
    entries: Vec<(usize, usize, u64)>,
    last: Option<LogId>,
}

impl Run {
    fn push(&mut self, slot: usize, log_id: LogId, commands: Vec<Command>) {
        self.entries.push((slot, commands.len(), log_id.index));
        self.commands.extend(commands);
        self.last = Some(log_id);
    }

    fn push_empty(&mut self, slot: usize, log_id: LogId) {
        self.entries.push((slot, 0, log_id.index));
        self.last = Some(log_id);
    }

    /// The log index of the `i`-th command (only looked up for the few
    /// shadow differences kept as examples).
    fn index_of(&self, mut i: usize) -> u64 {
        for &(_, n, index) in &self.entries {
            if i < n {
                return index;
            }
            i -= n;
        }
        0
    }
}

impl StateMachineStore {
    /// Apply the waiting run in one guest call and fill its responses.
    fn flush(
        &self,
        st: &mut SmState,
        run: &mut Run,
        responses: &mut [Option<Response>],
    ) -> Result<(), StorageError> {
        if run.entries.is_empty() {
            return Ok(());
        }
        let run = std::mem::take(run);
        let span = tracing::debug_span!(
            "apply",
            node = self.shared.id,
            term = run.last.map(|l| l.leader_id.term),
            index = run.last.map(|l| l.index),
            entries = run.entries.len(),
            commands = run.commands.len()
        );
        let _enter = span.enter();
        let outcomes = if run.commands.is_empty() {
            Vec::new()
        } else {
            st.guest.apply(&run.commands).map_err(sm_err)?
        };
        if let Some(shadow) = st.shadow.as_mut() {
            shadow.feed(&run.commands, |i| run.index_of(i), &outcomes);
        }
        #[cfg(feature = "fault-diverge")]
        self.plant_divergence(st, run.last);
        let mut outcomes = outcomes.into_iter();
        for (slot, n, _) in run.entries {
            let r = if n == 0 {
                vec![Outcome::Noop]
            } else {
                outcomes.by_ref().take(n).collect()
            };
            if let Some(place) = responses.get_mut(slot) {
                *place = Some(Response::Lock(r));
            }
        }
        Ok(())
    }

    /// Record the state hash at `index` (and compare the shadow's).
    fn audit_point(&self, st: &mut SmState, index: u64) {
        match st.guest.state_hash() {
            Ok(hash) => {
                let module = st.module.hash();
                st.audit.record(index, &hash, module, "interval");
                if let Some(shadow) = st.shadow.as_mut() {
                    shadow.check_hash(&hash);
                }
            }
            Err(e) => {
                tracing::error!(node = self.shared.id, index, error = %e, "state hash failed at an audit point")
            }
        }
    }

    /// Apply an upgrade entry: migrate and swap, or reject and keep the
    /// active module. The same on every node (see [`crate::upgrade`]).
    fn upgrade(&self, st: &mut SmState, log_id: LogId, up: UpgradeEntry) -> UpgradeOutcome {
        let started = std::time::Instant::now();
        let new_hash = ModuleHash::of(&up.module);
        let span = tracing::info_span!(
            "upgrade",
            node = self.shared.id,
            term = log_id.leader_id.term,
            index = log_id.index,
            module = %new_hash
        );
        let _enter = span.enter();
        let active = st.module.hash();
        let result = apply_upgrade(&self.shared.engine, &up, active, &mut st.guest, |b| {
            self.shared.precompiler.load(b)
        });
        let outcome = match result {
            Ok((module, mut migrated)) => {
                let version = migrated.version.clone();
                let hash = migrated.instance.state_hash();
                st.module = module;
                st.guest = migrated.instance;
                st.module_since = log_id.index;
                if let Ok(hash) = hash {
                    st.audit.record(log_id.index, &hash, new_hash, "upgrade");
                }
                if st.shadow.as_ref().is_some_and(|s| s.module.hash() == new_hash) {
                    tracing::info!("the shadow module was promoted; shadow mode ends");
                    st.shadow = None;
                }
                tracing::info!(version = %version, replaced = %active, "upgraded the lock module");
                self.shared.upgrades_swapped.fetch_add(1, Ordering::Relaxed);
                UpgradeOutcome::Swapped {
                    module: new_hash,
                    replaced: active,
                    version,
                }
            }
            Err(e) => {
                tracing::warn!(reason = %e, "upgrade rejected; the active module stays");
                self.shared.upgrades_rejected.fetch_add(1, Ordering::Relaxed);
                UpgradeOutcome::Rejected {
                    module: new_hash,
                    replaces: up.replaces,
                    reason: e.to_string(),
                }
            }
        };
        let record = record_of(log_id.index, &up.replaces, &outcome, started.elapsed());
        st.upgrades.push_back(record);
        while st.upgrades.len() > KEEP_UPGRADES {
            st.upgrades.pop_front();
        }
        outcome
    }

    /// Apply a shadow entry.
    fn shadow(&self, st: &mut SmState, log_id: LogId, entry: ShadowEntry) -> ShadowOutcome {
        match entry {
            ShadowEntry::Stop => {
                let module = st.shadow.take().map(|s| s.module.hash());
                tracing::info!(node = self.shared.id, index = log_id.index, ?module, "shadow mode stopped");
                ShadowOutcome::Stopped { module }
            }
            ShadowEntry::Start { module: bytes } => {
                let hash = ModuleHash::of(&bytes);
                let result = switch_to(
                    &self.shared.engine,
                    self.shared.precompiler.load(&bytes),
                    &mut st.guest,
                );
                match result {
                    Ok((module, migrated)) => {
                        let version = migrated.version.clone();
                        tracing::info!(node = self.shared.id, index = log_id.index, module = %hash, %version, "shadow mode started");
                        st.shadow = Some(Shadow::new(module, migrated.instance, migrated.version, log_id.index));
                        ShadowOutcome::Started {
                            module: hash,
                            version,
                        }
                    }
                    Err(e) => {
                        tracing::warn!(node = self.shared.id, index = log_id.index, module = %hash, reason = %e, "shadow module refused");
                        ShadowOutcome::Failed {
                            module: hash,
                            reason: e.to_string(),
                        }
                    }
                }
            }
        }
    }

    /// Test-only fault: once the applied index reaches
    /// `LOCKD_FAULT_DIVERGE_AT`, this node applies one extra grant that no
    /// other node applies, so its state hash diverges from there on.
    #[cfg(feature = "fault-diverge")]
    fn plant_divergence(&self, st: &mut SmState, last: Option<LogId>) {
        let Some(at) = std::env::var("LOCKD_FAULT_DIVERGE_AT")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        if last.is_some_and(|l| l.index >= at)
            && !self.shared.fault_done.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(node = self.shared.id, "FAULT: planting a state divergence");
            let _ = st.guest.apply(&[Command::grant("fault/diverged", 1)]);
        }
    }
}

/// The status record of an applied upgrade entry.
pub fn record_of(
    index: u64,
    replaces: &ModuleHash,
    outcome: &UpgradeOutcome,
    took: std::time::Duration,
) -> UpgradeRecord {
    let (module, result, version, reason) = match outcome {
        UpgradeOutcome::Swapped {
            module, version, ..
        } => (module, "swapped", Some(version.clone()), None),
        UpgradeOutcome::Rejected { module, reason, .. } => {
            (module, "rejected", None, Some(reason.clone()))
        }
    };
    UpgradeRecord {
        index,
        replaces: replaces.to_string(),
        module_hash: module.to_string(),
        result: result.into(),
        version,
        reason,
        swap_us: took.as_micros() as u64,
    }
}

//! Reads of the replicated state: each is one guest call (or none) at the
//! applied index, and [`ReplicaView`], what status reports.

use std::sync::Arc;

use lockd_proto::{AuditReport, CapacityStatus, PoisonedAt, ShadowStatus};

use super::Replica;
use crate::command::{
    FeatureSet, HolderInfo, KeyHolders, PrefixPolicy, SessionInfo, TableCounters,
};
use crate::engine::{EngineError, GuestModule, ModuleHash, World};
use crate::entry::{LogId, StoredMembership};
use crate::signature::{ModuleSignature, TrustedKeys};
use crate::upgrade::{capture, MigrateError};

/// The running shadow module, as a promote needs it.
pub struct ShadowModule {
    pub hash: ModuleHash,
    /// Why it failed, if it did (a failed shadow is not promoted).
    pub failed: Option<String>,
    pub bytes: Arc<[u8]>,
    /// The signature its start carried.
    pub signature: Option<ModuleSignature>,
}

/// What status reports about the replica, read at one applied index.
pub struct ReplicaView {
    pub applied_index: u64,
    pub module_hash: String,
    pub module_version: String,
    /// The world the active module implements.
    pub module_world: World,
    /// Empty unless asked for (both reference modules keep it up to date,
    /// but a module is free to compute it from the whole table).
    pub state_hash: String,
    pub locks_held: u64,
    pub poisoned: Option<String>,
    pub poisoned_at: Option<PoisonedAt>,
    pub module_since_index: u64,
    /// The module the cluster started with, hex (see
    /// [`crate::snapshot::SnapshotBlob::first_module`]).
    pub first_module_hash: Option<String>,
    pub upgrades: Vec<lockd_proto::UpgradeRecord>,
    pub shadow: Option<ShadowStatus>,
    pub upgrades_swapped: u64,
    pub upgrades_rejected: u64,
    pub capacity: CapacityStatus,
    /// The active guest's linear memory, all memories together (the
    /// memory limit counts this; it never shrinks).
    pub guest_memory_bytes: u64,
    /// The trusted module keys, hex, in key order.
    pub trusted_module_keys: Vec<String>,
    /// Commands the modules failed on (replicated), and the last ones.
    pub module_failures_total: u64,
    pub module_failures: Vec<lockd_proto::ModuleFailure>,
    /// The active module, when it is out of service for the kinds of
    /// command it kept failing on (replicated).
    pub module_out_of_service: Option<lockd_proto::ModuleOutOfService>,
    /// Guest instances this node rebuilt from its checkpoint (after a
    /// failed call; not replicated).
    pub instance_rebuilds: u64,
    /// The way back from the active module (replicated).
    pub module_way_back: lockd_proto::ModuleWayBack,
    /// The last quorum pre-check (replicated).
    pub module_precheck: Option<lockd_proto::ModulePrecheck>,
    /// A module this node cannot run, if it stopped for one (not
    /// replicated).
    pub module_cannot_run: Option<lockd_proto::ModuleCannotRun>,
}

impl Replica {
    // Queries. Each is one guest call (or none) at the applied index.

    pub fn last_applied(&self) -> Option<LogId> {
        self.last_applied
    }

    pub fn membership(&self) -> &StoredMembership {
        &self.membership
    }

    /// What a snapshot of the state now covers, named `snapshot_id`.
    pub fn snapshot_meta(&self, snapshot_id: String) -> crate::entry::SnapshotMeta {
        crate::entry::SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        }
    }

    /// The active module (loaded and compiled).
    pub fn module(&self) -> &GuestModule {
        &self.module
    }

    pub fn module_hash(&self) -> ModuleHash {
        self.module.hash()
    }

    pub fn world(&self) -> World {
        self.module.world()
    }

    /// The holdings of `key`, in token order.
    pub fn holders(&mut self, key: &str) -> Result<Vec<HolderInfo>, EngineError> {
        self.healthy()?.holders(key)
    }

    /// Up to `limit` held keys under `prefix` after `after`, in key order.
    pub fn list_keys(
        &mut self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KeyHolders>, EngineError> {
        self.healthy()?.list_keys(prefix, after, limit)
    }

    pub fn counters(&mut self) -> Result<TableCounters, EngineError> {
        self.healthy()?.counters()
    }

    /// The live session `id`, if any.
    pub fn session(&mut self, id: u64) -> Result<Option<SessionInfo>, EngineError> {
        self.healthy()?.session(id)
    }

    /// Up to `limit` live sessions after `after`, in id order.
    pub fn list_sessions(
        &mut self,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, EngineError> {
        self.healthy()?.list_sessions(after, limit)
    }

    pub fn features(&mut self) -> Result<FeatureSet, EngineError> {
        self.healthy()?.features()
    }

    pub fn policy(&mut self) -> Result<Vec<PrefixPolicy>, EngineError> {
        self.healthy()?.policy()
    }

    pub fn state_hash(&mut self) -> Result<[u8; 32], EngineError> {
        self.healthy()?.state_hash()
    }

    pub fn version(&mut self) -> Result<String, EngineError> {
        self.healthy()?.version()
    }

    /// The active state (as a module of world `to` reads it) and what a
    /// migration must keep of it, as input to a migration dry run.
    pub fn capture(
        &mut self,
        to: World,
    ) -> Result<(Vec<u8>, crate::upgrade::Before), MigrateError> {
        capture(self.healthy().map_err(MigrateError::OldSnapshot)?, to)
    }

    /// The running shadow: what a promote needs.
    pub fn shadow_module(&self) -> Option<ShadowModule> {
        self.shadow.as_ref().map(|s| ShadowModule {
            hash: s.module.hash(),
            failed: s.failed().map(str::to_string),
            bytes: s.module.bytes().clone(),
            signature: s.signature,
        })
    }

    /// Whether applying the indices `first..=last` may leave the active
    /// module for the previous one on its own (a judged index among them,
    /// with `rollback` chosen): such an apply may run as long as a swap.
    pub fn may_fall_back(&self, first: u64, last: u64) -> bool {
        self.way_back.falls_back()
            && super::failures::judged_within(first, last)
            && !self.failures.recent.is_empty()
    }

    /// The module a rollback would return to, if any: its hash and bytes.
    pub fn previous_module(&self) -> Option<(ModuleHash, Vec<u8>)> {
        let bytes = self.way_back.previous.clone()?;
        Some((ModuleHash::of(&bytes), bytes))
    }

    /// The module keys in force at the applied index.
    pub fn module_keys(&self) -> TrustedKeys {
        self.module_keys.clone()
    }

    pub fn audit_report(&self) -> AuditReport {
        self.audit.report(self.id)
    }

    /// What status shows, at one applied index; with the state hash when
    /// `hash` is set.
    pub fn view(&mut self, hash: bool) -> ReplicaView {
        let unavailable = |e: EngineError| format!("unavailable: {e}");
        let _ = self.heal();
        ReplicaView {
            applied_index: self.last_applied.map_or(0, |l| l.index),
            module_hash: self.module.hash().to_string(),
            module_version: self.guest.version().unwrap_or_else(unavailable),
            module_world: self.world(),
            state_hash: if hash {
                self.guest
                    .state_hash()
                    .map(hex::encode)
                    .unwrap_or_else(unavailable)
            } else {
                String::new()
            },
            locks_held: self.guest.counters().map(|s| s.holders).unwrap_or(0),
            poisoned: self.guest.poisoned().map(str::to_string),
            poisoned_at: self.stopped,
            module_since_index: self.module_since,
            first_module_hash: self.first_module.map(|h| h.to_string()),
            upgrades: self.upgrades.iter().cloned().collect(),
            shadow: self.shadow.as_ref().map(|s| s.status()),
            upgrades_swapped: self.upgrades_swapped,
            upgrades_rejected: self.upgrades_rejected,
            capacity: self.usage.status(self.capacity),
            guest_memory_bytes: self.guest.memory_bytes(),
            trusted_module_keys: self.module_keys.hex(),
            module_failures_total: self.failures.total,
            module_failures: self.failures.recent.iter().map(|f| f.status()).collect(),
            module_out_of_service: self
                .failures
                .refusing(&self.module.hash())
                .map(|o| o.status()),
            instance_rebuilds: self.rebuilds,
            module_way_back: self.way_back.status(),
            module_precheck: self.precheck.as_ref().map(|p| p.record.status(p.index)),
            module_cannot_run: self.cannot_run.clone(),
        }
    }
}

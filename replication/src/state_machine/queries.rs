//! Queries of the applied state: each one short call on the replica
//! under the state lock.

use lockd_core::command::{
    FeatureSet, HolderInfo, KeyHolders, PrefixPolicy, SessionInfo, TableCounters,
};
use lockd_core::engine::{EngineError, GuestModule, ModuleHash, World};
use lockd_core::replica::ShadowModule;
use lockd_core::signature::TrustedKeys;
use lockd_core::upgrade::MigrateError;

use super::StateMachineStore;
use crate::{convert, LogId};

impl StateMachineStore {
    pub fn last_applied(&self) -> Option<LogId> {
        self.with(|r| r.last_applied().map(convert::to_log_id))
    }

    pub fn module_hash(&self) -> ModuleHash {
        self.with(|r| r.module_hash())
    }

    pub fn world(&self) -> World {
        self.with(|r| r.world())
    }

    /// The active module (for a leader's `pick`).
    pub fn module(&self) -> GuestModule {
        self.with(|r| r.module().clone())
    }

    /// Without waiting: `None` when the state lock is held; `Some(None)`
    /// when the active module is still `seen`; else the active module.
    pub fn try_module_unless(&self, seen: Option<ModuleHash>) -> Option<Option<GuestModule>> {
        let r = self.shared.replica.try_lock().ok()?;
        Some((Some(r.module_hash()) != seen).then(|| r.module().clone()))
    }

    pub fn holders(&self, key: &str) -> Result<Vec<HolderInfo>, EngineError> {
        self.with(|r| r.holders(key))
    }

    /// [`Self::holders`], with the applied index they were read at.
    pub fn holders_at(&self, key: &str) -> Result<(u64, Vec<HolderInfo>), EngineError> {
        self.with(|r| {
            let at = r.last_applied().map_or(0, |l| l.index);
            Ok((at, r.holders(key)?))
        })
    }

    pub fn list_keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KeyHolders>, EngineError> {
        self.with(|r| r.list_keys(prefix, after, limit))
    }

    /// [`Self::list_keys`], with the applied index the page was read at
    /// (one lock: the page is the state *at* that index).
    pub fn list_keys_at(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<(u64, Vec<KeyHolders>), EngineError> {
        self.with(|r| {
            let at = r.last_applied().map_or(0, |l| l.index);
            Ok((at, r.list_keys(prefix, after, limit)?))
        })
    }

    pub fn counters(&self) -> Result<TableCounters, EngineError> {
        self.with(|r| r.counters())
    }

    /// The live session `id`, with the applied index it was read at.
    pub fn session_at(&self, id: u64) -> Result<(u64, Option<SessionInfo>), EngineError> {
        self.with(|r| {
            let at = r.last_applied().map_or(0, |l| l.index);
            Ok((at, r.session(id)?))
        })
    }

    /// Up to `limit` live sessions after `after`, in id order.
    pub fn list_sessions(
        &self,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, EngineError> {
        self.with(|r| r.list_sessions(after, limit))
    }

    pub fn version(&self) -> Result<String, EngineError> {
        self.with(|r| r.version())
    }

    pub fn features(&self) -> Result<FeatureSet, EngineError> {
        self.with(|r| r.features())
    }

    pub fn policy(&self) -> Result<Vec<PrefixPolicy>, EngineError> {
        self.with(|r| r.policy())
    }

    pub fn capture(
        &self,
        to: World,
    ) -> Result<(Vec<u8>, lockd_core::upgrade::Before), MigrateError> {
        self.with(|r| r.capture(to))
    }

    /// The module a rollback returns to: its hash and bytes.
    pub fn previous_module(&self) -> Option<(ModuleHash, Vec<u8>)> {
        self.with(|r| r.previous_module())
    }

    /// The running shadow: its hash, why it failed (if it did), its bytes
    /// and signature.
    pub fn shadow_module(&self) -> Option<ShadowModule> {
        self.with(|r| r.shadow_module())
    }

    /// The trusted module keys at the applied index (no guest call).
    pub fn module_keys(&self) -> TrustedKeys {
        self.with(|r| r.module_keys())
    }
}

//! The read-only and whole-state calls of a [`GuestInstance`] (queries,
//! snapshot, restore, hash, version), in world 0.3's types whatever the
//! module's world, through the adapters in [`super::world02`] and
//! [`super::world01`] for the older ones.

use super::error::EngineError;
use super::guest::{GuestInstance, World};
use super::{world01, world02};
use crate::command::{
    FeatureSet, HolderInfo, KeyHolders, PrefixPolicy, SessionInfo, TableCounters,
};

impl GuestInstance {
    /// The holdings of `key`, in token order.
    pub fn holders(&mut self, key: &str) -> Result<Vec<HolderInfo>, EngineError> {
        match self.world() {
            World::V03 | World::V04 => {
                self.v03("holders", Box::new(|sm, s| sm.call_holders(s, key)))
            }
            World::V02 => Ok(self
                .v02("holders", Box::new(|sm, s| sm.call_holders(s, key)))?
                .into_iter()
                .map(world02::holder_info)
                .collect()),
            World::V01 => Ok(self
                .v01("get", Box::new(|sm, s| sm.call_get(s, key)))?
                .map(|i| world01::holder_info(i.token, i.lease_ms))
                .into_iter()
                .collect()),
        }
    }

    /// Held keys that start with `prefix`, after `after`, at most `limit`.
    pub fn list_keys(
        &mut self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KeyHolders>, EngineError> {
        match self.world() {
            World::V03 | World::V04 => self.v03(
                "list-keys",
                Box::new(|sm, s| sm.call_list_keys(s, prefix, after, limit)),
            ),
            World::V02 => Ok(self
                .v02(
                    "list-keys",
                    Box::new(|sm, s| sm.call_list_keys(s, prefix, after, limit)),
                )?
                .into_iter()
                .map(world02::key_holders)
                .collect()),
            World::V01 => self.list01(prefix, after, limit),
        }
    }

    /// 0.1 lists every key after `after`: start at the prefix and stop at
    /// the first key past it.
    fn list01(
        &mut self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KeyHolders>, EngineError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = after.map(str::to_string);
        if cursor.as_deref().is_none_or(|a| a < prefix) {
            // `after` is exclusive: the prefix itself may be a key.
            cursor = None;
            if !prefix.is_empty() {
                if let Some(h) = self.holders(prefix)?.pop() {
                    out.push(KeyHolders {
                        key: prefix.to_string(),
                        holders: vec![h],
                    });
                }
                cursor = Some(prefix.to_string());
            }
        }
        while (out.len() as u64) < u64::from(limit) {
            let want = limit - out.len() as u32;
            let page = self.v01(
                "locks",
                Box::new(|sm, s| sm.call_locks(s, cursor.as_deref(), want.min(4096))),
            )?;
            let full = page.len() as u32 == want.min(4096);
            let Some(last) = page.last() else { break };
            cursor = Some(last.key.clone());
            for h in page {
                if !h.key.starts_with(prefix) {
                    return Ok(out);
                }
                out.push(KeyHolders {
                    holders: vec![world01::holder_info(h.token, h.lease_ms)],
                    key: h.key,
                });
            }
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// The live session `id`, if any (none before world 0.3).
    pub fn session(&mut self, id: u64) -> Result<Option<SessionInfo>, EngineError> {
        match self.world() {
            World::V03 | World::V04 => {
                self.v03("session", Box::new(|sm, s| sm.call_session(s, id)))
            }
            World::V02 | World::V01 => Ok(None),
        }
    }

    /// Live sessions in id order after `after`, at most `limit` (none
    /// before world 0.3).
    pub fn list_sessions(
        &mut self,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, EngineError> {
        match self.world() {
            World::V03 | World::V04 => self.v03(
                "list-sessions",
                Box::new(|sm, s| sm.call_list_sessions(s, after, limit)),
            ),
            World::V02 | World::V01 => Ok(Vec::new()),
        }
    }

    /// The policy data (none in a 0.1 module).
    pub fn policy(&mut self) -> Result<Vec<PrefixPolicy>, EngineError> {
        match self.world() {
            World::V03 | World::V04 => self.v03("policy", Box::new(|sm, s| sm.call_policy(s))),
            World::V02 => Ok(self
                .v02("policy", Box::new(|sm, s| sm.call_policy(s)))?
                .into_iter()
                .map(world02::policy)
                .collect()),
            World::V01 => Ok(Vec::new()),
        }
    }

    /// What the module supports (asked once, then remembered: it is
    /// fixed per module, and the request path checks it).
    pub fn features(&mut self) -> Result<FeatureSet, EngineError> {
        if let Some(f) = &self.features {
            return Ok(f.clone());
        }
        let f = match self.world() {
            World::V03 | World::V04 => {
                self.v03("features", Box::new(|sm, s| sm.call_features(s)))?
            }
            World::V02 => {
                world02::features(self.v02("features", Box::new(|sm, s| sm.call_features(s)))?)
            }
            World::V01 => world01::features(),
        };
        self.features = Some(f.clone());
        Ok(f)
    }

    pub fn counters(&mut self) -> Result<TableCounters, EngineError> {
        match self.world() {
            World::V03 | World::V04 => self.v03("counters", Box::new(|sm, s| sm.call_counters(s))),
            World::V02 => Ok(world02::counters(
                self.v02("counters", Box::new(|sm, s| sm.call_counters(s)))?,
            )),
            World::V01 => {
                let stats = self.v01("stats", Box::new(|sm, s| sm.call_stats(s)))?;
                Ok(world01::counters(&stats))
            }
        }
    }

    /// The whole state (with the state budget, as the next two).
    pub fn snapshot(&mut self) -> Result<Vec<u8>, EngineError> {
        self.state_call(|g| match g.world() {
            World::V03 | World::V04 => g.v03("snapshot", Box::new(|sm, s| sm.call_snapshot(s))),
            World::V02 => g.v02("snapshot", Box::new(|sm, s| sm.call_snapshot(s))),
            World::V01 => g.v01("snapshot", Box::new(|sm, s| sm.call_snapshot(s))),
        })
    }

    /// The state in world 0.1's snapshot format: `Ok(Err(why))` when the
    /// module refuses (the state holds what 0.1 cannot represent). A 0.1
    /// module's own snapshot is already that format.
    pub fn downgrade_snapshot(&mut self) -> Result<Result<Vec<u8>, String>, EngineError> {
        match self.world() {
            World::V03 | World::V04 => self.state_call(|g| {
                g.v03(
                    "downgrade-snapshot",
                    Box::new(|sm, s| sm.call_downgrade_snapshot(s)),
                )
            }),
            World::V02 => self.state_call(|g| {
                g.v02(
                    "downgrade-snapshot",
                    Box::new(|sm, s| sm.call_downgrade_snapshot(s)),
                )
            }),
            World::V01 => self.snapshot().map(Ok),
        }
    }

    /// Replace the state with `bytes`. A refusal by the guest is
    /// [`EngineError::RestoreRejected`] and leaves the instance usable.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        let answer = self.state_call(|g| match g.world() {
            World::V03 | World::V04 => {
                g.v03("restore", Box::new(|sm, s| sm.call_restore(s, bytes)))
            }
            World::V02 => g.v02("restore", Box::new(|sm, s| sm.call_restore(s, bytes))),
            World::V01 => g.v01("restore", Box::new(|sm, s| sm.call_restore(s, bytes))),
        })?;
        answer.map_err(EngineError::RestoreRejected)
    }

    pub fn state_hash(&mut self) -> Result<[u8; 32], EngineError> {
        let bytes = match self.world() {
            World::V03 | World::V04 => {
                self.v03("state-hash", Box::new(|sm, s| sm.call_state_hash(s)))?
            }
            World::V02 => self.v02("state-hash", Box::new(|sm, s| sm.call_state_hash(s)))?,
            World::V01 => self.v01("state-hash", Box::new(|sm, s| sm.call_state_hash(s)))?,
        };
        match <[u8; 32]>::try_from(bytes.as_slice()) {
            Ok(h) => Ok(h),
            Err(_) => Err(self.poison(EngineError::Trap {
                call: "state-hash",
                trap: format!("returned {} bytes, not 32", bytes.len()),
            })),
        }
    }

    /// The module's version (asked once, then remembered).
    pub fn version(&mut self) -> Result<String, EngineError> {
        if let Some(first) = self.poisoned() {
            return Err(EngineError::Poisoned(first.to_string()));
        }
        if let Some(v) = &self.version {
            return Ok(v.clone());
        }
        let v = match self.world() {
            World::V03 | World::V04 => self.v03("version", Box::new(|sm, s| sm.call_version(s)))?,
            World::V02 => self.v02("version", Box::new(|sm, s| sm.call_version(s)))?,
            World::V01 => self.v01("version", Box::new(|sm, s| sm.call_version(s)))?,
        };
        self.version = Some(v.clone());
        Ok(v)
    }
}

//! The typed calls of a [`GuestInstance`], in world 0.2's types whatever
//! the module's world: a 0.2 module is called directly, a 0.1 module
//! through the adapter in [`super::world01`].

use wasmtime::Store;

use super::bindings::v02::{
    Command, FeatureSet, HolderInfo, KeyHolders, Outcome, PrefixPolicy, TableCounters,
};
use super::bindings::{v01, v02};
use super::error::EngineError;
use super::guest::{Bound, GuestInstance, World};
use super::store::StoreState;
use super::world01;

type Call<'a, B, R> = Box<dyn FnOnce(&B, &mut Store<StoreState>) -> wasmtime::Result<R> + 'a>;

impl GuestInstance {
    /// A call of a world-0.2 export.
    fn v02<R>(
        &mut self,
        name: &'static str,
        f: Call<'_, v02::LockSm, R>,
    ) -> Result<R, EngineError> {
        self.call(name, |b, s| match b {
            Bound::V02(sm) => f(sm, s),
            Bound::V01(_) => Err(wasmtime::Error::msg("not a module of world 0.2")),
        })
    }

    /// A call of a world-0.1 export.
    fn v01<R>(
        &mut self,
        name: &'static str,
        f: Call<'_, v01::LockSm, R>,
    ) -> Result<R, EngineError> {
        self.call(name, |b, s| match b {
            Bound::V01(sm) => f(sm, s),
            Bound::V02(_) => Err(wasmtime::Error::msg("not a module of world 0.1")),
        })
    }

    /// Apply a committed range of entries: one list of outcomes per entry,
    /// one outcome per command, in order.
    pub fn apply(&mut self, entries: &[Vec<Command>]) -> Result<Vec<Vec<Outcome>>, EngineError> {
        match self.world() {
            World::V02 => {
                let out = self.v02("apply", Box::new(|sm, s| sm.call_apply(s, entries)))?;
                let shape_ok = out.len() == entries.len()
                    && out.iter().zip(entries).all(|(o, e)| o.len() == e.len());
                if !shape_ok {
                    let want = entries.iter().map(Vec::len).sum();
                    let got = out.iter().map(Vec::len).sum();
                    return Err(self.poison(EngineError::OutcomeCount { want, got }));
                }
                Ok(out)
            }
            World::V01 => self.apply01(entries),
        }
    }

    /// Entries on a 0.1 module: one guest call for every command it can
    /// run, the rest answered by the adapter.
    fn apply01(&mut self, entries: &[Vec<Command>]) -> Result<Vec<Vec<Outcome>>, EngineError> {
        let mut out: Vec<Vec<Option<Outcome>>> = Vec::with_capacity(entries.len());
        let mut batch = Vec::new();
        // (entry, position, lease asked) of each command in `batch`.
        let mut places = Vec::new();
        for (e, entry) in entries.iter().enumerate() {
            let mut slots = Vec::with_capacity(entry.len());
            for (i, cmd) in entry.iter().enumerate() {
                match world01::plan(cmd) {
                    Some(c) => {
                        let lease = match cmd {
                            Command::Grant(g) => g.lease_ms,
                            _ => 0,
                        };
                        batch.push(c);
                        places.push((e, i, lease));
                        slots.push(None);
                    }
                    // Rare: the version is asked only then.
                    None => slots.push(Some(world01::unsupported(cmd, &self.version()?))),
                }
            }
            out.push(slots);
        }
        let outcomes = self.legacy_batch(&batch)?;
        let run: Vec<(v01::Command, v01::Outcome)> = batch.into_iter().zip(outcomes).collect();
        for (at, (e, i, lease)) in places.into_iter().enumerate() {
            let o = run[at].1;
            let held = match o {
                v01::Outcome::GrantRejected => match world01::held_at(&run, at) {
                    Some(h) => h,
                    None => {
                        let key = world01::key_of(&run[at].0).to_string();
                        self.v01("get", Box::new(move |sm, s| sm.call_get(s, &key)))?
                            .is_some()
                    }
                },
                _ => false,
            };
            out[e][i] = Some(world01::outcome(o, lease, held));
        }
        Ok(out
            .into_iter()
            .map(|e| e.into_iter().map(|o| o.unwrap_or(Outcome::Noop)).collect())
            .collect())
    }

    /// A batch of 0.1 commands on a 0.1 module, checked for one outcome
    /// per command.
    fn legacy_batch(&mut self, batch: &[v01::Command]) -> Result<Vec<v01::Outcome>, EngineError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let out = self.v01("apply", Box::new(|sm, s| sm.call_apply(s, batch)))?;
        if out.len() != batch.len() {
            let err = EngineError::OutcomeCount {
                want: batch.len(),
                got: out.len(),
            };
            return Err(self.poison(err));
        }
        Ok(out)
    }

    /// The commands of a log entry written in world 0.1's types (before
    /// world 0.2 existed), applied as they were then. On a 0.2 module a
    /// `Release { key }` releases the key's holder, looked up first, so
    /// these go one call per command (logs that old are short).
    pub fn apply_legacy(&mut self, batch: &[v01::Command]) -> Result<Vec<Outcome>, EngineError> {
        let as_run = |batch: Vec<Command>| vec![batch];
        match self.world() {
            World::V01 => {
                let entry: Vec<Command> = batch.iter().map(Command::from_legacy).collect();
                Ok(self.apply(&as_run(entry))?.pop().unwrap_or_default())
            }
            World::V02 => {
                let mut out = Vec::with_capacity(batch.len());
                for c in batch {
                    let cmd = match c {
                        v01::Command::Release(key) => match self.holders(key)?.first() {
                            Some(h) => Command::release(key.clone(), h.token),
                            None => {
                                out.push(Outcome::NotFound);
                                continue;
                            }
                        },
                        other => Command::from_legacy(other),
                    };
                    let mut o = self.apply(&as_run(vec![cmd]))?;
                    out.extend(o.pop().unwrap_or_default());
                }
                Ok(out)
            }
        }
    }

    /// The holdings of `key`, in token order.
    pub fn holders(&mut self, key: &str) -> Result<Vec<HolderInfo>, EngineError> {
        match self.world() {
            World::V02 => self.v02("holders", Box::new(|sm, s| sm.call_holders(s, key))),
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
            World::V02 => self.v02(
                "list-keys",
                Box::new(|sm, s| sm.call_list_keys(s, prefix, after, limit)),
            ),
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

    /// The policy data (none in a 0.1 module).
    pub fn policy(&mut self) -> Result<Vec<PrefixPolicy>, EngineError> {
        match self.world() {
            World::V02 => self.v02("policy", Box::new(|sm, s| sm.call_policy(s))),
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
            World::V02 => self.v02("features", Box::new(|sm, s| sm.call_features(s)))?,
            World::V01 => world01::features(),
        };
        self.features = Some(f.clone());
        Ok(f)
    }

    pub fn counters(&mut self) -> Result<TableCounters, EngineError> {
        match self.world() {
            World::V02 => self.v02("counters", Box::new(|sm, s| sm.call_counters(s))),
            World::V01 => {
                let stats = self.v01("stats", Box::new(|sm, s| sm.call_stats(s)))?;
                Ok(world01::counters(&stats))
            }
        }
    }

    /// The whole state (with the state budget, as the next two).
    pub fn snapshot(&mut self) -> Result<Vec<u8>, EngineError> {
        self.state_call(|g| match g.world() {
            World::V02 => g.v02("snapshot", Box::new(|sm, s| sm.call_snapshot(s))),
            World::V01 => g.v01("snapshot", Box::new(|sm, s| sm.call_snapshot(s))),
        })
    }

    /// The state in world 0.1's snapshot format: `Ok(Err(why))` when the
    /// module refuses (the state holds what 0.1 cannot represent). A 0.1
    /// module's own snapshot is already that format.
    pub fn downgrade_snapshot(&mut self) -> Result<Result<Vec<u8>, String>, EngineError> {
        match self.world() {
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
            World::V02 => g.v02("restore", Box::new(|sm, s| sm.call_restore(s, bytes))),
            World::V01 => g.v01("restore", Box::new(|sm, s| sm.call_restore(s, bytes))),
        })?;
        answer.map_err(EngineError::RestoreRejected)
    }

    pub fn state_hash(&mut self) -> Result<[u8; 32], EngineError> {
        let bytes = match self.world() {
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
            World::V02 => self.v02("version", Box::new(|sm, s| sm.call_version(s)))?,
            World::V01 => self.v01("version", Box::new(|sm, s| sm.call_version(s)))?,
        };
        self.version = Some(v.clone());
        Ok(v)
    }
}

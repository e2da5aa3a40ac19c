//! A loaded lock module and a running instance of it.

use std::sync::Arc;

use wasmtime::{Store, Trap};

use super::bindings::{Command, HeldLock, LockInfo, LockSm, LockSmPre, Outcome, TableStats};
use super::cache::{self, Compiled};
use super::error::EngineError;
use super::hash::ModuleHash;
use super::store::{MemoryLimiter, StoreState};
use super::wasm::WasmEngine;

/// A checked, compiled component of the `lock-sm` world.
#[derive(Clone)]
pub struct GuestModule {
    hash: ModuleHash,
    bytes: Arc<[u8]>,
    pre: LockSmPre<StoreState>,
    compiled: Compiled,
}

impl GuestModule {
    pub(super) fn load(engine: &WasmEngine, bytes: &[u8]) -> Result<GuestModule, EngineError> {
        // Tell the common mistakes apart before wasmtime's general error.
        if !bytes.starts_with(b"\0asm") || bytes.len() < 8 {
            return Err(EngineError::NotWasm);
        }
        if bytes[4..8] == [1, 0, 0, 0] {
            return Err(EngineError::NotAComponent);
        }
        let hash = ModuleHash::of(bytes);
        let (component, compiled) = match engine.cache() {
            Some(c) => c.get_or_compile(&engine.engine, &hash, bytes)?,
            None => (cache::compile(&engine.engine, bytes)?, Compiled::Fresh),
        };
        let imports: Vec<String> = component
            .component_type()
            .imports(&engine.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        if !imports.is_empty() {
            return Err(EngineError::HasImports(imports));
        }
        let instance_pre = engine
            .linker
            .instantiate_pre(&component)
            .map_err(|e| EngineError::WrongWorld(format!("{e:#}")))?;
        let pre =
            LockSmPre::new(instance_pre).map_err(|e| EngineError::WrongWorld(format!("{e:#}")))?;
        Ok(GuestModule {
            hash,
            bytes: bytes.into(),
            pre,
            compiled,
        })
    }

    pub fn hash(&self) -> ModuleHash {
        self.hash
    }

    pub fn bytes(&self) -> &Arc<[u8]> {
        &self.bytes
    }

    /// Whether this load compiled the component or took it from the cache.
    pub fn compiled(&self) -> Compiled {
        self.compiled
    }
}

/// A running instance of a lock module: its own store, memory and lock table.
pub struct GuestInstance {
    store: Store<StoreState>,
    bindings: LockSm,
    module: ModuleHash,
    fuel_per_call: u64,
    poisoned: Option<String>,
    last_fuel_used: u64,
}

impl GuestInstance {
    pub(super) fn new(
        engine: &WasmEngine,
        module: &GuestModule,
    ) -> Result<GuestInstance, EngineError> {
        let settings = engine.settings();
        let mut store = Store::new(
            &engine.engine,
            StoreState {
                limiter: MemoryLimiter {
                    limit: settings.memory_limit_bytes,
                    refused: false,
                },
            },
        );
        store.limiter(|s| &mut s.limiter);
        store
            .set_fuel(settings.fuel_per_call)
            .map_err(|e| EngineError::Config(format!("{e:#}")))?;
        let bindings = module
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify("instantiate", e, &store, settings.fuel_per_call))?;
        Ok(GuestInstance {
            store,
            bindings,
            module: module.hash,
            fuel_per_call: settings.fuel_per_call,
            poisoned: None,
            last_fuel_used: 0,
        })
    }

    pub fn module_hash(&self) -> ModuleHash {
        self.module
    }

    /// The first failure that poisoned this instance, if any.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Fuel the last successful call consumed (a deterministic cost measure).
    pub fn last_fuel_used(&self) -> u64 {
        self.last_fuel_used
    }

    /// Run one guest call with a full fuel budget; a failure poisons.
    fn call<R>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&LockSm, &mut Store<StoreState>) -> wasmtime::Result<R>,
    ) -> Result<R, EngineError> {
        if let Some(first) = &self.poisoned {
            return Err(EngineError::Poisoned(first.clone()));
        }
        self.store.data_mut().limiter.refused = false;
        self.store
            .set_fuel(self.fuel_per_call)
            .map_err(|e| EngineError::Config(format!("{e:#}")))?;
        match f(&self.bindings, &mut self.store) {
            Ok(r) => {
                self.last_fuel_used = self.fuel_per_call - self.store.get_fuel().unwrap_or(0);
                Ok(r)
            }
            Err(e) => {
                let err = classify(name, e, &self.store, self.fuel_per_call);
                self.poisoned = Some(err.to_string());
                tracing::error!(module = %self.module, error = %err, "guest call failed; instance poisoned");
                Err(err)
            }
        }
    }

    /// Apply a committed range: one outcome per command, in order.
    pub fn apply(&mut self, batch: &[Command]) -> Result<Vec<Outcome>, EngineError> {
        let outcomes = self.call("apply", |b, s| b.call_apply(s, batch))?;
        if outcomes.len() != batch.len() {
            let err = EngineError::OutcomeCount {
                want: batch.len(),
                got: outcomes.len(),
            };
            self.poisoned = Some(err.to_string());
            return Err(err);
        }
        Ok(outcomes)
    }

    pub fn get(&mut self, key: &str) -> Result<Option<LockInfo>, EngineError> {
        self.call("get", |b, s| b.call_get(s, key))
    }

    pub fn locks(&mut self, after: Option<&str>, limit: u32) -> Result<Vec<HeldLock>, EngineError> {
        self.call("locks", |b, s| b.call_locks(s, after, limit))
    }

    pub fn stats(&mut self) -> Result<TableStats, EngineError> {
        self.call("stats", |b, s| b.call_stats(s))
    }

    pub fn snapshot(&mut self) -> Result<Vec<u8>, EngineError> {
        self.call("snapshot", |b, s| b.call_snapshot(s))
    }

    /// Replace the state with `bytes`. A refusal by the guest is
    /// [`EngineError::RestoreRejected`] and leaves the instance usable.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        self.call("restore", |b, s| b.call_restore(s, bytes))?
            .map_err(EngineError::RestoreRejected)
    }

    pub fn state_hash(&mut self) -> Result<[u8; 32], EngineError> {
        let bytes = self.call("state-hash", |b, s| b.call_state_hash(s))?;
        <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
            let err = EngineError::Trap {
                call: "state-hash",
                trap: format!("returned {} bytes, not 32", bytes.len()),
            };
            self.poisoned = Some(err.to_string());
            err
        })
    }

    pub fn version(&mut self) -> Result<String, EngineError> {
        self.call("version", |b, s| b.call_version(s))
    }
}

fn classify(
    call: &'static str,
    e: wasmtime::Error,
    store: &Store<StoreState>,
    budget: u64,
) -> EngineError {
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => EngineError::FuelExhausted { call, budget },
        _ if store.data().limiter.refused => EngineError::MemoryLimit {
            call,
            limit: store.data().limiter.limit,
        },
        Some(trap) => EngineError::Trap {
            call,
            trap: trap.to_string(),
        },
        None => EngineError::Trap {
            call,
            trap: format!("{e:#}"),
        },
    }
}

impl WasmEngine {
    /// Check and compile (or take from the cache) a component. Refuses bytes
    /// that are not wasm, a core module instead of a component, a component
    /// with any import, and one that does not export the `lock-sm` world.
    pub fn load(&self, bytes: &[u8]) -> Result<GuestModule, EngineError> {
        GuestModule::load(self, bytes)
    }

    /// A fresh instance of `module` with an empty lock table.
    pub fn instantiate(&self, module: &GuestModule) -> Result<GuestInstance, EngineError> {
        GuestInstance::new(self, module)
    }
}

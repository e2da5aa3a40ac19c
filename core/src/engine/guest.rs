//! A loaded lock module and a running instance of it, of any of the four
//! worlds.
//!
//! A component is of the newest world whose functions it exports (0.4,
//! else 0.3, else 0.2, else 0.1); the typed calls that hide the difference
//! are in [`super::calls`] and [`super::queries`]. A 0.4 module is a 0.3
//! module with one more export, `pick`: it is run through the 0.3
//! bindings, with `pick` bound beside them on the same instance.

use std::sync::Arc;

use wasmtime::{Store, Trap};

use super::bindings::{v01, v02, v03, v04};
use super::cache::{self, Compiled};
use super::error::EngineError;
use super::hash::ModuleHash;
use super::store::{MemoryLimiter, StoreState};
use super::wasm::WasmEngine;

/// The world a module implements: the one enum of the worlds, shared with
/// the modules' logic (`lock-key`, the lowest crate both build on).
pub use lock_key::World;

#[derive(Clone)]
enum Pre {
    V01(v01::LockSmPre<StoreState>),
    V02(v02::LockSmPre<StoreState>),
    /// With `pick`'s indices for a module of world 0.4.
    V03(v03::LockSmPre<StoreState>, Option<Box<v04::LockSmIndices>>),
}

/// The typed exports of a running instance.
pub(super) enum Bound {
    V01(v01::LockSm),
    V02(v02::LockSm),
    /// With `pick` for a module of world 0.4.
    V03(v03::LockSm, Option<Box<v04::LockSm>>),
}

/// A checked, compiled component of one of the `lock-sm` worlds.
#[derive(Clone)]
pub struct GuestModule {
    hash: ModuleHash,
    bytes: Arc<[u8]>,
    pre: Pre,
    /// Its own `check-invariants`, for a module of world 0.3 or later
    /// (see [`super::checks`]).
    checks: Option<wasmtime::component::ComponentExportIndex>,
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
        // Imports and the lock world's functions, read before a compile.
        super::admit::check(bytes)?;
        let hash = ModuleHash::of(bytes);
        let cached = engine.cache().and_then(|c| c.get(&engine.engine, &hash));
        let (component, compiled) = match cached {
            Some(c) => (c, Compiled::Cached),
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
        // Newest world first; the error names what 0.1 lacks, since a
        // module that is neither is most often an outdated build.
        let mut checks = None;
        let pre = if let Ok(pre) = v03::LockSmPre::new(instance_pre.clone()) {
            checks = super::checks::find(&engine.engine, &component)?;
            let pick = v04::LockSmIndices::new(&instance_pre).ok().map(Box::new);
            Pre::V03(pre, pick)
        } else if let Ok(pre) = v02::LockSmPre::new(instance_pre.clone()) {
            Pre::V02(pre)
        } else {
            Pre::V01(
                v01::LockSmPre::new(instance_pre)
                    .map_err(|e| EngineError::WrongWorld(format!("{e:#}")))?,
            )
        };
        // Admitted: now, and only now, kept for the next load.
        if let (Some(cache), Compiled::Fresh) = (engine.cache(), compiled) {
            cache.put(&component, &hash);
        }
        Ok(GuestModule {
            hash,
            bytes: bytes.into(),
            pre,
            checks,
            compiled,
        })
    }

    pub fn hash(&self) -> ModuleHash {
        self.hash
    }

    pub fn bytes(&self) -> &Arc<[u8]> {
        &self.bytes
    }

    pub fn world(&self) -> World {
        match self.pre {
            Pre::V01(_) => World::V01,
            Pre::V02(_) => World::V02,
            Pre::V03(_, None) => World::V03,
            Pre::V03(_, Some(_)) => World::V04,
        }
    }

    /// Whether this load compiled the component or took it from the cache.
    pub fn compiled(&self) -> Compiled {
        self.compiled
    }
}

/// A running instance of a lock module: its own store, memory and lock table.
pub struct GuestInstance {
    store: Store<StoreState>,
    bindings: Bound,
    module: ModuleHash,
    /// The budget of the next call: `fuel_per_call`, or the state
    /// budget while [`GuestInstance::state_call`] runs.
    fuel_per_call: u64,
    fuel_per_state_call: u64,
    poisoned: Option<String>,
    last_fuel_used: u64,
    /// The module's `version()` and `features()`, once asked.
    pub(super) version: Option<String>,
    pub(super) features: Option<crate::command::FeatureSet>,
    /// Its own `check-invariants`, if it exports one.
    pub(super) checks: Option<super::checks::CheckFn>,
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
                limiter: MemoryLimiter::new(settings.memory_limit_bytes),
            },
        );
        store.limiter(|s| &mut s.limiter);
        // wasmtime caps what one call may copy out of the guest (128 MiB by
        // default): a snapshot of a big table would trap there, on every
        // node alike. A guest cannot hand out more than its memory, so the
        // memory limit is the only bound that matters; spelled out here and
        // in the fingerprint.
        store.set_hostcall_fuel(settings.hostcall_fuel());
        store
            .set_fuel(settings.fuel_per_call)
            .map_err(|e| EngineError::Config(format!("{e:#}")))?;
        let mut checks = None;
        let bindings = match &module.pre {
            Pre::V01(pre) => pre.instantiate(&mut store).map(Bound::V01),
            Pre::V02(pre) => pre.instantiate(&mut store).map(Bound::V02),
            Pre::V03(pre, None) if module.checks.is_none() => {
                pre.instantiate(&mut store).map(|sm| Bound::V03(sm, None))
            }
            // One instance, every binding: 0.3's for everything, `pick`
            // and `check-invariants` where the module has them.
            Pre::V03(pre, pick) => {
                pre.instance_pre()
                    .instantiate(&mut store)
                    .and_then(|instance| {
                        let picker = match pick {
                            Some(p) => Some(Box::new(p.load(&mut store, &instance)?)),
                            None => None,
                        };
                        if let Some(index) = &module.checks {
                            checks = Some(super::checks::bind(&mut store, &instance, index)?);
                        }
                        let sm = v03::LockSm::new(&mut store, &instance)?;
                        Ok(Bound::V03(sm, picker))
                    })
            }
        }
        .map_err(|e| classify("instantiate", e, &store, settings.fuel_per_call))?;
        Ok(GuestInstance {
            store,
            bindings,
            module: module.hash,
            fuel_per_call: settings.fuel_per_call,
            fuel_per_state_call: settings.fuel_per_state_call,
            poisoned: None,
            last_fuel_used: 0,
            version: None,
            features: None,
            checks,
        })
    }

    pub fn module_hash(&self) -> ModuleHash {
        self.module
    }

    pub fn world(&self) -> World {
        match self.bindings {
            Bound::V01(_) => World::V01,
            Bound::V02(_) => World::V02,
            Bound::V03(_, None) => World::V03,
            Bound::V03(_, Some(_)) => World::V04,
        }
    }

    /// The first failure that poisoned this instance, if any.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Fuel the last successful call consumed (a deterministic cost measure).
    pub fn last_fuel_used(&self) -> u64 {
        self.last_fuel_used
    }

    /// Bytes of linear memory the instance holds, all memories together
    /// (what the memory limit counts; memories never shrink, so this is
    /// also the peak).
    pub fn memory_bytes(&self) -> u64 {
        self.store.data().limiter.used
    }

    /// Lower this instance's fuel budget per call to at most `fuel` (a
    /// leader's `pick` instance, whose calls hold up the lock table).
    pub(super) fn cap_fuel(&mut self, fuel: u64) {
        self.fuel_per_call = self.fuel_per_call.min(fuel);
    }

    /// Run `f` (one call that moves the whole state, or a replay of what
    /// was applied once) with the state budget.
    pub fn state_call<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let normal = std::mem::replace(&mut self.fuel_per_call, self.fuel_per_state_call);
        let r = f(self);
        self.fuel_per_call = normal;
        r
    }

    /// Run one guest call with a full fuel budget; a failure poisons.
    pub(super) fn call<R>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&Bound, &mut Store<StoreState>) -> wasmtime::Result<R>,
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

    /// Record a failure found outside a guest call (a malformed answer):
    /// the instance is poisoned as if the call had failed.
    pub(super) fn poison(&mut self, err: EngineError) -> EngineError {
        self.poisoned = Some(err.to_string());
        tracing::error!(module = %self.module, error = %err, "guest answer malformed; instance poisoned");
        err
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
        Some(Trap::StackOverflow) => EngineError::StackOverflow { call },
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

impl GuestInstance {
    /// The module's own verdict on its state: `None` when it has no
    /// `check-invariants`, `Some(Err(reason))` when it refuses. A trap or
    /// fuel exhaustion is an [`EngineError`] (and poisons the instance,
    /// as any failed call does).
    pub fn check_invariants(&mut self) -> Result<Option<Result<(), String>>, EngineError> {
        let Some(check) = self.checks else {
            return Ok(None);
        };
        let verdict = self.call(super::checks::EXPORT, |_, store| {
            check.call(store, ()).map(|(r,)| r)
        })?;
        Ok(Some(verdict.map_err(super::checks::cut)))
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

//! Compile a module when its entry is appended, not when it is applied.
//!
//! An upgrade or shadow entry reaches a follower (and the leader's own log)
//! well before it commits. [`Precompiler::prepare`] starts compiling it on a
//! thread at append time; by the time the entry is applied the compiled
//! module is usually ready, and [`Precompiler::load`] takes it without
//! stalling the apply path. If it is not ready, `load` waits for it; if it
//! was never prepared (a restart that re-applies the log), `load` compiles
//! (or takes it from the on-disk cache) itself. Either way the result is the
//! same [`WasmEngine::load`], so it cannot differ between nodes.
//!
//! Compiling is bounded: one compile at a time on the node (the others
//! wait their turn), and at most [`KEEP`] modules waiting to be compiled in
//! the background; past that, an appended module is not prepared and its
//! apply compiles it (in turn, too).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::engine::{EngineError, GuestModule, ModuleHash, WasmEngine};

/// Modules kept ready; an entry that never commits leaves one behind, so
/// the oldest are dropped.
const KEEP: usize = 8;

struct Slot {
    /// `None` while compiling; `Some(None)` if the compile thread died (the
    /// caller then compiles inline); `Some(Some(result))` when done.
    done: Mutex<Option<Option<Result<GuestModule, EngineError>>>>,
    ready: Condvar,
}

pub struct Precompiler {
    engine: Arc<WasmEngine>,
    slots: Mutex<VecDeque<(ModuleHash, Arc<Slot>)>>,
    /// Held while a module compiles: one at a time.
    compiling: Arc<Mutex<()>>,
    /// Background compiles started and not finished.
    pending: Arc<AtomicUsize>,
    /// The largest module this node runs (its `--max-module-bytes`);
    /// `None`: no bound of its own. Read at a swap
    /// (`crate::replica`, "Cannot run"), not by `load`.
    max_module_bytes: Option<usize>,
}

impl Precompiler {
    pub fn new(engine: Arc<WasmEngine>) -> Arc<Precompiler> {
        Self::limited(engine, None)
    }

    /// As [`Precompiler::new`], on a node that runs modules of at most
    /// `max_module_bytes`.
    pub fn limited(engine: Arc<WasmEngine>, max_module_bytes: Option<usize>) -> Arc<Precompiler> {
        Arc::new(Precompiler {
            engine,
            slots: Mutex::new(VecDeque::new()),
            compiling: Arc::new(Mutex::new(())),
            pending: Arc::new(AtomicUsize::new(0)),
            max_module_bytes,
        })
    }

    /// Why this node will not run `module` for its size (its own
    /// `--max-module-bytes`), if it will not: the one check of the bound,
    /// for a voter's dry run and for a swap (`crate::replica`, "Cannot
    /// run").
    pub fn over_bound(&self, module: &[u8]) -> Option<String> {
        let max = self.max_module_bytes?;
        (module.len() > max).then(|| {
            format!(
                "the module takes {} bytes, above this node's bound of {max} (--max-module-bytes)",
                module.len()
            )
        })
    }

    pub fn engine(&self) -> &Arc<WasmEngine> {
        &self.engine
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, VecDeque<(ModuleHash, Arc<Slot>)>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Load `bytes`, waiting for any other compile on this node first.
    fn load_in_turn(
        engine: &WasmEngine,
        gate: &Mutex<()>,
        bytes: &[u8],
    ) -> Result<GuestModule, EngineError> {
        let _turn = gate.lock().unwrap_or_else(|p| p.into_inner());
        engine.load(bytes)
    }

    /// Start compiling `bytes` in the background (once per module, and not
    /// when [`KEEP`] compiles are already waiting).
    pub fn prepare(&self, bytes: &[u8]) {
        let hash = ModuleHash::of(bytes);
        if self.pending.load(Ordering::Relaxed) >= KEEP {
            tracing::warn!(module = %hash, "too many modules waiting to compile; this one compiles when applied");
            return;
        }
        let slot = {
            let mut slots = self.slots();
            if slots.iter().any(|(h, _)| *h == hash) {
                return;
            }
            let slot = Arc::new(Slot {
                done: Mutex::new(None),
                ready: Condvar::new(),
            });
            slots.push_back((hash, slot.clone()));
            while slots.len() > KEEP {
                slots.pop_front();
            }
            slot
        };
        let engine = self.engine.clone();
        let bytes = bytes.to_vec();
        let (gate, pending) = (self.compiling.clone(), self.pending.clone());
        pending.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("precompile".into())
            .spawn({
                let slot = slot.clone();
                let pending = pending.clone();
                move || {
                    let started = std::time::Instant::now();
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        Self::load_in_turn(&engine, &gate, &bytes)
                    }))
                    .ok();
                    pending.fetch_sub(1, Ordering::Relaxed);
                    tracing::info!(module = %hash, ok = result.as_ref().is_some_and(|r| r.is_ok()), ms = started.elapsed().as_secs_f64() * 1e3, "precompiled a module from the log");
                    *slot.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                    slot.ready.notify_all();
                }
            });
        if spawned.is_err() {
            // No thread: `load` compiles inline instead.
            pending.fetch_sub(1, Ordering::Relaxed);
            self.slots().retain(|(h, _)| *h != hash);
        }
    }

    /// The loaded module for `bytes`: the prepared one (waiting for it if
    /// it is still compiling) or a fresh load.
    pub fn load(&self, bytes: &[u8]) -> Result<GuestModule, EngineError> {
        let hash = ModuleHash::of(bytes);
        let slot = self
            .slots()
            .iter()
            .find(|(h, _)| *h == hash)
            .map(|(_, s)| s.clone());
        if let Some(slot) = slot {
            let mut done = slot.done.lock().unwrap_or_else(|p| p.into_inner());
            while done.is_none() {
                done = slot.ready.wait(done).unwrap_or_else(|p| p.into_inner());
            }
            if let Some(Some(result)) = done.as_ref() {
                return result.clone();
            }
        }
        Self::load_in_turn(&self.engine, &self.compiling, bytes)
    }
}

//! [`WasmEngine`]: one wasmtime engine under the deterministic settings,
//! with the local component cache and an empty linker. Loading and
//! instantiating modules is in [`super::guest`].

use std::path::PathBuf;

use wasmtime::component::Linker;

use super::cache::{CacheBound, ComponentCache};
use super::error::EngineError;
use super::settings::{EngineFingerprint, EngineSettings};
use super::store::StoreState;

/// A wasmtime engine configured for deterministic execution, with the local
/// component cache.
pub struct WasmEngine {
    pub(super) engine: wasmtime::Engine,
    settings: EngineSettings,
    fingerprint: EngineFingerprint,
    cache: Option<ComponentCache>,
    /// Empty on purpose: a guest gets no host functions at all.
    pub(super) linker: Linker<StoreState>,
}

impl WasmEngine {
    /// Build the engine. `cache_dir` is where compiled components are kept
    /// between runs; `None` compiles every module on load.
    pub fn new(settings: EngineSettings, cache_dir: Option<PathBuf>) -> Result<Self, EngineError> {
        Self::bounded(settings, cache_dir, CacheBound::default())
    }

    /// [`WasmEngine::new`] with the cache kept within `bound`.
    pub fn bounded(
        settings: EngineSettings,
        cache_dir: Option<PathBuf>,
        bound: CacheBound,
    ) -> Result<Self, EngineError> {
        let engine = wasmtime::Engine::new(&settings.wasmtime_config())
            .map_err(|e| EngineError::Config(format!("{e:#}")))?;
        let fingerprint = settings.fingerprint();
        let cache = match cache_dir {
            Some(dir) => Some(ComponentCache::open(dir, &fingerprint, bound)?),
            None => None,
        };
        let linker = Linker::new(&engine);
        Ok(WasmEngine {
            engine,
            settings,
            fingerprint,
            cache,
            linker,
        })
    }

    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    pub fn fingerprint(&self) -> &EngineFingerprint {
        &self.fingerprint
    }

    pub fn cache(&self) -> Option<&ComponentCache> {
        self.cache.as_ref()
    }
}

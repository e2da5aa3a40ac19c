//! Compiled components on local disk, keyed by (module hash, engine
//! fingerprint).
//!
//! Compiling a component takes far longer than loading a compiled one, and a
//! node loads its active module at every start. Artifacts are written only by
//! this node, from bytes it compiled itself; a precompiled artifact from a
//! peer is never accepted, since deserialising one is trusting native code.
//!
//! File: `<dir>/<module-hash>-<fingerprint16>.cwasm` = SHA-256 of the artifact
//! followed by the artifact. The digest is checked before wasmtime sees the
//! bytes, so a torn or bit-flipped file is recompiled rather than loaded.
//! Writes go to a temporary file that is renamed into place.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::error::EngineError;
use super::hash::ModuleHash;
use super::settings::EngineFingerprint;

pub struct ComponentCache {
    dir: PathBuf,
    fingerprint_short: String,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Where a loaded component came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiled {
    /// Compiled just now.
    Fresh,
    /// Loaded from the local cache.
    Cached,
}

impl ComponentCache {
    pub fn open(dir: PathBuf, fingerprint: &EngineFingerprint) -> Result<Self, EngineError> {
        std::fs::create_dir_all(&dir).map_err(|e| cache_err(&dir, e))?;
        Ok(ComponentCache {
            dir,
            fingerprint_short: fingerprint.short().to_string(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_for(&self, module: &ModuleHash) -> PathBuf {
        self.dir
            .join(format!("{module}-{}.cwasm", self.fingerprint_short))
    }

    /// (hits, misses) since the cache was opened.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// The compiled component for `bytes`, from disk when a sound artifact is
    /// there, otherwise compiled and stored.
    pub fn get_or_compile(
        &self,
        engine: &wasmtime::Engine,
        module: &ModuleHash,
        bytes: &[u8],
    ) -> Result<(Component, Compiled), EngineError> {
        let path = self.path_for(module);
        if let Some(component) = self.load(engine, &path) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok((component, Compiled::Cached));
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let component = compile(engine, bytes)?;
        // A cache that cannot be written only costs a compile next time.
        if let Err(e) = self.store(&component, &path) {
            tracing::warn!(path = %path.display(), error = %e, "could not write compiled component to cache");
        }
        Ok((component, Compiled::Fresh))
    }

    fn load(&self, engine: &wasmtime::Engine, path: &Path) -> Option<Component> {
        let file = std::fs::read(path).ok()?;
        let (digest, artifact) = file.split_at_checked(32)?;
        if Sha256::digest(artifact).as_slice() != digest {
            tracing::warn!(path = %path.display(), "cached component fails its checksum; recompiling");
            return None;
        }
        // SAFETY: the artifact was produced by `Component::serialize` on this
        // node (nothing else writes this directory) and its digest matches,
        // so these are the bytes wasmtime wrote. wasmtime itself checks that
        // they were compiled by a compatible engine.
        match unsafe { Component::deserialize(engine, artifact) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cached component is incompatible; recompiling");
                None
            }
        }
    }

    fn store(&self, component: &Component, path: &Path) -> Result<(), EngineError> {
        let artifact = component.serialize().map_err(|e| cache_err(path, e))?;
        let mut file = Sha256::digest(&artifact).to_vec();
        file.extend_from_slice(&artifact);
        let tmp = path.with_extension("cwasm.tmp");
        std::fs::write(&tmp, &file).map_err(|e| cache_err(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| cache_err(path, e))
    }
}

pub(crate) fn compile(engine: &wasmtime::Engine, bytes: &[u8]) -> Result<Component, EngineError> {
    Component::new(engine, bytes).map_err(|e| EngineError::Invalid(format!("{e:#}")))
}

fn cache_err(path: &Path, e: impl std::fmt::Display) -> EngineError {
    EngineError::Cache {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

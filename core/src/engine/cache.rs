//! Compiled components on local disk, keyed by (module hash, engine
//! fingerprint).
//!
//! Compiling a component takes far longer than loading a compiled one, and a
//! node loads its active module at every start. Artifacts are written only by
//! this node, from bytes it compiled itself; a precompiled artifact from a
//! peer is never accepted, since deserialising one is trusting native code.
//!
//! File: `<dir>/<module-hash>-<fingerprint16>.cwasm` = HMAC-SHA256 under
//! this node's cache key of a context, the file's name and the artifact,
//! followed by the artifact. The name is under the tag: an artifact
//! renamed to another module's name (by anyone who can write the
//! directory) fails its tag, and is never run for the other module. The key
//! is 32 random bytes in `<dir>.key` (beside the cache directory, not in
//! it: for a node, `<data>/module-cache.key`), made once with mode 0600.
//! The tag is checked before wasmtime sees the bytes, so a torn or
//! bit-flipped file, and a file anyone without the key put there (even a
//! genuine artifact of another node with a fresh checksum), is recompiled
//! and logged rather than run as native code.
//!
//! Files are made safely: the directory with mode 0700, artifacts through a
//! temporary file created exclusively (never through a planted symlink)
//! and renamed into place; a cache entry that is not a regular file, or is
//! implausibly big, is ignored. An existing directory or key file is used
//! only if this node's user owns it and no one else may write it (and the
//! key, read it) ([`trust`], ssh's rule for its files): anyone who could
//! plant a key could make this node map native code of their choosing.
//!
//! Only a module that passed admission is stored (the caller checks, then
//! [`ComponentCache::put`]), and the cache is bounded in entries and bytes
//! ([`CacheBound`]): past either, the artifacts used longest ago go first
//! ([`bound`]). An artifact evicted is only compiled again when next
//! needed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::component::Component;

use super::error::EngineError;
use super::hash::ModuleHash;
use super::settings::EngineFingerprint;

mod bound;
mod trust;

pub use bound::CacheBound;

/// The biggest artifact read back (a compiled lock module is a few MiB).
const MAX_ARTIFACT: u64 = 512 << 20;

pub struct ComponentCache {
    dir: PathBuf,
    key: [u8; 32],
    bound: CacheBound,
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
    pub fn open(
        dir: PathBuf,
        fingerprint: &EngineFingerprint,
        bound: CacheBound,
    ) -> Result<Self, EngineError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| cache_err(&dir, e))?;
        trust::check_dir(&dir)?;
        let key_path = key_path(&dir);
        if let Some(parent) = key_path.parent() {
            trust::check_parent(parent)?;
        }
        let key = cache_key(&key_path)?;
        Ok(ComponentCache {
            dir,
            key,
            bound,
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

    /// The compiled component of `module`, from disk, when a sound artifact
    /// is there (its time of use renewed, for the bound).
    pub fn get(&self, engine: &wasmtime::Engine, module: &ModuleHash) -> Option<Component> {
        let path = self.path_for(module);
        match self.load(engine, &path) {
            Some(component) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                bound::used(&path);
                Some(component)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Keep `component`, compiled here from `module` and admitted, then
    /// keep the cache within its bound. A cache that cannot be written only
    /// costs a compile next time.
    pub fn put(&self, component: &Component, module: &ModuleHash) {
        let path = self.path_for(module);
        if let Err(e) = self.store(component, &path) {
            tracing::warn!(path = %path.display(), error = %e, "could not write compiled component to cache");
            return;
        }
        bound::keep_within(&self.dir, &self.bound, &path);
    }

    /// The tag of `artifact` stored at `path`: over its file name too.
    fn tag(&self, path: &Path, artifact: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .expect("HMAC takes a key of any length");
        let name = path.file_name().unwrap_or_default().as_encoded_bytes();
        mac.update(TAG_CONTEXT);
        mac.update(&(name.len() as u64).to_be_bytes());
        mac.update(name);
        mac.update(artifact);
        mac
    }

    fn load(&self, engine: &wasmtime::Engine, path: &Path) -> Option<Component> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.file_type().is_file() || meta.len() > MAX_ARTIFACT {
            tracing::warn!(path = %path.display(), "cache entry is not a plain file of a plausible size; recompiling");
            return None;
        }
        let mut file = Vec::with_capacity(meta.len() as usize);
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .ok()?
            .take(MAX_ARTIFACT)
            .read_to_end(&mut file)
            .ok()?;
        let (tag, artifact) = file.split_at_checked(32)?;
        if self.tag(path, artifact).verify_slice(tag).is_err() {
            tracing::warn!(path = %path.display(), "cached component fails its authentication tag (corrupt, or not written by this node); recompiling");
            return None;
        }
        // SAFETY: the artifact carries a tag under this node's key, so it is
        // exactly what `Component::serialize` produced here (only this node
        // has the key). wasmtime itself checks that it was compiled by a
        // compatible engine.
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
        let mut file = self.tag(path, &artifact).finalize().into_bytes().to_vec();
        file.extend_from_slice(&artifact);
        let tmp = write_beside(path, &file)?;
        let renamed = std::fs::rename(&tmp, path);
        if renamed.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        renamed.map_err(|e| cache_err(path, e))
    }
}

/// `bytes` written and synced to a new temporary file beside `path`, of
/// this process and this call alone (created exclusively, mode 0600, so
/// never through a planted symlink), for the caller to move into place.
fn write_beside(path: &Path, bytes: &[u8]) -> Result<PathBuf, EngineError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    // Only a dead process of this pid can have left one: ours now.
    let _ = std::fs::remove_file(&tmp);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(cache_err(&tmp, e))
        }
    }
}

/// What every tag covers first (version 2: the name is covered; a
/// version-1 file fails its tag and is compiled again, once).
const TAG_CONTEXT: &[u8] = b"lockd module cache v2\n";

/// Where the key of the cache in `dir` lives: beside it, not in it.
fn key_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".key");
    dir.with_file_name(name)
}

/// The cache key at `path`: read, or made once (32 random bytes, 0600).
/// A key file that is not a plain file of 32 bytes is refused: the cache
/// would be trusting bytes it cannot account for.
///
/// Nodes sharing a cache may start at once: a new key is written whole
/// to a file of this process's own and then linked to `path`, which fails
/// if another node's key got there first (that key is then read). So a
/// key is never read half-written, and never replaced.
fn cache_key(path: &Path) -> Result<[u8; 32], EngineError> {
    if std::fs::symlink_metadata(path).is_err() {
        make_key(path)?;
    }
    let mut key = [0u8; 32];
    let meta = std::fs::symlink_metadata(path).map_err(|e| cache_err(path, e))?;
    if !meta.file_type().is_file() || meta.len() != 32 {
        return Err(cache_err(
            path,
            "the cache key must be a plain file of 32 bytes",
        ));
    }
    trust::check_key(path, &meta)?;
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| cache_err(path, e))?;
    f.read_exact(&mut key).map_err(|e| cache_err(path, e))?;
    Ok(key)
}

/// Write a new key and link it to `path`, unless a key is there already.
fn make_key(path: &Path) -> Result<(), EngineError> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| cache_err(path, e))?;
    let tmp = write_beside(path, &key)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(cache_err(path, e)),
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

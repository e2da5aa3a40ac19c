//! The module cache's bound: at most so many artifacts and so many bytes
//! in the directory. After each artifact written, the ones used longest
//! ago (by their modification time, renewed at every use) are removed
//! until the cache is within both; the artifact just written stays. What
//! a node runs is in its memory, so an eviction costs at most a compile at
//! its next start; several nodes sharing one cache share its bound.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How much the cache keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheBound {
    pub max_entries: usize,
    pub max_bytes: u64,
}

impl Default for CacheBound {
    /// 64 artifacts, 1 GiB (a compiled lock module is a few MiB).
    fn default() -> Self {
        CacheBound {
            max_entries: 64,
            max_bytes: 1 << 30,
        }
    }
}

/// `path` was used: it is the last to go.
pub(super) fn used(path: &Path) {
    if let Ok(f) = std::fs::File::options().write(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Remove the artifacts of `dir` used longest ago until it is within
/// `bound`, never `keep`.
pub(super) fn keep_within(dir: &Path, bound: &CacheBound, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut artifacts: Vec<(SystemTime, u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_file().then(|| {
                (
                    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    meta.len(),
                    e.path(),
                )
            })
        })
        .collect();
    artifacts.sort();
    let mut count = artifacts.len();
    let mut bytes: u64 = artifacts.iter().map(|(_, len, _)| len).sum();
    for (_, len, path) in artifacts {
        if count <= bound.max_entries && bytes <= bound.max_bytes {
            break;
        }
        if path == keep {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "evicted a compiled module from the cache (its bound)");
                count -= 1;
                bytes = bytes.saturating_sub(len);
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "could not evict a compiled module")
            }
        }
    }
}

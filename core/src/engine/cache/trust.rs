//! Whether a module cache found on disk may be trusted, by ssh's rule for
//! its own files: the directory and the key must belong to this node's
//! user, no one else may write either, no one else may read the key, and
//! the directory the key lives in must not let others replace it (not
//! writable by others, unless sticky, as `/tmp` is). Anyone who could
//! plant a key could make the node map native code of their choosing, so
//! a cache that fails is refused at start with the path and the fix, not
//! used.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::cache_err;
use crate::engine::error::EngineError;

/// The effective user this process runs as.
fn me() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn owned_by_me(path: &Path, meta: &std::fs::Metadata) -> Result<(), EngineError> {
    if meta.uid() != me() {
        return Err(cache_err(
            path,
            format!(
                "it belongs to uid {}, not to this node's user (uid {}): use a directory of this user's own (docs/security.md, \"The module cache\")",
                meta.uid(),
                me()
            ),
        ));
    }
    Ok(())
}

/// The cache directory: a real directory (not a link), this user's, that
/// no one else may write.
pub(super) fn check_dir(dir: &Path) -> Result<(), EngineError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| cache_err(dir, e))?;
    if !meta.file_type().is_dir() {
        return Err(cache_err(
            dir,
            "it is not a directory (a link is not followed)",
        ));
    }
    owned_by_me(dir, &meta)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(cache_err(
            dir,
            format!("others may write it (mode {mode:04o}): chmod go-w it"),
        ));
    }
    Ok(())
}

/// The directory the key lives in: this user's or root's, and not one
/// where others could replace the key (writable by others only if sticky).
pub(super) fn check_parent(parent: &Path) -> Result<(), EngineError> {
    let meta = std::fs::metadata(parent).map_err(|e| cache_err(parent, e))?;
    if meta.uid() != me() && meta.uid() != 0 {
        return owned_by_me(parent, &meta);
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(cache_err(
            parent,
            format!(
                "others may write the directory the cache key is in (mode {mode:04o}, not sticky): chmod go-w it, or put the cache elsewhere"
            ),
        ));
    }
    Ok(())
}

/// The key: this user's, and no one else's to read or write.
pub(super) fn check_key(path: &Path, meta: &std::fs::Metadata) -> Result<(), EngineError> {
    owned_by_me(path, meta)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(cache_err(
            path,
            format!("others may read or write the cache key (mode {mode:04o}): chmod 600 it"),
        ));
    }
    Ok(())
}

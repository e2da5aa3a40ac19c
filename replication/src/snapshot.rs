//! The snapshot file: `snapshot/current` in the data dir, holding one
//! [`SnapshotBlob`] (the format is the deterministic core's,
//! [`lockd_core::snapshot`]), written atomically.

use std::path::Path;

use thiserror::Error;

pub use lockd_core::snapshot::SnapshotBlob;

/// A snapshot file that cannot be read or decoded.
#[derive(Debug, Error)]
#[error("cannot read snapshot {path}: {reason}")]
pub struct SnapshotFileError {
    pub path: String,
    pub reason: String,
}

/// Read and decode `current` in `dir`, if there is one; also returns the raw
/// bytes (kept for sending to peers).
pub fn read_blob(dir: &Path) -> Result<Option<(SnapshotBlob, Vec<u8>)>, SnapshotFileError> {
    let path = dir.join("current");
    let snapshot_err = |reason: String| SnapshotFileError {
        path: path.display().to_string(),
        reason,
    };
    let Some(bytes) = lockd_log::read_atomic(&path).map_err(|e| snapshot_err(e.to_string()))?
    else {
        return Ok(None);
    };
    let blob = SnapshotBlob::decode(&bytes).map_err(snapshot_err)?;
    Ok(Some((blob, bytes)))
}

/// Store `bytes` (an encoded blob) as `current` in `dir`, atomically.
pub fn write(dir: &Path, bytes: &[u8]) -> Result<(), lockd_log::WalError> {
    lockd_log::write_atomic(&dir.join("current"), bytes)
}

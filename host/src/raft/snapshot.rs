//! The snapshot file: what is stored in `snapshot/current` and sent to peers.
//!
//! A snapshot is the guest's own `snapshot()` bytes, the **active module's
//! component bytes**, and the Raft metadata (last log id, membership), so a
//! node that installs it runs exactly the module that was active at that
//! index. It also carries the index the module has been active since and the
//! last upgrade records, so status survives a restart, and the replicated
//! settings: the capacity bounds and the trusted module keys.
//!
//! Format: an 8-byte magic, then the postcard body. `LKDSNAP4` is written;
//! `LKDSNAP3` (before signed modules: no key is trusted), `LKDSNAP2`
//! (before the capacity bound existed: it gets the default bounds, and no
//! key) and `LKDSNAP1` (before upgrades existed) are still read.

use std::path::Path;

use lockd_client::proto::{Capacity, UpgradeRecord};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::SnapshotMeta;
use crate::upgrade::signature::TrustedKeys;

const SNAPSHOT_MAGIC_V1: &[u8; 8] = b"LKDSNAP1";
const SNAPSHOT_MAGIC_V2: &[u8; 8] = b"LKDSNAP2";
const SNAPSHOT_MAGIC_V3: &[u8; 8] = b"LKDSNAP3";
const SNAPSHOT_MAGIC: &[u8; 8] = b"LKDSNAP4";

/// The snapshot blob: what is stored on disk and sent to peers.
#[derive(Serialize, Deserialize)]
pub struct SnapshotBlob {
    pub meta: SnapshotMeta,
    /// Component bytes of the module active at `meta.last_log_id`.
    pub module: Vec<u8>,
    /// The guest's `snapshot()` output.
    pub guest_state: Vec<u8>,
    /// The index at which `module` became active (0: from the start).
    pub module_since: u64,
    /// The most recent upgrade entries applied.
    pub upgrades: Vec<UpgradeRecord>,
    /// The capacity bounds in force.
    pub capacity: Capacity,
    /// The module keys trusted.
    pub module_keys: TrustedKeys,
}

/// Format 3, before signed modules: read, never written.
#[derive(Deserialize)]
struct SnapshotBlobV3 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
    module_since: u64,
    upgrades: Vec<UpgradeRecord>,
    capacity: Capacity,
}

/// Format 2, before the capacity bound: read, never written.
#[derive(Deserialize)]
struct SnapshotBlobV2 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
    module_since: u64,
    upgrades: Vec<UpgradeRecord>,
}

/// Format 1, before upgrades existed: read, never written.
#[derive(Deserialize)]
struct SnapshotBlobV1 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
}

/// A snapshot file that cannot be read or decoded.
#[derive(Debug, Error)]
#[error("cannot read snapshot {path}: {reason}")]
pub struct SnapshotFileError {
    pub path: String,
    pub reason: String,
}

impl SnapshotBlob {
    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = SNAPSHOT_MAGIC.to_vec();
        out.extend(postcard::to_allocvec(self)?);
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SnapshotBlob, String> {
        let bad = |e: postcard::Error| format!("snapshot does not decode: {e}");
        let default = crate::raft::replica::capacity::DEFAULT_CAPACITY;
        if let Some(body) = bytes.strip_prefix(SNAPSHOT_MAGIC_V1.as_slice()) {
            let v1: SnapshotBlobV1 = postcard::from_bytes(body).map_err(bad)?;
            return Ok(SnapshotBlob {
                meta: v1.meta,
                module: v1.module,
                guest_state: v1.guest_state,
                module_since: 0,
                upgrades: Vec::new(),
                capacity: default,
                module_keys: TrustedKeys::default(),
            });
        }
        if let Some(body) = bytes.strip_prefix(SNAPSHOT_MAGIC_V2.as_slice()) {
            let v2: SnapshotBlobV2 = postcard::from_bytes(body).map_err(bad)?;
            return Ok(SnapshotBlob {
                meta: v2.meta,
                module: v2.module,
                guest_state: v2.guest_state,
                module_since: v2.module_since,
                upgrades: v2.upgrades,
                capacity: default,
                module_keys: TrustedKeys::default(),
            });
        }
        if let Some(body) = bytes.strip_prefix(SNAPSHOT_MAGIC_V3.as_slice()) {
            let v3: SnapshotBlobV3 = postcard::from_bytes(body).map_err(bad)?;
            return Ok(SnapshotBlob {
                meta: v3.meta,
                module: v3.module,
                guest_state: v3.guest_state,
                module_since: v3.module_since,
                upgrades: v3.upgrades,
                capacity: v3.capacity,
                module_keys: TrustedKeys::default(),
            });
        }
        let body = bytes
            .strip_prefix(SNAPSHOT_MAGIC.as_slice())
            .ok_or("not a lockd snapshot (bad magic)")?;
        let mut blob: SnapshotBlob = postcard::from_bytes(body).map_err(bad)?;
        blob.module_keys = std::mem::take(&mut blob.module_keys)
            .validated()
            .map_err(|e| format!("snapshot's trusted module keys: {e}"))?;
        Ok(blob)
    }
}

/// Read and decode `current` in `dir`, if there is one; also returns the raw
/// bytes (kept for sending to peers).
pub fn read_blob(dir: &Path) -> Result<Option<(SnapshotBlob, Vec<u8>)>, SnapshotFileError> {
    let path = dir.join("current");
    let snapshot_err = |reason: String| SnapshotFileError {
        path: path.display().to_string(),
        reason,
    };
    let Some(bytes) = crate::log::read_atomic(&path).map_err(|e| snapshot_err(e.to_string()))?
    else {
        return Ok(None);
    };
    let blob = SnapshotBlob::decode(&bytes).map_err(snapshot_err)?;
    Ok(Some((blob, bytes)))
}

/// Store `bytes` (an encoded blob) as `current` in `dir`, atomically.
pub fn write(dir: &Path, bytes: &[u8]) -> Result<(), crate::log::WalError> {
    crate::log::write_atomic(&dir.join("current"), bytes)
}

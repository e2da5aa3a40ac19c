//! The snapshot format: what a node stores as its snapshot file and sends to
//! peers (the file itself is the host's).
//!
//! A snapshot is the guest's own `snapshot()` bytes, the **active module's
//! component bytes**, and the Raft metadata (last log id, membership), so a
//! node that installs it runs exactly the module that was active at that
//! index. It also carries the index the module has been active since and the
//! last upgrade records, so status survives a restart, the replicated
//! settings (the capacity bounds and the trusted module keys), and the
//! module the cluster started with.
//!
//! Format: an 8-byte magic, then the postcard body. `LKDSNAP5` is written;
//! `LKDSNAP4` (before the first module was kept: known only while no
//! module has been swapped in since index 0),
//! `LKDSNAP3` (before signed modules: no key is trusted), `LKDSNAP2`
//! (before the capacity bound existed: it gets the default bounds, and no
//! key) and `LKDSNAP1` (before upgrades existed) are still read.

use serde::{Deserialize, Serialize};

use crate::engine::ModuleHash;
use crate::entry::SnapshotMeta;
use crate::replica::capacity::Capacity;
use crate::signature::TrustedKeys;
use crate::upgrade::UpgradeRecord;

const SNAPSHOT_MAGIC_V1: &[u8; 8] = b"LKDSNAP1";
const SNAPSHOT_MAGIC_V2: &[u8; 8] = b"LKDSNAP2";
const SNAPSHOT_MAGIC_V3: &[u8; 8] = b"LKDSNAP3";
const SNAPSHOT_MAGIC_V4: &[u8; 8] = b"LKDSNAP4";
const SNAPSHOT_MAGIC: &[u8; 8] = b"LKDSNAP5";

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
    /// The module the cluster started with: the built-in one of index 0
    /// or the one its first entry recorded ([`crate::upgrade::Genesis`]).
    /// `None`: not known (read from format 4 after an upgrade).
    pub first_module: Option<ModuleHash>,
}

/// Format 4, before the first module was kept: read, never written.
#[derive(Deserialize)]
struct SnapshotBlobV4 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
    module_since: u64,
    upgrades: Vec<UpgradeRecord>,
    capacity: Capacity,
    module_keys: TrustedKeys,
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

impl SnapshotBlob {
    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = SNAPSHOT_MAGIC.to_vec();
        out.extend(postcard::to_allocvec(self)?);
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SnapshotBlob, String> {
        let mut blob = Self::decode_any(bytes)?;
        // Before format 5: the active module is the first while none has
        // been swapped in since index 0.
        if blob.first_module.is_none() && blob.module_since == 0 {
            blob.first_module = Some(ModuleHash::of(&blob.module));
        }
        blob.module_keys = std::mem::take(&mut blob.module_keys)
            .validated()
            .map_err(|e| format!("snapshot's trusted module keys: {e}"))?;
        Ok(blob)
    }

    /// The blob of any format, read as it was written.
    fn decode_any(bytes: &[u8]) -> Result<SnapshotBlob, String> {
        let bad = |e: postcard::Error| format!("snapshot does not decode: {e}");
        let default = crate::replica::capacity::DEFAULT_CAPACITY;
        let (magic, body) = bytes
            .split_at_checked(8)
            .ok_or("not a lockd snapshot (too short)")?;
        let blob = match <&[u8; 8]>::try_from(magic).map_err(|_| "not a lockd snapshot")? {
            SNAPSHOT_MAGIC => postcard::from_bytes::<SnapshotBlob>(body).map_err(bad)?,
            SNAPSHOT_MAGIC_V4 => {
                let v4: SnapshotBlobV4 = postcard::from_bytes(body).map_err(bad)?;
                SnapshotBlob {
                    meta: v4.meta,
                    module: v4.module,
                    guest_state: v4.guest_state,
                    module_since: v4.module_since,
                    upgrades: v4.upgrades,
                    capacity: v4.capacity,
                    module_keys: v4.module_keys,
                    first_module: None,
                }
            }
            SNAPSHOT_MAGIC_V3 => {
                let v3: SnapshotBlobV3 = postcard::from_bytes(body).map_err(bad)?;
                SnapshotBlob {
                    meta: v3.meta,
                    module: v3.module,
                    guest_state: v3.guest_state,
                    module_since: v3.module_since,
                    upgrades: v3.upgrades,
                    capacity: v3.capacity,
                    module_keys: TrustedKeys::default(),
                    first_module: None,
                }
            }
            SNAPSHOT_MAGIC_V2 => {
                let v2: SnapshotBlobV2 = postcard::from_bytes(body).map_err(bad)?;
                SnapshotBlob {
                    meta: v2.meta,
                    module: v2.module,
                    guest_state: v2.guest_state,
                    module_since: v2.module_since,
                    upgrades: v2.upgrades,
                    capacity: default,
                    module_keys: TrustedKeys::default(),
                    first_module: None,
                }
            }
            SNAPSHOT_MAGIC_V1 => {
                let v1: SnapshotBlobV1 = postcard::from_bytes(body).map_err(bad)?;
                SnapshotBlob {
                    meta: v1.meta,
                    module: v1.module,
                    guest_state: v1.guest_state,
                    module_since: 0,
                    upgrades: Vec::new(),
                    capacity: default,
                    module_keys: TrustedKeys::default(),
                    first_module: None,
                }
            }
            _ => return Err("not a lockd snapshot (bad magic)".into()),
        };
        Ok(blob)
    }
}

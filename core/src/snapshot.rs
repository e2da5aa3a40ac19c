//! The snapshot format: what a node stores as its snapshot file and sends to
//! peers (the file itself is the host's).
//!
//! A snapshot is the guest's own `snapshot()` bytes, the **active module's
//! component bytes**, and the Raft metadata (last log id, membership), so a
//! node that installs it runs exactly the module that was active at that
//! index. It also carries the index the module has been active since and the
//! last upgrade records, so status survives a restart, the replicated
//! settings (the capacity bounds and the trusted module keys), the
//! module the cluster started with, the commands its modules failed
//! on, the way back (the previous module and what to do on failure), and
//! the last quorum pre-check's verdicts.
//!
//! Format: an 8-byte magic, then the postcard body. `LKDSNAP9` is written;
//! `LKDSNAP8` (before the quorum pre-check: none recorded),
//! `LKDSNAP7` (before versions and the way back: none recorded),
//! `LKDSNAP6` (before a module could be taken out of service: its failures
//! have no kinds, and none is out of service),
//! `LKDSNAP5` (before module failures were isolated: none recorded),
//! `LKDSNAP4` (before the first module was kept: known only while no
//! module has been swapped in since index 0),
//! `LKDSNAP3` (before signed modules: no key is trusted), `LKDSNAP2`
//! (before the capacity bound existed: it gets the default bounds, and no
//! key) and `LKDSNAP1` (before upgrades existed) are still read.

use serde::{Deserialize, Serialize};

use crate::engine::ModuleHash;
use crate::entry::SnapshotMeta;
use crate::precheck::PrecheckSeen;
use crate::replica::capacity::Capacity;
use crate::replica::failures::{FailureLog, FailureLogV6, KEEP_FAILURES};
use crate::signature::TrustedKeys;
use crate::upgrade::UpgradeRecord;
use crate::way_back::WayBack;

const SNAPSHOT_MAGIC_V1: &[u8; 8] = b"LKDSNAP1";
const SNAPSHOT_MAGIC_V2: &[u8; 8] = b"LKDSNAP2";
const SNAPSHOT_MAGIC_V3: &[u8; 8] = b"LKDSNAP3";
const SNAPSHOT_MAGIC_V4: &[u8; 8] = b"LKDSNAP4";
const SNAPSHOT_MAGIC_V5: &[u8; 8] = b"LKDSNAP5";
const SNAPSHOT_MAGIC_V6: &[u8; 8] = b"LKDSNAP6";
const SNAPSHOT_MAGIC_V7: &[u8; 8] = b"LKDSNAP7";
const SNAPSHOT_MAGIC_V8: &[u8; 8] = b"LKDSNAP8";
const SNAPSHOT_MAGIC: &[u8; 8] = b"LKDSNAP9";

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
    /// The commands the cluster's modules failed on (see
    /// `crate::replica`, "Trap isolation").
    pub failures: FailureLog,
    /// The previous module and what to do on failure (see
    /// [`crate::way_back`]).
    pub way_back: WayBack,
    /// The last quorum pre-check (see [`crate::precheck`]).
    pub precheck: Option<PrecheckSeen>,
}

// The earlier formats, read and never written. Each is the one before it
// and the fields it added: postcard writes a nested struct as its fields in
// order, so these read exactly what the flat structs of their time wrote
// (the golden files of tests/sm/golden_snapshots.rs hold them).

/// Format 8, before the quorum pre-check.
#[derive(Deserialize)]
struct SnapshotBlobV8 {
    v7: SnapshotBlobV7,
    way_back: WayBack,
}

/// Format 7, before versions and the way back.
#[derive(Deserialize)]
struct SnapshotBlobV7 {
    v5: SnapshotBlobV5,
    failures: FailureLog,
}

/// Format 6, before a module could be taken out of service.
#[derive(Deserialize)]
struct SnapshotBlobV6 {
    v5: SnapshotBlobV5,
    failures: FailureLogV6,
}

/// Format 5, before module failures were isolated.
#[derive(Deserialize)]
struct SnapshotBlobV5 {
    v4: SnapshotBlobV4,
    first_module: Option<ModuleHash>,
}

/// Format 4, before the first module was kept.
#[derive(Deserialize)]
struct SnapshotBlobV4 {
    v3: SnapshotBlobV3,
    module_keys: TrustedKeys,
}

/// Format 3, before signed modules.
#[derive(Deserialize)]
struct SnapshotBlobV3 {
    v2: SnapshotBlobV2,
    capacity: Capacity,
}

/// Format 2, before the capacity bound.
#[derive(Deserialize)]
struct SnapshotBlobV2 {
    v1: SnapshotBlobV1,
    module_since: u64,
    upgrades: Vec<UpgradeRecord>,
}

/// Format 1, before upgrades existed.
#[derive(Deserialize)]
struct SnapshotBlobV1 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
}

impl SnapshotBlobV1 {
    /// As the current format holds it: what a format did not have, as it was then
    /// (no upgrade, the default bounds, no key; the first module is
    /// derived once the chain is read, in `decode_any`).
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            meta: self.meta,
            module: self.module,
            guest_state: self.guest_state,
            module_since: 0,
            upgrades: Vec::new(),
            capacity: crate::replica::capacity::DEFAULT_CAPACITY,
            module_keys: TrustedKeys::default(),
            first_module: None,
            failures: FailureLog::default(),
            way_back: WayBack::default(),
            precheck: None,
        }
    }
}

impl SnapshotBlobV2 {
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            module_since: self.module_since,
            upgrades: self.upgrades,
            ..self.v1.current()
        }
    }
}

impl SnapshotBlobV3 {
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            capacity: self.capacity,
            ..self.v2.current()
        }
    }
}

impl SnapshotBlobV4 {
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            module_keys: self.module_keys,
            ..self.v3.current()
        }
    }
}

impl SnapshotBlobV5 {
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            first_module: self.first_module,
            ..self.v4.current()
        }
    }
}

impl SnapshotBlobV6 {
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            failures: self.failures.current(),
            ..self.v5.current()
        }
    }
}

impl SnapshotBlobV7 {
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            failures: self.failures,
            ..self.v5.current()
        }
    }
}

impl SnapshotBlobV8 {
    fn current(self) -> SnapshotBlob {
        SnapshotBlob {
            way_back: self.way_back,
            ..self.v7.current()
        }
    }
}

impl SnapshotBlob {
    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = SNAPSHOT_MAGIC.to_vec();
        out.extend(postcard::to_allocvec(self)?);
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SnapshotBlob, String> {
        let mut blob = Self::decode_any(bytes)?;
        // The disk is not trusted to keep the bound the writer kept.
        while blob.failures.recent.len() > KEEP_FAILURES {
            blob.failures.recent.pop_front();
        }
        blob.precheck = blob.precheck.take().map(|p| PrecheckSeen {
            record: p.record.bounded(),
            ..p
        });
        blob.module_keys = std::mem::take(&mut blob.module_keys)
            .validated()
            .map_err(|e| format!("snapshot's trusted module keys: {e}"))?;
        Ok(blob)
    }

    /// The blob of any format, read as it was written.
    fn decode_any(bytes: &[u8]) -> Result<SnapshotBlob, String> {
        fn read<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, String> {
            postcard::from_bytes(body).map_err(|e| format!("snapshot does not decode: {e}"))
        }
        let (magic, body) = bytes
            .split_at_checked(8)
            .ok_or("not a lockd snapshot (too short)")?;
        let magic = <&[u8; 8]>::try_from(magic).map_err(|_| "not a lockd snapshot")?;
        let old = match magic {
            SNAPSHOT_MAGIC => return read::<SnapshotBlob>(body),
            SNAPSHOT_MAGIC_V8 => return Ok(read::<SnapshotBlobV8>(body)?.current()),
            SNAPSHOT_MAGIC_V7 => return Ok(read::<SnapshotBlobV7>(body)?.current()),
            SNAPSHOT_MAGIC_V6 => return Ok(read::<SnapshotBlobV6>(body)?.current()),
            SNAPSHOT_MAGIC_V5 => return Ok(read::<SnapshotBlobV5>(body)?.current()),
            SNAPSHOT_MAGIC_V4 => read::<SnapshotBlobV4>(body)?.current(),
            SNAPSHOT_MAGIC_V3 => read::<SnapshotBlobV3>(body)?.current(),
            SNAPSHOT_MAGIC_V2 => read::<SnapshotBlobV2>(body)?.current(),
            SNAPSHOT_MAGIC_V1 => read::<SnapshotBlobV1>(body)?.current(),
            _ => return Err("not a lockd snapshot (bad magic)".into()),
        };
        // Before format 5 the first module was not kept: it is the active
        // one while none has been swapped in since index 0, else unknown.
        Ok(SnapshotBlob {
            first_module: (old.module_since == 0).then(|| ModuleHash::of(&old.module)),
            ..old
        })
    }
}

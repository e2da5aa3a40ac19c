//! Backup and disaster recovery (docs/operations.md, "Backup and disaster
//! recovery"): a new cluster's data dirs made from a backup (`lockd
//! restore`) or from one survivor's data dir (`lockd recover
//! --force-new-cluster`).
//!
//! Either way the new cluster has a new id ([`crate::cluster_id`]), so the
//! old cluster's nodes are refused by it, and every node of the new cluster gets the same snapshot as its
//! state machine: the old state at its index (module, locks, settings),
//! with the new membership, and a log purged up to that index. The nodes
//! then elect a leader as after any restart; nothing is proposed to build
//! them, so nodes restored from the same file with the same members are
//! identical by construction.
//!
//! # Tokens never go backwards
//!
//! The old cluster may have granted tokens after the backup was taken (or
//! that the survivor never saw). So the token counter does not continue
//! from the snapshot's: it jumps to the next **token epoch**, the next
//! multiple of 2^48 ([`EPOCH_BITS`]). Every token the old cluster issued
//! in its epoch is below that, as long as it issued fewer than 2^48 (2.8
//! × 10^14: 89 years at 100 000 grants a second), and a fenced resource
//! keeps accepting the new cluster's tokens. 2^16 restores are possible.
//!
//! The counter lives in the lock module's state, which is the module's own
//! format. The host raises it in the formats of the modules this project
//! ships (`LKSM` formats 1, 2 and 3, where `next_token` comes first after
//! the header, or after format 2's policy string); a module with another
//! format is refused, saying so, rather than restored with tokens that
//! might repeat.
//!
//! Pure but for [`survivor_state`] and [`write_node`], which read and write
//! the data dir.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use thiserror::Error;

use crate::cluster_id::ClusterId;
use crate::modules::replay::{stored_entries, stored_replica, ReplayError};
use crate::raft::snapshot::{self, SnapshotBlob};
use crate::raft::{convert, NodeId};
use lockd_core::engine::{EngineError, WasmEngine};
use lockd_core::entry::{LogId, Membership, Node, SnapshotMeta, StoredMembership};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;

mod backup_trust;
pub use backup_trust::{check_vouched, Vouched};

/// Tokens of one epoch: the counter's low bits.
pub(crate) const EPOCH_BITS: u32 = 48;

#[derive(Debug, Error)]
pub enum RestoreError {
    #[error("not a snapshot file: {0}")]
    NotASnapshot(String),
    #[error("the lock module's state is not in a format whose token counter lockd can raise ({0}); refusing to restore tokens that might repeat")]
    UnknownStateFormat(String),
    #[error("the token counter {0} is in the last token epoch: no later epoch is left")]
    NoEpochLeft(u64),
    #[error("the snapshot does not restore: {0}")]
    Engine(#[from] EngineError),
    /// The backup holds what the operator did not vouch for.
    #[error("{0}")]
    Unvouched(String),
    #[error("data dir {0} is not empty: a new cluster's node needs a new data dir")]
    NotEmpty(String),
    #[error("the new cluster's members do not include this node ({0})")]
    NotAMember(NodeId),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("the survivor's data dir: {0}")]
    Stored(#[from] ReplayError),
    #[error("cannot write {path}: {reason}")]
    Write { path: String, reason: String },
}

/// The state with its token counter raised to the next epoch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Raised {
    pub state: Vec<u8>,
    /// The counter before, and after.
    pub was: u64,
    pub now: u64,
}

/// A postcard varint (LEB128 u64) at the start of `b`: its value and length.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, byte) in b.iter().enumerate().take(10) {
        let part = u64::from(byte & 0x7f);
        v |= part.checked_shl(7 * i as u32)?;
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The first token of the epoch after `next`'s.
pub(crate) fn next_epoch(next: u64) -> Option<u64> {
    let epoch = (next >> EPOCH_BITS) + 1;
    epoch
        .checked_mul(1 << EPOCH_BITS)
        .filter(|first| first >> EPOCH_BITS == epoch)
}

/// Raise the token counter of a lock module's state (see the module docs).
pub(crate) fn raise_token_floor(state: &[u8]) -> Result<Raised, RestoreError> {
    let unknown = |why: &str| RestoreError::UnknownStateFormat(why.into());
    if state.len() < 5 || &state[..4] != b"LKSM" {
        return Err(unknown("no LKSM header"));
    }
    let body = &state[5..];
    // Where `next_token` starts in the body.
    let at = match state[4] {
        1 | 3 => 0,
        2 => {
            let (len, n) = varint(body).ok_or_else(|| unknown("format 2's policy is cut short"))?;
            let len = usize::try_from(len).map_err(|_| unknown("format 2's policy is too long"))?;
            n.checked_add(len)
                .filter(|end| *end <= body.len())
                .ok_or_else(|| unknown("format 2's policy is cut short"))?
        }
        f => return Err(unknown(&format!("LKSM format {f}"))),
    };
    let (was, n) = varint(&body[at..]).ok_or_else(|| unknown("no token counter"))?;
    let now = next_epoch(was).ok_or(RestoreError::NoEpochLeft(was))?;
    let mut out = Vec::with_capacity(state.len() + 8);
    out.extend_from_slice(&state[..5 + at]);
    put_varint(now, &mut out);
    out.extend_from_slice(&body[at + n..]);
    Ok(Raised {
        state: out,
        was,
        now,
    })
}

/// What a new node's data dir was made from.
#[derive(Debug)]
pub struct Restored {
    /// The old cluster's log index the state is at.
    pub index: u64,
    pub module_hash: String,
    pub locks_held: u64,
    pub tokens_were: u64,
    pub tokens_now: u64,
    pub state_hash: String,
}

/// The state of a stopped node's data dir, everything in its log applied
/// (committed or not: what a survivor holds is all there is, and the
/// token epoch covers grants it never saw).
pub fn survivor_state(
    engine: &Arc<WasmEngine>,
    data_dir: &Path,
    builtin: &[u8],
) -> Result<SnapshotBlob, RestoreError> {
    let (mut replica, from) = stored_replica(engine, data_dir, builtin)?;
    for (_, entry) in stored_entries(data_dir, from)? {
        replica.apply([convert::entry(entry)])?;
    }
    let meta = replica.snapshot_meta("survivor".into());
    Ok(replica.snapshot_blob(meta)?)
}

/// Decode a backup file's bytes.
pub fn decode(bytes: &[u8]) -> Result<SnapshotBlob, RestoreError> {
    SnapshotBlob::decode(bytes).map_err(RestoreError::NotASnapshot)
}

fn is_empty_dir(dir: &Path) -> Result<bool, RestoreError> {
    match lockd_log::disk::disk().list(dir) {
        Ok(names) => Ok(names.is_empty()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(source) => Err(RestoreError::Io {
            path: dir.display().to_string(),
            source,
        }),
    }
}

/// Make `dir` (absent or empty) the data dir of node `id` of the new
/// cluster `cluster` of `members`, whose state is `blob`'s with the token
/// counter raised.
pub fn write_node(
    engine: &Arc<WasmEngine>,
    dir: &Path,
    id: NodeId,
    mut blob: SnapshotBlob,
    members: &BTreeMap<NodeId, String>,
    cluster: &ClusterId,
) -> Result<Restored, RestoreError> {
    if !members.contains_key(&id) {
        return Err(RestoreError::NotAMember(id));
    }
    if !is_empty_dir(dir)? {
        return Err(RestoreError::NotEmpty(dir.display().to_string()));
    }
    let raised = raise_token_floor(&blob.guest_state)?;
    let index = blob.meta.last_log_id.map_or(0, |l| l.index);
    // Term 0: the new cluster's first election is at term 1, above it.
    let log_id = LogId::new(0, 0, index);
    let voters: BTreeSet<NodeId> = members.keys().copied().collect();
    let nodes: BTreeMap<NodeId, Node> = members
        .iter()
        .map(|(id, addr)| (*id, Node { addr: addr.clone() }))
        .collect();
    blob.meta = SnapshotMeta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership {
            log_id: Some(log_id),
            membership: Membership {
                configs: vec![voters],
                nodes,
            },
        },
        snapshot_id: format!("restored-{index}"),
    };
    blob.guest_state = raised.state;
    // It must restore before anything is written.
    let mut replica = Replica::from_snapshot(id, Precompiler::new(engine.clone()), &blob, 0)?;
    let restored = Restored {
        index,
        module_hash: replica.module_hash().to_string(),
        locks_held: replica.counters()?.holders,
        tokens_were: raised.was,
        tokens_now: raised.now,
        state_hash: hex::encode(replica.state_hash()?),
    };
    let bytes = blob.encode().map_err(|e| RestoreError::Write {
        path: dir.display().to_string(),
        reason: e.to_string(),
    })?;
    let write_err = |path: &Path, e: &dyn std::fmt::Display| RestoreError::Write {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let snap = dir.join("snapshot");
    lockd_log::create_dir_durably(&snap).map_err(|e| write_err(&snap, &e))?;
    snapshot::write(&snap, &bytes).map_err(|e| write_err(&snap, &e))?;
    let raft = dir.join("raft");
    lockd_log::create_dir_durably(&raft).map_err(|e| write_err(&raft, &e))?;
    let purged = raft.join("purged");
    let marker = postcard::to_allocvec(&log_id).map_err(|e| write_err(&purged, &e))?;
    lockd_log::write_atomic(&purged, &marker).map_err(|e| write_err(&purged, &e))?;
    cluster.write(dir).map_err(|e| write_err(dir, &e))?;
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(format: u8, prefix: &[u8], next: u64, rest: &[u8]) -> Vec<u8> {
        let mut s = b"LKSM".to_vec();
        s.push(format);
        s.extend_from_slice(prefix);
        put_varint(next, &mut s);
        s.extend_from_slice(rest);
        s
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, 1 << 48, u64::MAX] {
            let mut b = Vec::new();
            put_varint(v, &mut b);
            assert_eq!(varint(&b), Some((v, b.len())), "{v}");
        }
        assert_eq!(varint(&[0x80, 0x80]), None, "cut short");
    }

    #[test]
    fn the_counter_moves_to_the_next_epoch_and_nothing_else_changes() {
        let rest = [9, 8, 7];
        for format in [1, 3] {
            let r = raise_token_floor(&state(format, &[], 42, &rest)).expect("raise");
            assert_eq!((r.was, r.now), (42, 1 << 48));
            assert_eq!(r.state, state(format, &[], 1 << 48, &rest));
        }
        // Format 2: the policy string comes first.
        let policy = [3, b'a', b'b', b'c'];
        let r = raise_token_floor(&state(2, &policy, (1 << 48) + 5, &rest)).expect("raise");
        assert_eq!((r.was, r.now), ((1 << 48) + 5, 2 << 48));
        assert_eq!(r.state, state(2, &policy, 2 << 48, &rest));
    }

    #[test]
    fn every_token_of_an_epoch_is_below_the_next() {
        for next in [1, 2, (1 << 48) - 1, 1 << 48, (7 << 48) + 99] {
            let now = next_epoch(next).expect("epoch");
            assert!(now > next && now.is_multiple_of(1 << 48), "{next} -> {now}");
        }
        assert_eq!(next_epoch(u64::MAX), None);
        assert!(matches!(
            raise_token_floor(&state(1, &[], u64::MAX, &[])),
            Err(RestoreError::NoEpochLeft(_))
        ));
    }

    #[test]
    fn unknown_formats_are_refused() {
        for bad in [
            &b"LKS"[..],
            b"XXXX\x01\x05",
            b"LKSM\x09\x05",
            b"LKSM\x01",
            b"LKSM\x02\x09ab",
        ] {
            assert!(
                matches!(
                    raise_token_floor(bad),
                    Err(RestoreError::UnknownStateFormat(_))
                ),
                "{bad:?}"
            );
        }
    }
}

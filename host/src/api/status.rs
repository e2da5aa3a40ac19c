//! The node's status report.

use openraft::ServerState;

use super::services::Services;
use crate::raft::{known_leader, leading_unconfirmed, members};

pub use lockd_proto::{Member, Role, Status};

pub fn role_of(state: ServerState) -> Role {
    match state {
        ServerState::Leader => Role::Leader,
        ServerState::Follower => Role::Follower,
        ServerState::Candidate => Role::Candidate,
        ServerState::Learner => Role::Learner,
        ServerState::Shutdown => Role::Shutdown,
    }
}

/// The status of `node` now.
pub fn status_of(node: &Services) -> Status {
    status_with(node, true).0
}

/// The status; without `state_hash` (left empty) when `hash` is false. Both
/// reference modules answer the state hash in O(1), but another module may
/// walk its whole table for it while holding the state machine's lock, so
/// frequent readers that do not report it (metrics scrapes) skip it rather
/// than stall apply. Also returns the upgrade counters, which status does
/// not show.
pub fn status_with(node: &Services, hash: bool) -> (Status, UpgradeCounts) {
    let m = node.raft.metrics().borrow().clone();
    // Applied index and state hash are read under one lock, so the hash is
    // the hash *at* that index.
    let v = node.sm.view(hash);
    let snaps = node.sm.snapshot_stats();
    let stats = node.log.stats();
    let status = Status {
        id: node.id,
        addr: node.addr.clone(),
        // A leader no quorum has acknowledged yet is still seeking office.
        role: if leading_unconfirmed(&m) {
            Role::Candidate
        } else {
            role_of(m.state)
        },
        leader: known_leader(&m),
        term: m.current_term,
        commit_index: node.log.committed().map_or(0, |l| l.index),
        applied_index: v.applied_index,
        last_log_index: m.last_log_index.unwrap_or(0),
        snapshot_index: m.snapshot.map(|l| l.index),
        purged_index: m.purged.map(|l| l.index),
        members: members(&node.raft),
        module_hash: v.module_hash,
        module_version: v.module_version,
        state_hash: v.state_hash,
        locks_held: v.locks_held,
        engine_fingerprint: node.engine.fingerprint().hash.clone(),
        snapshots_built: snaps.built,
        snapshots_installed: snaps.installed,
        wal_fsyncs: stats.fsyncs.load(std::sync::atomic::Ordering::Relaxed),
        wal_entries: stats.entries.load(std::sync::atomic::Ordering::Relaxed),
        poisoned: v.poisoned,
        poisoned_at: v.poisoned_at,
        module_since_index: v.module_since_index,
        upgrades: v.upgrades,
        shadow: v.shadow,
        audit_divergences: node.sm.divergences(),
        capacity: Some(v.capacity),
        guest_memory_bytes: v.guest_memory_bytes,
        last_snapshot_bytes: snaps.last_bytes,
        last_snapshot_build_ms: snaps.last_build_us / 1000,
        last_snapshot_install_ms: snaps.last_install_us / 1000,
        admin_actions: node.admin_log.recent(),
        trusted_module_keys: v.trusted_module_keys,
        last_divergence: node.sm.last_divergence(),
        engine_implementation: node.engine.fingerprint().implementation(),
        cluster_id: node.cluster.get().map(|c| c.to_string()),
    };
    let counts = UpgradeCounts {
        swapped: v.upgrades_swapped,
        rejected: v.upgrades_rejected,
    };
    (status, counts)
}

/// Upgrade entries applied since start: swapped, rejected.
pub struct UpgradeCounts {
    pub swapped: u64,
    pub rejected: u64,
}

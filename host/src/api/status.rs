//! The node's status report.

use openraft::ServerState;

use crate::node::Node;

pub use lockd_client::proto::{Member, Status};

pub fn role_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Follower => "follower",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
}

/// The members of the cluster as this node knows them.
pub fn members_of(node: &Node) -> Vec<Member> {
    let m = node.raft.metrics().borrow().membership_config.clone();
    let membership = m.membership();
    let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
    membership
        .nodes()
        .map(|(id, n)| Member {
            id: *id,
            addr: n.addr.clone(),
            voter: voters.contains(id),
        })
        .collect()
}

/// The status of `node` now.
pub fn status_of(node: &Node) -> Status {
    status_with(node, true)
}

/// The status; without `state_hash` (left empty) when `hash` is false. The
/// state hash encodes and hashes the whole lock table while holding the
/// state machine's lock, so frequent readers that do not report it (metrics
/// scrapes) skip it rather than stall apply.
pub fn status_with(node: &Node, hash: bool) -> Status {
    let m = node.raft.metrics().borrow().clone();
    let members = members_of(node);
    // Applied index and state hash are read under one lock, so the hash
    // is the hash *at* that index.
    let (applied_index, module_hash, module_version, state_hash, locks_held, poisoned, upgrade) = {
        let mut st = node.sm.state();
        let applied = st.last_applied.map_or(0, |l| l.index);
        let module_hash = st.module_hash().to_string();
        let version = st
            .guest
            .version()
            .unwrap_or_else(|e| format!("unavailable: {e}"));
        let hash = if hash {
            st.guest
                .state_hash()
                .map(hex::encode)
                .unwrap_or_else(|e| format!("unavailable: {e}"))
        } else {
            String::new()
        };
        let held = st.guest.stats().map(|s| s.held).unwrap_or(0);
        let poisoned = st.guest.poisoned().map(str::to_string);
        let upgrade = (
            st.module_since,
            st.upgrades.iter().cloned().collect::<Vec<_>>(),
            st.shadow.as_ref().map(|s| s.status()),
        );
        (applied, module_hash, version, hash, held, poisoned, upgrade)
    };
    let (module_since_index, upgrades, shadow) = upgrade;
    let (built, installed) = node.sm.snapshot_counts();
    let stats = node.log.stats();
    Status {
        id: node.id,
        addr: node.addr.clone(),
        role: role_name(m.state).into(),
        leader: m.current_leader,
        term: m.current_term,
        commit_index: node.log.committed().map_or(0, |l| l.index),
        applied_index,
        last_log_index: m.last_log_index.unwrap_or(0),
        snapshot_index: m.snapshot.map(|l| l.index),
        purged_index: m.purged.map(|l| l.index),
        members,
        module_hash,
        module_version,
        state_hash,
        locks_held,
        engine_fingerprint: node.engine.fingerprint().hash.clone(),
        snapshots_built: built,
        snapshots_installed: installed,
        wal_fsyncs: stats.fsyncs.load(std::sync::atomic::Ordering::Relaxed),
        wal_entries: stats.entries.load(std::sync::atomic::Ordering::Relaxed),
        poisoned,
        module_since_index,
        upgrades,
        shadow,
        audit_divergences: node.sm.divergences(),
    }
}

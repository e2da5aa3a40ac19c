//! The node's status report.

use openraft::ServerState;
use serde::{Deserialize, Serialize};

use crate::node::Node;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub addr: String,
    pub voter: bool,
}

/// `GET /v1/status`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    pub id: u64,
    pub addr: String,
    /// "leader", "follower", "candidate", "learner" (or "shutdown").
    pub role: String,
    pub leader: Option<u64>,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub last_log_index: u64,
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    pub members: Vec<Member>,
    /// SHA-256 of the active module's component bytes.
    pub module_hash: String,
    pub module_version: String,
    /// The guest state hash at `applied_index`.
    pub state_hash: String,
    pub locks_held: u64,
    pub engine_fingerprint: String,
    pub snapshots_built: u64,
    pub snapshots_installed: u64,
    pub wal_fsyncs: u64,
    pub wal_entries: u64,
    /// Set when the guest failed and the state machine stopped applying.
    pub poisoned: Option<String>,
}

pub fn role_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Follower => "follower",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
}

impl Status {
    pub fn of(node: &Node) -> Status {
        let m = node.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(id, n)| Member { id: *id, addr: n.addr.clone(), voter: voters.contains(id) })
            .collect();
        // Applied index and state hash are read under one lock, so the hash
        // is the hash *at* that index.
        let (applied_index, module_hash, module_version, state_hash, locks_held, poisoned) = {
            let mut st = node.sm.state();
            let applied = st.last_applied.map_or(0, |l| l.index);
            let module_hash = st.module_hash().to_string();
            let version = st.guest.version().unwrap_or_else(|e| format!("unavailable: {e}"));
            let hash = st.guest.state_hash().map(hex::encode).unwrap_or_else(|e| format!("unavailable: {e}"));
            let held = st.guest.stats().map(|s| s.held).unwrap_or(0);
            let poisoned = st.guest.poisoned().map(str::to_string);
            (applied, module_hash, version, hash, held, poisoned)
        };
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
        }
    }
}

//! What this node knows of the cluster, read from Raft's metrics and the
//! state machine together: its status, its readiness, the members and
//! the leader; the membership changes.

use std::time::Duration;

use lockd_core::engine::EngineFingerprint;
use lockd_proto::{Member, Role, Status};

use super::Services;
use crate::api::health::{judge, Readiness, Seen};
use crate::api::status::{role_of, UpgradeCounts};
use crate::membership::MembershipError;
use crate::raft::{known_leader, leading_unconfirmed, members, NodeId};
use crate::transport::tls::Identity;

/// How often a node waiting for a leader looks again without a change in
/// Raft's metrics.
const RECHECK: Duration = Duration::from_millis(20);

/// Where a request for the leader goes.
enum LeaderRoute {
    /// This node leads: it answers.
    Here,
    /// Another node leads, at this address: the request goes there.
    Elsewhere(NodeId, String),
    /// No leader known (or not yet its address).
    Unknown,
}

impl LeaderRoute {
    fn elsewhere(self) -> Option<(NodeId, String)> {
        match self {
            LeaderRoute::Elsewhere(id, addr) => Some((id, addr)),
            _ => None,
        }
    }
}

impl Services {
    /// The status of this node now.
    pub fn status(&self) -> Status {
        self.status_with(true).0
    }

    /// The status; without `state_hash` (left empty) when `hash` is false.
    /// Both reference modules answer the state hash in O(1), but another
    /// module may walk its whole table for it while holding the state
    /// machine's lock, so frequent readers that do not report it (metrics
    /// scrapes) skip it rather than stall apply. Also returns the upgrade
    /// counters, which status does not show.
    pub(crate) fn status_with(&self, hash: bool) -> (Status, UpgradeCounts) {
        let m = self.parts.raft.metrics().borrow().clone();
        // Applied index and state hash are read under one lock, so the
        // hash is the hash *at* that index.
        let v = self.parts.sm.view(hash);
        let snaps = self.parts.sm.snapshot_stats();
        let stats = self.parts.log.stats();
        let status = Status {
            id: self.parts.id,
            addr: self.parts.addr.clone(),
            // A leader no quorum has acknowledged yet is still seeking
            // office.
            role: if leading_unconfirmed(&m, self.quorum_within_ms()) {
                Role::Candidate
            } else {
                role_of(m.state)
            },
            leader: known_leader(&m, self.quorum_within_ms(), self.parts.silence.silent_ms()),
            term: m.current_term,
            commit_index: self.commit_index(v.applied_index),
            applied_index: v.applied_index,
            last_log_index: m.last_log_index.unwrap_or(0),
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            members: members(&self.parts.raft),
            module_hash: v.module_hash,
            module_version: v.module_version,
            state_hash: v.state_hash,
            locks_held: v.locks_held,
            engine_fingerprint: self.parts.engine.fingerprint().hash.clone(),
            snapshots_built: snaps.built,
            snapshots_installed: snaps.installed,
            wal_fsyncs: stats.fsyncs.load(std::sync::atomic::Ordering::Relaxed),
            wal_entries: stats.entries.load(std::sync::atomic::Ordering::Relaxed),
            poisoned: v.poisoned,
            poisoned_at: v.poisoned_at,
            module_since_index: v.module_since_index,
            upgrades: v.upgrades,
            shadow: v.shadow,
            audit_divergences: self.parts.sm.divergences(),
            capacity: Some(v.capacity),
            guest_memory_bytes: v.guest_memory_bytes,
            last_snapshot_bytes: snaps.last_bytes,
            last_snapshot_build_ms: snaps.last_build_us / 1000,
            last_snapshot_install_ms: snaps.last_install_us / 1000,
            admin_actions: self.admin_log.recent(),
            trusted_module_keys: v.trusted_module_keys,
            last_divergence: self.parts.sm.last_divergence(),
            engine_implementation: self.parts.engine.fingerprint().implementation(),
            cluster_id: self.parts.cluster.get().map(|c| c.to_string()),
            first_module_hash: v.first_module_hash,
            module_failures_total: Some(v.module_failures_total),
            module_failures: Some(v.module_failures),
            module_out_of_service: v.module_out_of_service,
            module_way_back: Some(v.module_way_back),
            module_precheck: v.module_precheck,
            module_cannot_run: v.module_cannot_run,
            membership: Some(crate::raft::membership_in_effect(&m)),
            module_world: Some(v.module_world.number().to_string()),
        };
        let counts = UpgradeCounts {
            swapped: v.upgrades_swapped,
            rejected: v.upgrades_rejected,
            rebuilds: v.instance_rebuilds,
        };
        (status, counts)
    }

    /// Whether this node can take its share of requests now, and why not
    /// ([`judge`]).
    pub fn readiness(&self) -> Readiness {
        let (leader, stopped) = {
            let m = self.parts.raft.metrics();
            let m = m.borrow();
            (
                known_leader(&m, self.quorum_within_ms(), self.parts.silence.silent_ms()),
                m.running_state.as_ref().err().map(|e| e.to_string()),
            )
        };
        let view = self.parts.sm.view(false);
        judge(Seen {
            leader,
            applied_index: view.applied_index,
            commit_index: self.commit_index(view.applied_index),
            poisoned: view.poisoned,
            stopped,
        })
    }

    /// Where this node's applied changes are published for watchers.
    pub(crate) fn watch_hub(&self) -> Option<&std::sync::Arc<crate::watch::WatchHub>> {
        self.parts.sm.watch()
    }

    /// The members, as this node knows them.
    pub fn members(&self) -> Vec<Member> {
        members(&self.parts.raft)
    }

    /// Add a learner (after checking its engine, id and cluster); the
    /// members after.
    pub async fn add_learner(
        &self,
        id: NodeId,
        addr: &str,
    ) -> Result<Vec<Member>, MembershipError> {
        self.parts.membership.add_learner(id, addr).await?;
        Ok(self.members())
    }

    /// Make a learner a voter; the members after.
    pub async fn promote(&self, id: NodeId) -> Result<Vec<Member>, MembershipError> {
        self.parts.membership.promote(id).await?;
        Ok(self.members())
    }

    /// Remove a voter or a learner; the members after.
    pub async fn remove_member(&self, id: NodeId) -> Result<Vec<Member>, MembershipError> {
        self.parts.membership.remove(id).await?;
        Ok(self.members())
    }

    /// Whether `id` is a member (voter or learner) as this node knows it;
    /// `None` before it has a membership.
    pub(crate) fn is_member(&self, id: NodeId) -> Option<bool> {
        crate::raft::peer_answer::is_member(&self.parts.raft, id)
    }

    /// Whether a peer connection from `id` is a member's: a member of this
    /// node's membership (or a leader a member vouched for), or any node
    /// while this node has no membership yet (it is being added).
    pub(crate) fn is_peer_member(&self, id: NodeId) -> bool {
        self.may_send(id) != Some(false)
    }

    /// The member node a certificate names, if it names one that is a
    /// member now (a node acting for a caller, or as itself).
    pub(crate) fn member_of(&self, identity: Option<&Identity>) -> Option<NodeId> {
        identity
            .and_then(|i| i.node_id())
            .filter(|id| self.is_member(*id) == Some(true))
    }

    /// The address of member `id`, as this node's membership knows it.
    pub(crate) fn addr_of(&self, id: NodeId) -> Option<String> {
        let metrics = self.parts.raft.metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.addr.clone())
    }

    /// The commit index this node knows: the one openraft last saved,
    /// or the applied index if that is further (what is applied was
    /// committed; a snapshot installed from the leader moves the applied
    /// index without a save, and an idle leader sends no new one).
    fn commit_index(&self, applied: u64) -> u64 {
        self.parts
            .log
            .committed()
            .map_or(0, |l| l.index)
            .max(applied)
    }

    /// How recently a quorum must have answered this node for it to name
    /// itself the leader: the election timeout ([`known_leader`]).
    fn quorum_within_ms(&self) -> u64 {
        self.parts.election_timeout_ms
    }

    /// Where a request for the leader goes now ([`LeaderRoute`]).
    fn leader_route(&self) -> LeaderRoute {
        // Borrow, do not clone, the metrics: this runs on every request.
        let Some(leader) = known_leader(
            &self.parts.raft.metrics().borrow(),
            self.quorum_within_ms(),
            self.parts.silence.silent_ms(),
        ) else {
            return LeaderRoute::Unknown;
        };
        if leader == self.parts.id {
            return LeaderRoute::Here;
        }
        match self.addr_of(leader) {
            Some(addr) => LeaderRoute::Elsewhere(leader, addr),
            None => LeaderRoute::Unknown,
        }
    }

    /// The leader's id and address when another node leads (a request
    /// for the leader goes there); `None` when this node leads, or when no
    /// leader (or its address) becomes known within one election timeout.
    /// A node that knows no leader yet (one that has just joined and not
    /// yet heard from the leader, or one during an election) waits for one
    /// rather than answer 503 at once, as an etcd member holds a proposal
    /// until it has a leader; docs/operations.md, "Who is the leader".
    pub(crate) async fn leader_elsewhere(&self) -> Option<(NodeId, String)> {
        let route = self.leader_route();
        if !matches!(route, LeaderRoute::Unknown) {
            return route.elsewhere();
        }
        let mut metrics = self.parts.raft.metrics();
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(self.parts.election_max_ms);
        loop {
            // The metrics change when a leader becomes known; the quorum
            // acknowledgement of a leader restored in its old term ages
            // without a change, hence the recheck at least every 20 ms.
            let tick = (tokio::time::Instant::now() + RECHECK).min(deadline);
            if let Ok(Err(_)) = tokio::time::timeout_at(tick, metrics.changed()).await {
                return None; // Raft has stopped.
            }
            match self.leader_route() {
                LeaderRoute::Unknown if tokio::time::Instant::now() < deadline => {}
                route => return route.elsewhere(),
            }
        }
    }

    /// Returns once this node no longer names `leader` as the leader (it
    /// has not heard from it for an election timeout, another node leads,
    /// or Raft stopped): a request passed on to it is then abandoned
    /// (`api::forward`), whatever its own deadline.
    pub async fn leader_gone(&self, leader: NodeId) {
        // The server metrics (the vote, the role, the leader): the full
        // metrics change with every entry, and every forwarded request
        // would wake for each.
        let mut metrics = self.parts.raft.server_metrics();
        loop {
            match self.leader_route() {
                LeaderRoute::Elsewhere(id, _) if id == leader => {}
                _ => return,
            }
            // Silence ages without a change of the metrics: recheck.
            if let Ok(Err(_)) = tokio::time::timeout(RECHECK, metrics.changed()).await {
                return;
            }
        }
    }

    /// How a peer's wasm engine differs from this node's in what guests
    /// compute (empty: it may serve beside this one).
    pub(crate) fn engine_differences(&self, theirs: &EngineFingerprint) -> Vec<String> {
        theirs.determinism_differences(self.parts.engine.fingerprint())
    }

    /// Whether a peer of the cluster it names may be served (and, before
    /// this node knows its cluster, adopt it); `Err` says why not.
    pub(crate) fn meet_cluster(&self, theirs: Option<&str>) -> Result<(), String> {
        self.parts.cluster.meet_peer(theirs)
    }
}

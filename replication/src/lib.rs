//! `lockd-replication`: a lockd node's replication layer. openraft's type
//! configuration and the adapters that connect it to the write-ahead log,
//! the deterministic replica and the peers; the peer protocol, client and
//! message side; elections (pre-vote, hand-over); membership changes; and
//! what every node derives from the applied log for others to follow (the
//! watch history) or to check (the cluster id).
//!
//! openraft drives everything; these modules are the places it calls out:
//!
//! ```text
//!  client_write(Request) ─► leader appends ─► log_store::LogStore::append ─► WAL (group fsync)
//!                           replicates    ─► peer_client::PeerClient ─► peers' Raft::append_entries
//!  committed range       ─► state_machine::StateMachineStore::apply ─► one guest call ─► Response
//!                           (split at upgrade/shadow entries and audit points)
//! ```
//!
//! # Layout
//!
//! The path of an acquire through the node's crates: the node (`lockd`:
//! the HTTP and native front doors, authorisation) hands a checked request
//! to the lock service, whose proposer calls `client_write` here; the log
//! store appends it ([`lockd_log`]) while [`peer_client`] replicates it;
//! once a majority has it, [`state_machine`] applies it through the
//! core's replica ([`lockd_core`]) and the proposer answers. This crate
//! imports only the crates below it (`lockd-core`, `lockd-log`,
//! `lockd-net`, `lockd-proto`), never the lock service or the node: what
//! it carries for them is the core's [`Request`] and [`Response`].
//!
//! * [`TypeConfig`]: openraft's types over the core's [`Request`] and
//!   [`Response`] (what a log entry carries and what applying it returns,
//!   [`lockd_core::entry`]).
//! * [`log_store`]: `RaftLogStorage` over the on-disk [`lockd_log`], with a
//!   writer thread that turns concurrent appends into one fsync.
//! * [`state_machine`]: the `RaftStateMachine` adapter around the core's
//!   [`lockd_core::replica::Replica`], which applies committed entries
//!   (one batched guest call per range).
//! * [`convert`]: openraft's log ids and memberships to the core's mirrors
//!   of them, and back.
//! * [`snapshot`]: the snapshot file (its format is the core's), with
//!   [`snapshot_policy`] (when to take one), [`snapshot_send`] (sent in
//!   chunks) and [`snapshot_counts`] (how sends ended).
//! * [`messages`]: every peer message, requests and answers, with the
//!   payloads of consensus's own (pre-vote, resignation); the lock
//!   service's (the module pre-check) are carried through a trait this
//!   crate defines ([`messages::ServiceMessages`]), never named here.
//! * [`peer_conn`]: the calling side of a framed connection to a peer,
//!   with its deadlines and keep-alives; [`peer_client`]: a connection to
//!   one peer and the calls made on it; [`network`]: openraft's
//!   `RaftNetworkFactory` and `RaftNetwork` over them. [`peer_answer`]:
//!   the answering side (the connection that carries it is the node's: it
//!   shares the node's one address with the front doors); [`peer_check`]
//!   is what a peer's RPC must satisfy before openraft sees it.
//! * [`stand`]: a node stands as soon as its leader is gone (silent, or
//!   its connection closed), and only once a quorum granted a pre-vote
//!   ([`prevote`]); [`handoff`]: a stopping leader names its successor;
//!   [`non_member`]: a node its peers refuse as a non-member stops
//!   starting elections; [`leader_vouch`]: a leader this node's
//!   membership does not name yet, vouched for by a member.
//! * [`membership`]: adding, promoting and removing nodes.
//! * [`watch`]: what the last applied entries changed, for watchers to
//!   follow a prefix and resume from an index.
//! * [`cluster_id`]: the id every member must share, so an old node never
//!   rejoins the cluster that replaced its own.
//! * [`telemetry`]: the latency histograms each layer records into (this
//!   crate and the ones above it), read by the node's `/metrics`.
//! * [`runtime`]: the async runtime openraft runs on: tokio's, with the
//!   random numbers it draws seedable per thread (for a simulation).
//!
//! Inside, [`state_machine`] feeds [`watch`] and records into
//! [`telemetry`]; nothing here uses [`membership`], which the node drives.

pub mod cluster_id;
pub mod convert;
pub mod handoff;
pub mod leader_vouch;
pub mod log_store;
pub mod membership;
pub mod messages;
pub mod network;
pub mod non_member;
pub mod peer_answer;
pub mod peer_check;
pub mod peer_client;
pub mod peer_conn;
pub mod peer_pool;
pub mod prevote;
pub mod runtime;
pub mod snapshot;
pub mod snapshot_counts;
pub mod snapshot_policy;
pub mod snapshot_send;
pub mod stand;
pub mod state_machine;
pub mod telemetry;
pub mod watch;

use std::io::Cursor;

pub use lockd_core::entry::{Request, Response};

pub type NodeId = u64;
pub use openraft::BasicNode as Node;

openraft::declare_raft_types!(
    /// The Raft types of lockd.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = runtime::Runtime,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type Vote = openraft::Vote<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
pub type StorageError = openraft::StorageError<NodeId>;

/// When openraft refused a call because another node leads (or none is
/// known): `Some(the leader it named)`. The one place that reads openraft's
/// forward-to-leader answer.
pub fn leader_hint<E>(e: &openraft::error::RaftError<NodeId, E>) -> Option<Option<NodeId>>
where
    E: openraft::TryAsRef<openraft::error::ForwardToLeader<NodeId, Node>> + std::fmt::Debug,
{
    e.forward_to_leader::<Node>().map(|f| f.leader_id)
}

/// The members of the cluster as this node knows them.
pub fn members(raft: &Raft) -> Vec<lockd_proto::Member> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    let voters: std::collections::BTreeSet<NodeId> = membership.voter_ids().collect();
    membership
        .nodes()
        .map(|(id, n)| lockd_proto::Member {
            id: *id,
            addr: n.addr.clone(),
            voter: voters.contains(id),
        })
        .collect()
}

/// The voter configuration in effect in `m`: its index, whether joint.
pub fn membership_in_effect(
    m: &openraft::RaftMetrics<NodeId, Node>,
) -> lockd_proto::MembershipInEffect {
    lockd_proto::MembershipInEffect {
        index: m.membership_config.log_id().map_or(0, |l| l.index),
        joint: m.membership_config.membership().get_joint_config().len() > 1,
    }
}

/// The leader this node may name, from its metrics: openraft's
/// `current_leader`, except that a node that leads without a quorum's
/// acknowledgement within `quorum_within_ms` names none. openraft restores
/// a node that led at its last term as that term's leader, with nothing
/// committed and perhaps no quorum left, and a leader cut off from its
/// quorum (or removed from the cluster while cut off) keeps the office
/// while the others elect another; status, readiness, forwarding and the
/// console must not present it as the cluster's leader until a quorum
/// answers it again (see docs/operations.md, "Who is the leader").
/// Callers pass the election timeout: by then the others may have
/// elected someone else (etcd's check-quorum uses the same bound).
///
/// A follower names its leader only while it has heard from it within the
/// same bound (`leader_silent_ms`: since its last message, `raft::stand`):
/// openraft keeps the last leader it knew until a node stands, and a node
/// that alone lost its leader does not stand (the pre-vote).
pub fn known_leader(
    m: &openraft::RaftMetrics<NodeId, Node>,
    quorum_within_ms: u64,
    leader_silent_ms: u64,
) -> Option<NodeId> {
    // A node whose Raft has stopped (a storage error, a module it cannot
    // run) keeps its last metrics: a leader's would name it for ever, and
    // every client would be sent to it (simulation seed 130193).
    if m.running_state.is_err() {
        return None;
    }
    match m.current_leader {
        Some(l) if l == m.id && leading_unconfirmed(m, quorum_within_ms) => None,
        Some(l) if l != m.id && leader_silent_ms > quorum_within_ms => None,
        other => other,
    }
}

/// The voters of `m`'s membership with their addresses (one whose node
/// is missing is left out): who a pre-vote, a handover or a module
/// pre-check asks.
pub fn voters(m: &openraft::RaftMetrics<NodeId, Node>) -> Vec<(NodeId, Node)> {
    let membership = m.membership_config.membership();
    membership
        .voter_ids()
        .filter_map(|v| Some((v, membership.get_node(&v)?.clone())))
        .collect()
}

/// Returns once this node, which led when it was called, no longer leads
/// in that term, or leads without a quorum's acknowledgement within
/// `quorum_within_ms` ([`leading_unconfirmed`]); at once if it did not lead.
/// A write proposed meanwhile cannot be known to commit: an admin write
/// (a membership change, an upgrade) is abandoned then, with an answer
/// that says it may or may not take effect, instead of waiting for a
/// quorum that may never come back.
pub async fn leadership_fails(raft: &Raft, id: NodeId, quorum_within_ms: u64) {
    let mut metrics = raft.metrics();
    let term = {
        let m = metrics.borrow_and_update();
        if m.current_leader != Some(id) {
            return;
        }
        m.current_term
    };
    // openraft reports no acknowledgement at all for a moment after a
    // membership change: only one that lasts the bound counts.
    let mut unconfirmed_since = None;
    loop {
        {
            let m = metrics.borrow_and_update();
            if m.current_leader != Some(id) || m.current_term != term {
                return;
            }
            if leading_unconfirmed(&m, quorum_within_ms) {
                let since = *unconfirmed_since.get_or_insert_with(tokio::time::Instant::now);
                let aged = m.millis_since_quorum_ack.is_some();
                if aged || since.elapsed().as_millis() as u64 > quorum_within_ms {
                    return;
                }
            } else {
                unconfirmed_since = None;
            }
        }
        // The quorum's acknowledgement ages without a change: recheck.
        let recheck = std::time::Duration::from_millis(20);
        if let Ok(Err(_)) = tokio::time::timeout(recheck, metrics.changed()).await {
            return;
        }
    }
}

/// This node holds the leader's office but no quorum has acknowledged it
/// within `quorum_within_ms`.
pub fn leading_unconfirmed(m: &openraft::RaftMetrics<NodeId, Node>, quorum_within_ms: u64) -> bool {
    m.state == openraft::ServerState::Leader
        && m.millis_since_quorum_ack
            .is_none_or(|ms| ms > quorum_within_ms)
}

#[cfg(test)]
mod leader_tests {
    use super::*;

    #[test]
    fn a_leader_without_a_quorum_names_no_leader() {
        let mut m = openraft::RaftMetrics::<NodeId, Node>::new_initial(3);
        m.state = openraft::ServerState::Leader;
        m.current_leader = Some(3);
        assert_eq!(
            known_leader(&m, 400, 0),
            None,
            "restored as leader, no ack yet"
        );
        m.millis_since_quorum_ack = Some(0);
        assert_eq!(known_leader(&m, 400, 0), Some(3));
        m.millis_since_quorum_ack = Some(400);
        assert_eq!(
            known_leader(&m, 400, 0),
            Some(3),
            "acknowledged within the bound"
        );
        m.millis_since_quorum_ack = Some(401);
        assert_eq!(
            known_leader(&m, 400, 0),
            None,
            "no quorum for an election timeout"
        );
        // A follower names whom it heard from.
        m.state = openraft::ServerState::Follower;
        m.millis_since_quorum_ack = None;
        m.current_leader = Some(1);
        assert_eq!(known_leader(&m, 400, 0), Some(1));
        assert_eq!(known_leader(&m, 400, 400), Some(1));
        assert_eq!(
            known_leader(&m, 400, 401),
            None,
            "not heard from for an election timeout"
        );
    }

    #[test]
    fn a_node_whose_raft_stopped_names_no_leader() {
        let mut m = openraft::RaftMetrics::<NodeId, Node>::new_initial(3);
        m.state = openraft::ServerState::Leader;
        m.current_leader = Some(3);
        m.millis_since_quorum_ack = Some(0);
        assert_eq!(known_leader(&m, 400, 0), Some(3));
        m.running_state = Err(openraft::error::Fatal::Stopped);
        assert_eq!(known_leader(&m, 400, 0), None, "its metrics are frozen");
        m.state = openraft::ServerState::Follower;
        m.current_leader = Some(1);
        assert_eq!(known_leader(&m, 400, 0), None);
    }
}

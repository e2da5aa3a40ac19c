//! Consensus: openraft's type configuration and the adapters that connect it
//! to our storage, state machine and transport.
//!
//! openraft drives everything; these modules are the places it calls out:
//!
//! ```text
//!  client_write(Request) ─► leader appends ─► log_store::LogStore::append ─► WAL (group fsync)
//!                           replicates    ─► network::PeerClient ─► peers' Raft::append_entries
//!  committed range       ─► state_machine::StateMachineStore::apply ─► one guest call ─► Response
//!                           (split at upgrade/shadow entries and audit points)
//! ```
//!
//! # Layout
//!
//! * [`TypeConfig`], [`Request`], [`Response`]: what a log entry carries and
//!   what applying it returns.
//! * [`log_store`]: `RaftLogStorage` over the on-disk [`crate::log`], with a
//!   writer thread that turns concurrent appends into one fsync.
//! * [`replica`]: the node's replicated state (active module, shadow, audit
//!   points) and the one I/O-free path that applies committed entries: one
//!   batched guest call per range.
//! * [`state_machine`]: the `RaftStateMachine` adapter around the replica.
//! * [`snapshot`]: the snapshot file = guest state + active module +
//!   membership.
//! * [`network`]: `RaftNetworkFactory` over [`crate::transport`].

pub mod log_store;
pub mod network;
pub mod peer_check;
pub mod replica;
pub mod snapshot;
pub mod snapshot_policy;
pub mod state_machine;

use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::command::{legacy, Command, Outcome};
use crate::upgrade::signature::{
    BoundUpgrade, KeyChange, KeyEntry, KeyError, SignedShadowStart, SignedUpgrade, TrustedKeys,
};
use crate::upgrade::{ShadowEntry, ShadowOutcome, UpgradeEntry, UpgradeOutcome};

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
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type Vote = openraft::Vote<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
pub type StorageError = openraft::StorageError<NodeId>;

/// The application payload of a log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Lock commands in world 0.1's types, as entries written before world
    /// 0.2 carry them; still applied (variant order is the log format).
    Lock(Vec<legacy::Command>),
    /// Replace the lock module (see [`crate::upgrade`]).
    Upgrade(UpgradeEntry),
    /// Start or stop a shadow module (see [`crate::upgrade::shadow`]).
    Shadow(ShadowEntry),
    /// Replicated lock commands in groups, applied in this order; each
    /// group is one entry of world 0.2's `apply` (a `busy` grant makes the
    /// later grants of its key in the group wait). The leader puts every
    /// group waiting at the moment into one log entry (see
    /// [`crate::service::proposer`]): one fsync for many commands.
    Commands(Vec<Vec<Command>>),
    /// Set the cluster's capacity bounds (see [`replica::capacity`]).
    Capacity(lockd_client::proto::Capacity),
    /// Trust or untrust a module key (see [`crate::upgrade::signature`]).
    ModuleKeys(KeyEntry),
    /// An upgrade carrying its module's signature; an unsigned upgrade is
    /// still [`Request::Upgrade`].
    SignedUpgrade(SignedUpgrade),
    /// A shadow start carrying its module's signature.
    SignedShadow(SignedShadowStart),
    /// An upgrade (or the promote of a shadow) carrying a signature bound
    /// to its use (see [`crate::upgrade::signature`]); what a leader
    /// proposes for a signed upgrade since bound signatures.
    BoundUpgrade(BoundUpgrade),
    /// A shadow start carrying a signature bound to its use.
    BoundShadow(SignedShadowStart),
    /// The first module of a new cluster (see [`crate::upgrade::Genesis`]).
    Genesis(crate::upgrade::Genesis),
}

/// What applying an entry returns to the proposer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// One list of outcomes per group of the entry, one outcome per
    /// command (a legacy entry is one group); a single group of one `Noop`
    /// for Raft's blank and membership entries.
    Lock(Vec<Vec<Outcome>>),
    Upgrade(UpgradeOutcome),
    Shadow(ShadowOutcome),
    /// The bounds now in force and their use.
    Capacity(lockd_client::proto::CapacityStatus),
    /// What a module-key entry did, and the keys trusted after it.
    ModuleKeys(Result<KeyChange, KeyError>, TrustedKeys),
}

impl Request {
    /// About how many bytes the entry takes on the wire: module bytes and
    /// strings counted exactly, a fixed allowance for each command's
    /// numbers and framing. What bounds an AppendEntries batch in bytes.
    pub fn wire_bytes(&self) -> usize {
        crate::command::WIRE_OVERHEAD
            + match self {
                Request::Lock(cs) => cs.iter().map(legacy::Command::wire_bytes).sum(),
                Request::Commands(groups) => groups.iter().flatten().map(Command::wire_bytes).sum(),
                Request::Upgrade(u) => u.module.len(),
                Request::Genesis(g) => g.module.len(),
                Request::SignedUpgrade(s) => s.upgrade.module.len() + s.signature.0.len(),
                Request::Shadow(ShadowEntry::Start { module }) => module.len(),
                Request::SignedShadow(s) | Request::BoundShadow(s) => {
                    s.module.len() + s.signature.0.len()
                }
                Request::BoundUpgrade(s) => s.upgrade.module.len() + s.signature.0.len(),
                Request::ModuleKeys(_) => 32,
                Request::Shadow(ShadowEntry::Stop) | Request::Capacity(_) => 0,
            }
    }

    /// The component bytes an entry carries, if any (upgrade, shadow start):
    /// what the log store hands to the precompiler on append.
    pub fn module_bytes(&self) -> Option<&[u8]> {
        match self {
            Request::Upgrade(u) => Some(&u.module),
            Request::Genesis(g) => Some(&g.module),
            Request::SignedUpgrade(s) => Some(&s.upgrade.module),
            Request::Shadow(ShadowEntry::Start { module }) => Some(module),
            Request::SignedShadow(s) | Request::BoundShadow(s) => Some(&s.module),
            Request::BoundUpgrade(s) => Some(&s.upgrade.module),
            Request::Lock(_)
            | Request::Commands(_)
            | Request::Capacity(_)
            | Request::ModuleKeys(_)
            | Request::Shadow(ShadowEntry::Stop) => None,
        }
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Lock(cs) => {
                write!(f, "[")?;
                for (i, c) in cs.iter().enumerate() {
                    write!(f, "{}{c}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, "]")
            }
            Request::Commands(groups) => {
                write!(f, "[")?;
                for (g, cs) in groups.iter().enumerate() {
                    write!(f, "{}[", if g > 0 { ", " } else { "" })?;
                    for (i, c) in cs.iter().enumerate() {
                        write!(f, "{}{c}", if i > 0 { ", " } else { "" })?;
                    }
                    write!(f, "]")?;
                }
                write!(f, "]")
            }
            Request::Upgrade(u) => write!(f, "{u:?}"),
            Request::Genesis(g) => write!(f, "{g:?}"),
            Request::SignedUpgrade(s) => write!(f, "{:?} signed {}", s.upgrade, s.signature),
            Request::Shadow(s) => write!(f, "{s:?}"),
            Request::SignedShadow(s) => write!(f, "{s:?}"),
            Request::BoundUpgrade(s) => write!(
                f,
                "{:?} signed {} for {:?}",
                s.upgrade, s.signature, s.signed_for
            ),
            Request::BoundShadow(s) => write!(f, "bound {s:?}"),
            Request::ModuleKeys(KeyEntry::Trust(k)) => write!(f, "trust module key {k}"),
            Request::ModuleKeys(KeyEntry::Untrust(k)) => write!(f, "untrust module key {k}"),
            Request::Capacity(c) => write!(
                f,
                "capacity(max_held {}, max_key_bytes {})",
                c.max_held, c.max_key_bytes
            ),
        }
    }
}

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
pub fn members(raft: &Raft) -> Vec<lockd_client::proto::Member> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    let voters: std::collections::BTreeSet<NodeId> = membership.voter_ids().collect();
    membership
        .nodes()
        .map(|(id, n)| lockd_client::proto::Member {
            id: *id,
            addr: n.addr.clone(),
            voter: voters.contains(id),
        })
        .collect()
}

/// The leader this node may name, from its metrics: openraft's
/// `current_leader`, except that a node that leads without a quorum's
/// acknowledgement yet names none. openraft restores a node that led at
/// its last term as that term's leader, with nothing committed and
/// perhaps no quorum left; status, readiness, forwarding and the console
/// must not present it as the cluster's leader until a quorum has
/// answered it (see docs/operations.md, "Who is the leader").
pub fn known_leader(m: &openraft::RaftMetrics<NodeId, Node>) -> Option<NodeId> {
    match m.current_leader {
        Some(l) if l == m.id && leading_unconfirmed(m) => None,
        other => other,
    }
}

/// This node holds the leader's office but no quorum has acknowledged it.
pub fn leading_unconfirmed(m: &openraft::RaftMetrics<NodeId, Node>) -> bool {
    m.state == openraft::ServerState::Leader && m.millis_since_quorum_ack.is_none()
}

#[cfg(test)]
mod leader_tests {
    use super::*;

    #[test]
    fn a_leader_without_a_quorum_names_no_leader() {
        let mut m = openraft::RaftMetrics::<NodeId, Node>::new_initial(3);
        m.state = openraft::ServerState::Leader;
        m.current_leader = Some(3);
        assert_eq!(known_leader(&m), None, "restored as leader, no ack yet");
        m.millis_since_quorum_ack = Some(0);
        assert_eq!(known_leader(&m), Some(3));
        // A follower names whom it heard from.
        m.state = openraft::ServerState::Follower;
        m.millis_since_quorum_ack = None;
        m.current_leader = Some(1);
        assert_eq!(known_leader(&m), Some(1));
    }
}

//! Membership changes: add a learner, promote it, remove a node.
//!
//! Before a learner is added the leader connects to it as a peer: the new
//! node checks the leader's engine fingerprint and names itself (with TLS,
//! its certificate must name the id it is added as), so a node with a
//! different wasm engine, or the wrong node at that address, is refused
//! before it enters the membership.

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::ChangeMembers;
use thiserror::Error;

use crate::raft::{members, Node as RaftNode, NodeId, Raft};
use crate::transport::frame::Role;
use crate::transport::peer::FramedConn;

#[derive(Debug, Error)]
pub enum MembershipError {
    #[error("node {id} at {addr} cannot join: {reason}")]
    Refused {
        id: u64,
        addr: String,
        reason: String,
    },
    #[error("node {0} is not a member")]
    NotMember(u64),
    #[error("node {0} is not a learner")]
    NotLearner(u64),
    #[error("{0}")]
    Raft(String),
}

/// Membership changes proposed by this node (they take effect only on the
/// leader; elsewhere openraft refuses them).
#[derive(Clone)]
pub struct Membership {
    id: NodeId,
    raft: Raft,
    /// This node's engine fingerprint, which a new learner must share.
    fingerprint: String,
    /// This node's certificate, when peers speak TLS: a new learner must
    /// then prove it is the node id it is added as.
    tls: Option<lockd_client::tls::TlsClient>,
}

impl Membership {
    pub fn new(
        id: NodeId,
        raft: Raft,
        fingerprint: String,
        tls: Option<lockd_client::tls::TlsClient>,
    ) -> Membership {
        Membership {
            id,
            raft,
            fingerprint,
            tls,
        }
    }

    pub async fn add_learner(&self, id: u64, addr: &str) -> Result<(), MembershipError> {
        let role = Role::Peer {
            from: self.id,
            fingerprint: self.fingerprint.clone(),
        };
        let refused = |reason: String| MembershipError::Refused {
            id,
            addr: addr.to_string(),
            reason,
        };
        let conn = FramedConn::connect(addr, id, role, Duration::from_secs(3), self.tls.as_ref())
            .await
            .map_err(|e| refused(e.to_string()))?;
        if conn.welcome.node_id != id {
            return Err(refused(format!(
                "the node at that address is node {}",
                conn.welcome.node_id
            )));
        }
        drop(conn);
        self.raft
            .add_learner(
                id,
                RaftNode {
                    addr: addr.to_string(),
                },
                true,
            )
            .await
            .map(|_| ())
            .map_err(|e| MembershipError::Raft(e.to_string()))
    }

    /// (voters, every member) as this node knows them.
    fn membership(&self) -> (BTreeSet<u64>, BTreeSet<u64>) {
        let members = members(&self.raft);
        let voters = members.iter().filter(|m| m.voter).map(|m| m.id).collect();
        let all = members.iter().map(|m| m.id).collect();
        (voters, all)
    }

    pub async fn promote(&self, id: u64) -> Result<(), MembershipError> {
        let (voters, all) = self.membership();
        if !all.contains(&id) {
            return Err(MembershipError::NotMember(id));
        }
        if voters.contains(&id) {
            return Err(MembershipError::NotLearner(id));
        }
        self.raft
            .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
            .await
            .map(|_| ())
            .map_err(|e| MembershipError::Raft(e.to_string()))
    }

    pub async fn remove(&self, id: u64) -> Result<(), MembershipError> {
        let (voters, all) = self.membership();
        if !all.contains(&id) {
            return Err(MembershipError::NotMember(id));
        }
        let change = if voters.contains(&id) {
            // retain = false: the removed voter leaves the cluster entirely.
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        };
        self.raft
            .change_membership(change, false)
            .await
            .map(|_| ())
            .map_err(|e| MembershipError::Raft(e.to_string()))
    }
}

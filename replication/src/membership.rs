//! Membership changes: add a learner, promote it, remove a node.
//!
//! Before a learner is added the leader connects to it as a peer: the new
//! node checks the leader's engine fingerprint and names itself (with TLS,
//! its certificate must name the id it is added as), so a node with a
//! different wasm engine, or the wrong node at that address, is refused
//! before it enters the membership. A node of another implementation
//! (another wasmtime or CPU; the determinism settings must match) is
//! welcome as a learner, but promoted only once the determinism audit has
//! seen its state hash equal to the leader's at `--promote-audit-points`
//! audit points, and at none different (docs/operations.md, "Rolling
//! binary upgrades").

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::ChangeMembers;
use thiserror::Error;

use lockd_proto::{AuditReport, Status};

use crate::cluster_id::ClusterIdentity;
use crate::peer_conn::FramedConn;
use crate::peer_conn::TransportError;
use crate::state_machine::StateMachineStore;
use crate::{members, Node as RaftNode, NodeId, Raft};

#[derive(Debug, Error)]
pub enum MembershipError {
    #[error("address {addr:?} is not HOST:PORT with a port from 1 to 65535")]
    BadAddress { addr: String },
    #[error("the node at {addr} is node {found}, not node {id}")]
    WrongNode { id: u64, addr: String, found: u64 },
    #[error("node {0} is the only voter: add and promote another node first")]
    LastVoter(u64),
    #[error("cannot reach node {id} at {addr}: {reason}")]
    Unreached {
        id: u64,
        addr: String,
        reason: String,
    },
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
    #[error("node {id} runs another implementation ({theirs}; this node {ours}): it is promoted only after the determinism audit has seen its state hash equal at {needed} audit points, and it has seen {seen}; the audit records one every {interval} entries, so let more entries commit and try again")]
    NotAudited {
        id: u64,
        theirs: String,
        ours: String,
        seen: usize,
        needed: u64,
        interval: u64,
    },
    #[error("node {id} runs another implementation ({theirs}) and its state hash differs from this node's at index {index}: it must not vote")]
    Diverged { id: u64, theirs: String, index: u64 },
    #[error("cannot ask node {id} for its {what}: {reason}")]
    Unreachable {
        id: u64,
        what: &'static str,
        reason: String,
    },
    #[error("adding node {id} as a learner did not finish within {secs} s: the change may have committed and the learner still be catching up (see the members); add it again to wait more, or promote it once it has caught up")]
    CatchingUp { id: u64, secs: u64 },
    #[error("{0}")]
    Raft(String),
}

/// How long adding a learner waits for it to catch up with the log. openraft
/// waits without end; a learner that cannot be reached (or is cut off just
/// after the hello) held the admin request until the caller's own timeout
/// (found by the simulation, seed 9259).
pub(crate) const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(20);

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
    tls: Option<lockd_net::tls::TlsClient>,
    gate: PromoteGate,
    /// Named in the hello to a new learner, which adopts it.
    cluster: Arc<ClusterIdentity>,
    /// A change is abandoned once this leader goes this long without a
    /// quorum's acknowledgement (ten election timeouts: a leader cut off
    /// stays cut off, a slow follower catches up).
    quorum_within_ms: u64,
}

/// What a promotion of a learner of another implementation is checked
/// against.
#[derive(Clone)]
pub struct PromoteGate {
    /// This node's state machine: its own audit points.
    pub sm: StateMachineStore,
    /// Reads the learner's status and audit points, as this node.
    pub http: lockd_net::http::Http,
    /// This node's implementation (`wasmtime=…;arch=…`).
    pub implementation: String,
    /// Matching audit points a learner of another implementation needs.
    pub audit_points: u64,
}

/// How many of `learner`'s audit points match `ours`, or the first index
/// where they differ. Pure.
pub(crate) fn audit_agreement(ours: &AuditReport, learner: &AuditReport) -> Result<usize, u64> {
    let mut matching = 0;
    for r in &learner.records {
        if let Some(o) = ours.records.iter().find(|o| o.index == r.index) {
            if o.state_hash != r.state_hash {
                return Err(r.index);
            }
            matching += 1;
        }
    }
    Ok(matching)
}

impl Membership {
    pub fn new(
        id: NodeId,
        raft: Raft,
        fingerprint: String,
        tls: Option<lockd_net::tls::TlsClient>,
        gate: PromoteGate,
        cluster: Arc<ClusterIdentity>,
        quorum_within_ms: u64,
    ) -> Membership {
        Membership {
            id,
            raft,
            fingerprint,
            tls,
            gate,
            cluster,
            quorum_within_ms,
        }
    }

    /// Propose `change` and wait for it, until this leader loses its
    /// quorum or its office (`raft::leadership_fails`).
    async fn change(&self, change: ChangeMembers<u64, RaftNode>) -> Result<(), MembershipError> {
        tokio::select! {
            changed = self.raft.change_membership(change, false) => changed
                .map(|_| ())
                .map_err(|e| MembershipError::Raft(e.to_string())),
            () = crate::leadership_fails(&self.raft, self.id, self.quorum_within_ms) => {
                Err(MembershipError::Raft(format!(
                    "node {} lost its quorum (or its leadership) before the change committed: it may or may not take effect (see the members)",
                    self.id
                )))
            }
        }
    }

    pub async fn add_learner(&self, id: u64, addr: &str) -> Result<(), MembershipError> {
        check_addr(addr)?;
        let role = self.cluster.hello(self.id, id, &self.fingerprint);
        let refused = |reason: String| MembershipError::Refused {
            id,
            addr: addr.to_string(),
            reason,
        };
        let conn = FramedConn::connect(addr, id, role, Duration::from_secs(3), self.tls.as_ref())
            .await
            .map_err(|e| match e {
                // It answered, and said no (or is not lockd): the caller's
                // choice of node or address.
                TransportError::Refused { .. } | TransportError::NotLockd { .. } => {
                    refused(e.to_string())
                }
                _ => MembershipError::Unreached {
                    id,
                    addr: addr.to_string(),
                    reason: e.to_string(),
                },
            })?;
        if conn.welcome.node_id != id {
            return Err(MembershipError::WrongNode {
                id,
                addr: addr.to_string(),
                found: conn.welcome.node_id,
            });
        }
        drop(conn);
        let add = self.raft.add_learner(
            id,
            RaftNode {
                addr: addr.to_string(),
            },
            true,
        );
        match tokio::time::timeout(CATCH_UP, add).await {
            Ok(added) => added
                .map(|_| ())
                .map_err(|e| MembershipError::Raft(e.to_string())),
            Err(_) => Err(MembershipError::CatchingUp {
                id,
                secs: CATCH_UP.as_secs(),
            }),
        }
    }

    /// (voters, every member) as this node knows them.
    fn membership(&self) -> (BTreeSet<u64>, BTreeSet<u64>) {
        let members = members(&self.raft);
        let voters = members.iter().filter(|m| m.voter).map(|m| m.id).collect();
        let all = members.iter().map(|m| m.id).collect();
        (voters, all)
    }

    /// Make learner `id` a voter. Also finishes a change left joint: a
    /// promotion whose leader lost its quorum midway stays in a joint
    /// configuration (a quorum needs a majority of the old voters and of
    /// the new) until someone finishes it, and asking again does, since
    /// openraft moves from a joint configuration towards its newer half
    /// (sweep seed 111323).
    pub async fn promote(&self, id: u64) -> Result<(), MembershipError> {
        let (voters, all) = self.membership();
        if !all.contains(&id) {
            return Err(MembershipError::NotMember(id));
        }
        if voters.contains(&id) && !self.joint() {
            return Err(MembershipError::NotLearner(id));
        }
        if !voters.contains(&id) {
            self.check_audited(id).await?;
        }
        self.change(ChangeMembers::AddVoterIds(BTreeSet::from([id])))
            .await
    }

    /// The configuration in effect is joint: a change stopped midway.
    fn joint(&self) -> bool {
        crate::membership_in_effect(&self.raft.metrics().borrow()).joint
    }

    /// A learner of another implementation must have matched this node's
    /// state hash at enough audit points (and never differed).
    async fn check_audited(&self, id: u64) -> Result<(), MembershipError> {
        let g = &self.gate;
        let addr = members(&self.raft)
            .into_iter()
            .find(|m| m.id == id)
            .map(|m| m.addr)
            .ok_or(MembershipError::NotMember(id))?;
        let unreachable = |what, e: lockd_net::http::AdminError| MembershipError::Unreachable {
            id,
            what,
            reason: e.to_string(),
        };
        let status: Status = g
            .http
            .get_json(&addr, "/v1/status")
            .await
            .map_err(|e| unreachable("status", e))?;
        if status.engine_implementation == g.implementation {
            return Ok(());
        }
        let theirs: AuditReport = g
            .http
            .get_json(&addr, "/v1/audit")
            .await
            .map_err(|e| unreachable("audit points", e))?;
        let ours = g.sm.audit_report();
        match audit_agreement(&ours, &theirs) {
            Err(index) => Err(MembershipError::Diverged {
                id,
                theirs: status.engine_implementation,
                index,
            }),
            Ok(seen) if (seen as u64) < g.audit_points => Err(MembershipError::NotAudited {
                id,
                theirs: status.engine_implementation,
                ours: g.implementation.clone(),
                seen,
                needed: g.audit_points,
                interval: ours.interval,
            }),
            Ok(seen) => {
                tracing::info!(
                    node = self.id,
                    learner = id,
                    implementation = %status.engine_implementation,
                    matching = seen,
                    "promoting a learner of another implementation: the audit points match"
                );
                Ok(())
            }
        }
    }

    pub async fn remove(&self, id: u64) -> Result<(), MembershipError> {
        let (voters, all) = self.membership();
        if !all.contains(&id) {
            return Err(MembershipError::NotMember(id));
        }
        if voters.len() == 1 && voters.contains(&id) {
            // openraft refuses an empty voter set too, but as an internal
            // error; it is the caller's to fix.
            return Err(MembershipError::LastVoter(id));
        }
        let change = if voters.contains(&id) {
            // retain = false: the removed voter leaves the cluster entirely.
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        };
        self.change(change).await
    }
}

/// What a learner's address must look like before it is dialled: a host
/// and a port from 1 to 65535 (the host is resolved when dialled).
fn check_addr(addr: &str) -> Result<(), MembershipError> {
    let bad = || MembershipError::BadAddress {
        addr: addr.to_string(),
    };
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    let host_ok = !host.is_empty() && !host.contains(|c: char| c.is_whitespace() || c == '/');
    match port.parse::<u16>() {
        Ok(p) if p > 0 && host_ok => Ok(()),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockd_proto::{AuditKind, AuditRecord};

    #[test]
    fn addresses_are_host_and_port() {
        for good in ["127.0.0.1:7400", "node-2.lockd:1", "[::1]:65535"] {
            assert!(check_addr(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "no-port",
            ":7400",
            "127.0.0.1:0",
            "127.0.0.1:65536",
            "127.0.0.1:x",
            "http://h:1",
            "a b:1",
        ] {
            assert!(
                matches!(check_addr(bad), Err(MembershipError::BadAddress { .. })),
                "{bad}"
            );
        }
    }

    fn report(points: &[(u64, &str)]) -> AuditReport {
        AuditReport {
            id: 1,
            interval: 10,
            records: points
                .iter()
                .map(|(index, hash)| AuditRecord {
                    index: *index,
                    state_hash: hash.to_string(),
                    module_hash: "m".into(),
                    kind: AuditKind::Interval,
                })
                .collect(),
        }
    }

    #[test]
    fn only_points_both_recorded_count_and_one_difference_refuses() {
        let ours = report(&[(10, "a"), (20, "b"), (30, "c")]);
        assert_eq!(
            audit_agreement(&ours, &report(&[(20, "b"), (30, "c"), (40, "d")])),
            Ok(2)
        );
        assert_eq!(audit_agreement(&ours, &report(&[])), Ok(0));
        assert_eq!(
            audit_agreement(&ours, &report(&[(10, "a"), (20, "x")])),
            Err(20)
        );
    }
}

//! [`Services`]: what the APIs of a node reach — built and started by
//! [`crate::node`], shared by every connection.

use std::sync::Arc;

use crate::auth::trail::AdminLog;
use crate::auth::Auth;
use crate::membership::Membership;
use crate::raft::log_store::LogStore;
use crate::raft::state_machine::StateMachineStore;
use crate::raft::{NodeId, Raft};
use crate::service::LockService;
use crate::upgrade::submit::Upgrader;
use lockd_core::engine::WasmEngine;

/// The parts of a running node that requests use.
pub struct Services {
    pub id: NodeId,
    /// The address peers and clients reach this node at.
    pub addr: String,
    pub raft: Raft,
    pub sm: StateMachineStore,
    pub log: LogStore,
    pub engine: Arc<WasmEngine>,
    pub locks: LockService,
    pub upgrader: Upgrader,
    pub membership: Membership,
    /// Checks every peer RPC before openraft sees it.
    pub peer_gate: crate::raft::peer_check::PeerGate,
    /// `--max-module-bytes`: the largest module an upgrade may carry.
    pub max_module_bytes: usize,
    /// The connection caps and timeouts.
    pub conn: crate::transport::limits::Gate,
    /// Every connection must be TLS (the node has a certificate).
    pub tls_required: bool,
    /// Who may do what (off without an auth file).
    pub auth: Arc<Auth>,
    /// The HTTP client for forwarding to the leader.
    pub forwarder: crate::transport::http::Forwarder,
    /// The admin requests this node served, for status.
    pub admin_log: AdminLog,
    /// Times the leader this node knows changed, for metrics.
    pub leader_changes: Arc<std::sync::atomic::AtomicU64>,
    /// Which cluster this node belongs to; peers of another are refused.
    pub cluster: Arc<crate::cluster_id::ClusterIdentity>,
}

impl Services {
    /// Whether `id` is a member (voter or learner) as this node knows it;
    /// `None` before it has a membership.
    pub fn is_member(&self, id: NodeId) -> Option<bool> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        membership.nodes().next()?;
        Some(membership.get_node(&id).is_some())
    }

    /// The address of member `id`, as this node's membership knows it.
    pub fn addr_of(&self, id: NodeId) -> Option<String> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.addr.clone())
    }
}

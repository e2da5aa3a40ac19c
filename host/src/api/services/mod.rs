//! [`Services`]: what the APIs of a node reach — built by [`crate::node`],
//! shared by every connection.
//!
//! Its parts are private: a handler asks for what it needs through a
//! method that says so, so the sequences several handlers share (reading
//! Raft's metrics beside the state machine's view, checking a caller's
//! rights, answering a peer) are written once, and what a handler can
//! touch is visible here.
//!
//! # Layout
//!
//! * this module: the parts, declared once in [`Parts`], who this node
//!   is, its connection limits, and the two subsystems handlers drive
//!   whole (the lock service, the upgrader).
//! * `cluster`: what this node knows of the cluster — status, readiness,
//!   members and their changes, the leader to forward to.
//! * `peer`: the answer to a peer's Raft RPC.
//! * `access`: who a caller is, what it may do, and the admin audit trail.
//! * `state`: reads of the state machine for the admin routes (audit,
//!   capacity, module keys), snapshots built or exported on request, and
//!   the counters metrics read.
//! * `snapshot_error`: why a snapshot was not built or exported.

mod access;
mod cluster;
mod peer;
pub(crate) mod snapshot_error;
mod state;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::hosts::AllowedHosts;
use crate::auth::trail::AdminLog;
use crate::auth::Auth;
use crate::cluster_id::ClusterIdentity;
use crate::membership::Membership;
use crate::modules::submit::Upgrader;
use crate::raft::leader_vouch::Vouches;
use crate::raft::log_store::LogStore;
use crate::raft::non_member::Standing;
use crate::raft::peer_check::PeerGate;
use crate::raft::stand::Silence;
use crate::raft::state_machine::StateMachineStore;
use crate::raft::{NodeId, Raft};
use crate::service::LockService;
use crate::transport::http::Forwarder;
use crate::transport::limits::{ConnLimits, Gate};
use lockd_core::engine::WasmEngine;

pub use access::Refusal;

/// The parts of a running node that requests use (each described in
/// [`Parts`], declared there once), and the admin audit trail.
pub struct Services {
    parts: Parts,
    /// The admin requests this node served, for status.
    admin_log: AdminLog,
}

/// What [`Services`] is built from: the node's subsystems, started by
/// [`crate::node`]. Public fields, as a constructor's named arguments.
pub struct Parts {
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
    pub peer_gate: PeerGate,
    /// Whether this node's elections are paused (refused as a non-member).
    pub standing: Arc<Standing>,
    /// What this node knows of its leader's liveness (`raft::stand`).
    pub silence: Arc<Silence>,
    /// `--election-timeout-ms`, and the longest an election may take
    /// (`NodeConfig::election_max_ms`).
    pub election_timeout_ms: u64,
    pub election_max_ms: u64,
    /// Leaders outside this node's membership that a member vouched for.
    pub vouches: Arc<Vouches>,
    /// `--max-module-bytes`: the largest module an upgrade may carry.
    pub max_module_bytes: usize,
    /// The connection caps and timeouts.
    pub conn: Gate,
    /// Every connection must be TLS (the node has a certificate).
    pub tls_required: bool,
    /// Who may do what (off without an auth file).
    pub auth: Arc<Auth>,
    /// The names HTTP requests may be sent to (DNS rebinding): the node's
    /// advertised and listen hosts and `--allowed-hosts`.
    pub allowed_hosts: AllowedHosts,
    /// The HTTP client for forwarding to the leader.
    pub forwarder: Forwarder,
    /// Times the leader this node knows changed (counted by a task of the
    /// node), for metrics.
    pub leader_changes: Arc<AtomicU64>,
    /// Counted by the snapshot sender; read here for metrics.
    pub snapshot_sends: Arc<crate::raft::snapshot_counts::SendCounts>,
    /// Which cluster this node belongs to; peers of another are refused.
    pub cluster: Arc<ClusterIdentity>,
}

impl Services {
    /// The services of a node, with an empty admin audit trail.
    pub fn new(parts: Parts) -> Services {
        Services {
            parts,
            admin_log: AdminLog::default(),
        }
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.parts.id
    }

    /// Whether every connection must be TLS (the node has a certificate).
    pub(crate) fn tls_required(&self) -> bool {
        self.parts.tls_required
    }

    /// The names an HTTP request may be sent to ([`super::hosts`]).
    pub(crate) fn allowed_hosts(&self) -> &AllowedHosts {
        &self.parts.allowed_hosts
    }

    /// The caps and timeouts every connection is served under.
    pub(crate) fn conn_limits(&self) -> &ConnLimits {
        self.parts.conn.limits()
    }

    /// `--max-module-bytes`: the largest module an upgrade may carry.
    pub fn max_module_bytes(&self) -> usize {
        self.parts.max_module_bytes
    }

    /// The lock service: every lock route and native request uses most
    /// of it (acquire, release, keepalive, reads, policy data, counters).
    pub fn locks(&self) -> &LockService {
        &self.parts.locks
    }

    /// Upgrades, shadow modules, capacity and module keys, each proposed
    /// through the log: the admin routes use all of it.
    pub(crate) fn upgrader(&self) -> &Upgrader {
        &self.parts.upgrader
    }

    /// The HTTP client that passes requests on to the leader.
    pub(crate) fn forwarder(&self) -> &Forwarder {
        &self.parts.forwarder
    }
}

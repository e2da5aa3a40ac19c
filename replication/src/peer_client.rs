//! A connection to one peer and the calls made on it: [`NetworkFactory`]
//! makes a [`PeerClient`] per target (openraft's replication streams, the
//! pre-check, the pre-vote, the hand-over), each with its own connection.
//!
//! A connection is opened lazily, re-opened after any error, and every
//! call has a deadline and a bound on how long it may go without progress
//! ([`NetworkFactory::stall`]): the answering node sends keep-alive frames
//! while it reads or works on a long request, so a connection that went
//! dead (a partition dropped its packets) fails within that bound however
//! long the request may take. openraft's calls are in `raft::network`,
//! snapshots in `raft::snapshot_send`.

use std::time::Duration;

use openraft::error::{NetworkError, RPCError, Unreachable};

use super::messages::{
    PeerRequest, PeerResponse, PreVoteAnswer, PreVoteAsk, PrecheckAnswer, ResignNotice,
    SignedPrecheckAsk,
};
use super::{Node, NodeId};
use crate::peer_conn::FramedConn;
use crate::peer_conn::TransportError;

/// Makes a [`PeerClient`] per replication target.
#[derive(Clone)]
pub struct NetworkFactory {
    pub my_id: NodeId,
    /// This node's engine fingerprint (text), sent in every peer hello.
    pub fingerprint: String,
    pub connect_timeout: Duration,
    /// This node's certificate and the cluster's CA, when peers speak TLS.
    pub tls: Option<lockd_net::tls::TlsClient>,
    /// This node's cluster, named in every peer hello.
    pub cluster: std::sync::Arc<crate::cluster_id::ClusterIdentity>,
    /// Paused when a peer refuses this node's vote as a non-member.
    pub standing: std::sync::Arc<super::non_member::Standing>,
    /// How long a call may go without a byte moving before its connection
    /// is abandoned as dead (the election timeout: a peer silent that long
    /// is gone for every other purpose too).
    pub stall: Duration,
    /// openraft's backoff after an unreachable peer: one heartbeat.
    pub retry: Duration,
    /// Snapshot sends and how they ended (`raft::snapshot_send`).
    pub snapshot_sends: std::sync::Arc<super::snapshot_counts::SendCounts>,
}

/// One replication target's connection and its calls.
pub struct PeerClient {
    pub(super) factory: NetworkFactory,
    pub(super) target: NodeId,
    addr: String,
    conn: Option<FramedConn>,
}

#[derive(Debug, thiserror::Error)]
#[error("node {target} answered a {want} request with {got}")]
struct WrongReply {
    target: NodeId,
    want: &'static str,
    got: String,
}

impl PeerClient {
    /// A client of `target` at `addr`; it connects on its first call.
    pub(super) fn new(factory: NetworkFactory, target: NodeId, addr: String) -> PeerClient {
        PeerClient {
            factory,
            target,
            addr,
            conn: None,
        }
    }

    /// The node this client calls.
    pub fn target(&self) -> NodeId {
        self.target
    }

    pub(super) fn snapshot_counts(&self) -> &std::sync::Arc<super::snapshot_counts::SendCounts> {
        &self.factory.snapshot_sends
    }

    pub(super) async fn call(
        &mut self,
        req: PeerRequest,
        timeout: Duration,
    ) -> Result<PeerResponse, TransportError> {
        // The connection is taken out for the call and put back only after
        // an answer: a call that fails, or that the caller drops (openraft
        // abandons a snapshot send at its own deadline), closes it, so the
        // next call never waits on a stream that lost a frame or still owes
        // an old answer (seed 7577: a snapshot retried on such a stream
        // timed out again and again).
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => self.connect(timeout).await?,
        };
        let started = std::time::Instant::now();
        // A quiet call gives up sooner when a new connection opens (its
        // own is dead): `peer_conn`.
        let probe = || async { self.connect(timeout).await.is_ok() };
        let result = conn.call(&req, timeout, self.factory.stall, probe).await;
        tracing::trace!(
            target = self.target,
            micros = started.elapsed().as_micros() as u64,
            ok = result.is_ok(),
            "peer rpc"
        );
        if result.is_ok() {
            self.conn = Some(conn);
        }
        result
    }

    async fn connect(&self, timeout: Duration) -> Result<FramedConn, TransportError> {
        let role =
            self.factory
                .cluster
                .hello(self.factory.my_id, self.target, &self.factory.fingerprint);
        let conn = FramedConn::connect(
            &self.addr,
            self.target,
            role,
            self.factory.connect_timeout.min(timeout),
            self.factory.tls.as_ref(),
        )
        .await?;
        if conn.welcome.node_id != self.target {
            // Addresses get reused: never send Raft RPC to the wrong node.
            return Err(TransportError::Refused {
                addr: self.addr.clone(),
                reason: format!(
                    "it is node {}, not node {}",
                    conn.welcome.node_id, self.target
                ),
            });
        }
        let mut conn = conn;
        let ask = PeerRequest::KeepAlive {
            every_ms: keep_alive_every(self.factory.stall).as_millis() as u64,
        };
        let bound = self.factory.connect_timeout.min(timeout);
        // A node before keep-alives answers `Error` (it cannot read the
        // ask): its calls then end at their deadlines only.
        if let PeerResponse::KeepAlive { .. } =
            conn.call(&ask, bound, bound, || async { false }).await?
        {
            conn.keep_alive();
        }
        Ok(conn)
    }

    pub(super) fn unreachable<E: std::error::Error>(
        e: TransportError,
    ) -> RPCError<NodeId, Node, E> {
        RPCError::Unreachable(Unreachable::new(&e))
    }

    pub(super) fn wrong<E: std::error::Error>(
        &self,
        want: &'static str,
        got: PeerResponse,
    ) -> RPCError<NodeId, Node, E> {
        RPCError::Network(NetworkError::new(&WrongReply {
            target: self.target,
            want,
            got: format!("{got:?}"),
        }))
    }
}

/// How often a peer is asked to send keep-alive frames: four per stall
/// bound, so one lost or late frame never looks like a dead connection.
pub(crate) fn keep_alive_every(stall: Duration) -> Duration {
    (stall / 4).max(Duration::from_millis(5))
}

impl PeerClient {
    /// Ask this peer to pre-check a module, within `timeout`.
    pub async fn precheck(
        &mut self,
        ask: SignedPrecheckAsk,
        timeout: Duration,
    ) -> Result<PrecheckAnswer, String> {
        match self.call(PeerRequest::SignedPrecheck(ask), timeout).await {
            Ok(PeerResponse::Precheck(answer)) => Ok(answer),
            Ok(PeerResponse::Error(why) | PeerResponse::NotMember(why)) => Err(why),
            Ok(other) => Err(format!("answered {other:?}")),
            Err(e) => Err(format!("unreachable: {e}")),
        }
    }

    /// Ask this peer whether it would vote for this node, within
    /// `timeout`.
    pub(crate) async fn pre_vote(
        &mut self,
        ask: PreVoteAsk,
        timeout: Duration,
    ) -> Result<PreVoteAnswer, String> {
        match self.call(PeerRequest::PreVote(ask), timeout).await {
            Ok(PeerResponse::PreVote(answer)) => Ok(answer),
            Ok(PeerResponse::NotMember(why)) => {
                self.factory.standing.refused(self.target);
                Err(why)
            }
            Ok(PeerResponse::Error(why)) => Err(why),
            Ok(other) => Err(format!("answered {other:?}")),
            Err(e) => Err(format!("unreachable: {e}")),
        }
    }

    /// Tell this peer its leader resigns, within `timeout`.
    pub async fn resign(&mut self, notice: ResignNotice, timeout: Duration) -> Result<(), String> {
        match self.call(PeerRequest::Resign(notice), timeout).await {
            Ok(PeerResponse::Resigned) => Ok(()),
            Ok(other) => Err(format!("answered {other:?}")),
            Err(e) => Err(format!("unreachable: {e}")),
        }
    }
}

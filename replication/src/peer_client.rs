//! A connection to one peer and the calls made on it: [`NetworkFactory`]
//! makes a [`PeerClient`] per target (openraft's replication streams, the
//! pre-check, the pre-vote, the hand-over), each with its own connection.
//!
//! A connection is opened lazily, re-opened after any error, by a task of
//! its own within the connection's bound (`connect_timeout`), not the
//! call's: a call that gives up leaves it running, and the next call takes
//! its connection (see [`PeerClient`]'s `connecting`). Every
//! call has a deadline and a bound on how long it may go without progress
//! ([`NetworkFactory::stall`]): the answering node sends keep-alive frames
//! while it reads or works on a long request, so a connection that went
//! dead (a partition dropped its packets) fails within that bound however
//! long the request may take. openraft's calls are in `raft::network`,
//! snapshots in `raft::snapshot_send`.

use std::time::Duration;

use openraft::error::{NetworkError, RPCError, Unreachable};

use super::messages::{
    PeerRequest, PeerResponse, PreVoteAnswer, PreVoteAsk, ResignNotice, ServiceMessages,
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
    /// Connections no client holds, for the next client of that peer
    /// (`raft::peer_pool`).
    pub idle: crate::peer_pool::IdleConns,
}

/// One replication target's connection and its calls.
pub struct PeerClient {
    pub(super) factory: NetworkFactory,
    pub(super) target: NodeId,
    addr: String,
    conn: Option<FramedConn>,
    /// A connection being made, by a task that leaves it in the idle
    /// pool. Opening one takes four round trips (TCP, TLS, the hello, the
    /// keep-alive ask): on a link slower than a quarter of a heartbeat,
    /// bounded by an append's deadline (a heartbeat), every try would be
    /// cut off and the next start over, and the peer would never be
    /// reached again (found by the simulation: seed 28 of a run with TLS,
    /// a 25 ms heartbeat and up to 10 ms a message). The task outlives
    /// the call, and this client.
    connecting: Option<tokio::task::JoinHandle<Result<(), TransportError>>>,
}

impl Drop for PeerClient {
    /// Its connection, healthy (kept only after an answer), goes to the
    /// pool for the next client of this peer.
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.factory.idle.put(self.target, conn);
        }
    }
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
            connecting: None,
        }
    }

    /// The node this client calls.
    pub fn target(&self) -> NodeId {
        self.target
    }

    pub(super) fn snapshot_counts(&self) -> &std::sync::Arc<super::snapshot_counts::SendCounts> {
        &self.factory.snapshot_sends
    }

    /// Send consensus's own `req` and wait for its answer, within
    /// `timeout`.
    pub(super) async fn call(
        &mut self,
        req: PeerRequest,
        timeout: Duration,
    ) -> Result<PeerResponse, TransportError> {
        self.call_as(req, timeout).await
    }

    /// Send `req` and wait for its answer, within `timeout`; `S` names
    /// the layer above's messages (its module pre-check).
    pub async fn call_as<S: ServiceMessages>(
        &mut self,
        req: PeerRequest<S>,
        timeout: Duration,
    ) -> Result<PeerResponse<S>, TransportError> {
        // The connection is taken out for the call and put back only after
        // an answer: a call that fails, or that the caller drops (openraft
        // abandons a snapshot send at its own deadline), closes it, so the
        // next call never waits on a stream that lost a frame or still owes
        // an old answer (seed 7577: a snapshot retried on such a stream
        // timed out again and again).
        let idle = || self.factory.idle.take(self.target, self.factory.stall);
        let mut conn = match self.conn.take().or_else(idle) {
            Some(conn) => conn,
            None => self.connected(timeout).await?,
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

    /// A new connection for a call that may wait `timeout` for it: the
    /// one being made, or a new one started (see `connecting`). At the
    /// deadline the making goes on; the connection waits in the pool.
    async fn connected(&mut self, timeout: Duration) -> Result<FramedConn, TransportError> {
        let task = self.connecting.get_or_insert_with(|| {
            let (factory, target, addr) = (self.factory.clone(), self.target, self.addr.clone());
            let bound = factory.connect_timeout;
            tokio::spawn(async move {
                let conn = connect(&factory, target, &addr, bound).await?;
                factory.idle.put(target, conn);
                Ok(())
            })
        });
        let joined =
            tokio::time::timeout(timeout, task)
                .await
                .map_err(|_| TransportError::Timeout {
                    addr: self.addr.clone(),
                    what: "connect (still under way)",
                    ms: timeout.as_millis() as u64,
                })?;
        self.connecting = None;
        joined.unwrap_or_else(|e| {
            Err(TransportError::Connect {
                addr: self.addr.clone(),
                source: std::io::Error::other(e),
            })
        })?;
        // Another client of this peer may have taken it meanwhile: the
        // call fails as if the connection were still being made.
        self.factory
            .idle
            .take(self.target, self.factory.stall)
            .ok_or_else(|| TransportError::Timeout {
                addr: self.addr.clone(),
                what: "connect (taken by another call)",
                ms: timeout.as_millis() as u64,
            })
    }

    /// A connection made now, within `timeout` (the probe of a quiet call).
    async fn connect(&self, timeout: Duration) -> Result<FramedConn, TransportError> {
        let bound = self.factory.connect_timeout.min(timeout);
        connect(&self.factory, self.target, &self.addr, bound).await
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

/// Connect to node `target` at `addr` for `factory`'s node within
/// `bound`: the hello, the check that it is that node, and the keep-alive
/// ask.
async fn connect(
    factory: &NetworkFactory,
    target: NodeId,
    addr: &str,
    bound: Duration,
) -> Result<FramedConn, TransportError> {
    let role = factory
        .cluster
        .hello(factory.my_id, target, &factory.fingerprint);
    let mut conn = FramedConn::connect(addr, target, role, bound, factory.tls.as_ref()).await?;
    if conn.welcome.node_id != target {
        // Addresses get reused: never send Raft RPC to the wrong node.
        return Err(TransportError::Refused {
            addr: addr.to_string(),
            reason: format!("it is node {}, not node {}", conn.welcome.node_id, target),
        });
    }
    let ask: PeerRequest = PeerRequest::KeepAlive {
        every_ms: keep_alive_every(factory.stall).as_millis() as u64,
    };
    // A node before keep-alives answers `Error` (it cannot read the
    // ask): its calls then end at their deadlines only.
    let answer: PeerResponse = conn.call(&ask, bound, bound, || async { false }).await?;
    if let PeerResponse::KeepAlive { .. } = answer {
        conn.keep_alive();
    }
    Ok(conn)
}

//! Raft RPC between peers over the framed transport.
//!
//! Each replication stream (one per target) gets its own [`PeerClient`] with
//! its own connection, so a slow snapshot to one node never delays heartbeats
//! to another. A connection is opened lazily, re-opened after any error, and
//! every call has a deadline (openraft's hard TTL for the RPC) and a bound
//! on how long it may go without progress ([`NetworkFactory::stall`]): the
//! answering node sends keep-alive frames while it reads or works on a
//! long request, so a connection that went dead (a partition dropped its
//! packets) fails within that bound however long the request may take.
//!
//! After a failed call openraft waits a backoff before it tries again;
//! ours is one heartbeat ([`NetworkFactory::retry`]), not openraft's
//! 500 ms, so replication resumes within a heartbeat of a link coming
//! back. A peer that stays unreachable costs one connection attempt per
//! heartbeat (each bounded by the heartbeat too). Snapshots are sent by
//! `raft::snapshot_send`.

use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use super::{Node, NodeId, TypeConfig};
use crate::transport::peer::FramedConn;
use crate::transport::TransportError;

/// A Raft RPC from one node to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// The leader asks a voter to pre-check a candidate module
    /// (`modules::precheck`).
    Precheck(crate::modules::precheck::PrecheckAsk),
    /// A node that wants to stand asks whether a voter would vote for it
    /// (`raft::prevote`).
    PreVote(super::prevote::PreVoteAsk),
    /// A stopping leader names its successor (`raft::handoff`).
    Resign(super::handoff::ResignNotice),
    /// On this connection, while reading or answering a request, send a
    /// [`PeerResponse::Working`] frame at least every `every_ms` (clamped
    /// by the answering node); answered [`PeerResponse::KeepAlive`]. A
    /// connection setting, answered by the connection, never by Raft.
    KeepAlive {
        every_ms: u64,
    },
    /// The pre-check ask with what admission needs (the signature the
    /// upgrade or shadow carries): what a leader sends since signatures
    /// are checked before a voter compiles anything.
    SignedPrecheck(crate::modules::precheck::SignedPrecheckAsk),
}

/// The answer to a [`PeerRequest`]; `Error` when the request itself could
/// not be handled (e.g. a client frame sent on a peer connection),
/// `NotMember` when the sender is not a member of the answering node's
/// membership (the reason as text; the sender stops starting elections,
/// `raft::standing`). New variants go at the end: the wire is pinned by
/// `tests/sm/golden_wire.rs`.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Error(String),
    NotMember(String),
    /// A voter's verdict on a candidate module.
    Precheck(crate::modules::precheck::PrecheckAnswer),
    /// A voter's answer to a pre-vote.
    PreVote(super::prevote::PreVoteAnswer),
    /// A resign notice was read.
    Resigned,
    /// Still reading or working on the request of this frame's id (id 0:
    /// a request not read whole yet).
    Working,
    /// To `KeepAlive`: keep-alive frames will come every `every_ms`.
    KeepAlive {
        every_ms: u64,
    },
}

impl crate::transport::peer::Reply for PeerResponse {
    fn is_keep_alive(&self) -> bool {
        matches!(self, PeerResponse::Working)
    }
}

/// Makes a [`PeerClient`] per replication target.
#[derive(Clone)]
pub struct NetworkFactory {
    pub my_id: NodeId,
    /// This node's engine fingerprint (text), sent in every peer hello.
    pub fingerprint: String,
    pub connect_timeout: Duration,
    /// This node's certificate and the cluster's CA, when peers speak TLS.
    pub tls: Option<lockd_client::tls::TlsClient>,
    /// This node's cluster, named in every peer hello.
    pub cluster: std::sync::Arc<crate::cluster_id::ClusterIdentity>,
    /// Paused when a peer refuses this node's vote as a non-member.
    pub standing: std::sync::Arc<super::standing::Standing>,
    /// How long a call may go without a byte moving before its connection
    /// is abandoned as dead (the election timeout: a peer silent that long
    /// is gone for every other purpose too).
    pub stall: Duration,
    /// openraft's backoff after an unreachable peer: one heartbeat.
    pub retry: Duration,
    /// Snapshot sends and how they ended (`raft::snapshot_send`).
    pub snapshot_sends: std::sync::Arc<super::snapshot_send::SendCounts>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        PeerClient {
            factory: self.clone(),
            target,
            addr: node.addr.clone(),
            conn: None,
        }
    }
}

pub struct PeerClient {
    factory: NetworkFactory,
    target: NodeId,
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
    /// The node this client calls.
    pub fn target(&self) -> NodeId {
        self.target
    }

    pub(super) fn snapshot_counts(&self) -> &std::sync::Arc<super::snapshot_send::SendCounts> {
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
        // own is dead): `transport::peer`.
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

    fn unreachable<E: std::error::Error>(e: TransportError) -> RPCError<NodeId, Node, E> {
        RPCError::Unreachable(Unreachable::new(&e))
    }

    fn wrong<E: std::error::Error>(
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
pub fn keep_alive_every(stall: Duration) -> Duration {
    (stall / 4).max(Duration::from_millis(5))
}

/// The most bytes of entries one AppendEntries carries (one entry alone
/// may be bigger: a module up to `--max-module-bytes`). openraft batches up
/// to `max_payload_entries` entries whatever their size; a batch of big
/// upgrade entries could pass the frame limit and be retried as it was
/// forever. Past this bound the batch is refused with `PayloadTooLarge`
/// and a hint of how many entries fit, and openraft sends fewer.
pub const MAX_APPEND_BYTES: usize = 8 << 20;

/// How many leading entries fit in [`MAX_APPEND_BYTES`] (at least one).
pub fn entries_that_fit(entries: &[crate::raft::Entry]) -> usize {
    // One entry (every heartbeat-sized batch) always goes: no sizing.
    if entries.len() <= 1 {
        return entries.len();
    }
    let mut total = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let size = match &e.payload {
            openraft::EntryPayload::Normal(r) => r.wire_bytes(),
            openraft::EntryPayload::Membership(_) => 1024,
            openraft::EntryPayload::Blank => 64,
        };
        total = total.saturating_add(size);
        if total > MAX_APPEND_BYTES {
            return i.max(1);
        }
    }
    entries.len()
}

impl PeerClient {
    /// Ask this peer to pre-check a module, within `timeout`.
    pub async fn precheck(
        &mut self,
        ask: crate::modules::precheck::SignedPrecheckAsk,
        timeout: Duration,
    ) -> Result<crate::modules::precheck::PrecheckAnswer, String> {
        match self.call(PeerRequest::SignedPrecheck(ask), timeout).await {
            Ok(PeerResponse::Precheck(answer)) => Ok(answer),
            Ok(PeerResponse::Error(why) | PeerResponse::NotMember(why)) => Err(why),
            Ok(other) => Err(format!("answered {other:?}")),
            Err(e) => Err(format!("unreachable: {e}")),
        }
    }
}

impl PeerClient {
    /// Ask this peer whether it would vote for this node, within
    /// `timeout`.
    pub async fn pre_vote(
        &mut self,
        ask: super::prevote::PreVoteAsk,
        timeout: Duration,
    ) -> Result<super::prevote::PreVoteAnswer, String> {
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
}

impl PeerClient {
    /// Tell this peer its leader resigns, within `timeout`.
    pub async fn resign(
        &mut self,
        notice: super::handoff::ResignNotice,
        timeout: Duration,
    ) -> Result<(), String> {
        match self.call(PeerRequest::Resign(notice), timeout).await {
            Ok(PeerResponse::Resigned) => Ok(()),
            Ok(other) => Err(format!("answered {other:?}")),
            Err(e) => Err(format!("unreachable: {e}")),
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    fn backoff(&self) -> openraft::network::Backoff {
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().stuck_stream {
            return openraft::network::Backoff::new(std::iter::repeat(Duration::from_secs(10)));
        }
        openraft::network::Backoff::new(std::iter::repeat(self.factory.retry))
    }

    async fn full_snapshot(
        &mut self,
        vote: openraft::Vote<NodeId>,
        snapshot: openraft::Snapshot<TypeConfig>,
        cancel: impl std::future::Future<Output = openraft::error::ReplicationClosed>
            + openraft::OptionalSend
            + 'static,
        _option: RPCOption,
    ) -> Result<
        openraft::raft::SnapshotResponse<NodeId>,
        openraft::error::StreamingError<TypeConfig, openraft::error::Fatal<NodeId>>,
    > {
        super::snapshot_send::send(self, vote, snapshot, cancel).await
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        let fit = entries_that_fit(&rpc.entries);
        if fit < rpc.entries.len() {
            tracing::debug!(
                target = self.target,
                entries = rpc.entries.len(),
                fit,
                "append-entries batch over its byte bound; openraft will send fewer"
            );
            return Err(RPCError::PayloadTooLarge(
                openraft::error::PayloadTooLarge::new_entries_hint(fit as u64),
            ));
        }
        match self
            .call(PeerRequest::AppendEntries(rpc), option.hard_ttl())
            .await
            .map_err(Self::unreachable)?
        {
            PeerResponse::AppendEntries(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.wrong("append-entries", other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, Node, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self
            .call(PeerRequest::InstallSnapshot(rpc), option.hard_ttl())
            .await
            .map_err(Self::unreachable)?
        {
            PeerResponse::InstallSnapshot(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.wrong("install-snapshot", other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        match self
            .call(PeerRequest::Vote(rpc), option.hard_ttl())
            .await
            .map_err(Self::unreachable)?
        {
            PeerResponse::Vote(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            PeerResponse::NotMember(why) => {
                self.factory.standing.refused(self.target);
                Err(self.wrong("vote", PeerResponse::NotMember(why)))
            }
            other => Err(self.wrong("vote", other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload, LogId};

    use super::*;
    use crate::raft::{Entry, Request};
    use lockd_core::upgrade::UpgradeEntry;

    fn entry(i: u64, payload: EntryPayload<TypeConfig>) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), i),
            payload,
        }
    }

    fn module(i: u64, bytes: usize) -> Entry {
        entry(
            i,
            EntryPayload::Normal(Request::Upgrade(UpgradeEntry {
                module: vec![0; bytes],
                replaces: lockd_core::engine::ModuleHash::of(b""),
            })),
        )
    }

    #[test]
    fn a_batch_is_cut_at_its_byte_bound_but_never_to_nothing() {
        let small: Vec<Entry> = (0..300).map(|i| entry(i, EntryPayload::Blank)).collect();
        assert_eq!(entries_that_fit(&small), 300);
        let big: Vec<Entry> = (0..5).map(|i| module(i, 3 << 20)).collect();
        assert_eq!(entries_that_fit(&big), 2);
        let huge = vec![module(0, MAX_APPEND_BYTES * 2), module(1, 10)];
        assert_eq!(entries_that_fit(&huge), 1);
    }
}

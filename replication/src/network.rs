//! Raft RPC between peers: openraft's `RaftNetworkFactory` and
//! `RaftNetwork` over [`PeerClient`] (`raft::peer_client`), and the byte
//! bound on one AppendEntries.
//!
//! After a failed call openraft waits a backoff before it tries again;
//! ours is one heartbeat ([`NetworkFactory::retry`]), not openraft's
//! 500 ms, so replication resumes within a heartbeat of a link coming
//! back. A peer that stays unreachable costs one connection attempt per
//! heartbeat (each bounded by the heartbeat too). Snapshots are sent by
//! `raft::snapshot_send`.

use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use super::messages::{PeerRequest, PeerResponse};
use super::peer_client::{NetworkFactory, PeerClient};
use super::{Node, NodeId, TypeConfig};

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        PeerClient::new(self.clone(), target, node.addr.clone())
    }
}

/// The most bytes of entries one AppendEntries carries (one entry alone
/// may be bigger: a module up to `--max-module-bytes`). openraft batches up
/// to `max_payload_entries` entries whatever their size; a batch of big
/// upgrade entries could pass the frame limit and be retried as it was
/// forever. Past this bound the batch is refused with `PayloadTooLarge`
/// and a hint of how many entries fit, and openraft sends fewer.
pub const MAX_APPEND_BYTES: usize = 8 << 20;

/// How many leading entries fit in [`MAX_APPEND_BYTES`] (at least one).
pub fn entries_that_fit(entries: &[crate::Entry]) -> usize {
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

impl RaftNetwork<TypeConfig> for PeerClient {
    fn backoff(&self) -> openraft::network::Backoff {
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().stuck_stream {
            return openraft::network::Backoff::new(std::iter::repeat(
                std::time::Duration::from_secs(10),
            ));
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
    use crate::{Entry, Request};
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

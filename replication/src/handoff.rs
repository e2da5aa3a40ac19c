//! A leader that stops (SIGTERM) hands its leadership over first.
//!
//! openraft 0.9 has no leadership transfer. So a stopping leader picks
//! its successor itself: the voter whose log matches most of its own
//! (waiting, up to the election timeout, until one matches all of it),
//! stops its Raft (no more heartbeats: the lease the voters hold for it
//! starts to run out), and tells every voter ([`ResignNotice`]) who
//! should stand. The successor stands as soon as openraft's lease allows
//! (half the election timeout after the leader's last message), without
//! the random spread or the margin of a node that guesses; the others
//! hold back a whole timeout, so they do not split the vote
//! (`raft::stand`). A rolling restart then costs each leader change about
//! half an election timeout, and no election timeout of silence.
//!
//! The notice is a peer message (`PeerRequest::Resign`, pinned by
//! `tests/golden/peer_resign.hex`); a voter acts on it only when it names
//! the vote it follows (the leader's, of this term). If the notice is
//! lost, the closed connections tell the voters the same, a little later.

use std::time::Duration;

use futures::future::join_all;

use super::messages::ResignNotice;
use super::peer_client::NetworkFactory;
use super::{NodeId, Raft};
use openraft::RaftNetworkFactory;

/// What a leader needs to hand over.
#[derive(Clone)]
pub struct Handoff {
    pub id: NodeId,
    pub raft: Raft,
    pub peers: NetworkFactory,
    /// `--election-timeout-ms`: the longest it waits for a successor to
    /// catch up.
    pub election: Duration,
}

impl Handoff {
    /// If this node leads other voters: pick a successor, stop Raft, tell
    /// the voters. Returns the successor (`None`: not a leader, or alone;
    /// Raft then still runs).
    pub async fn hand_over(&self) -> Option<NodeId> {
        let (last, voters) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            if m.current_leader != Some(self.id) || !m.vote.is_committed() {
                return None;
            }
            let mut voters = super::voters(&m);
            voters.retain(|(v, _)| *v != self.id);
            (m.last_log_index, voters)
        };
        if voters.is_empty() {
            return None;
        }
        let ids: Vec<NodeId> = voters.iter().map(|(v, _)| *v).collect();
        // Wait (bounded) for a voter that has all of this node's log.
        let _ = self
            .raft
            .wait(Some(self.election))
            .metrics(
                |m| best(&ids, m).is_some_and(|(_, matched)| matched >= last),
                "a voter has the leader's whole log",
            )
            .await;
        let (successor, vote) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            (best(&ids, &m).map_or(ids[0], |(id, _)| id), m.vote)
        };
        tracing::info!(
            successor,
            "leaving: handing leadership over (Raft stops, voters told)"
        );
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
        let notice = ResignNotice { vote, successor };
        let within = self.election / 4;
        join_all(voters.into_iter().map(|(target, node)| {
            let mut peers = self.peers.clone();
            let notice = notice.clone();
            async move {
                let mut client = peers.new_client(target, &node).await;
                let sent = tokio::time::timeout(within, client.resign(notice, within)).await;
                if !matches!(sent, Ok(Ok(()))) {
                    tracing::debug!(target, "a voter did not take the resign notice");
                }
            }
        }))
        .await;
        Some(successor)
    }
}

/// The voter among `ids` whose log matches most of the leader's (the
/// lowest id of equals), and that match's index.
fn best(
    ids: &[NodeId],
    m: &openraft::RaftMetrics<NodeId, super::Node>,
) -> Option<(NodeId, Option<u64>)> {
    let replication = m.replication.as_ref()?;
    ids.iter()
        .map(|id| (*id, replication.get(id).cloned().flatten().map(|l| l.index)))
        .max_by_key(|(id, matched)| (*matched, std::cmp::Reverse(*id)))
}

//! Sending a snapshot to a follower: chunk by chunk, each chunk a call
//! that ends as soon as its connection stops making progress, never one
//! deadline for the whole transfer.
//!
//! openraft's own sender gave every chunk (3 MiB, and the install of the
//! last) one 10 s deadline: a snapshot started into a partition held that
//! follower's replication stream for the whole 10 s however soon the link
//! came back (simulation seeds 33452 and 55569: nothing committed for 8 s
//! with a majority connected). Here a chunk is a [`PeerClient`] call, which
//! fails once no byte has moved for the stall bound (the follower sends
//! keep-alive frames while it receives a chunk and while it installs the
//! snapshot), so a large snapshot on a slow link still completes, while a
//! dead connection is dropped within that bound.
//!
//! A chunk whose call failed is sent again at once on a new connection; the
//! follower keeps what it received, so the transfer goes on where it
//! stopped. After [`RETRIES`] failures in a row the send fails as
//! unreachable and openraft tries again after its backoff (one heartbeat,
//! `raft::network`). Every send that ends is logged and counted
//! ([`SendCounts`](super::snapshot_counts::SendCounts), metric `lockd_raft_snapshot_sends_total`).

use std::time::Duration;

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RaftError, RemoteError, ReplicationClosed,
    StreamingError, Unreachable,
};
use openraft::raft::{InstallSnapshotRequest, SnapshotResponse};
use openraft::{Snapshot, Vote};

use super::messages::{PeerRequest, PeerResponse};
use super::peer_client::PeerClient;
use super::snapshot_counts::Sending;
use super::{NodeId, TypeConfig};

/// Bytes of snapshot per chunk.
pub(crate) const CHUNK_BYTES: usize = 1 << 20;
/// Failed chunk calls in a row before the send gives up.
pub(crate) const RETRIES: u32 = 3;
/// The most one chunk's call may take while it progresses (the last one
/// includes the follower's install): a backstop, far above any install;
/// a dead connection ends at the stall bound long before.
const CHUNK_DEADLINE: Duration = Duration::from_secs(600);

type SendError = StreamingError<TypeConfig, Fatal<NodeId>>;

/// Send `snapshot` to the client's target, until it is installed, fails,
/// or `cancel` (openraft dropped the stream) fires.
pub async fn send(
    client: &mut PeerClient,
    vote: Vote<NodeId>,
    snapshot: Snapshot<TypeConfig>,
    cancel: impl std::future::Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
) -> Result<SnapshotResponse<NodeId>, SendError> {
    let started = tokio::time::Instant::now();
    let id = snapshot.meta.snapshot_id.clone();
    let bytes = snapshot.snapshot.get_ref().len();
    let target = client.target();
    tracing::info!(target, snapshot = %id, bytes, "sending a snapshot");
    let counts = client.snapshot_counts().clone();
    let mut sending = Sending::start(&counts);
    let result = tokio::select! {
        r = chunks(client, vote, &snapshot) => r,
        closed = cancel => Err(closed.into()),
    };
    let ms = started.elapsed().as_millis() as u64;
    match &result {
        Ok(_) => {
            sending.ended(&counts.installed);
            tracing::info!(target, snapshot = %id, bytes, ms, "snapshot sent");
        }
        Err(StreamingError::Closed(why)) => {
            sending.ended(&counts.abandoned);
            tracing::warn!(target, snapshot = %id, ms, %why, "snapshot send abandoned");
        }
        Err(e) => {
            sending.ended(&counts.failed);
            tracing::warn!(target, snapshot = %id, ms, error = %e, "snapshot send failed");
        }
    }
    result
}

async fn chunks(
    client: &mut PeerClient,
    vote: Vote<NodeId>,
    snapshot: &Snapshot<TypeConfig>,
) -> Result<SnapshotResponse<NodeId>, SendError> {
    let data = snapshot.snapshot.get_ref();
    let end = data.len();
    let mut offset = 0usize;
    let mut failures = 0u32;
    loop {
        let upto = end.min(offset + CHUNK_BYTES);
        let done = upto == end;
        let req = InstallSnapshotRequest {
            vote,
            meta: snapshot.meta.clone(),
            offset: offset as u64,
            data: data[offset..upto].to_vec(),
            done,
        };
        let why = match client
            .call(PeerRequest::InstallSnapshot(req), CHUNK_DEADLINE)
            .await
        {
            Ok(PeerResponse::InstallSnapshot(Ok(resp))) => {
                if resp.vote > vote || done {
                    return Ok(SnapshotResponse::new(resp.vote));
                }
                offset = upto;
                failures = 0;
                continue;
            }
            // The follower lost the snapshot's start (it restarted, or
            // began another): from the beginning.
            Ok(PeerResponse::InstallSnapshot(Err(RaftError::APIError(
                InstallSnapshotError::SnapshotMismatch(m),
            )))) => {
                offset = 0;
                m.to_string()
            }
            Ok(PeerResponse::InstallSnapshot(Err(RaftError::Fatal(fatal)))) => {
                return Err(RemoteError::new(client.target(), fatal).into());
            }
            Ok(other) => {
                let why = std::io::Error::other(format!("answered {other:?}"));
                return Err(NetworkError::new(&why).into());
            }
            Err(e) => e.to_string(),
        };
        failures += 1;
        tracing::debug!(target = client.target(), offset, failures, %why, "snapshot chunk failed");
        if failures >= RETRIES {
            let why = std::io::Error::other(why);
            return Err(Unreachable::new(&why).into());
        }
    }
}

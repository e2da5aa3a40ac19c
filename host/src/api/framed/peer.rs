//! A peer's connection, after its hello: Raft RPC, one request at a time,
//! each answered by [`Services::answer_peer`].

use futures::StreamExt;
use tokio::sync::watch;

use super::{send, Conn};
use crate::api::caller::peer_refusal;
use crate::api::services::Services;
use crate::raft::network::{PeerRequest, PeerResponse};
use crate::transport::listener::{stopping, Caller};
use lockd_client::wire::{self as frame, Envelope, PeerHello};

/// Whether to serve a peer: its certificate, the node it calls, its wasm
/// engine, its cluster ([`crate::cluster_id`]). `Err` says why not.
pub(super) fn meet(node: &Services, caller: &Caller, p: PeerHello<'_>) -> Result<(), String> {
    if let Some(why) = peer_refusal(node, caller, p.from) {
        return Err(why);
    }
    // Addresses get reused: answer only calls meant for this node (and
    // never adopt the cluster of a caller that wanted another).
    if let Some(to) = p.to.filter(|to| *to != node.id()) {
        return Err(format!("it is node {}, not node {to}", node.id()));
    }
    let theirs = lockd_core::engine::EngineFingerprint {
        text: p.fingerprint.to_string(),
        hash: String::new(),
    };
    // Another wasmtime or CPU may serve beside this one (a rolling
    // upgrade; promotion waits for the audit, see membership); a setting
    // that decides what guests compute may not.
    let diffs = node.engine_differences(&theirs);
    if !diffs.is_empty() {
        return Err(format!(
            "it runs a different wasm engine (caller != this node): {}",
            diffs.join(", ")
        ));
    }
    node.meet_cluster(p.cluster)
}

/// Answer peer `from`'s requests until it closes or the node stops.
pub(super) async fn serve(
    node: &Services,
    mut framed: Conn,
    from: u64,
    mut shutdown: watch::Receiver<bool>,
) {
    // Dropped on every way out: the node learns the connection closed.
    let conn = node.peer_connection();
    loop {
        let bytes = tokio::select! {
            next = framed.next() => match next {
                Some(Ok(bytes)) => bytes,
                _ => return,
            },
            () = stopping(&mut shutdown) => return,
        };
        let (id, response) = match frame::decode::<Envelope<PeerRequest>>(&bytes) {
            Ok(env) => (env.id, node.answer_peer(from, conn.id(), env.body).await),
            Err(e) => (
                0,
                PeerResponse::Error(format!("request does not decode: {e}")),
            ),
        };
        if send(&mut framed, &Envelope { id, body: response })
            .await
            .is_err()
        {
            return;
        }
    }
}

//! A peer's connection, after its hello: Raft RPC, one request at a time,
//! each answered by [`Services::answer_peer`].

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;

use super::{send, Conn};
use crate::api::caller::peer_refusal;
use crate::api::services::Services;
use crate::modules::peer_messages::{PeerRequest, PeerResponse};
use crate::transport::listener::{stopping, Caller};
use lockd_net::wire::{self as frame, Envelope, PeerHello};

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

/// The bounds on how often a caller may ask for keep-alive frames.
const KEEP_ALIVE_MS: (u64, u64) = (5, 10_000);

/// Answer peer `from`'s requests until it closes or the node stops.
///
/// Once the caller asked for keep-alives (`PeerRequest::KeepAlive`), a
/// `PeerResponse::Working` frame goes out at that interval while a
/// request arrives in pieces (id 0: not read yet) and while it is being
/// answered (its id), so the caller can tell a long request (a snapshot's
/// install) from a dead connection (`lockd_replication::peer_conn`).
pub(super) async fn serve(
    node: &Services,
    mut framed: Conn,
    from: u64,
    mut shutdown: watch::Receiver<bool>,
) {
    // Dropped on every way out: the node learns the connection closed.
    let conn = node.peer_connection();
    let mut every = None;
    loop {
        let Some(bytes) = next(&mut framed, every, &mut shutdown).await else {
            return;
        };
        let (id, response) = match frame::decode::<Envelope<PeerRequest>>(&bytes) {
            Ok(Envelope {
                id,
                body: PeerRequest::KeepAlive { every_ms },
            }) => {
                let (lo, hi) = KEEP_ALIVE_MS;
                let every_ms = every_ms.clamp(lo, hi);
                every = Some(Duration::from_millis(every_ms));
                (id, PeerResponse::KeepAlive { every_ms })
            }
            Ok(env) => {
                let answer = node.answer_peer(from, conn.id(), env.body);
                match working(&mut framed, env.id, every, answer).await {
                    Some(response) => (env.id, response),
                    None => return,
                }
            }
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

/// The next frame; `None` when the connection ends or the node stops.
/// With `every`, a keep-alive (id 0) at that interval while a frame
/// arrives in pieces and its bytes keep coming.
async fn next(
    framed: &mut Conn,
    every: Option<Duration>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<tokio_util::bytes::BytesMut> {
    let mut had = framed.read_buffer().len();
    loop {
        let tick = async {
            match every {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            next = framed.next() => return match next {
                Some(Ok(bytes)) => Some(bytes),
                _ => None,
            },
            () = stopping(shutdown) => return None,
            () = tick => {
                let has = framed.read_buffer().len();
                if has > had && send(framed, &keep_alive(0)).await.is_err() {
                    return None;
                }
                had = has;
            }
        }
    }
}

/// `answer`'s response, with a keep-alive for request `id` at every
/// `every` until it is ready; `None` if the connection failed meanwhile.
async fn working(
    framed: &mut Conn,
    id: u64,
    every: Option<Duration>,
    answer: impl std::future::Future<Output = PeerResponse>,
) -> Option<PeerResponse> {
    let Some(every) = every else {
        return Some(answer.await);
    };
    tokio::pin!(answer);
    loop {
        tokio::select! {
            response = &mut answer => return Some(response),
            () = tokio::time::sleep(every) => {
                if send(framed, &keep_alive(id)).await.is_err() {
                    return None;
                }
            }
        }
    }
}

fn keep_alive(id: u64) -> Envelope<PeerResponse> {
    Envelope {
        id,
        body: PeerResponse::Working,
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::Framed;

    use super::*;

    /// The node's end of a connection, and the caller's raw end.
    fn pair() -> (Conn, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(4096);
        let io: Box<dyn crate::transport::listener::Io> = Box::new(ours);
        (Framed::new(io, frame::codec()), theirs)
    }

    /// The keep-alives (and their ids) read from `theirs` until it has
    /// nothing more for a while.
    async fn keep_alives(theirs: &mut tokio::io::DuplexStream) -> Vec<u64> {
        let mut framed = Framed::new(theirs, frame::codec());
        let mut ids = Vec::new();
        while let Ok(Some(Ok(bytes))) =
            tokio::time::timeout(Duration::from_millis(50), framed.next()).await
        {
            let env: Envelope<PeerResponse> = frame::decode(&bytes).expect("a response");
            assert!(matches!(env.body, PeerResponse::Working), "{:?}", env.body);
            ids.push(env.id);
        }
        ids
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_arriving_slowly_is_met_with_keep_alives_and_a_stalled_one_is_not() {
        let (mut conn, mut theirs) = pair();
        let (_stop, mut shutdown) = watch::channel(false);
        let every = Some(Duration::from_millis(10));
        let body = vec![7u8; 64 << 10];
        let writer = async move {
            // A 64 KiB frame, 4 KiB each 5 ms (about 80 ms), then silence
            // with a second frame half sent.
            theirs
                .write_all(&(body.len() as u32).to_be_bytes())
                .await
                .expect("head");
            for piece in body.chunks(4096) {
                theirs.write_all(piece).await.expect("a piece");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            theirs.write_all(&100u32.to_be_bytes()).await.expect("head");
            theirs.write_all(&[1; 10]).await.expect("a piece");
            theirs
        };
        let (read, mut theirs) = tokio::join!(next(&mut conn, every, &mut shutdown), writer);
        assert_eq!(read.expect("the frame").len(), 64 << 10);
        let waiting = async {
            let stalled = tokio::time::timeout(
                Duration::from_millis(200),
                next(&mut conn, every, &mut shutdown),
            );
            assert!(stalled.await.is_err(), "a frame half sent never completes");
        };
        let (_, ids) = tokio::join!(waiting, keep_alives(&mut theirs));
        // One per 10 ms while the first frame's bytes came (its last
        // pieces may land in one interval), none for the stalled one
        // beyond its first bytes.
        assert!(ids.len() >= 5 && ids.len() <= 10, "{ids:?}");
        assert!(ids.iter().all(|id| *id == 0), "{ids:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_answer_is_preceded_by_keep_alives_with_its_id() {
        let (mut conn, mut theirs) = pair();
        let answer = async {
            tokio::time::sleep(Duration::from_millis(55)).await;
            PeerResponse::Resigned
        };
        let every = Some(Duration::from_millis(10));
        let (response, ids) = tokio::join!(
            working(&mut conn, 9, every, answer),
            keep_alives(&mut theirs)
        );
        assert!(matches!(response, Some(PeerResponse::Resigned)));
        assert_eq!(ids, vec![9; 5]);
        // Without keep-alives asked for, none.
        let (mut conn, mut theirs) = pair();
        let quick = async { PeerResponse::Resigned };
        let (response, ids) =
            tokio::join!(working(&mut conn, 9, None, quick), keep_alives(&mut theirs));
        assert!(response.is_some());
        assert!(ids.is_empty(), "{ids:?}");
    }
}

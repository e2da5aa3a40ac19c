//! The server side of a framed connection.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

use crate::node::Node;
use crate::raft::network::{PeerRequest, PeerResponse};
use crate::transport::frame::{self, Envelope, Hello, HelloReply, Refused, Role, Welcome};

/// Serve one framed connection until it closes.
pub async fn serve(node: Arc<Node>, mut stream: TcpStream) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let mut preface = [0u8; 4];
    if stream.read_exact(&mut preface).await.is_err() {
        return;
    }
    let mut framed = Framed::new(stream, frame::codec());
    let refuse = |reason: String| HelloReply::Refused(Refused { reason });
    if preface[3] != frame::VERSION {
        let reply = refuse(format!("protocol version {} is not supported; this node speaks version {}", preface[3], frame::VERSION));
        let _ = send(&mut framed, &reply).await;
        return;
    }
    let hello: Hello = match framed.next().await {
        Some(Ok(bytes)) => match frame::decode(&bytes) {
            Ok(h) => h,
            Err(e) => {
                let _ = send(&mut framed, &refuse(format!("the first frame is not a hello: {e}"))).await;
                return;
            }
        },
        _ => return,
    };
    let reply = match &hello.role {
        Role::Peer { fingerprint, from } => {
            let ours = &node.engine.fingerprint().text;
            if fingerprint == ours {
                HelloReply::Welcome(Welcome { node_id: node.id })
            } else {
                let theirs = crate::engine::EngineFingerprint { text: fingerprint.clone(), hash: String::new() };
                let diffs = theirs.differences(node.engine.fingerprint()).join(", ");
                tracing::error!(id = node.id, from, %peer, %diffs, "refused a peer with a different wasm engine");
                refuse(format!("node {} runs a different wasm engine (caller != this node): {diffs}", node.id))
            }
        }
        Role::Client => refuse("this node does not serve the native client protocol yet; use the HTTP API".into()),
    };
    let welcomed = matches!(reply, HelloReply::Welcome(_));
    if send(&mut framed, &reply).await.is_err() || !welcomed {
        return;
    }
    while let Some(Ok(bytes)) = framed.next().await {
        let (id, response) = match frame::decode::<Envelope<PeerRequest>>(&bytes) {
            Ok(env) => (env.id, handle_peer(&node, env.body).await),
            Err(e) => (0, PeerResponse::Error(format!("request does not decode: {e}"))),
        };
        if send(&mut framed, &Envelope { id, body: response }).await.is_err() {
            return;
        }
    }
}

async fn send<T: serde::Serialize>(
    framed: &mut Framed<TcpStream, tokio_util::codec::LengthDelimitedCodec>,
    value: &T,
) -> Result<(), ()> {
    let bytes = frame::encode(value).map_err(|_| ())?;
    framed.send(bytes).await.map_err(|_| ())
}

async fn handle_peer(node: &Node, req: PeerRequest) -> PeerResponse {
    match req {
        PeerRequest::AppendEntries(r) => PeerResponse::AppendEntries(node.raft.append_entries(r).await),
        PeerRequest::Vote(r) => PeerResponse::Vote(node.raft.vote(r).await),
        PeerRequest::InstallSnapshot(r) => PeerResponse::InstallSnapshot(node.raft.install_snapshot(r).await),
    }
}

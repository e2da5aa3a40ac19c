//! The server side of a framed connection: peers (Raft RPC, one request at
//! a time) and clients (the lock protocol, many requests at once).
//!
//! With TLS, a peer's hello is believed only over the peer protocol
//! (`lockd-peer/1`) from a certificate that names the node id it claims;
//! a client's principal is settled at the hello (its token, else its
//! certificate) and every request is checked against it
//! ([`crate::auth`]).
//!
//! # Layout
//!
//! * this module: the preface and the hello, and which protocol follows.
//! * `peer`: whether a peer is served, and its Raft RPC.
//! * `client`: a client's requests, concurrently, under its rights.

mod client;
mod peer;

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use lockd_net::tls::Alpn;
use tokio::io::AsyncReadExt;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::caller::Settled;
use super::services::Services;
use crate::transport::limits::{MAX_CLIENT_FRAME, MAX_HELLO_FRAME, MAX_UNPROVEN_PEER_FRAME};
use crate::transport::listener::{Incoming, Io};
use lockd_net::wire::{self as frame, Hello, HelloReply, Refused, Role, Welcome};

type Conn = Framed<Box<dyn Io>, LengthDelimitedCodec>;

/// Serve one framed connection until it closes. At the hello its place
/// in the opening budget becomes a client's (authenticated or not) or,
/// for a peer, is given back (see [`crate::transport::limits`]).
pub async fn serve(node: Arc<Services>, c: Incoming) {
    let (stream, caller, slot, deadline) = (c.stream, c.caller, c.slot, c.deadline);
    let shutdown = c.shutdown;
    let peer = caller.addr.to_string();
    let limits = node.conn_limits().clone();
    let Ok(opened) = tokio::time::timeout_at(deadline, open(stream)).await else {
        tracing::debug!(%peer, "no hello in time; connection closed");
        return;
    };
    let Some((mut framed, hello)) = opened else {
        return;
    };
    let refuse = |reason: String| HelloReply::Refused(Refused { reason });
    let welcome = HelloReply::Welcome(Welcome { node_id: node.id() });
    let plaintext = node.tls_required() && caller.tls.is_none();
    let refusal = match (&hello.role, hello.role.peer()) {
        _ if plaintext => {
            tracing::warn!(id = node.id(), %peer, "refused a plaintext connection: this node requires TLS");
            Some(format!(
                "node {} requires TLS: connect with TLS (lockctl --cacert CA.pem)",
                node.id()
            ))
        }
        (_, Some(p)) => peer::meet(&node, &caller, p).err().map(|why| {
            tracing::warn!(id = node.id(), from = p.from, %peer, %why, "refused a peer");
            format!("node {} refused the peer: {why}", node.id())
        }),
        (Role::Client | Role::ClientToken { .. }, _)
            if caller
                .tls
                .as_ref()
                .is_some_and(|t| t.alpn == Some(Alpn::Peer)) =>
        {
            Some("a client hello over the peer protocol (ALPN lockd-peer/1)".into())
        }
        _ => None,
    };
    if let Some(reason) = refusal {
        let _ = send(&mut framed, &refuse(reason)).await;
        return;
    }
    let from = match hello.role.peer() {
        None => {
            let token = match &hello.role {
                Role::ClientToken { token } => Some(token.to_string()),
                _ => None,
            };
            let caller = Settled::new(&node, caller, token);
            if let Err(why) = slot.settle(caller.is_authenticated(&node)) {
                tracing::warn!(id = node.id(), %peer, %why, "refused a client connection");
                let _ = send(&mut framed, &refuse(why)).await;
                return;
            }
            if send(&mut framed, &welcome).await.is_err() {
                return;
            }
            framed.codec_mut().set_max_frame_length(MAX_CLIENT_FRAME);
            let closes_unauthenticated = limits.unauthenticated_deadline(deadline);
            return client::serve(
                node,
                framed,
                &limits,
                caller,
                (slot, closes_unauthenticated),
                peer,
                shutdown,
            )
            .await;
        }
        Some(p) => {
            // A member holds no client place, and may send big entries; a
            // node that is not one takes a place of its own and may send
            // only small frames (see `transport::limits`).
            if node.is_peer_member(p.from) {
                slot.peer();
                framed.codec_mut().set_max_frame_length(frame::MAX_FRAME);
            } else if let Err(why) = slot.unproven_peer() {
                tracing::warn!(id = node.id(), from = p.from, %peer, %why, "refused a peer that is not a member");
                let _ = send(&mut framed, &refuse(why)).await;
                return;
            } else {
                framed
                    .codec_mut()
                    .set_max_frame_length(MAX_UNPROVEN_PEER_FRAME);
            }
            if send(&mut framed, &welcome).await.is_err() {
                return;
            }
            p.from
        }
    };
    peer::serve(&node, framed, from, shutdown).await
}

/// Read the preface and the hello (frames at most [`MAX_HELLO_FRAME`]
/// bytes until the caller is known). `None`: the connection ended, or was
/// answered with the reason it cannot go on.
async fn open(mut stream: Box<dyn Io>) -> Option<(Conn, Hello)> {
    let mut preface = [0u8; 4];
    stream.read_exact(&mut preface).await.ok()?;
    let mut framed = Framed::new(stream, frame::codec());
    framed.codec_mut().set_max_frame_length(MAX_HELLO_FRAME);
    let refuse = |reason: String| HelloReply::Refused(Refused { reason });
    if preface[3] != frame::VERSION {
        let reply = refuse(format!(
            "protocol version {} is not supported; this node speaks version {}",
            preface[3],
            frame::VERSION
        ));
        let _ = send(&mut framed, &reply).await;
        return None;
    }
    match framed.next().await {
        Some(Ok(bytes)) => match frame::decode(&bytes) {
            Ok(h) => Some((framed, h)),
            Err(e) => {
                let reply = refuse(format!("the first frame is not a hello: {e}"));
                let _ = send(&mut framed, &reply).await;
                None
            }
        },
        _ => None,
    }
}

async fn send<T: serde::Serialize>(framed: &mut Conn, value: &T) -> Result<(), ()> {
    let bytes = frame::encode(value).map_err(|_| ())?;
    framed.send(bytes).await.map_err(|_| ())
}

//! The server side of a framed connection: peers (Raft RPC, one request at
//! a time) and clients (the lock protocol, many requests at once).
//!
//! With TLS, a peer's hello is believed only over the peer protocol
//! (`lockd-peer/1`) from a certificate that names the node id it claims;
//! a client's principal is settled at the hello (its token, else its
//! certificate) and every request is checked against it
//! ([`crate::auth`]).

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lockd_client::tls::Alpn;
use lockd_proto::{ClientRequest, ClientResponse, LockView, WireError};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::caller::{authorize, peer_refusal, Settled};
use super::services::Services;
use super::status::status_of;
use super::wire;
use crate::auth::{Access, Denied};
use crate::raft::network::{PeerRequest, PeerResponse};
use crate::service::ServiceError;
use crate::transport::frame::{
    self, Envelope, Hello, HelloReply, PeerHello, Refused, Role, Welcome,
};
use crate::transport::limits::{ConnLimits, Slot, MAX_CLIENT_FRAME, MAX_HELLO_FRAME};
use crate::transport::listener::{stopping, Caller, Incoming, Io};

type Conn = Framed<Box<dyn Io>, LengthDelimitedCodec>;

/// Serve one framed connection until it closes. At the hello its place
/// in the opening budget becomes a client's (authenticated or not) or,
/// for a peer, is given back (see [`crate::transport::limits`]).
pub async fn serve(node: Arc<Services>, c: Incoming) {
    let (stream, caller, slot, deadline) = (c.stream, c.caller, c.slot, c.deadline);
    let mut shutdown = c.shutdown;
    let peer = caller.addr.to_string();
    let limits = node.conn.limits().clone();
    let Ok(opened) = tokio::time::timeout_at(deadline, open(stream)).await else {
        tracing::debug!(%peer, "no hello in time; connection closed");
        return;
    };
    let Some((mut framed, hello)) = opened else {
        return;
    };
    let refuse = |reason: String| HelloReply::Refused(Refused { reason });
    let welcome = HelloReply::Welcome(Welcome { node_id: node.id });
    let plaintext = node.tls_required && caller.tls.is_none();
    let refusal = match (&hello.role, hello.role.peer()) {
        _ if plaintext => {
            tracing::warn!(id = node.id, %peer, "refused a plaintext connection: this node requires TLS");
            Some(format!(
                "node {} requires TLS: connect with TLS (lockctl --cacert CA.pem)",
                node.id
            ))
        }
        (_, Some(p)) => meet_peer(&node, &caller, p).err().map(|why| {
            tracing::warn!(id = node.id, from = p.from, %peer, %why, "refused a peer");
            format!("node {} refused the peer: {why}", node.id)
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
                tracing::warn!(id = node.id, %peer, %why, "refused a client connection");
                let _ = send(&mut framed, &refuse(why)).await;
                return;
            }
            if send(&mut framed, &welcome).await.is_err() {
                return;
            }
            framed.codec_mut().set_max_frame_length(MAX_CLIENT_FRAME);
            let closes_unauthenticated = limits.unauthenticated_deadline(deadline);
            return serve_client(
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
            // Peers hold no client place, and may send big entries.
            slot.peer();
            if send(&mut framed, &welcome).await.is_err() {
                return;
            }
            framed.codec_mut().set_max_frame_length(frame::MAX_FRAME);
            p.from
        }
    };
    loop {
        let bytes = tokio::select! {
            next = framed.next() => match next {
                Some(Ok(bytes)) => bytes,
                _ => return,
            },
            () = stopping(&mut shutdown) => return,
        };
        let (id, response) = match frame::decode::<Envelope<PeerRequest>>(&bytes) {
            Ok(env) => (env.id, handle_peer(&node, from, env.body).await),
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

/// Whether to serve a peer: its certificate, the node it calls, its wasm
/// engine, its cluster ([`crate::cluster_id`]). `Err` says why not.
fn meet_peer(node: &Services, caller: &Caller, p: PeerHello<'_>) -> Result<(), String> {
    if let Some(why) = peer_refusal(node, caller, p.from) {
        return Err(why);
    }
    // Addresses get reused: answer only calls meant for this node (and
    // never adopt the cluster of a caller that wanted another).
    if let Some(to) = p.to.filter(|to| *to != node.id) {
        return Err(format!("it is node {}, not node {to}", node.id));
    }
    let theirs = lockd_core::engine::EngineFingerprint {
        text: p.fingerprint.to_string(),
        hash: String::new(),
    };
    // Another wasmtime or CPU may serve beside this one (a rolling
    // upgrade; promotion waits for the audit, see membership); a setting
    // that decides what guests compute may not.
    let diffs = theirs.determinism_differences(node.engine.fingerprint());
    if !diffs.is_empty() {
        return Err(format!(
            "it runs a different wasm engine (caller != this node): {}",
            diffs.join(", ")
        ));
    }
    node.cluster.meet_peer(p.cluster)
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

/// A client connection: requests run concurrently, answers go back as they
/// finish, paired by id. When the connection closes, every request still
/// running on it is dropped — an acquire still waiting leaves the queue, and a
/// grant that lands after that is released at once (no phantom lock).
///
/// At most `max_in_flight` requests run at once: past it the connection is
/// not read until one finishes (TCP then slows the sender). With nothing in
/// flight and no frame for `idle_timeout`, the connection is closed.
///
/// `caller`: who the caller is, settled again whenever the rules are
/// reloaded; every request is checked against it. A client certificate
/// that has expired since the handshake ends the connection. A caller
/// that presented no valid credential holds an unauthenticated `slot`,
/// and is closed at its deadline (`unauthenticated_timeout` after accept)
/// whatever it does.
async fn serve_client(
    node: Arc<Services>,
    framed: Conn,
    limits: &ConnLimits,
    mut caller: Settled,
    (slot, closes_unauthenticated): (Slot, tokio::time::Instant),
    peer: String,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let (mut sink, mut stream) = framed.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Envelope<ClientResponse>>();
    let mut tasks = JoinSet::new();
    // One timer for the connection, moved on by activity (not a new one
    // per frame).
    let idle = || tokio::time::Instant::now() + limits.idle_timeout;
    let idle_timer = tokio::time::sleep_until(idle());
    tokio::pin!(idle_timer);
    // Settled once, at the hello: no lock taken per frame to ask again.
    let authenticated = slot.is_authenticated();
    let unauthenticated = tokio::time::sleep_until(closes_unauthenticated);
    tokio::pin!(unauthenticated);
    loop {
        tokio::select! {
            frame = stream.next(), if tasks.len() < limits.max_in_flight => match frame {
                Some(Ok(bytes)) => match frame::decode::<Envelope<ClientRequest>>(&bytes) {
                    Ok(env) => {
                        let Some(who) = caller.now(&node) else {
                            let body = ClientResponse::Error(WireError::Unauthenticated(
                                "the client certificate has expired".into(),
                            ));
                            if let Ok(bytes) = frame::encode(&Envelope { id: env.id, body }) {
                                let _ = sink.send(bytes).await;
                            }
                            return;
                        };
                        let (node, tx) = (node.clone(), tx.clone());
                        let peer = peer.clone();
                        tasks.spawn(async move {
                            let body = match authorize(&node, &who, &env.body, &peer) {
                                Ok(access) => handle_client(&node, env.body, &access).await,
                                Err(denied) => ClientResponse::Error(match denied {
                                    Denied::Unauthenticated(m) => WireError::Unauthenticated(m),
                                    Denied::Forbidden(m) => WireError::Forbidden(m),
                                }),
                            };
                            let _ = tx.send(Envelope { id: env.id, body });
                        });
                    }
                    Err(e) => {
                        let body = ClientResponse::Error(WireError::BadRequest(format!("request frame does not decode: {e}")));
                        let _ = tx.send(Envelope { id: 0, body });
                    }
                },
                Some(Err(e)) => {
                    // The framing itself is broken (e.g. a length over the
                    // limit): say why, then close, as nothing after it can
                    // be trusted to be a frame boundary.
                    let body = ClientResponse::Error(WireError::BadRequest(format!(
                        "bad frame: {e} (a client's frames are at most {MAX_CLIENT_FRAME} bytes)"
                    )));
                    if let Ok(bytes) = frame::encode(&Envelope { id: 0, body }) {
                        let _ = sink.send(bytes).await;
                    }
                    return;
                }
                None => return,
            },
            Some(resp) = rx.recv() => {
                let Ok(bytes) = frame::encode(&resp) else { continue };
                if sink.send(bytes).await.is_err() {
                    return;
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {
                idle_timer.as_mut().reset(idle());
            }
            _ = idle_timer.as_mut(), if tasks.is_empty() => {
                tracing::debug!(id = node.id, "idle client connection closed");
                return;
            }
            // The node shuts down: requests in flight are dropped (an
            // acquire still waiting leaves its queue), the client retries
            // elsewhere.
            () = stopping(&mut shutdown) => return,
            _ = unauthenticated.as_mut(), if !authenticated => {
                tracing::debug!(id = node.id, %peer, "unauthenticated client connection closed at its deadline");
                return;
            }
        }
    }
}

fn wire_error(node: &Services, e: ServiceError) -> WireError {
    let msg = e.to_string();
    match e {
        ServiceError::EmptyKey
        | ServiceError::KeyTooLong(_)
        | ServiceError::KeyNotUtf8
        | ServiceError::ZeroLease
        | ServiceError::LeaseTooLong { .. }
        | ServiceError::WaitTooLong { .. }
        | ServiceError::ZeroLimit
        | ServiceError::BadLimit { .. }
        | ServiceError::FieldTooLong { .. } => WireError::BadRequest(msg),
        ServiceError::PolicyRefused(_) => WireError::Unsupported(msg),
        ServiceError::Held { .. } => WireError::Held(msg),
        ServiceError::NotHeld { .. } => WireError::NotHeld(msg),
        ServiceError::WrongToken { .. } => WireError::WrongToken(msg),
        ServiceError::NotHolder { .. } => WireError::Forbidden(msg),
        ServiceError::Refused { .. } => WireError::Refused(msg),
        ServiceError::Quota { .. } => WireError::Quota(msg),
        ServiceError::Capacity { .. } => WireError::Capacity(msg),
        ServiceError::TooManyWaiters { .. } => WireError::TooManyWaiters(msg),
        ServiceError::Unsupported { .. } => WireError::Unsupported(msg),
        ServiceError::NotLeader { leader, .. } => {
            let leader_addr = leader.and_then(|l| node.addr_of(l));
            WireError::NotLeader {
                leader,
                leader_addr,
                message: msg,
            }
        }
        ServiceError::Unavailable(_) | ServiceError::Overloaded(_) => WireError::Unavailable(msg),
        ServiceError::StateMachine(_) => WireError::Internal(msg),
    }
}

async fn handle_client(node: &Services, req: ClientRequest, access: &Access) -> ClientResponse {
    let key = |k: Vec<u8>| String::from_utf8(k).map_err(|_| ServiceError::KeyNotUtf8);
    let by = wire::bound_to(access);
    let result = match req {
        ClientRequest::Acquire {
            key: k,
            lease_ms,
            wait_ms,
        } => match key(k) {
            Ok(k) => node
                .locks
                .acquire_with(
                    &k,
                    crate::service::table::Spec {
                        principal: access.principal.clone(),
                        ..crate::service::table::Spec::exclusive(lease_ms)
                    },
                    Duration::from_millis(wait_ms),
                )
                .await
                .map(|a| ClientResponse::Acquired {
                    token: a.token,
                    lease_ms: a.lease_ms,
                }),
            Err(e) => Err(e),
        },
        ClientRequest::Release { key: k, token } => match key(k) {
            Ok(k) => node
                .locks
                .release(&k, token, by)
                .await
                .map(|_| ClientResponse::Released),
            Err(e) => Err(e),
        },
        ClientRequest::Keepalive { key: k, token } => match key(k) {
            Ok(k) => node
                .locks
                .keepalive(&k, token, by)
                .await
                .map(|lease_ms| ClientResponse::KeptAlive { lease_ms }),
            Err(e) => Err(e),
        },
        ClientRequest::Get { key: k } => match key(k) {
            Ok(k) => node.locks.holders(&k).await.map(|v| {
                ClientResponse::Lock(v.first().map(|i| LockView {
                    token: if wire::sees_token(access, i) {
                        i.token
                    } else {
                        0
                    },
                    lease_ms: i.lease_ms,
                }))
            }),
            Err(e) => Err(e),
        },
        ClientRequest::Status => Ok(ClientResponse::Status(Box::new(status_of(node)))),
        ClientRequest::AcquireWith(r) => wire::acquire(node, r, access).await,
        ClientRequest::Holders { key } => wire::holders(node, key, access).await,
        ClientRequest::List {
            prefix,
            after,
            limit,
        } => wire::list(node, prefix, after, limit, access).await,
    };
    result.unwrap_or_else(|e| ClientResponse::Error(wire_error(node, e)))
}

async fn handle_peer(node: &Services, from: u64, req: PeerRequest) -> PeerResponse {
    if let Err(why) = node.peer_gate.check(from, &req, |id| node.is_member(id)) {
        tracing::warn!(id = node.id, from, %why, "refused a peer request");
        return PeerResponse::Error(format!("node {} refused the request: {why}", node.id));
    }
    match req {
        PeerRequest::AppendEntries(r) => {
            PeerResponse::AppendEntries(node.raft.append_entries(r).await)
        }
        PeerRequest::Vote(r) => PeerResponse::Vote(node.raft.vote(r).await),
        PeerRequest::InstallSnapshot(r) => {
            PeerResponse::InstallSnapshot(node.raft.install_snapshot(r).await)
        }
    }
}

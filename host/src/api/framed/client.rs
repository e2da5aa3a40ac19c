//! A client's connection, after its hello: the lock protocol, many
//! requests at once, each checked against the caller's rights and
//! answered as it finishes.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lockd_proto::{ClientRequest, ClientResponse, ErrorCode, LockView, WireError};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::Conn;
use crate::api::caller::{authorize, Settled};
use crate::api::native_locks;
use crate::api::native_watch::{self, Outgoing};
use crate::api::services::Services;
use crate::auth::{Access, Denied};
use crate::service::ServiceError;
use crate::telemetry::Stage;
use crate::transport::limits::{ConnLimits, Slot, CLIENT_STALL, MAX_CLIENT_FRAME};
use crate::transport::listener::stopping;
use lockd_net::wire::{self as frame, Envelope};

/// A client connection: requests run concurrently, answers go back as they
/// finish, paired by id. When the connection ends, every request still
/// running on it is dropped before the node closes its side — an acquire
/// still waiting leaves its queue ahead of any request sent after the
/// close was seen, and a grant that lands after that is released at once
/// (no phantom lock).
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
pub(super) async fn serve(
    node: Arc<Services>,
    framed: Conn,
    limits: &ConnLimits,
    mut caller: Settled,
    (slot, closes_unauthenticated): (Slot, tokio::time::Instant),
    peer: String,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let (mut sink, mut stream) = framed.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
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
                        let received = std::time::Instant::now();
                        let Some(who) = caller.now(&node) else {
                            let body = ClientResponse::Error(WireError::Unauthenticated(
                                "the client certificate has expired".into(),
                            ));
                            if let Ok(bytes) = frame::encode(&Envelope { id: env.id, body }) {
                                let _ = sink.send(bytes).await;
                            }
                            break;
                        };
                        let reauth = matches!(env.body, ClientRequest::Watch(_))
                            .then(|| caller.reauth(&node, &env.body));
                        let (node, tx) = (node.clone(), tx.clone());
                        let peer = peer.clone();
                        tasks.spawn(async move {
                            let (body, code) = match authorize(&node, &who, &env.body, &peer) {
                                Ok(access) => match (env.body, reauth) {
                                    (ClientRequest::Watch(w), Some(reauth)) => {
                                        return native_watch::stream(&node, w, (&access, &reauth), env.id, &tx).await
                                    }
                                    (body, _) => {
                                        if matches!(body, ClientRequest::Acquire { .. } | ClientRequest::AcquireWith(_)) {
                                            node.stages().observe(Stage::Receive, received.elapsed());
                                        }
                                        handle_client(&node, body, &access).await
                                    }
                                },
                                Err(denied) => {
                                    let e = match denied {
                                        Denied::Unauthenticated(m) => WireError::Unauthenticated(m),
                                        Denied::Forbidden(m) => WireError::Forbidden(m),
                                    };
                                    let code = e.code();
                                    (ClientResponse::Error(e), Some(code))
                                }
                            };
                            let _ = tx.send(Outgoing::answer(env.id, body, code));
                        });
                    }
                    Err(e) => {
                        let body = ClientResponse::Error(WireError::BadRequest(format!("request frame does not decode: {e}")));
                        let _ = tx.send(Outgoing::answer(0, body, Some(ErrorCode::BadRequest)));
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
                    break;
                }
                None => break,
            },
            Some(out) = rx.recv() => {
                let Ok(bytes) = out.encode() else { continue };
                // A client that takes nothing for a while is gone, or
                // holds its slot (a watcher's) for nothing: closed.
                let sent = tokio::time::timeout(CLIENT_STALL, sink.send(bytes.into())).await;
                if !matches!(sent, Ok(Ok(()))) {
                    if sent.is_err() {
                        tracing::debug!(id = node.id(), %peer, "client took nothing for {} s; connection closed", CLIENT_STALL.as_secs());
                    }
                    break;
                }
                if let Some(written) = out.written {
                    let _ = written.send(());
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {
                idle_timer.as_mut().reset(idle());
            }
            _ = idle_timer.as_mut(), if tasks.is_empty() => {
                tracing::debug!(id = node.id(), "idle client connection closed");
                break;
            }
            // The node shuts down: requests in flight are dropped (an
            // acquire still waiting leaves its queue), the client retries
            // elsewhere.
            () = stopping(&mut shutdown) => break,
            _ = unauthenticated.as_mut(), if !authenticated => {
                tracing::debug!(id = node.id(), %peer, "unauthenticated client connection closed at its deadline");
                break;
            }
        }
    }
    // Drop every request still running before the socket closes (its
    // halves drop after this): a client that sees its connection end knows
    // its waiting acquires have left their queues.
    tasks.shutdown().await;
}

fn wire_error(node: &Services, e: ServiceError) -> WireError {
    match WireError::of_code(e.code(), e.to_string()) {
        WireError::NotLeader { message, .. } => WireError::NotLeader {
            leader: e.leader(),
            leader_addr: e.leader().and_then(|l| node.addr_of(l)),
            message,
        },
        other => other,
    }
}

/// The answer to `req`, and an error's precise code.
async fn handle_client(
    node: &Services,
    req: ClientRequest,
    access: &Access,
) -> (ClientResponse, Option<ErrorCode>) {
    let key = |k: Vec<u8>| String::from_utf8(k).map_err(|_| ServiceError::KeyNotUtf8);
    let by = native_locks::bound_to(access);
    let result = match req {
        ClientRequest::Acquire {
            key: k,
            lease_ms,
            wait_ms,
        } => match key(k) {
            Ok(k) => node
                .locks()
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
                .locks()
                .release(&k, token, by)
                .await
                .map(|_| ClientResponse::Released),
            Err(e) => Err(e),
        },
        ClientRequest::Keepalive { key: k, token } => match key(k) {
            Ok(k) => node
                .locks()
                .keepalive(&k, token, by)
                .await
                .map(|lease_ms| ClientResponse::KeptAlive { lease_ms }),
            Err(e) => Err(e),
        },
        ClientRequest::Get { key: k } => match key(k) {
            Ok(k) => node.locks().holders(&k).await.map(|v| {
                ClientResponse::Lock(v.first().map(|i| LockView {
                    token: if native_locks::sees_token(access, i) {
                        i.token
                    } else {
                        0
                    },
                    lease_ms: i.lease_ms,
                }))
            }),
            Err(e) => Err(e),
        },
        ClientRequest::Status => Ok(ClientResponse::Status(Box::new(node.status()))),
        ClientRequest::AcquireWith(r) => native_locks::acquire(node, r, access).await,
        ClientRequest::Holders { key } => native_locks::holders(node, key, access).await,
        ClientRequest::List {
            prefix,
            after,
            limit,
        } => native_locks::list(node, prefix, after, limit, access).await,
        r @ (ClientRequest::AcquireIn(_)
        | ClientRequest::AcquireRanked(_)
        | ClientRequest::OpenSession { .. }
        | ClientRequest::KeepSession { .. }
        | ClientRequest::CloseSession { .. }
        | ClientRequest::Proclaim { .. }
        | ClientRequest::ReleaseCount { .. }
        | ClientRequest::Leader { .. }) => native_locks::session_request(node, r, access).await,
        // Streamed by `native_watch` before it gets here.
        ClientRequest::Watch(_) => Err(ServiceError::StateMachine(
            "a watch is a stream, not a request".into(),
        )),
    };
    match result {
        Ok(r) => (r, None),
        Err(e) => {
            let code = e.code();
            (ClientResponse::Error(wire_error(node, e)), Some(code))
        }
    }
}

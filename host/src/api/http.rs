//! The HTTP/JSON API: one connection, served by the router.
//!
//! The routes are in one table ([`super::routes`]); the reference is the
//! OpenAPI document ([`super::openapi`], `docs/api.md`).
//!
//! Keys may contain `/`; other reserved characters are percent-encoded. A
//! key is everything between `/v1/locks/` and the action. Every error is
//! `{"error":"…"}` with a fitting status code ([`super::error`]); bodies
//! over 64 KiB, malformed JSON and unknown fields are refused before
//! anything is proposed ([`super::body`]). The lock, admin and membership
//! routes are answered by the leader: any other node forwards them
//! ([`super::forward`]). Every route is behind the authorisation layer
//! ([`super::authorize`]): with authentication on, a request without
//! credentials gets 401 and one its roles do not allow 403. A node with
//! TLS answers a plaintext HTTP request with 400 and the reason.

use std::sync::Arc;

use axum::{Extension, Router};
use hyper_util::rt::TokioIo;

use super::error::ApiError;
use super::services::Services;
use crate::transport::listener::{stopping, Incoming};

/// Serve one HTTP connection. Its place stays in the opening budget
/// until its first request reaches the authorisation layer, which
/// settles it (see [`crate::transport::limits`]) or answers 503 when its
/// budget is full; one still opening `hello_timeout` after accept is
/// closed. With authentication on, a connection none of whose requests
/// brought a valid credential is closed `unauthenticated_timeout` after
/// accept, once what it is serving is finished.
pub async fn serve(node: Arc<Services>, c: Incoming) {
    let (stream, caller, slot, deadline) = (c.stream, c.caller, c.slot, c.deadline);
    let mut shutdown = c.shutdown;
    let slot = Arc::new(slot);
    let limits = node.conn_limits().clone();
    let addr = caller.addr;
    let app = if node.tls_required() && caller.tls.is_none() {
        tracing::warn!(id = node.id(), peer = %addr, "refused a plaintext HTTP connection: this node requires TLS");
        tls_required(node.id())
    } else {
        super::router::router(node)
            .layer(Extension(caller))
            .layer(Extension(slot.clone()))
    };
    let svc = hyper_util::service::TowerToHyperService::new(app);
    let conn = hyper::server::conn::http1::Builder::new()
        // Headers within the timeout; hyper also counts a kept-alive
        // connection's wait for its next request in it.
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    let opening = tokio::time::sleep_until(deadline);
    tokio::pin!(opening);
    let unauthenticated = tokio::time::sleep_until(limits.unauthenticated_deadline(deadline));
    tokio::pin!(unauthenticated);
    let (mut opened, mut closing, mut stopped) = (false, false, false);
    loop {
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "http connection ended with an error");
                }
                return;
            }
            _ = opening.as_mut(), if !opened => {
                if slot.expire_opening() {
                    tracing::debug!(peer = %addr, "no HTTP request in time; connection closed");
                    return;
                }
                opened = true;
            }
            // The node shuts down: the request in progress is answered,
            // then the connection closes.
            () = stopping(&mut shutdown), if !stopped => {
                stopped = true;
                conn.as_mut().graceful_shutdown();
            }
            // Whether it authenticated is asked when the deadline comes: a
            // request can settle it while this select is already waiting.
            _ = unauthenticated.as_mut(), if !closing => {
                closing = true;
                if !slot.is_authenticated() {
                    tracing::debug!(peer = %addr, "unauthenticated HTTP connection closed at its deadline");
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// What a plaintext HTTP request to a node with TLS gets: 400 with the
/// reason, for every route.
fn tls_required(id: u64) -> Router {
    Router::new().fallback(move || async move {
        ApiError::bad_request(format!(
            "node {id} requires TLS: use https:// (lockctl: --cacert CA.pem)"
        ))
    })
}

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
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::error::ApiError;
use super::services::Services;
use crate::transport::limits::Admission;
use crate::transport::listener::{Caller, Io};

/// Serve one HTTP connection, or answer 503 and close when the connection
/// caps are full (`admission`, see [`crate::transport::limits`]).
pub async fn serve(
    node: Arc<Services>,
    mut stream: Box<dyn Io>,
    admission: Admission,
    caller: Caller,
) {
    let _ticket = match admission {
        Ok(t) => t,
        Err(why) => {
            tracing::warn!(id = node.id, peer = %caller.addr, %why, "refused an HTTP connection");
            let body = serde_json::json!({ "error": why }).to_string();
            let answer = format!(
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
            let _ = stream.shutdown().await;
            linger(&mut stream).await;
            return;
        }
    };
    let header_timeout = node.conn.limits().header_timeout;
    let app = if node.tls_required && caller.tls.is_none() {
        tracing::warn!(id = node.id, peer = %caller.addr, "refused a plaintext HTTP connection: this node requires TLS");
        tls_required(node.id)
    } else {
        super::routes::router(node).layer(Extension(caller))
    };
    let svc = hyper_util::service::TowerToHyperService::new(app);
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        // Headers within the timeout; hyper also counts a kept-alive
        // connection's wait for its next request in it.
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), svc)
        .await
    {
        tracing::debug!(error = %e, "http connection ended with an error");
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

/// Read and drop what the caller still sends (its request, which was
/// never read) for a moment before closing. Closing a socket with unread
/// bytes sends a reset, and a reset that overtakes the answer destroys it
/// on the caller's side: a client whose request came in pieces would see
/// a broken pipe instead of the 503 and its reason. Bounded in time and
/// bytes, so a refused caller cannot keep the slot.
async fn linger(stream: &mut Box<dyn Io>) {
    const FOR: std::time::Duration = std::time::Duration::from_millis(500);
    const UP_TO: usize = 64 << 10;
    let mut buf = [0u8; 4096];
    let mut read = 0;
    let drain = async {
        while read < UP_TO {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    };
    let _ = tokio::time::timeout(FOR, drain).await;
}

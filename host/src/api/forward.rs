//! Requests that only the leader can answer, passed on by any other node.
//!
//! A layer on the leader-only routes (locks, admin, membership changes):
//! when this node knows another node leads, the request goes there over a
//! pooled HTTP/1 connection and the answer comes back unchanged. The body
//! is read here first, within the route's limit, so an oversized body gets
//! its 413 from this node rather than a broken forward. The forwarded request carries `x-lockd-forwarded`,
//! and a node never forwards such a request again (a stale view of the
//! leader costs one 503 with a leader hint, not a loop). If the caller
//! disconnects, the forwarded request is dropped with it, so the leader
//! sees the caller leave; and once this node stops naming that leader (it
//! has not heard from it for an election timeout), the forwarded request
//! is abandoned with a 503, so a hung or cut-off leader holds no caller.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lockd_proto::ErrorCode;

use super::authorize::{Forwarded, FORWARDED};
use super::body::read;
use super::error::ApiError;
use super::services::Services;
use crate::auth::{Access, PRINCIPAL_HEADER};

/// The caller's headers the leader needs to answer as this node would:
/// the body's type, an acquire's request id (without it the leader could
/// not tell a retry from a new acquire), and a bearer token, which the
/// leader checks again by its own rules (so a token revoked there is
/// refused whatever this node still believes). A caller known by its
/// certificate is named in [`PRINCIPAL_HEADER`] instead, which the leader
/// believes only from a member node's certificate.
const PASSED_ON: [header::HeaderName; 3] = [
    header::CONTENT_TYPE,
    header::HeaderName::from_static("idempotency-key"),
    header::AUTHORIZATION,
];

/// The leader's id and address, when a request here should go there.
async fn target(node: &Services, forwarded: bool) -> Option<(u64, String)> {
    // Never forwarded twice: a stale view of the leader costs one 503.
    if forwarded {
        return None;
    }
    node.leader_elsewhere().await
}

/// The layer's state: the node, and the body limit of the routes it wraps.
#[derive(Clone)]
pub(crate) struct Forwarding {
    pub node: Arc<Services>,
    pub limit: usize,
    /// What the body is, for the error at the limit.
    pub what: &'static str,
}

/// The layer: answer here, or forward to the leader.
pub(crate) async fn to_leader(State(f): State<Forwarding>, req: Request, next: Next) -> Response {
    let node = &f.node;
    let forwarded = req.headers().contains_key(FORWARDED);
    let Some((leader, addr)) = target(node, forwarded).await else {
        return next.run(req).await;
    };
    let unavailable = |e: String| {
        ApiError::new(
            ErrorCode::Unavailable,
            format!(
                "node {} could not reach leader {leader} at {addr}: {e}",
                node.id()
            ),
        )
        .with_leader(Some(leader))
        .into_response()
    };
    // A token travels itself (in PASSED_ON); only a certificate's
    // principal needs this node's word.
    let principal = match req.headers().contains_key(header::AUTHORIZATION) {
        true => String::new(),
        false => req
            .extensions()
            .get::<Access>()
            .map(|a| a.principal.clone())
            .unwrap_or_default(),
    };
    let (parts, body) = req.into_parts();
    let body = match read(body, f.limit, f.what).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut forwarded = axum::http::Request::builder()
        .method(parts.method.clone())
        .uri(node.forwarder().url(&addr, path))
        .header(FORWARDED, node.id().to_string());
    // The leader believes it from this node's certificate only, on a
    // request this node forwards, and checks the caller's rights again by
    // its own rules.
    // Percent-encoded: a principal's name may hold any character.
    if !principal.is_empty() {
        let encoded =
            percent_encoding::utf8_percent_encode(&principal, percent_encoding::NON_ALPHANUMERIC);
        forwarded = forwarded.header(PRINCIPAL_HEADER, encoded.to_string());
    }
    for name in PASSED_ON {
        if let Some(v) = parts.headers.get(&name) {
            forwarded = forwarded.header(name, v);
        }
    }
    let forwarded = match forwarded.body(Body::from(body)) {
        Ok(r) => r,
        Err(e) => return unavailable(e.to_string()),
    };
    // Bounded by the leader's life, not by a deadline: an acquire may wait
    // minutes at a live leader, but not a moment past the point this node
    // stops hearing it (a hung or cut-off leader; the caller retries at the
    // next one). Dropping the request closes its connection, so the leader,
    // if it lives, sees the caller leave.
    let answer = tokio::select! {
        answer = node.forwarder().send(forwarded) => answer,
        () = node.leader_gone(leader) => Err(format!(
            "node {} stopped hearing from it, so the request was abandoned (it may or may not have taken effect)",
            node.id()
        )),
    };
    match answer {
        Ok(response) => {
            let mut r = response.into_response();
            r.extensions_mut().insert(Forwarded);
            r
        }
        Err(e) => unavailable(e),
    }
}

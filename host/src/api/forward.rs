//! Forwarding lock requests from a follower to the leader.
//!
//! Any node answers the lock routes: a follower passes the request on to the
//! leader over a pooled HTTP/1 connection and relays the answer. The
//! forwarded request carries `x-lockd-forwarded`, and a node never forwards
//! such a request again (a stale view of the leader costs one 503 with a
//! leader hint, not a loop). If the caller disconnects, the forwarded request
//! is dropped with it, so the leader sees the caller leave.

use std::sync::OnceLock;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::http::ApiError;
use crate::node::Node;

pub const FORWARDED: &str = "x-lockd-forwarded";

fn client() -> &'static Client<HttpConnector, Full<Bytes>> {
    static CLIENT: OnceLock<Client<HttpConnector, Full<Bytes>>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

/// The leader's id and address, when a request here should go there.
pub fn target(node: &Node, headers: &HeaderMap) -> Option<(u64, String)> {
    if headers.contains_key(FORWARDED) {
        return None;
    }
    // Borrow, do not clone, the metrics: this runs on every request.
    let metrics = node.raft.metrics();
    let m = metrics.borrow();
    let leader = m.current_leader?;
    if leader == node.id {
        return None;
    }
    let addr = m
        .membership_config
        .membership()
        .get_node(&leader)?
        .addr
        .clone();
    Some((leader, addr))
}

pub async fn forward(
    node: &Node,
    (leader, addr): (u64, String),
    method: Method,
    uri: &Uri,
    body: Bytes,
) -> Result<Response, ApiError> {
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let unavailable = |e: String| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "node {} could not reach leader {leader} at {addr}: {e}",
                node.id
            ),
            Some(leader),
        )
    };
    let request = axum::http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header(FORWARDED, node.id.to_string())
        .header("content-type", "application/json")
        .body(Full::new(body))
        .map_err(|e| unavailable(e.to_string()))?;
    let response = client()
        .request(request)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map_err(|e| unavailable(e.to_string()))?
        .to_bytes();
    Ok((
        parts.status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        Body::from(bytes),
    )
        .into_response())
}

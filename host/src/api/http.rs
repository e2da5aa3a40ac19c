//! The HTTP/JSON API.
//!
//! | route | body | answer |
//! |---|---|---|
//! | `/v1/locks…`, `/v1/admin/policy` | | acquire, release, keepalive, holders, listing, force release, policy data: see [`super::locks`] |
//! | `GET /v1/status` | | see [`super::status`] |
//! | `GET /healthz`, `GET /readyz` | | liveness and readiness, no credentials needed: see [`super::health`] |
//! | `GET /ui` | | the web console, one self-contained page (its data comes from the routes here, with the viewer's credentials) |
//! | `GET /v1/whoami` | | `{"principal":"…","admin":bool}`: who this node takes the caller for (`""` and admin when authentication is off) |
//! | `GET /v1/members` | | `[{"id":N,"addr":"…","voter":bool}]` |
//! | `POST /v1/members/add` | `{"id":N,"addr":"…"}` | add a learner (after checking its engine) |
//! | `POST /v1/members/promote` | `{"id":N}` | learner → voter |
//! | `POST /v1/members/remove` | `{"id":N}` | remove a voter or learner |
//! | `GET /metrics` | | Prometheus text ([`super::metrics`]) |
//! | `/v1/admin/…`, `GET /v1/audit` | | upgrade, shadow mode, module keys, capacity, snapshots, audit: see [`super::admin`] |
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

use axum::extract::State;
use axum::{Extension, Json, Router};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use super::body::JsonBody;
use super::error::{ApiError, ErrorBody};
use super::services::Services;
use super::status::{status_of, Member, Status};
use crate::raft::members;
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

/// This node's status: its role, indices, module, audit and capacity.
#[utoipa::path(get, path = "/v1/status", tag = "cluster",
    responses((status = 200, description = "the node's status (never forwarded)", body = Status)))]
pub async fn status(State(node): State<Arc<Services>>) -> Json<Status> {
    Json(status_of(&node))
}

/// The web console: one page, compiled into the binary (no CDN, nothing
/// fetched at run time but this node's own API).
#[utoipa::path(get, path = "/ui", tag = "cluster",
    responses((status = 200, description = "the web console, one self-contained page", content_type = "text/html", body = String)))]
pub async fn console() -> axum::response::Html<&'static str> {
    axum::response::Html(include_str!("../../ui/console.html"))
}

/// Who this node takes the caller for.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WhoAmI {
    /// `""` when authentication is off.
    principal: String,
    /// Whether the caller may use the admin routes (true when
    /// authentication is off).
    admin: bool,
}

#[utoipa::path(get, path = "/v1/whoami", tag = "cluster",
    responses((status = 200, description = "the caller's principal", body = WhoAmI)))]
pub async fn whoami(Extension(access): Extension<crate::auth::Access>) -> Json<WhoAmI> {
    Json(WhoAmI {
        principal: access.principal,
        admin: access.admin,
    })
}

/// The members, as this node knows them.
#[utoipa::path(get, path = "/v1/members", tag = "cluster",
    responses((status = 200, description = "every member, voter or learner", body = Vec<Member>)))]
pub async fn members_list(State(node): State<Arc<Services>>) -> Json<Vec<Member>> {
    Json(members(&node.raft))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    id: u64,
    /// The address its peers reach it at (its `--advertise-addr`).
    addr: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberId {
    id: u64,
}

/// Add a learner, after checking its wasm engine, its node id and its
/// cluster.
#[utoipa::path(post, path = "/v1/members/add", tag = "cluster", request_body = AddMember,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 502, description = "the node refused (another engine, id or cluster) or did not answer", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn members_add(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<AddMember>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.add_learner(req.id, &req.addr).await?;
    Ok(Json(members(&node.raft)))
}

/// Make a learner a voter (one of another engine implementation only once
/// the audit saw its state equal to the others').
#[utoipa::path(post, path = "/v1/members/promote", tag = "cluster", request_body = MemberId,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 404, description = "not a member", body = ErrorBody),
        (status = 409, description = "not a learner, not yet audited, or its state diverged", body = ErrorBody),
        (status = 502, description = "its audit report could not be read", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn members_promote(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.promote(req.id).await?;
    Ok(Json(members(&node.raft)))
}

/// Remove a voter or a learner.
#[utoipa::path(post, path = "/v1/members/remove", tag = "cluster", request_body = MemberId,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 404, description = "not a member", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn members_remove(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.remove(req.id).await?;
    Ok(Json(members(&node.raft)))
}

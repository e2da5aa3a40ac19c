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
use axum::middleware;
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use super::body::{JsonBody, MAX_BODY, MAX_MODULE};
use super::error::ApiError;
use super::forward::{to_leader, Forwarding};
use super::services::Services;
use super::status::{status_of, Member, Status};
use super::{admin, locks, metrics};
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
        router(node).layer(Extension(caller))
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

/// Every route, behind the authorisation layer (which needs the
/// connection's [`Caller`] as an extension).
pub fn router(node: Arc<Services>) -> Router {
    let forward = |limit, what| {
        middleware::from_fn_with_state(
            Forwarding {
                node: node.clone(),
                limit,
                what,
            },
            to_leader,
        )
    };
    let leader_json = Router::new()
        .route("/v1/members/add", post(members_add))
        .route("/v1/members/promote", post(members_promote))
        .route("/v1/members/remove", post(members_remove))
        .route("/v1/locks", get(locks::lock_list))
        .route(
            "/v1/locks/{*path}",
            get(locks::lock_get)
                .post(locks::lock_post)
                .delete(locks::lock_delete),
        )
        .route(
            "/v1/admin/policy",
            get(locks::policy_get).put(locks::policy_put),
        )
        .route(
            "/v1/admin/capacity",
            get(admin::capacity_get).put(admin::capacity_put),
        )
        .route(
            "/v1/admin/module-keys",
            get(admin::module_keys_get).post(admin::module_keys_post),
        )
        .route(
            "/v1/admin/module-keys/{key}",
            delete(admin::module_keys_delete),
        )
        .route_layer(forward(MAX_BODY, "request body"));
    let leader_modules = Router::new()
        .route("/v1/admin/upgrade", post(admin::upgrade))
        .route("/v1/admin/shadow", post(admin::shadow_start))
        .route("/v1/admin/shadow/promote", post(admin::shadow_promote))
        .route("/v1/admin/shadow/abort", post(admin::shadow_abort))
        .route_layer(forward(MAX_MODULE, "module"));
    Router::new()
        .route("/v1/status", get(status))
        .route("/healthz", get(super::health::healthz))
        .route("/readyz", get(super::health::readyz))
        .route("/ui", get(console))
        .route("/v1/whoami", get(whoami))
        .route("/v1/members", get(members_list))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/audit", get(admin::audit))
        // A backup (GET) comes from the leader; a snapshot build (POST)
        // happens on the node asked. A method router's layer wraps only the
        // methods before it.
        .route(
            "/v1/admin/snapshot",
            get(admin::snapshot_save)
                .route_layer(forward(MAX_BODY, "request body"))
                .post(admin::snapshot_build),
        )
        .merge(leader_json)
        .merge(leader_modules)
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(middleware::from_fn_with_state(
            node.clone(),
            super::authorize::authorize,
        ))
        .with_state(node)
}

async fn status(State(node): State<Arc<Services>>) -> Json<Status> {
    Json(status_of(&node))
}

/// The web console: one page, compiled into the binary (no CDN, nothing
/// fetched at run time but this node's own API).
async fn console() -> axum::response::Html<&'static str> {
    axum::response::Html(include_str!("../../ui/console.html"))
}

async fn whoami(Extension(access): Extension<crate::auth::Access>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "principal": access.principal, "admin": access.admin }))
}

async fn members_list(State(node): State<Arc<Services>>) -> Json<Vec<Member>> {
    Json(members(&node.raft))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddMember {
    id: u64,
    addr: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberId {
    id: u64,
}

async fn members_add(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<AddMember>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.add_learner(req.id, &req.addr).await?;
    Ok(Json(members(&node.raft)))
}

async fn members_promote(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.promote(req.id).await?;
    Ok(Json(members(&node.raft)))
}

async fn members_remove(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.remove(req.id).await?;
    Ok(Json(members(&node.raft)))
}

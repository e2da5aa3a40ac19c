//! The HTTP/JSON API.
//!
//! | route | body | answer |
//! |---|---|---|
//! | `POST /v1/locks/{key}/acquire` | `{"lease_ms":N,"wait_ms":N}` | `200 {"token":T,"lease_ms":N}`; `409` still held after the wait; `403` the lock module's policy refused the key |
//! | `POST /v1/locks/{key}/release` | `{"token":T}` | `200`; `404` not held; `409` not the holder's token |
//! | `POST /v1/locks/{key}/keepalive` | `{"token":T}` | `200 {"lease_ms":N}`; `404`/`409` as above; `503` leadership not confirmed |
//! | `GET /v1/locks/{key}` | | `{"held":bool,"token":T?,"lease_ms":N?}`, read linearizably |
//! | `GET /v1/status` | | see [`super::status`] |
//! | `GET /v1/members` | | `[{"id":N,"addr":"…","voter":bool}]` |
//! | `POST /v1/members/add` | `{"id":N,"addr":"…"}` | add a learner (after checking its engine) |
//! | `POST /v1/members/promote` | `{"id":N}` | learner → voter |
//! | `POST /v1/members/remove` | `{"id":N}` | remove a voter or learner |
//! | `GET /metrics` | | Prometheus text ([`super::metrics`]) |
//! | `/v1/admin/…`, `GET /v1/audit` | | upgrade, shadow mode, audit: see [`super::admin`] |
//!
//! Keys may contain `/`; other reserved characters are percent-encoded. A
//! key is everything between `/v1/locks/` and the action. Every error is
//! `{"error":"…"}` with a fitting status code ([`super::error`]); bodies
//! over 64 KiB, malformed JSON and unknown fields are refused before
//! anything is proposed ([`super::body`]). The lock, admin and membership
//! routes are answered by the leader: any other node forwards them
//! ([`super::forward`]).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::net::TcpStream;

use super::body::{parse, JsonBody, RawBody, MAX_BODY, MAX_MODULE};
use super::error::ApiError;
use super::forward::{to_leader, Forwarding};
use super::services::Services;
use super::status::{status_of, Member, Status};
use super::{admin, metrics};
use crate::raft::members;
use crate::service::ServiceError;

/// Serve one HTTP connection.
pub async fn serve(node: Arc<Services>, stream: TcpStream) {
    let svc = hyper_util::service::TowerToHyperService::new(router(node));
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), svc)
        .await
    {
        tracing::debug!(error = %e, "http connection ended with an error");
    }
}

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
        .route("/v1/locks/{*path}", get(lock_get).post(lock_post))
        .route_layer(forward(MAX_BODY, "request body"));
    let leader_modules = Router::new()
        .route("/v1/admin/upgrade", post(admin::upgrade))
        .route("/v1/admin/shadow", post(admin::shadow_start))
        .route("/v1/admin/shadow/promote", post(admin::shadow_promote))
        .route("/v1/admin/shadow/abort", post(admin::shadow_abort))
        .route_layer(forward(MAX_MODULE, "module"));
    Router::new()
        .route("/v1/status", get(status))
        .route("/v1/members", get(members_list))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/audit", get(admin::audit))
        .merge(leader_json)
        .merge(leader_modules)
        .fallback(|| async { ApiError::not_found("no such route") })
        .with_state(node)
}

async fn status(State(node): State<Arc<Services>>) -> Json<Status> {
    Json(status_of(&node))
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    lease_ms: u64,
    #[serde(default)]
    wait_ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    token: u64,
}

#[derive(Serialize)]
struct AcquireReply {
    token: u64,
    lease_ms: u64,
}

#[derive(Serialize)]
struct LockReply {
    held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_ms: Option<u64>,
}

fn lock_path(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(p)| p)
        .map_err(|e| ApiError::bad_request(format!("{}: {e}", ServiceError::KeyNotUtf8)))
}

async fn lock_get(
    State(node): State<Arc<Services>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<LockReply>, ApiError> {
    let key = lock_path(path)?;
    let holders = node.locks.holders(&key).await?;
    let first = holders.first();
    Ok(Json(LockReply {
        held: first.is_some(),
        token: first.map(|i| i.token),
        lease_ms: first.map(|i| i.lease_ms),
    }))
}

async fn lock_post(
    State(node): State<Arc<Services>>,
    path: Result<Path<String>, PathRejection>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let path = lock_path(path)?;
    let Some((key, action)) = path.rsplit_once('/') else {
        return Err(ApiError::not_found(
            "expected /v1/locks/{key}/acquire|release|keepalive",
        ));
    };
    match action {
        "acquire" => {
            let req: AcquireBody = parse(&body)?;
            let wait = Duration::from_millis(req.wait_ms);
            let a = node.locks.acquire(key, req.lease_ms, wait).await?;
            Ok(Json(AcquireReply {
                token: a.token,
                lease_ms: a.lease_ms,
            })
            .into_response())
        }
        "release" => {
            let req: TokenBody = parse(&body)?;
            node.locks.release(key, req.token).await?;
            Ok(Json(json!({})).into_response())
        }
        "keepalive" => {
            let req: TokenBody = parse(&body)?;
            let lease_ms = node.locks.keepalive(key, req.token).await?;
            Ok(Json(json!({ "lease_ms": lease_ms })).into_response())
        }
        other => Err(ApiError::not_found(format!(
            "unknown lock action {other:?}; expected acquire, release or keepalive"
        ))),
    }
}

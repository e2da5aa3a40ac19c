//! The HTTP/JSON API.
//!
//! | route | body | answer |
//! |---|---|---|
//! | `POST /v1/locks/{key}/acquire` | `{"lease_ms":N,"wait_ms":N}` | `200 {"token":T,"lease_ms":N}`; `409` still held after the wait; `403` the lock module's policy refused the key |
//! | `POST /v1/locks/{key}/release` | `{"token":T}` | `200`; `404` not held; `409` not the holder's token |
//! | `POST /v1/locks/{key}/keepalive` | `{"token":T}` | `200 {"lease_ms":N}`; `404`/`409` as above; `503` leadership not confirmed |
//! | `GET /v1/locks/{key}` | | `{"held":bool,"token":T?,"lease_ms":N?}`, read linearizably |
//! | `GET /v1/status` | | see [`super::status::Status`] |
//! | `GET /v1/members` | | `[{"id":N,"addr":"…","voter":bool}]` |
//! | `POST /v1/members/add` | `{"id":N,"addr":"…"}` | add a learner (after checking its engine) |
//! | `POST /v1/members/promote` | `{"id":N}` | learner → voter |
//! | `POST /v1/members/remove` | `{"id":N}` | remove a voter or learner |
//! | `GET /metrics` | | Prometheus text |
//! | `/v1/admin/…`, `GET /v1/audit` | | upgrade, shadow mode, audit: see [`super::admin`] |
//!
//! Keys may contain `/`; other reserved characters are percent-encoded. A
//! key is everything between `/v1/locks/` and the action. Every error is
//! `{"error":"…"}` with a fitting status code; bodies over 64 KiB, malformed
//! JSON and unknown fields are refused before anything is proposed.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::net::TcpStream;

use super::forward;
use super::status::{members_of, status_of, status_with, Member, Status};
use crate::membership::{self, MembershipError};
use crate::node::Node;
use crate::service::{self, ServiceError};

/// The largest request body accepted.
pub const MAX_BODY: usize = 64 << 10;

/// Serve one HTTP connection.
pub async fn serve(node: Arc<Node>, stream: TcpStream) {
    let svc = hyper_util::service::TowerToHyperService::new(router(node));
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), svc)
        .await
    {
        tracing::debug!(error = %e, "http connection ended with an error");
    }
}

pub fn router(node: Arc<Node>) -> Router {
    Router::new()
        .route("/v1/status", get(status))
        .route("/v1/members", get(members))
        .route("/v1/members/add", post(members_add))
        .route("/v1/members/promote", post(members_promote))
        .route("/v1/members/remove", post(members_remove))
        .route("/v1/locks/{*path}", get(lock_get).post(lock_post))
        .route("/metrics", get(metrics))
        .route("/v1/audit", get(super::admin::audit))
        .merge(
            Router::new()
                .route("/v1/admin/upgrade", post(super::admin::upgrade))
                .route("/v1/admin/shadow", post(super::admin::shadow_start))
                .route("/v1/admin/shadow/promote", post(super::admin::shadow_promote))
                .route("/v1/admin/shadow/abort", post(super::admin::shadow_abort))
                .layer(DefaultBodyLimit::max(super::admin::MAX_MODULE)),
        )
        .fallback(|| async { ApiError(StatusCode::NOT_FOUND, "no such route".into(), None) })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(node)
}

/// An error answer: status, message, and the leader's id when it helps.
pub struct ApiError(pub StatusCode, pub String, pub Option<u64>);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match self.2 {
            Some(leader) => json!({ "error": self.1, "leader": leader }),
            None => json!({ "error": self.1 }),
        };
        (self.0, Json(body)).into_response()
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> ApiError {
        let status = match &e {
            ServiceError::EmptyKey
            | ServiceError::KeyTooLong(_)
            | ServiceError::KeyNotUtf8
            | ServiceError::ZeroLease
            | ServiceError::LeaseTooLong { .. } => StatusCode::BAD_REQUEST,
            ServiceError::Held { .. } | ServiceError::WrongToken { .. } => StatusCode::CONFLICT,
            ServiceError::NotHeld { .. } => StatusCode::NOT_FOUND,
            ServiceError::Refused { .. } => StatusCode::FORBIDDEN,
            ServiceError::NotLeader { .. } | ServiceError::Unavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ServiceError::StateMachine(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let leader = match &e {
            ServiceError::NotLeader { leader, .. } => *leader,
            _ => None,
        };
        ApiError(status, e.to_string(), leader)
    }
}

impl From<MembershipError> for ApiError {
    fn from(e: MembershipError) -> ApiError {
        let status = match &e {
            MembershipError::Refused { .. } => StatusCode::BAD_GATEWAY,
            MembershipError::NotMember(_) => StatusCode::NOT_FOUND,
            MembershipError::NotLearner(_) => StatusCode::CONFLICT,
            MembershipError::Raft(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError(status, e.to_string(), None)
    }
}

/// Parse a JSON body strictly, with errors that say what is wrong.
fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    parse_bytes(&read_body(body)?)
}

fn parse_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!("malformed JSON body: {e}"),
            None,
        )
    })
}

async fn status(State(node): State<Arc<Node>>) -> Json<Status> {
    Json(status_of(&node))
}

async fn members(State(node): State<Arc<Node>>) -> Json<Vec<Member>> {
    Json(members_of(&node))
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
    State(node): State<Arc<Node>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Vec<Member>>, ApiError> {
    let req: AddMember = parse(body)?;
    membership::add_learner(&node, req.id, &req.addr).await?;
    Ok(Json(members_of(&node)))
}

async fn members_promote(
    State(node): State<Arc<Node>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Vec<Member>>, ApiError> {
    let req: MemberId = parse(body)?;
    membership::promote(&node, req.id).await?;
    Ok(Json(members_of(&node)))
}

async fn members_remove(
    State(node): State<Arc<Node>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Vec<Member>>, ApiError> {
    let req: MemberId = parse(body)?;
    membership::remove(&node, req.id).await?;
    Ok(Json(members_of(&node)))
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

/// The body's bytes, or a precise error.
fn read_body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        let status = e.status();
        let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("request body is over {MAX_BODY} bytes")
        } else {
            format!("cannot read request body: {e}")
        };
        ApiError(status, msg, None)
    })
}

fn lock_path(
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<String, ApiError> {
    path.map(|Path(p)| p).map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!("{}: {e}", ServiceError::KeyNotUtf8),
            None,
        )
    })
}

async fn lock_get(
    State(node): State<Arc<Node>>,
    uri: Uri,
    headers: HeaderMap,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, ApiError> {
    let key = lock_path(path)?;
    if let Some(leader) = forward::target(&node, &headers) {
        return forward::forward(&node, leader, Method::GET, &uri, Bytes::new()).await;
    }
    let info = service::get(&node, &key).await?;
    Ok(Json(LockReply {
        held: info.is_some(),
        token: info.map(|i| i.token),
        lease_ms: info.map(|i| i.lease_ms),
    })
    .into_response())
}

async fn lock_post(
    State(node): State<Arc<Node>>,
    uri: Uri,
    headers: HeaderMap,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let path = lock_path(path)?;
    let body = read_body(body)?;
    if let Some(leader) = forward::target(&node, &headers) {
        return forward::forward(&node, leader, Method::POST, &uri, body).await;
    }
    let Some((key, action)) = path.rsplit_once('/') else {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            "expected /v1/locks/{key}/acquire|release|keepalive".into(),
            None,
        ));
    };
    match action {
        "acquire" => {
            let req: AcquireBody = parse_bytes(&body)?;
            let a = service::acquire(&node, key, req.lease_ms, Duration::from_millis(req.wait_ms))
                .await?;
            Ok(Json(AcquireReply {
                token: a.token,
                lease_ms: a.lease_ms,
            })
            .into_response())
        }
        "release" => {
            let req: TokenBody = parse_bytes(&body)?;
            service::release(&node, key, req.token).await?;
            Ok(Json(json!({})).into_response())
        }
        "keepalive" => {
            let req: TokenBody = parse_bytes(&body)?;
            let lease_ms = service::keepalive(&node, key, req.token).await?;
            Ok(Json(json!({ "lease_ms": lease_ms })).into_response())
        }
        other => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("unknown lock action {other:?}; expected acquire, release or keepalive"),
            None,
        )),
    }
}

async fn metrics(State(node): State<Arc<Node>>) -> impl IntoResponse {
    let s = status_with(&node, false);
    let batches = node.log.stats().batches.load(Ordering::Relaxed);
    let ls = &node.locks.stats;
    let (swapped, rejected) = node.sm.upgrade_counts();
    let sh = s.shadow.as_ref();
    // (name, type, help, value): one gauge or counter each, labelled by node.
    #[rustfmt::skip]
    let rows: [(&str, &str, &str, u64); 27] = [
        ("lockd_raft_term", "gauge", "Current Raft term.", s.term),
        ("lockd_raft_is_leader", "gauge", "1 when this node is the leader.", (s.role == "leader") as u64),
        ("lockd_raft_commit_index", "gauge", "Last committed log index.", s.commit_index),
        ("lockd_raft_applied_index", "gauge", "Last applied log index.", s.applied_index),
        ("lockd_raft_last_log_index", "gauge", "Last log index.", s.last_log_index),
        ("lockd_locks_held", "gauge", "Locks held in the state machine.", s.locks_held),
        ("lockd_wal_entries_total", "counter", "Log entries made durable.", s.wal_entries),
        ("lockd_wal_batches_total", "counter", "Group-commit batches written.", batches),
        ("lockd_wal_fsyncs_total", "counter", "fsyncs issued by the log.", s.wal_fsyncs),
        ("lockd_snapshots_built_total", "counter", "Snapshots built.", s.snapshots_built),
        ("lockd_snapshots_installed_total", "counter", "Snapshots installed from a leader.", s.snapshots_installed),
        ("lockd_lock_grants_total", "counter", "Grants committed by this node as leader.", ls.grants.load(Ordering::Relaxed)),
        ("lockd_lock_releases_total", "counter", "Releases committed for callers.", ls.releases.load(Ordering::Relaxed)),
        ("lockd_lock_expires_total", "counter", "Expire commands committed.", ls.expires.load(Ordering::Relaxed)),
        ("lockd_lock_handoffs_total", "counter", "Grants pipelined behind a release or expire.", ls.handoffs.load(Ordering::Relaxed)),
        ("lockd_lock_phantom_releases_total", "counter", "Grants released because the caller left.", ls.phantom_releases.load(Ordering::Relaxed)),
        ("lockd_lock_keepalives_total", "counter", "Leases extended.", ls.keepalives.load(Ordering::Relaxed)),
        ("lockd_lock_waiters", "gauge", "Callers waiting for a lock.", ls.waiting.load(Ordering::Relaxed)),
        ("lockd_state_machine_poisoned", "gauge", "1 when the guest failed and applying stopped.", s.poisoned.is_some() as u64),
        ("lockd_upgrades_swapped_total", "counter", "Upgrade entries applied that swapped the lock module.", swapped),
        ("lockd_upgrades_rejected_total", "counter", "Upgrade entries applied that were rejected (the old module stayed).", rejected),
        ("lockd_module_since_index", "gauge", "Log index at which the active module became active.", s.module_since_index),
        ("lockd_audit_divergences_total", "counter", "State-hash divergences between nodes found by the determinism audit.", s.audit_divergences),
        ("lockd_shadow_active", "gauge", "1 when a shadow module runs (and has not failed).", sh.is_some_and(|x| x.failed.is_none()) as u64),
        ("lockd_shadow_commands_compared_total", "counter", "Commands fed to both the active and the shadow module.", sh.map_or(0, |x| x.commands_compared)),
        ("lockd_shadow_outcome_diffs_total", "counter", "Commands whose shadow outcome differed from the active one.", sh.map_or(0, |x| x.outcome_diffs)),
        ("lockd_shadow_hash_diffs_total", "counter", "Audit points where the shadow's state hash differed.", sh.map_or(0, |x| x.hash_diffs)),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in rows {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{node=\"{}\"}} {value}\n",
            s.id
        );
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        out,
    )
}

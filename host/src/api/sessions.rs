//! HTTP routes of sessions (docs/sessions.md) and of a holding's value
//! (`POST /v1/locks/{key}/proclaim`, what an election's leader publishes).
//!
//! A session is one lease for many holdings: acquires name it
//! (`"session": ID`), one keepalive renews them all, and closing it, or
//! its expiry when no keepalive came within its TTL, releases them all in
//! one log entry. Only the session's principal (or an admin) may acquire
//! in it, renew, read or close it.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::body::{parse, RawBody};
use super::error::{ApiError, ErrorBody};
use super::native_locks;
use super::op::{Op, SessionOp};
use super::paths;
use super::services::Services;
use crate::auth::Access;
use crate::service::SessionOpen;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionBody {
    /// How long the session (and every holding in it) lives without a
    /// keepalive: at least 1, at most the node's `--max-lease-ms`.
    #[schema(minimum = 1, maximum = 3_600_000)]
    ttl_ms: u64,
    /// Who holds it, for people.
    #[serde(default)]
    #[schema(max_length = 256)]
    owner: String,
    /// Makes a retry safe: the same owner and request id get the session
    /// that opened.
    #[serde(default)]
    #[schema(max_length = 128)]
    request_id: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct SessionReply {
    id: u64,
    ttl_ms: u64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct HoldingRef {
    key: String,
    token: u64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct SessionInfoReply {
    id: u64,
    principal: String,
    owner: String,
    ttl_ms: u64,
    /// What is left of its TTL on the leader's clock (null: not timed
    /// there yet).
    ttl_left_ms: Option<u64>,
    /// The most holdings it may have.
    max_holdings: u32,
    /// Its holdings, in key order.
    holdings: Vec<HoldingRef>,
    /// The log index this answer was read at.
    index: u64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ClosedReply {
    /// The holdings the close released, in key order.
    released: Vec<HoldingRef>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProclaimBody {
    /// The holding's fencing token.
    token: u64,
    /// Its new value, at most 1024 characters.
    #[schema(max_length = 1024)]
    value: String,
}

fn refs(v: Vec<(String, u64)>) -> Vec<HoldingRef> {
    v.into_iter()
        .map(|(key, token)| HoldingRef { key, token })
        .collect()
}

fn session_op(op: Op) -> Result<SessionOp, ApiError> {
    match op {
        Op::Session(s) => Ok(s),
        other => Err(ApiError::not_found(format!(
            "not a route of this handler: {other:?}"
        ))),
    }
}

/// Open a session.
#[utoipa::path(post, path = paths::SESSIONS, tag = "sessions", request_body = SessionBody,
    responses(
        (status = 200, description = "opened (or, for a retry with the same owner and request id, the session that opened)", body = SessionReply),
        (status = 400, description = "a TTL of 0 or above --max-lease-ms, a field too long, or a malformed body", body = ErrorBody),
        (status = 403, description = "the principal has as many live sessions as --max-sessions allows", body = ErrorBody),
        (status = 422, description = "the active module has no sessions", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn open(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let req: SessionBody = parse(&body)?;
    let (id, ttl_ms) = node
        .locks()
        .open_session(SessionOpen {
            ttl_ms: req.ttl_ms,
            principal: access.principal.clone(),
            owner: req.owner,
            request_id: req.request_id,
        })
        .await?;
    Ok(Json(SessionReply { id, ttl_ms }).into_response())
}

/// A session and its holdings, read linearizably.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = u64, Path, description = "the session's id")),
    responses(
        (status = 200, description = "the session", body = SessionInfoReply),
        (status = 400, description = "a bad id", body = ErrorBody),
        (status = 403, description = "another principal's session", body = ErrorBody),
        (status = 404, description = "no such session (never opened, closed or expired)", body = ErrorBody),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub async fn get(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    Extension(op): Extension<Op>,
) -> Result<Response, ApiError> {
    let SessionOp::Get(id) = session_op(op)? else {
        return Err(ApiError::not_found("not a session read"));
    };
    let locks = node.locks();
    let (index, info) = locks.session(id).await?;
    let info = info.ok_or(crate::service::ServiceError::NoSession { id })?;
    if let Some(by) = native_locks::bound_to(&access) {
        if info.holder.principal != by {
            return Err(crate::service::ServiceError::NotSessionHolder {
                id,
                holder: info.holder.principal,
                caller: by.to_string(),
            }
            .into());
        }
    }
    let ttl_left_ms = locks.session_left(id).await;
    Ok(Json(SessionInfoReply {
        id,
        principal: info.holder.principal,
        owner: info.holder.owner,
        ttl_ms: info.ttl_ms,
        ttl_left_ms,
        max_holdings: info.max_holdings,
        holdings: info
            .holdings
            .into_iter()
            .map(|r| HoldingRef {
                key: r.key,
                token: r.token,
            })
            .collect(),
        index,
    })
    .into_response())
}

/// Renew a session, and so every holding in it, by its TTL.
#[utoipa::path(post, path = "/v1/sessions/{id}/keepalive", tag = "sessions",
    params(("id" = u64, Path, description = "the session's id")),
    responses(
        (status = 200, description = "renewed", body = SessionReply),
        (status = 400, description = "a bad id", body = ErrorBody),
        (status = 403, description = "another principal's session", body = ErrorBody),
        (status = 404, description = "no such session (never opened, closed or expired)", body = ErrorBody),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub async fn post(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    Extension(op): Extension<Op>,
) -> Result<Response, ApiError> {
    let SessionOp::Keepalive(id) = session_op(op)? else {
        return Err(ApiError::not_found("not a session keepalive"));
    };
    let by = native_locks::bound_to(&access);
    let ttl_ms = node.locks().keep_session(id, by).await?;
    Ok(Json(SessionReply { id, ttl_ms }).into_response())
}

/// Close a session: every holding in it is released, in one log entry.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = u64, Path, description = "the session's id")),
    responses(
        (status = 200, description = "closed", body = ClosedReply),
        (status = 400, description = "a bad id", body = ErrorBody),
        (status = 403, description = "another principal's session", body = ErrorBody),
        (status = 404, description = "no such session (never opened, closed or expired)", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn close(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    Extension(op): Extension<Op>,
) -> Result<Response, ApiError> {
    let SessionOp::Close(id) = session_op(op)? else {
        return Err(ApiError::not_found("not a session close"));
    };
    let by = native_locks::bound_to(&access);
    let released = node.locks().close_session(id, by).await?;
    Ok(Json(ClosedReply {
        released: refs(released),
    })
    .into_response())
}

/// Publish a new value for a holding (an election's leader).
#[utoipa::path(post, path = "/v1/locks/{key}/proclaim", tag = "locks",
    params(("key" = String, Path, description = "the lock's key (may contain `/`)")),
    request_body = ProclaimBody,
    responses(
        (status = 200, description = "the value replaced", body = super::lock_json::Done),
        (status = 400, description = "a bad key, a value above 1024 characters, or a malformed body", body = ErrorBody),
        (status = 403, description = "another principal's holding", body = ErrorBody),
        (status = 404, description = "not held", body = ErrorBody),
        (status = 409, description = "not the holder's token", body = ErrorBody),
        (status = 422, description = "the active module keeps no values", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn proclaim(
    node: &Services,
    access: &Access,
    key: &str,
    req: ProclaimBody,
) -> Result<Response, ApiError> {
    let by = native_locks::bound_to(access);
    node.locks().proclaim(key, req.token, req.value, by).await?;
    Ok(Json(super::lock_json::Done {}).into_response())
}

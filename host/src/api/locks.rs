//! HTTP routes of the locks and of the lock module's policy data.
//!
//! | route | body | answer |
//! |---|---|---|
//! | `POST /v1/locks/{key}/acquire` | `{"lease_ms":N,"wait_ms":N,"mode":"exclusive"\|"shared","limit":N,"owner":"…","request_id":"…"}` (all but `lease_ms` optional; `Idempotency-Key` header = `request_id`) | `200 {"token":T,"lease_ms":N}` (the lease granted); `409` still busy after the wait; `403` refused by the module's policy; `429` a quota of it is used up, or as many callers wait for the key (or on the node) as the limits allow (with `Retry-After: 1`); `400` a `wait_ms` above `--max-wait-ms`; `422` the module cannot serve the mode or limit |
//! | `POST /v1/locks/{key}/release` | `{"token":T}` | `200`; `404` not held; `409` not the holder's token |
//! | `POST /v1/locks/{key}/keepalive` | `{"token":T}` | `200 {"lease_ms":N}`; `404`/`409` as above; `503` leadership not confirmed |
//! | `GET /v1/locks/{key}` | | `{"held":bool,"token":T?,"lease_ms":N?,"holders":[…]}` (the first holder's token and lease, as before holders existed), read linearizably |
//! | `GET /v1/locks?prefix=P&after=K&limit=N` | | `{"locks":[{"key":"…","holders":[…]}],"next":"K"?}`: held keys under `P` after `K` in key order, at most `N` (default 100, at most 1000); `next` is the `after` of the next page |
//! | `DELETE /v1/locks/{key}/holders/{token}` | | admin force release of one holding: `200`, `404`, `409` |
//! | `GET /v1/admin/policy` | | `{"rules":[…]}` |
//! | `PUT /v1/admin/policy` | `{"rules":[{"prefix":"…","reserved":bool,"max_lease_ms":N?,"max_holders":N?,"max_held":N?}]}` | `200`; `422` the module refused the rules (or keeps no policy data) |
//!
//! A holder is `{"token","lease_ms","mode","limit","holder":{"principal","owner"}|null,"request_id"?}`;
//! `holder` is null for a holding carried over from a world-0.1 state,
//! whose holder nobody recorded. With authentication on, `token` is shown
//! only to the holding's principal and to admins (`null` to others): a
//! token is not a credential here, but nobody else needs it.
//!
//! Holder-bound locks: the principal that acquired a holding (recorded in
//! the grant, so it survives leader changes with a module of world 0.2)
//! alone may release or renew it, besides an admin; another principal is
//! refused with 403 even with the right token. A holding whose principal
//! was not recorded (granted before authentication was on, or by a 0.1
//! module under an earlier leader) is released or renewed by any
//! principal that may lock its key.
//!
//! Idempotent acquire: an acquire retried with the same owner and request
//! id, after an answer that never came, gets the grant that committed (same
//! token), never a second one; it does not wait behind itself. A client
//! that retries should send both (a request id alone, with no owner, is
//! fine too: the pair is what the module compares).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use lockd_client::proto::LockMode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::body::{parse, JsonBody, RawBody};
use super::error::ApiError;
use super::services::Services;
use super::wire;
use crate::auth::action::split_lock_path;
use crate::auth::Access;
use crate::command::{HolderInfo, KeyHolders, PrefixPolicy};
use crate::service::table::Spec;
use crate::service::ServiceError;

/// Listing page size when none is asked for.
const DEFAULT_LIST: u32 = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    lease_ms: u64,
    #[serde(default)]
    wait_ms: u64,
    #[serde(default)]
    mode: LockMode,
    #[serde(default = "one")]
    limit: u32,
    #[serde(default)]
    owner: String,
    #[serde(default)]
    request_id: Option<String>,
}

fn one() -> u32 {
    1
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
pub struct HolderJson {
    principal: String,
    owner: String,
}

#[derive(Serialize)]
pub struct HoldingJson {
    /// Null: not shown to this caller (another principal's holding).
    token: Option<u64>,
    lease_ms: u64,
    mode: LockMode,
    limit: u32,
    /// Null: carried over from a 0.1 state, holder unknown.
    holder: Option<HolderJson>,
    #[serde(skip_serializing_if = "String::is_empty")]
    request_id: String,
}

fn holding(access: &Access, h: HolderInfo) -> HoldingJson {
    HoldingJson {
        token: wire::sees_token(access, &h).then_some(h.token),
        lease_ms: h.lease_ms,
        mode: wire::lock_mode(h.mode),
        limit: h.limit,
        holder: h.holder.map(|x| HolderJson {
            principal: x.principal,
            owner: x.owner,
        }),
        request_id: h.request_id,
    }
}

#[derive(Serialize)]
pub struct LockReply {
    held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_ms: Option<u64>,
    holders: Vec<HoldingJson>,
}

fn lock_path(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(p)| p)
        .map_err(|e| ApiError::bad_request(format!("{}: {e}", ServiceError::KeyNotUtf8)))
}

pub async fn lock_get(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<LockReply>, ApiError> {
    let key = lock_path(path)?;
    let holders = node.locks.holders(&key).await?;
    let first = holders.first();
    Ok(Json(LockReply {
        held: first.is_some(),
        token: first
            .filter(|i| wire::sees_token(&access, i))
            .map(|i| i.token),
        lease_ms: first.map(|i| i.lease_ms),
        holders: holders.into_iter().map(|h| holding(&access, h)).collect(),
    }))
}

/// The request id of an acquire: the body's or the `Idempotency-Key`
/// header's (they must agree when both are given).
fn request_id(headers: &HeaderMap, body: Option<String>) -> Result<String, ApiError> {
    let header = match headers.get("idempotency-key") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("Idempotency-Key is not visible ASCII"))?
                .to_string(),
        ),
        None => None,
    };
    match (header, body) {
        (Some(h), Some(b)) if h != b => Err(ApiError::bad_request(format!(
            "Idempotency-Key {h:?} differs from the body's request_id {b:?}"
        ))),
        (h, b) => Ok(h.or(b).unwrap_or_default()),
    }
}

pub async fn lock_post(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let path = lock_path(path)?;
    let by = wire::bound_to(&access);
    let Some((key, action)) = split_lock_path(&path) else {
        return Err(ApiError::not_found(
            "expected /v1/locks/{key}/acquire|release|keepalive",
        ));
    };
    match action {
        "acquire" => {
            let req: AcquireBody = parse(&body)?;
            let spec = Spec {
                lease_ms: req.lease_ms,
                mode: wire::mode(req.mode),
                limit: req.limit,
                principal: access.principal.clone(),
                owner: req.owner,
                request_id: request_id(&headers, req.request_id)?,
            };
            let wait = Duration::from_millis(req.wait_ms);
            let a = node.locks.acquire_with(key, spec, wait).await?;
            Ok(Json(AcquireReply {
                token: a.token,
                lease_ms: a.lease_ms,
            })
            .into_response())
        }
        "release" => {
            let req: TokenBody = parse(&body)?;
            node.locks.release(key, req.token, by).await?;
            Ok(Json(json!({})).into_response())
        }
        "keepalive" => {
            let req: TokenBody = parse(&body)?;
            let lease_ms = node.locks.keepalive(key, req.token, by).await?;
            Ok(Json(json!({ "lease_ms": lease_ms })).into_response())
        }
        other => Err(ApiError::not_found(format!(
            "unknown lock action {other:?}; expected acquire, release or keepalive"
        ))),
    }
}

/// `DELETE /v1/locks/{key}/holders/{token}`: end one holding now.
pub async fn lock_delete(
    State(node): State<Arc<Services>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let path = lock_path(path)?;
    let parsed = path
        .rsplit_once("/holders/")
        .map(|(key, token)| (key, token.parse::<u64>()));
    let (key, token) = match parsed {
        Some((key, Ok(token))) => (key, token),
        Some((_, Err(e))) => return Err(ApiError::bad_request(format!("token: {e}"))),
        None => {
            return Err(ApiError::not_found(
                "expected DELETE /v1/locks/{key}/holders/{token}",
            ))
        }
    };
    // An admin's (the route is admin-only): any holding.
    node.locks.release(key, token, None).await?;
    Ok(Json(json!({})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    #[serde(default)]
    prefix: String,
    after: Option<String>,
    limit: Option<u32>,
}

#[derive(Serialize)]
pub struct KeyJson {
    key: String,
    holders: Vec<HoldingJson>,
}

#[derive(Serialize)]
pub struct ListReply {
    locks: Vec<KeyJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

pub async fn lock_list(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<ListReply>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = q.limit.unwrap_or(DEFAULT_LIST);
    let page: Vec<KeyHolders> = node
        .locks
        .list(&q.prefix, q.after.as_deref(), limit)
        .await?;
    let next = (page.len() == limit as usize)
        .then(|| page.last().map(|k| k.key.clone()))
        .flatten();
    Ok(Json(ListReply {
        locks: page
            .into_iter()
            .map(|k| KeyJson {
                key: k.key,
                holders: k.holders.into_iter().map(|h| holding(&access, h)).collect(),
            })
            .collect(),
        next,
    }))
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleJson {
    prefix: String,
    #[serde(default)]
    reserved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_lease_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_holders: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_held: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyJson {
    rules: Vec<RuleJson>,
}

pub async fn policy_get(State(node): State<Arc<Services>>) -> Result<Json<PolicyJson>, ApiError> {
    let rules = node.locks.policy().await?;
    Ok(Json(PolicyJson {
        rules: rules
            .into_iter()
            .map(|r| RuleJson {
                prefix: r.prefix,
                reserved: r.reserved,
                max_lease_ms: r.max_lease_ms,
                max_holders: r.max_holders,
                max_held: r.max_held,
            })
            .collect(),
    }))
}

pub async fn policy_put(
    State(node): State<Arc<Services>>,
    JsonBody(body): JsonBody<PolicyJson>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let rules = body
        .rules
        .into_iter()
        .map(|r| PrefixPolicy {
            prefix: r.prefix,
            reserved: r.reserved,
            max_lease_ms: r.max_lease_ms,
            max_holders: r.max_holders,
            max_held: r.max_held,
        })
        .collect();
    node.locks.set_policy(rules).await?;
    Ok(Json(json!({})))
}

//! HTTP routes of the locks (the policy data is in [`super::policy`]).
//!
//! Each route, its body, answers and errors: the OpenAPI document
//! ([`super::openapi`], rendered in `docs/api.md`), declared on each
//! handler below.
//!
//! A holding's `holder` is null when it was carried over from a world-0.1
//! state, whose holder nobody recorded. With authentication on, `token` is shown
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

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;

use super::body::{parse, RawBody};
use super::error::{ApiError, ErrorBody};
use super::lock_json::{
    holding, AcquireBody, AcquireReply, Done, HoldingJson, KeepaliveReply, LockReply, ReleaseReply,
    TokenBody,
};
use super::native_locks;
use super::op::{ListQuery, LockOp, Op, Verb};
use super::paths;
use super::services::Services;
use crate::auth::Access;
use crate::service::table::Spec;
use crate::service::ServiceError;
use crate::telemetry::Stage;
use lockd_core::command::KeyHolders;

/// Listing page size when none is asked for.
const DEFAULT_LIST: u32 = 100;

/// The lock route the authorisation layer parsed, if the request is the
/// one `verb` says (the layer's reading is the only one: see [`super::op`]).
fn lock_op(op: Op, verb: fn(&Verb) -> bool) -> Result<LockOp, ApiError> {
    match op {
        Op::Lock(l) if verb(&l.verb) => Ok(l),
        other => Err(ApiError::not_found(format!(
            "not a route of this handler: {other:?}"
        ))),
    }
}

/// Who holds a key, read linearizably.
#[utoipa::path(get, path = "/v1/locks/{key}", tag = "locks", params(KeyPath),
    responses(
        (status = 200, description = "the holders (empty: free)", body = LockReply),
        (status = 400, description = "a bad key", body = ErrorBody),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub(crate) async fn lock_get(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    Extension(op): Extension<Op>,
) -> Result<Json<LockReply>, ApiError> {
    let key = lock_op(op, |v| *v == Verb::Get)?.key;
    let (holders, left) = node.locks().holders_timed(&key).await?;
    let first = holders.first();
    Ok(Json(LockReply {
        held: first.is_some(),
        token: first
            .filter(|i| native_locks::sees_token(&access, i))
            .map(|i| i.token),
        lease_ms: first.map(|i| i.lease_ms),
        holders: holders
            .into_iter()
            .map(|h| holding(&access, h, &left))
            .collect(),
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

/// The actions of `POST /v1/locks/{key}/ACTION` (the OpenAPI document
/// must name each: a unit test there).
#[cfg(test)]
pub(crate) const ACTIONS: [&str; 4] = ["acquire", "release", "keepalive", "proclaim"];

pub(crate) async fn lock_post(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    Extension(op): Extension<Op>,
    Extension(received): Extension<super::marks::Received>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let l = lock_op(op, |v| {
        matches!(
            v,
            Verb::Acquire | Verb::Release | Verb::Keepalive | Verb::Proclaim
        )
    })?;
    let lock = Lock {
        node: &node,
        access: &access,
        key: &l.key,
    };
    match l.verb {
        Verb::Acquire => {
            let body = parse(&body)?;
            node.stages().observe(Stage::Receive, received.0.elapsed());
            acquire(lock, &headers, body).await
        }
        Verb::Release => release(lock, parse(&body)?).await,
        Verb::Proclaim => super::sessions::proclaim(&node, &access, &l.key, parse(&body)?).await,
        _ => keepalive(lock, parse(&body)?).await,
    }
}

/// The key in a lock route's path, for the OpenAPI document (the router
/// takes the whole path and splits off the action).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // a declaration: `lock_path` reads the key
struct KeyPath {
    /// The lock's key (may contain `/`).
    key: String,
}

/// What a lock action works on.
#[derive(Clone, Copy)]
pub struct Lock<'a> {
    node: &'a Services,
    access: &'a Access,
    key: &'a str,
}

/// Take the lock, waiting up to `wait_ms` while it is busy.
#[utoipa::path(post, path = "/v1/locks/{key}/acquire", tag = "locks", params(KeyPath), request_body = AcquireBody,
    responses(
        (status = 200, description = "granted", body = AcquireReply),
        (status = 400, description = "a bad key, a lease of 0 or above --max-lease-ms, a wait above --max-wait-ms, or a malformed body", body = ErrorBody),
        (status = 403, description = "refused by the module's policy", body = ErrorBody),
        (status = 404, description = "the session named does not exist (never opened, closed or expired)", body = ErrorBody),
        (status = 409, description = "still busy after the wait", body = ErrorBody),
        (status = 422, description = "the module cannot serve the mode or limit, or the limit differs from the holders'", body = ErrorBody),
        (status = 429, description = "a quota is used up, or as many callers wait as the limits allow (Retry-After)", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody),
        (status = 507, description = "the cluster's capacity bound is reached (`code`: `capacity`)", body = ErrorBody)))]
pub async fn acquire(
    l: Lock<'_>,
    headers: &HeaderMap,
    req: AcquireBody,
) -> Result<Response, ApiError> {
    // 0 is how the service hears "not given"; given, it is refused.
    if req.limit == Some(0) {
        return Err(ServiceError::ZeroLimit.into());
    }
    let spec = Spec {
        lease_ms: req.lease_ms,
        mode: native_locks::mode(req.mode),
        limit: req.limit.unwrap_or(0),
        adopt: None,
        principal: l.access.principal.clone(),
        owner: req.owner,
        request_id: request_id(headers, req.request_id)?,
        session: req.session,
        reentrant: req.reentrant,
        value: req.value,
        priority: req.priority,
    };
    let wait = Duration::from_millis(req.wait_ms);
    let a = l.node.locks().acquire_with(l.key, spec, wait).await?;
    Ok(Json(AcquireReply {
        token: a.token,
        lease_ms: a.lease_ms,
        count: a.count,
    })
    .into_response())
}

/// Give the lock up.
#[utoipa::path(post, path = "/v1/locks/{key}/release", tag = "locks", params(KeyPath), request_body = TokenBody,
    responses(
        (status = 200, description = "released (or, for a reentrant holding entered more than once, one count taken off)", body = ReleaseReply),
        (status = 400, description = "a bad key or body", body = ErrorBody),
        (status = 403, description = "another principal's holding", body = ErrorBody),
        (status = 404, description = "not held", body = ErrorBody),
        (status = 409, description = "not the holder's token", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn release(l: Lock<'_>, req: TokenBody) -> Result<Response, ApiError> {
    let by = native_locks::bound_to(l.access);
    let count = l.node.locks().release(l.key, req.token, by).await?;
    Ok(Json(ReleaseReply { count }).into_response())
}

/// Restart the lease.
#[utoipa::path(post, path = "/v1/locks/{key}/keepalive", tag = "locks", params(KeyPath), request_body = TokenBody,
    responses(
        (status = 200, description = "renewed", body = KeepaliveReply),
        (status = 400, description = "a bad key or body", body = ErrorBody),
        (status = 403, description = "another principal's holding", body = ErrorBody),
        (status = 404, description = "not held", body = ErrorBody),
        (status = 409, description = "not the holder's token", body = ErrorBody),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub async fn keepalive(l: Lock<'_>, req: TokenBody) -> Result<Response, ApiError> {
    let by = native_locks::bound_to(l.access);
    let lease_ms = l.node.locks().keepalive(l.key, req.token, by).await?;
    Ok(Json(KeepaliveReply { lease_ms }).into_response())
}

/// End one holding now (admin); its holder is not told.
#[utoipa::path(delete, path = "/v1/locks/{key}/holders/{token}", tag = "locks",
    params(KeyPath, ("token" = u64, Path, description = "the holding's fencing token")),
    responses(
        (status = 200, description = "released", body = Done),
        (status = 400, description = "a bad key or token", body = ErrorBody),
        (status = 404, description = "not held", body = ErrorBody),
        (status = 409, description = "no holding with that token", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn lock_delete(
    State(node): State<Arc<Services>>,
    Extension(op): Extension<Op>,
) -> Result<Json<Done>, ApiError> {
    let l = lock_op(op, |v| matches!(v, Verb::ForceRelease(_)))?;
    let Verb::ForceRelease(token) = l.verb else {
        return Err(ApiError::not_found("not a force release"));
    };
    // An admin's (the route's action is admin): any holding.
    node.locks().release(&l.key, token, None).await?;
    Ok(Json(Done {}))
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct KeyJson {
    key: String,
    holders: Vec<HoldingJson>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ListReply {
    locks: Vec<KeyJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
    /// The log index this page was read at: `GET /v1/watch?from=` one
    /// more misses no change after it (docs/watch.md).
    index: u64,
}

/// Held keys, in key order, a page at a time.
#[utoipa::path(get, path = paths::LOCKS, tag = "locks", params(ListQuery),
    responses(
        (status = 200, description = "a page of held keys", body = ListReply),
        (status = 400, description = "a bad prefix or limit", body = ErrorBody),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub(crate) async fn lock_list(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    Extension(op): Extension<Op>,
) -> Result<Json<ListReply>, ApiError> {
    let Op::List(q) = op else {
        return Err(ApiError::not_found("not a listing"));
    };
    let limit = q.limit.unwrap_or(DEFAULT_LIST);
    let (index, page, left): (_, Vec<KeyHolders>, _) = node
        .locks()
        .list_timed(&q.prefix, q.after.as_deref(), limit)
        .await?;
    let next = (page.len() == limit as usize)
        .then(|| page.last().map(|k| k.key.clone()))
        .flatten();
    Ok(Json(ListReply {
        locks: page
            .into_iter()
            .zip(left)
            .map(|(k, left)| KeyJson {
                key: k.key,
                holders: k
                    .holders
                    .into_iter()
                    .map(|h| holding(&access, h, &left))
                    .collect(),
            })
            .collect(),
        next,
        index,
    }))
}

//! HTTP routes of hot upgrade, shadow mode, signed modules and the
//! determinism audit.
//!
//! Each route, its body, answers and errors: the OpenAPI document
//! ([`super::openapi`], rendered in `docs/api.md`), declared on each
//! handler below.
//!
//! The audit report and a snapshot build are answered by the node asked;
//! the other admin routes are forwarded to the leader like the lock routes.
//! Module bodies may be up to `--max-module-bytes` (default
//! [`super::body::DEFAULT_MAX_MODULE`]); a bigger one is refused with 413
//! before anything is proposed.

use std::sync::Arc;

use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lockd_proto::signature::{ModuleKeyReply, ModuleKeys};
use lockd_proto::{AuditReport, Capacity, CapacityStatus, SnapshotBuilt, UpgradeReply};
use serde::Deserialize;

use super::authorize::AdminOutcome;
use super::body::ModuleBody;
use super::error::{ApiError, ErrorBody};
use super::services::Services;
use crate::upgrade::submit::UpgradeError;
use lockd_core::engine::ModuleHash;

/// An upgrade or shadow answer, with what it did for the admin audit
/// trail: the entry's index and module, or (refused before proposing)
/// the module `sent`.
fn audited(result: Result<UpgradeReply, UpgradeError>, sent: Option<ModuleHash>) -> Response {
    let outcome = match &result {
        Ok(r) => AdminOutcome {
            index: Some(r.index),
            module_hash: Some(r.module_hash.clone()),
        },
        Err(UpgradeError::Rejected(r)) => AdminOutcome {
            index: Some(r.index),
            module_hash: Some(r.module_hash.clone()),
        },
        Err(_) => AdminOutcome {
            index: None,
            module_hash: sent.map(|h| h.to_string()),
        },
    };
    let mut response = match result {
        Ok(r) => Json(r).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    };
    response.extensions_mut().insert(outcome);
    response
}
use lockd_core::signature::{ModuleKey, ModuleSignature};

/// Options in the query string.
struct Options {
    replaces: Option<ModuleHash>,
    signature: Option<ModuleSignature>,
    precheck: bool,
}

fn options(uri: &Uri) -> Result<Options, ApiError> {
    let mut o = Options {
        replaces: None,
        signature: None,
        precheck: true,
    };
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "replaces" => {
                o.replaces = Some(ModuleHash::parse(v).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "replaces={v:?} is not a 64-digit hex module hash"
                    ))
                })?)
            }
            "signature" => {
                o.signature = Some(
                    ModuleSignature::parse(v)
                        .map_err(|e| ApiError::bad_request(format!("signature=: {e}")))?,
                )
            }
            "precheck" => {
                o.precheck = match v {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "precheck={v:?}: expected true or false"
                        )))
                    }
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {other:?}"
                )))
            }
        }
    }
    Ok(o)
}

/// Query parameters of an upgrade or a shadow start.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by `options`, which also refuses unknown ones
struct ModuleQuery {
    /// Refuse unless this module (64 hex digits) is the active one.
    replaces: Option<String>,
    /// The module's ed25519 signature, 128 hex digits.
    signature: Option<String>,
    /// Compile and migrate on the leader before proposing (default true).
    precheck: Option<bool>,
}

/// Replace the lock module through the log.
#[utoipa::path(post, path = "/v1/admin/upgrade", tag = "admin", params(ModuleQuery),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "the component's bytes"),
    responses(
        (status = 200, description = "swapped at `index` on every node", body = UpgradeReply),
        (status = 400, description = "not a valid lock module, or a bad query parameter", body = ErrorBody),
        (status = 403, description = "the cluster trusts module keys and this module is not signed by one", body = ErrorBody),
        (status = 409, description = "`replaces` is not the active module", body = ErrorBody),
        (status = 413, description = "bigger than --max-module-bytes", body = ErrorBody),
        (status = 422, description = "the migration fails (with `index` when at apply)", body = ErrorBody),
        (status = 503, description = "no leader, or another upgrade in flight", body = ErrorBody)))]
pub async fn upgrade(
    State(node): State<Arc<Services>>,
    uri: Uri,
    ModuleBody(body): ModuleBody,
) -> Result<Response, ApiError> {
    let o = options(&uri)?;
    let sent = ModuleHash::of(&body);
    let r = node
        .upgrader
        .upgrade(
            body.to_vec(),
            o.replaces,
            o.signature,
            o.precheck,
            lockd_core::signature::SignedFor::Upgrade,
        )
        .await;
    Ok(audited(r, Some(sent)))
}

/// Run a candidate module in shadow beside the active one.
#[utoipa::path(post, path = "/v1/admin/shadow", tag = "admin", params(ModuleQuery),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "the component's bytes"),
    responses(
        (status = 200, description = "the shadow runs from `index`", body = UpgradeReply),
        (status = 400, description = "not a valid lock module, a bad query parameter, or `replaces`", body = ErrorBody),
        (status = 403, description = "not signed by a trusted key", body = ErrorBody),
        (status = 413, description = "bigger than --max-module-bytes", body = ErrorBody),
        (status = 422, description = "the migration fails", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn shadow_start(
    State(node): State<Arc<Services>>,
    uri: Uri,
    ModuleBody(body): ModuleBody,
) -> Result<Response, ApiError> {
    let o = options(&uri)?;
    if o.replaces.is_some() {
        return Err(ApiError::bad_request(
            "replaces= applies to upgrades, not to shadow mode",
        ));
    }
    let sent = ModuleHash::of(&body);
    let r = node
        .upgrader
        .shadow_start(body.to_vec(), o.signature, o.precheck)
        .await;
    Ok(audited(r, Some(sent)))
}

/// Upgrade to the running shadow (with the signature it was started with).
#[utoipa::path(post, path = "/v1/admin/shadow/promote", tag = "admin",
    responses(
        (status = 200, description = "swapped", body = UpgradeReply),
        (status = 404, description = "no shadow runs", body = ErrorBody),
        (status = 422, description = "the migration fails", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn shadow_promote(State(node): State<Arc<Services>>) -> Response {
    audited(node.upgrader.shadow_promote().await, None)
}

/// Stop the shadow.
#[utoipa::path(post, path = "/v1/admin/shadow/abort", tag = "admin",
    responses(
        (status = 200, description = "stopped", body = UpgradeReply),
        (status = 404, description = "no shadow runs", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn shadow_abort(State(node): State<Arc<Services>>) -> Response {
    audited(node.upgrader.shadow_abort().await, None)
}

/// This node's determinism audit points (never forwarded).
#[utoipa::path(get, path = "/v1/audit", tag = "admin",
    responses((status = 200, description = "the state hash at each audit point", body = AuditReport)))]
pub async fn audit(State(node): State<Arc<Services>>) -> Json<AuditReport> {
    Json(node.sm.audit_report())
}

/// The capacity bounds and their use, at the leader's applied index.
/// The capacity bounds and their use.
#[utoipa::path(get, path = "/v1/admin/capacity", tag = "admin",
    responses(
        (status = 200, description = "bounds and use", body = CapacityStatus),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn capacity_get(
    State(node): State<Arc<Services>>,
) -> Result<Json<CapacityStatus>, ApiError> {
    Ok(Json(node.sm.capacity()))
}

/// Change the capacity bounds through the log.
#[utoipa::path(put, path = "/v1/admin/capacity", tag = "admin", request_body = Capacity,
    responses(
        (status = 200, description = "once the entry applied", body = CapacityStatus),
        (status = 400, description = "a bound of 0, or a malformed body", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn capacity_put(
    State(node): State<Arc<Services>>,
    super::body::JsonBody(bounds): super::body::JsonBody<Capacity>,
) -> Result<Json<CapacityStatus>, ApiError> {
    if bounds.max_held == 0 || bounds.max_key_bytes == 0 {
        return Err(ApiError::bad_request(
            "max_held and max_key_bytes must be at least 1",
        ));
    }
    Ok(Json(node.upgrader.set_capacity(bounds).await?))
}

/// The trusted module keys, at the leader's applied index.
/// The trusted module keys.
#[utoipa::path(get, path = "/v1/admin/module-keys", tag = "admin",
    responses(
        (status = 200, description = "hex, in key order", body = ModuleKeys),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn module_keys_get(State(node): State<Arc<Services>>) -> Json<ModuleKeys> {
    Json(ModuleKeys {
        keys: node.sm.module_keys().hex(),
    })
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustKey {
    /// An ed25519 public key, 64 hex digits.
    key: String,
}

fn module_key(text: &str) -> Result<ModuleKey, ApiError> {
    ModuleKey::parse(text).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// A module-key answer, with its index for the admin audit trail.
fn key_change(reply: ModuleKeyReply) -> Response {
    let index = reply.index;
    let mut r = Json(reply).into_response();
    r.extensions_mut().insert(AdminOutcome {
        index: Some(index),
        module_hash: None,
    });
    r
}

/// Trust a module key: from then on every module must be signed.
#[utoipa::path(post, path = "/v1/admin/module-keys", tag = "admin", request_body = TrustKey,
    responses(
        (status = 200, description = "once the entry applied (`already-trusted`: nothing changed)", body = ModuleKeyReply),
        (status = 400, description = "not 64 hex digits or not a usable ed25519 key", body = ErrorBody),
        (status = 409, description = "already 16 keys trusted", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn module_keys_post(
    State(node): State<Arc<Services>>,
    super::body::JsonBody(req): super::body::JsonBody<TrustKey>,
) -> Result<Response, ApiError> {
    let key = module_key(&req.key)?;
    Ok(key_change(node.upgrader.trust_key(key).await?))
}

/// Stop trusting a module key.
#[utoipa::path(delete, path = "/v1/admin/module-keys/{key}", tag = "admin",
    params(("key" = String, Path, description = "the key, 64 hex digits")),
    responses(
        (status = 200, description = "once the entry applied", body = ModuleKeyReply),
        (status = 400, description = "malformed key", body = ErrorBody),
        (status = 404, description = "not trusted", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn module_keys_delete(
    State(node): State<Arc<Services>>,
    axum::Extension(op): axum::Extension<super::op::Op>,
) -> Result<Response, ApiError> {
    let super::op::Op::UntrustKey(key) = op else {
        return Err(ApiError::not_found("not a module key route"));
    };
    let key = module_key(&key)?;
    Ok(key_change(node.upgrader.untrust_key(key).await?))
}

/// How long a requested snapshot may take before the request gives up
/// (the build goes on).
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Build a snapshot on this node now. openraft builds one at a time: a
/// request during a build waits for that build.
/// Build a snapshot of this node's state now and compact its log (never
/// forwarded).
#[utoipa::path(post, path = "/v1/admin/snapshot", tag = "admin",
    responses(
        (status = 200, description = "built", body = SnapshotBuilt),
        (status = 503, description = "raft stopped", body = ErrorBody),
        (status = 504, description = "no snapshot within 300 s", body = ErrorBody)))]
pub async fn snapshot_build(State(node): State<Arc<Services>>) -> Result<Response, ApiError> {
    use axum::http::StatusCode;
    let before = node.sm.snapshot_stats().built;
    node.raft.trigger().snapshot().await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("raft stopped: {e}"),
        )
    })?;
    let deadline = tokio::time::Instant::now() + SNAPSHOT_WAIT;
    loop {
        let s = node.sm.snapshot_stats();
        if s.built > before {
            let mut r = Json(SnapshotBuilt {
                node: node.id,
                index: s.last_index,
                bytes: s.last_bytes,
                build_ms: s.last_build_us / 1000,
            })
            .into_response();
            r.extensions_mut().insert(AdminOutcome {
                index: Some(s.last_index),
                module_hash: None,
            });
            return Ok(r);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!("no snapshot built within {} s", SNAPSHOT_WAIT.as_secs()),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A backup from the leader (for `lockctl snapshot save` and `lockd
/// restore`). A read barrier first (this node leads, and has applied
/// everything committed when the request came), so the snapshot holds
/// every grant acknowledged before it: module, state, token counter,
/// capacity and trusted keys, in the snapshot file's format.
#[utoipa::path(get, path = "/v1/admin/snapshot", tag = "admin",
    responses(
        (status = 200, description = "the snapshot file", content_type = "application/octet-stream", body = Vec<u8>,
            headers(("x-lockd-snapshot-index" = u64, description = "its log index"))),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub async fn snapshot_save(State(node): State<Arc<Services>>) -> Result<Response, ApiError> {
    use crate::service::ServiceError;
    use axum::http::{header, HeaderValue, StatusCode};
    node.raft
        .ensure_linearizable()
        .await
        .map_err(|e| ServiceError::from_raft(node.id, e, |e| e.to_string()))?;
    let sm = node.sm.clone();
    let (index, bytes) = tokio::task::spawn_blocking(move || sm.export())
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot snapshot the state: {e}"),
            )
        })?;
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(
        lockd_client::admin::SNAPSHOT_INDEX_HEADER,
        HeaderValue::from(index),
    );
    r.extensions_mut().insert(AdminOutcome {
        index: Some(index),
        module_hash: None,
    });
    Ok(r)
}

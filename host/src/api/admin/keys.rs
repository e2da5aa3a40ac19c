//! The routes of the trusted module keys: listed, trusted and no longer
//! trusted, each change through the log.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lockd_core::signature::ModuleKey;
use lockd_proto::signature::{ModuleKeyReply, ModuleKeys};
use lockd_proto::ErrorCode;
use serde::Deserialize;

use crate::api::error::{ApiError, ErrorBody};
use crate::api::marks::AdminOutcome;
use crate::api::paths;
use crate::api::services::Services;

/// The trusted module keys, at the leader's applied index.
/// The trusted module keys.
#[utoipa::path(get, path = paths::MODULE_KEYS, tag = "admin",
    responses(
        (status = 200, description = "hex, in key order", body = ModuleKeys),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn module_keys_get(State(node): State<Arc<Services>>) -> Json<ModuleKeys> {
    Json(node.module_keys())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustKey {
    /// An ed25519 public key, 64 hex digits (one that is not a usable
    /// key is refused with 422).
    #[schema(
        pattern = "^[0-9a-fA-F]{64}$",
        example = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    )]
    key: String,
}

fn module_key(text: &str) -> Result<ModuleKey, ApiError> {
    ModuleKey::parse(text).map_err(|e| {
        ApiError::new(ErrorCode::BadModuleKey, e.to_string())
            .with_status(axum::http::StatusCode::BAD_REQUEST)
    })
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
#[utoipa::path(post, path = paths::MODULE_KEYS, tag = "admin", request_body = TrustKey,
    responses(
        (status = 200, description = "once the entry applied (`already-trusted`: nothing changed)", body = ModuleKeyReply),
        (status = 400, description = "not 64 hex digits or not a usable ed25519 key", body = ErrorBody),
        (status = 409, description = "already 16 keys trusted", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn module_keys_post(
    State(node): State<Arc<Services>>,
    crate::api::body::JsonBody(req): crate::api::body::JsonBody<TrustKey>,
) -> Result<Response, ApiError> {
    let key = module_key(&req.key)?;
    Ok(key_change(node.upgrader().trust_key(key).await?))
}

/// Stop trusting a module key.
#[utoipa::path(delete, path = paths::MODULE_KEY, tag = "admin",
    params(("key" = String, Path, description = "the key, 64 hex digits")),
    responses(
        (status = 200, description = "once the entry applied", body = ModuleKeyReply),
        (status = 400, description = "malformed key", body = ErrorBody),
        (status = 404, description = "not trusted", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn module_keys_delete(
    State(node): State<Arc<Services>>,
    axum::Extension(op): axum::Extension<crate::api::op::Op>,
) -> Result<Response, ApiError> {
    let crate::api::op::Op::UntrustKey(key) = op else {
        return Err(ApiError::not_found("not a module key route"));
    };
    let key = module_key(&key)?;
    Ok(key_change(node.upgrader().untrust_key(key).await?))
}

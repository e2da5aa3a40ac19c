//! HTTP routes of hot upgrade, shadow mode and the determinism audit.
//!
//! | route | body | answer |
//! |---|---|---|
//! | `POST /v1/admin/upgrade[?replaces=HEX][&precheck=false]` | the component bytes | `200` [`UpgradeReply`] with the swap's log index; `400` not a valid lock module; `409` stale `replaces`; `422` the migration fails (dry run, or every node at apply: then with `index`) |
//! | `POST /v1/admin/shadow[?precheck=false]` | the component bytes | `200` shadow started at `index`; errors as above |
//! | `POST /v1/admin/shadow/promote` | | upgrade to the running shadow |
//! | `POST /v1/admin/shadow/abort` | | `200` shadow stopped; `404` none running |
//! | `GET /v1/audit` | | this node's [`AuditReport`] (never forwarded) |
//!
//! The admin routes are forwarded to the leader like the lock routes.
//! Module bodies may be up to [`MAX_MODULE`] bytes.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use lockd_client::proto::{AuditReport, UpgradeReply};
use serde_json::json;

use super::forward;
use super::http::ApiError;
use crate::engine::{EngineError, ModuleHash};
use crate::node::Node;
use crate::upgrade::submit::{self, UpgradeError};
use crate::upgrade::MigrateError;

/// The largest module accepted.
pub const MAX_MODULE: usize = 32 << 20;

impl IntoResponse for UpgradeError {
    fn into_response(self) -> Response {
        let status = match &self {
            UpgradeError::NotLeader { .. } | UpgradeError::Unavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            UpgradeError::Refused(MigrateError::Stale { .. }) => StatusCode::CONFLICT,
            UpgradeError::Refused(MigrateError::Load(
                EngineError::NotWasm
                | EngineError::NotAComponent
                | EngineError::Invalid(_)
                | EngineError::HasImports(_)
                | EngineError::WrongWorld(_),
            )) => StatusCode::BAD_REQUEST,
            UpgradeError::Refused(_) | UpgradeError::Rejected(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            UpgradeError::NoShadow => StatusCode::NOT_FOUND,
            UpgradeError::ShadowFailed(_) | UpgradeError::AlreadyActive(_) => StatusCode::CONFLICT,
            UpgradeError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut body = json!({ "error": self.to_string() });
        match &self {
            UpgradeError::NotLeader {
                leader: Some(l), ..
            } => body["leader"] = json!(l),
            UpgradeError::Rejected(reply) => {
                body["index"] = json!(reply.index);
                body["result"] = json!(reply.result);
                body["module_hash"] = json!(reply.module_hash);
                body["reason"] = json!(reply.reason);
            }
            _ => {}
        }
        (status, Json(body)).into_response()
    }
}

fn module_body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    let body = body.map_err(|e| {
        let status = e.status();
        let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("module is over {MAX_MODULE} bytes")
        } else {
            format!("cannot read request body: {e}")
        };
        ApiError(status, msg, None)
    })?;
    if body.is_empty() {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "the request body must be the component's bytes (it is empty)".into(),
            None,
        ));
    }
    Ok(body)
}

/// Options in the query string.
struct Options {
    replaces: Option<ModuleHash>,
    precheck: bool,
}

fn options(uri: &Uri) -> Result<Options, ApiError> {
    let bad = |m: String| ApiError(StatusCode::BAD_REQUEST, m, None);
    let mut o = Options {
        replaces: None,
        precheck: true,
    };
    for pair in uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "replaces" => {
                o.replaces = Some(ModuleHash::parse(v).ok_or_else(|| {
                    bad(format!("replaces={v:?} is not a 64-digit hex module hash"))
                })?)
            }
            "precheck" => {
                o.precheck = match v {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => return Err(bad(format!("precheck={v:?}: expected true or false"))),
                }
            }
            other => return Err(bad(format!("unknown query parameter {other:?}"))),
        }
    }
    Ok(o)
}

fn reply(r: Result<UpgradeReply, UpgradeError>) -> Response {
    match r {
        Ok(r) => Json(r).into_response(),
        Err(e) => e.into_response(),
    }
}

pub async fn upgrade(
    State(node): State<Arc<Node>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = module_body(body)?;
    let o = options(&uri)?;
    if let Some(leader) = forward::target(&node, &headers) {
        return forward::forward(&node, leader, Method::POST, &uri, body).await;
    }
    Ok(reply(
        submit::upgrade(&node, body.to_vec(), o.replaces, o.precheck).await,
    ))
}

pub async fn shadow_start(
    State(node): State<Arc<Node>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = module_body(body)?;
    let o = options(&uri)?;
    if o.replaces.is_some() {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "replaces= applies to upgrades, not to shadow mode".into(),
            None,
        ));
    }
    if let Some(leader) = forward::target(&node, &headers) {
        return forward::forward(&node, leader, Method::POST, &uri, body).await;
    }
    Ok(reply(
        submit::shadow_start(&node, body.to_vec(), o.precheck).await,
    ))
}

pub async fn shadow_promote(
    State(node): State<Arc<Node>>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(leader) = forward::target(&node, &headers) {
        return forward::forward(&node, leader, Method::POST, &uri, Bytes::new()).await;
    }
    Ok(reply(submit::shadow_promote(&node).await))
}

pub async fn shadow_abort(
    State(node): State<Arc<Node>>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(leader) = forward::target(&node, &headers) {
        return forward::forward(&node, leader, Method::POST, &uri, Bytes::new()).await;
    }
    Ok(reply(submit::shadow_abort(&node).await))
}

pub async fn audit(State(node): State<Arc<Node>>) -> Json<AuditReport> {
    Json(node.sm.audit_report())
}

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
//!
//! # Layout
//!
//! * this module: upgrades and shadow modules (a module's bytes in, an
//!   entry proposed), and the query options they share.
//! * `keys`: the trusted module keys.
//! * `state`: the audit report, the capacity bounds, and snapshots built
//!   or saved on request.
//!
//! The handlers of each are re-exported here, so a route names
//! `admin::<handler>` wherever it lives.

mod keys;
mod state;

pub use keys::*;
pub use state::*;

use std::sync::Arc;

use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lockd_proto::UpgradeReply;

use super::body::ModuleBody;
use super::error::{ApiError, ErrorBody};
use super::marks::AdminOutcome;
use super::paths;
use super::services::Services;
use crate::modules::submit::{How, UpgradeError};
use lockd_core::engine::ModuleHash;
use lockd_core::way_back::OnModuleFailure;

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
use lockd_core::signature::ModuleSignature;

/// Options in the query string.
struct Options {
    replaces: Option<ModuleHash>,
    signature: Option<ModuleSignature>,
    precheck: bool,
    how: How,
}

/// `true`/`1` or `false`/`0`.
fn flag(name: &str, v: &str) -> Result<bool, ApiError> {
    match v {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "{name}={v:?}: expected true or false"
        ))),
    }
}

fn options(uri: &Uri) -> Result<Options, ApiError> {
    let mut o = Options {
        replaces: None,
        signature: None,
        precheck: true,
        how: How::default(),
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
            "precheck" => o.precheck = flag(k, v)?,
            "rollback" => o.how.rollback = flag(k, v)?,
            "quorum" => o.how.quorum = flag(k, v)?,
            "on_failure" => {
                o.how.on_failure = OnModuleFailure::parse(v).ok_or_else(|| {
                    ApiError::bad_request(format!("on_failure={v:?}: expected refuse or rollback"))
                })?
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
    /// Upgrades only: let the module in whatever its version (an older or
    /// equal one, or none); default false.
    rollback: Option<bool>,
    /// Upgrades only: when the module goes out of service, `refuse` the
    /// kinds of command it fails on (default) or `rollback` to the module
    /// it replaces.
    on_failure: Option<OnModuleFailure>,
    /// Upgrades only: enact the module once a majority of voters accepted
    /// it at the pre-check, even if a voter refused it (default false: a
    /// refusal blocks it). A voter that cannot run it then stops before
    /// the swap until it can.
    quorum: Option<bool>,
}

/// Query parameters of a rollback.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by `options`, which also refuses unknown ones
struct RollbackQuery {
    /// Migrate back on the leader before proposing (default true).
    precheck: Option<bool>,
}

/// Replace the lock module through the log.
#[utoipa::path(post, path = paths::UPGRADE, tag = "admin", params(ModuleQuery),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "the component's bytes"),
    responses(
        (status = 200, description = "swapped at `index` on every node", body = UpgradeReply),
        (status = 400, description = "not a valid lock module, or a bad query parameter", body = ErrorBody),
        (status = 403, description = "the cluster trusts module keys and this module is not signed by one", body = ErrorBody),
        (status = 409, description = "`replaces` is not the active module (`stale_module`), the module's version is not above the active one's and `rollback` is not set (`module_not_newer`), or a voter refused it at the pre-check (`precheck_refused`, with `verdicts`)", body = ErrorBody),
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
        .upgrader()
        .upgrade(
            body.to_vec(),
            o.replaces,
            o.signature,
            o.precheck,
            lockd_core::signature::SignedFor::Upgrade,
            o.how,
        )
        .await;
    Ok(audited(r, Some(sent)))
}

/// Return to the module the active one replaced (docs/writing-a-lock-module.md,
/// "Versions and the way back").
#[utoipa::path(post, path = paths::ROLLBACK, tag = "admin", params(RollbackQuery),
    responses(
        (status = 200, description = "swapped back at `index` on every node", body = UpgradeReply),
        (status = 400, description = "a bad query parameter", body = ErrorBody),
        (status = 403, description = "module keys are trusted: sign the previous module and upgrade to it with `rollback=true` instead (`bad_signature`)", body = ErrorBody),
        (status = 404, description = "no previous module (`no_previous_module`)", body = ErrorBody),
        (status = 409, description = "a voter refused it at the pre-check (`precheck_refused`, with `verdicts`)", body = ErrorBody),
        (status = 422, description = "the migration back fails (with `index` when at apply)", body = ErrorBody),
        (status = 503, description = "no leader, or another upgrade in flight", body = ErrorBody)))]
pub async fn rollback(State(node): State<Arc<Services>>, uri: Uri) -> Result<Response, ApiError> {
    let o = options(&uri)?;
    if o.replaces.is_some()
        || o.signature.is_some()
        || o.how.rollback
        || o.how.on_failure != OnModuleFailure::Refuse
        || o.how.quorum
    {
        return Err(ApiError::bad_request(
            "a rollback takes only precheck=: it returns to the recorded previous module",
        ));
    }
    Ok(audited(node.upgrader().rollback(o.precheck).await, None))
}

/// Run a candidate module in shadow beside the active one.
#[utoipa::path(post, path = paths::SHADOW, tag = "admin", params(ModuleQuery),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "the component's bytes"),
    responses(
        (status = 200, description = "the shadow runs from `index`", body = UpgradeReply),
        (status = 400, description = "not a valid lock module, a bad query parameter, or `replaces`", body = ErrorBody),
        (status = 403, description = "not signed by a trusted key", body = ErrorBody),
        (status = 409, description = "a voter refused it at the pre-check (`precheck_refused`, with `verdicts`)", body = ErrorBody),
        (status = 413, description = "bigger than --max-module-bytes", body = ErrorBody),
        (status = 422, description = "the migration fails", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn shadow_start(
    State(node): State<Arc<Services>>,
    uri: Uri,
    ModuleBody(body): ModuleBody,
) -> Result<Response, ApiError> {
    let o = options(&uri)?;
    if o.replaces.is_some()
        || o.how.rollback
        || o.how.on_failure != OnModuleFailure::Refuse
        || o.how.quorum
    {
        return Err(ApiError::bad_request(
            "replaces=, rollback=, on_failure= and quorum= apply to upgrades, not to shadow mode",
        ));
    }
    let sent = ModuleHash::of(&body);
    let r = node
        .upgrader()
        .shadow_start(body.to_vec(), o.signature, o.precheck)
        .await;
    Ok(audited(r, Some(sent)))
}

/// Upgrade to the running shadow (with the signature it was started with).
#[utoipa::path(post, path = paths::SHADOW_PROMOTE, tag = "admin",
    responses(
        (status = 200, description = "swapped", body = UpgradeReply),
        (status = 404, description = "no shadow runs", body = ErrorBody),
        (status = 422, description = "the migration fails", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn shadow_promote(State(node): State<Arc<Services>>) -> Response {
    audited(node.upgrader().shadow_promote().await, None)
}

/// Stop the shadow.
#[utoipa::path(post, path = paths::SHADOW_ABORT, tag = "admin",
    responses(
        (status = 200, description = "stopped", body = UpgradeReply),
        (status = 404, description = "no shadow runs", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn shadow_abort(State(node): State<Arc<Services>>) -> Response {
    audited(node.upgrader().shadow_abort().await, None)
}

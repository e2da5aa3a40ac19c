//! The routes of this node's replicated state for operators: the
//! determinism audit, the capacity bounds, and snapshots built or saved on
//! request.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use lockd_proto::{AuditReport, Capacity, CapacityStatus, SnapshotBuilt};

use crate::api::error::{ApiError, ErrorBody};
use crate::api::marks::AdminOutcome;
use crate::api::paths;
use crate::api::services::Services;

/// This node's determinism audit points (never forwarded).
#[utoipa::path(get, path = paths::AUDIT, tag = "admin",
    responses((status = 200, description = "the state hash at each audit point", body = AuditReport)))]
pub async fn audit(State(node): State<Arc<Services>>) -> Json<AuditReport> {
    Json(node.audit_report())
}

/// The capacity bounds and their use, at the leader's applied index.
/// The capacity bounds and their use.
#[utoipa::path(get, path = paths::CAPACITY, tag = "admin",
    responses(
        (status = 200, description = "bounds and use", body = CapacityStatus),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn capacity_get(
    State(node): State<Arc<Services>>,
) -> Result<Json<CapacityStatus>, ApiError> {
    Ok(Json(node.capacity()))
}

/// Change the capacity bounds through the log.
#[utoipa::path(put, path = paths::CAPACITY, tag = "admin", request_body = Capacity,
    responses(
        (status = 200, description = "once the entry applied", body = CapacityStatus),
        (status = 400, description = "a bound of 0, or a malformed body", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn capacity_put(
    State(node): State<Arc<Services>>,
    crate::api::body::JsonBody(bounds): crate::api::body::JsonBody<Capacity>,
) -> Result<Json<CapacityStatus>, ApiError> {
    if bounds.max_held == 0 || bounds.max_key_bytes == 0 {
        return Err(ApiError::bad_request(
            "max_held and max_key_bytes must be at least 1",
        ));
    }
    Ok(Json(node.upgrader().set_capacity(bounds).await?))
}

/// How long a requested snapshot may take before the request gives up
/// (the build goes on).
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Build a snapshot on this node now. openraft builds one at a time: a
/// request during a build waits for that build.
/// Build a snapshot of this node's state now and compact its log (never
/// forwarded).
#[utoipa::path(post, path = paths::SNAPSHOT, tag = "admin",
    responses(
        (status = 200, description = "built", body = SnapshotBuilt),
        (status = 503, description = "raft stopped", body = ErrorBody),
        (status = 504, description = "no snapshot within 300 s", body = ErrorBody)))]
pub(crate) async fn snapshot_build(
    State(node): State<Arc<Services>>,
) -> Result<Response, ApiError> {
    let built = node.build_snapshot(SNAPSHOT_WAIT).await?;
    let index = built.index;
    let mut r = Json(built).into_response();
    r.extensions_mut().insert(AdminOutcome {
        index: Some(index),
        module_hash: None,
    });
    Ok(r)
}

/// A backup from the leader (for `lockctl snapshot save` and `lockd
/// restore`). A read barrier first (this node leads, and has applied
/// everything committed when the request came), so the snapshot holds
/// every grant acknowledged before it: module, state, token counter,
/// capacity and trusted keys, in the snapshot file's format.
#[utoipa::path(get, path = paths::SNAPSHOT, tag = "admin",
    responses(
        (status = 200, description = "the snapshot file", content_type = "application/octet-stream", body = Vec<u8>,
            headers(("x-lockd-snapshot-index" = u64, description = "its log index"))),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub(crate) async fn snapshot_save(State(node): State<Arc<Services>>) -> Result<Response, ApiError> {
    let (index, bytes) = node.export_snapshot().await?;
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(lockd_proto::SNAPSHOT_INDEX_HEADER, HeaderValue::from(index));
    r.extensions_mut().insert(AdminOutcome {
        index: Some(index),
        module_hash: None,
    });
    Ok(r)
}

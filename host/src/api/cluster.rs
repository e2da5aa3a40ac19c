//! HTTP routes of the cluster: this node's status, the members and their
//! changes, who the caller is, and the web console.

use std::sync::Arc;

use axum::extract::State;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::body::JsonBody;
use super::error::{ApiError, ErrorBody};
use super::services::Services;
use super::status::{status_of, Member, Status};
use crate::raft::members;

/// This node's status: its role, indices, module, audit and capacity.
#[utoipa::path(get, path = "/v1/status", tag = "cluster",
    responses((status = 200, description = "the node's status (never forwarded)", body = Status)))]
pub async fn status(State(node): State<Arc<Services>>) -> Json<Status> {
    Json(status_of(&node))
}

/// The web console: one page, compiled into the binary (no CDN, nothing
/// fetched at run time but this node's own API).
#[utoipa::path(get, path = "/ui", tag = "cluster",
    responses((status = 200, description = "the web console, one self-contained page", content_type = "text/html", body = String)))]
pub async fn console() -> axum::response::Html<&'static str> {
    axum::response::Html(include_str!("../../ui/console.html"))
}

/// Who this node takes the caller for.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WhoAmI {
    /// `""` when authentication is off.
    principal: String,
    /// Whether the caller may use the admin routes (true when
    /// authentication is off).
    admin: bool,
}

#[utoipa::path(get, path = "/v1/whoami", tag = "cluster",
    responses((status = 200, description = "the caller's principal", body = WhoAmI)))]
pub async fn whoami(Extension(access): Extension<crate::auth::Access>) -> Json<WhoAmI> {
    Json(WhoAmI {
        principal: access.principal,
        admin: access.admin,
    })
}

/// The members, as this node knows them.
#[utoipa::path(get, path = "/v1/members", tag = "cluster",
    responses((status = 200, description = "every member, voter or learner", body = Vec<Member>)))]
pub async fn members_list(State(node): State<Arc<Services>>) -> Json<Vec<Member>> {
    Json(members(&node.raft))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    id: u64,
    /// The address its peers reach it at (its `--advertise-addr`).
    addr: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberId {
    id: u64,
}

/// Add a learner, after checking its wasm engine, its node id and its
/// cluster.
#[utoipa::path(post, path = "/v1/members/add", tag = "cluster", request_body = AddMember,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 502, description = "the node refused (another engine, id or cluster) or did not answer", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn members_add(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<AddMember>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.add_learner(req.id, &req.addr).await?;
    Ok(Json(members(&node.raft)))
}

/// Make a learner a voter (one of another engine implementation only once
/// the audit saw its state equal to the others').
#[utoipa::path(post, path = "/v1/members/promote", tag = "cluster", request_body = MemberId,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 404, description = "not a member", body = ErrorBody),
        (status = 409, description = "not a learner, not yet audited, or its state diverged", body = ErrorBody),
        (status = 502, description = "its audit report could not be read", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn members_promote(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.promote(req.id).await?;
    Ok(Json(members(&node.raft)))
}

/// Remove a voter or a learner.
#[utoipa::path(post, path = "/v1/members/remove", tag = "cluster", request_body = MemberId,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 404, description = "not a member", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub async fn members_remove(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    node.membership.remove(req.id).await?;
    Ok(Json(members(&node.raft)))
}

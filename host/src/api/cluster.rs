//! HTTP routes of the cluster: this node's status, the members and their
//! changes, who the caller is, and the web console.

use std::sync::Arc;

use axum::extract::State;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::body::JsonBody;
use super::error::{ApiError, ErrorBody};
use super::paths;
use super::services::Services;
use super::status::{Member, Status};

/// This node's status: its role, indices, module, audit and capacity.
#[utoipa::path(get, path = paths::STATUS, tag = "cluster",
    responses((status = 200, description = "the node's status (never forwarded)", body = Status)))]
pub async fn status(State(node): State<Arc<Services>>) -> Json<Status> {
    Json(node.status())
}

/// The web console: one page, compiled into the binary (no CDN, nothing
/// fetched at run time but this node's own API).
#[utoipa::path(get, path = paths::UI, tag = "cluster",
    responses((status = 200, description = "the web console, one self-contained page", content_type = "text/html", body = String)))]
pub async fn console() -> impl axum::response::IntoResponse {
    use axum::http::header;
    (
        [
            (header::CONTENT_SECURITY_POLICY, console_csp()),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        axum::response::Html(CONSOLE),
    )
}

const CONSOLE: &str = include_str!("../../ui/console.html");

/// The console's Content-Security-Policy: nothing but its own inline
/// script and style (named by their hashes, so no injected script or
/// style runs), requests to any node (it reads every member's
/// readiness), and never inside a frame (`frame-ancestors 'none'`: no
/// other site can overlay it to trick an admin into a click).
fn console_csp() -> &'static str {
    static CSP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSP.get_or_init(|| {
        format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self' http: https:; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            inline_hashes(CONSOLE, "script"),
            inline_hashes(CONSOLE, "style")
        )
    })
}

/// `'sha256-…'` of every inline `<tag>` element's text in `page`.
fn inline_hashes(page: &str, tag: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start + open.len()..];
        let Some(end) = body.find(&close) else { break };
        let digest = sha2::Sha256::digest(&body.as_bytes()[..end]);
        out.push(format!(
            "'sha256-{}'",
            base64::engine::general_purpose::STANDARD.encode(digest)
        ));
        rest = &body[end..];
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_console_policy_names_its_one_script_and_style_and_forbids_frames() {
        let csp = super::console_csp();
        assert_eq!(csp.matches("'sha256-").count(), 2, "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        // No markup style attribute would be allowed by it.
        assert!(!super::CONSOLE.contains(" style=\""));
    }
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

#[utoipa::path(get, path = paths::WHOAMI, tag = "cluster",
    responses((status = 200, description = "the caller's principal", body = WhoAmI)))]
pub async fn whoami(Extension(access): Extension<crate::auth::Access>) -> Json<WhoAmI> {
    Json(WhoAmI {
        principal: access.principal,
        admin: access.admin,
    })
}

/// The members, as this node knows them.
#[utoipa::path(get, path = paths::MEMBERS, tag = "cluster",
    responses((status = 200, description = "every member, voter or learner", body = Vec<Member>)))]
pub(crate) async fn members_list(State(node): State<Arc<Services>>) -> Json<Vec<Member>> {
    Json(node.members())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddMember {
    id: u64,
    /// The address its peers reach it at (its `--advertise-addr`): HOST:PORT
    /// with a port from 1 to 65535; anything else is refused (400,
    /// `bad_address`) before it is dialled.
    #[schema(pattern = "^[^\\s/]+:[0-9]{1,5}$", example = "127.0.0.1:7404")]
    addr: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemberId {
    id: u64,
}

/// Add a learner, after checking its wasm engine, its node id and its
/// cluster.
#[utoipa::path(post, path = paths::MEMBERS_ADD, tag = "cluster", request_body = AddMember,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body, or an address that is not HOST:PORT", body = ErrorBody),
        (status = 422, description = "the node at that address refused (another engine, id or cluster) or is not lockd", body = ErrorBody),
        (status = 502, description = "nothing answered at that address", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody),
        (status = 504, description = "the learner did not catch up within 20 s (the change may have committed; add again to wait more)", body = ErrorBody)))]
pub(crate) async fn members_add(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<AddMember>,
) -> Result<Json<Vec<Member>>, ApiError> {
    Ok(Json(node.add_learner(req.id, &req.addr).await?))
}

/// Make a learner a voter (one of another engine implementation only once
/// the audit saw its state equal to the others').
#[utoipa::path(post, path = paths::MEMBERS_PROMOTE, tag = "cluster", request_body = MemberId,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 404, description = "not a member", body = ErrorBody),
        (status = 409, description = "not a learner, not yet audited, or its state diverged", body = ErrorBody),
        (status = 502, description = "its audit report could not be read", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn members_promote(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    Ok(Json(node.promote(req.id).await?))
}

/// Remove a voter or a learner.
#[utoipa::path(post, path = paths::MEMBERS_REMOVE, tag = "cluster", request_body = MemberId,
    responses(
        (status = 200, description = "the members after", body = Vec<Member>),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 404, description = "not a member", body = ErrorBody),
        (status = 409, description = "the only voter", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn members_remove(
    State(node): State<Arc<Services>>,
    JsonBody(req): JsonBody<MemberId>,
) -> Result<Json<Vec<Member>>, ApiError> {
    Ok(Json(node.remove_member(req.id).await?))
}

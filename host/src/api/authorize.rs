//! The HTTP API's authorisation layer, outside every route (so a route
//! cannot be added without it): who the caller is (bearer token, client
//! certificate, or a member node forwarding for a principal), what the
//! route does ([`crate::auth::action::of_http`]), and whether the rules
//! allow it. A refusal is 401 (no credentials this node accepts, with
//! `WWW-Authenticate: Bearer`) or 403, and is logged with the principal
//! and its roles. An allowed request carries its [`Access`] to the
//! handler, which records the principal in grants and binds releases and
//! keepalives to it.
//!
//! Every admin request that this node served (not one it passed on to the
//! leader) goes to the admin audit trail: a log line and the recent
//! admin actions in `/v1/status` ([`crate::auth::trail`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use lockd_client::proto::AdminAction;

use super::error::ApiError;
use super::services::Services;
use crate::auth::{action, Access, Action, Denied, Principal, PRINCIPAL_HEADER};
use crate::transport::listener::Caller;

/// What an admin handler did, for the audit trail: set on its response.
#[derive(Clone, Debug, Default)]
pub struct AdminOutcome {
    pub index: Option<u64>,
    pub module_hash: Option<String>,
}

/// Set by the forwarding layer on an answer that came from the leader:
/// the leader recorded the action, this node only passed it on.
#[derive(Clone, Copy, Debug)]
pub struct Forwarded;

/// The bearer token of `headers`, if any.
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, Denied> {
    let Some(v) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let v = v.to_str().map_err(|_| {
        Denied::Unauthenticated("the Authorization header is not visible ASCII".into())
    })?;
    match v.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(Some(token.trim()))
        }
        _ => Err(Denied::Unauthenticated(
            "the Authorization header must be `Bearer <token>`".into(),
        )),
    }
}

/// Who is calling, from the connection and the headers.
fn principal(node: &Services, caller: &Caller, headers: &HeaderMap) -> Result<Principal, Denied> {
    let token = bearer(headers)?;
    let forwarded = match headers.get(PRINCIPAL_HEADER) {
        Some(v) => {
            let bad =
                || Denied::Forbidden(format!("{PRINCIPAL_HEADER} is not a percent-encoded name"));
            let text = v.to_str().map_err(|_| bad())?;
            let name = percent_encoding::percent_decode_str(text)
                .decode_utf8()
                .map_err(|_| bad())?;
            Some(name.into_owned())
        }
        None => None,
    };
    let identity = caller.identity();
    let member = identity
        .and_then(|i| i.node_id())
        .filter(|id| node.is_member(*id) == Some(true));
    node.auth.authenticate(
        token,
        identity.and_then(|i| i.principal()),
        member,
        forwarded.as_deref(),
    )
}

fn refusal(denied: Denied) -> Response {
    match denied {
        Denied::Unauthenticated(m) => {
            let mut r = ApiError::new(StatusCode::UNAUTHORIZED, m).into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"lockd\""),
            );
            r
        }
        Denied::Forbidden(m) => ApiError::new(StatusCode::FORBIDDEN, m).into_response(),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The layer.
pub async fn authorize(
    State(node): State<Arc<Services>>,
    Extension(caller): Extension<Caller>,
    mut req: Request,
    next: Next,
) -> Response {
    let action = action::of_http(req.method().as_str(), req.uri().path(), req.uri().query());
    let who = principal(&node, &caller, req.headers());
    let access = who.clone().and_then(|p| node.auth.check(&p, &action));
    let what = format!("{} {}", req.method(), req.uri().path());
    let access = match access {
        Ok(a) => a,
        Err(denied) => {
            let (name, roles) = match &who {
                Ok(p) => (p.name(), node.auth.roles_of(p)),
                Err(_) => (String::new(), String::new()),
            };
            tracing::warn!(id = node.id, peer = %caller.addr, principal = %name, %roles, request = %what, why = %denied, "refused a request");
            return refusal(denied);
        }
    };
    req.extensions_mut().insert(access.clone());
    let response = next.run(req).await;
    if action == Action::Admin && response.extensions().get::<Forwarded>().is_none() {
        record(&node, &access, what, &response);
    }
    response
}

/// One admin action served here, to the log and the status trail.
fn record(node: &Services, access: &Access, what: String, response: &Response) {
    let outcome = response
        .extensions()
        .get::<AdminOutcome>()
        .cloned()
        .unwrap_or_default();
    let a = AdminAction {
        at_ms: now_ms(),
        principal: access.principal.clone(),
        action: what,
        status: response.status().as_u16(),
        index: outcome.index,
        module_hash: outcome.module_hash,
    };
    tracing::info!(
        id = node.id,
        principal = %a.principal,
        action = %a.action,
        status = a.status,
        index = ?a.index,
        module = a.module_hash.as_deref().unwrap_or(""),
        "admin action"
    );
    node.admin_log.push(a);
}

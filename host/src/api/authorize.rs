//! The HTTP API's authorisation layer, outside every route (so a route
//! cannot be added without it): who the caller is (bearer token, client
//! certificate, or a member node forwarding for a principal), what the
//! request asks for ([`super::parse::parse_found`], the one reading of its method,
//! path and query), and whether the rules allow it. A refusal is 401 (no
//! credentials this node accepts, with `WWW-Authenticate: Bearer`) or 403,
//! and is logged with the principal and its roles. A request whose route
//! is malformed is answered 400, and one naming no route 404, once the
//! caller is authenticated: neither reaches a handler. A request sent to
//! a name that is not this node's is refused first, once its connection
//! is settled ([`super::hosts`]); a cross-site or untyped request that
//! would change state is refused ([`super::origin`]). An allowed request
//! carries its [`Op`] and its [`Access`] to the handler, which records
//! the principal in grants and binds releases and keepalives to it.
//!
//! Every admin request that this node served (not one it passed on to the
//! leader) goes to the admin audit trail: a log line and the recent
//! admin actions in `/v1/status` ([`crate::auth::trail`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use lockd_proto::AdminAction;
use lockd_proto::ErrorCode;

use super::error::ApiError;
use super::marks::{AdminOutcome, Received};
use super::op::Op;
use super::parse;
use super::services::{Refusal, Services};
use crate::auth::{Access, Action, Denied, Principal, PRINCIPAL_HEADER};
use crate::transport::limits::Slot;
use crate::transport::listener::Caller;

/// The header a node puts on a request it forwards to the leader, naming
/// itself; only a member may send it.
pub(crate) const FORWARDED: &str = "x-lockd-forwarded";

/// Set by the forwarding layer on an answer that came from the leader:
/// the leader recorded the action, this node only passed it on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forwarded;

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

/// Who is calling, from the connection and the headers. A principal
/// named by a forwarding node is believed only from a member node's
/// certificate, on a request that node says it forwards (its own id in
/// `x-lockd-forwarded`) to a route that is forwarded (`leader_route`).
fn principal(
    node: &Services,
    caller: &Caller,
    headers: &HeaderMap,
    leader_route: bool,
) -> Result<Principal, Denied> {
    let token = bearer(headers)?;
    let identity = caller.identity();
    // Checked per request: a kept-alive connection outlives a certificate.
    if identity.is_some_and(|i| !i.valid_now()) {
        return Err(Denied::Unauthenticated(
            "the client certificate has expired".into(),
        ));
    }
    let member = node.member_of(identity);
    let forwarded = match headers.get(PRINCIPAL_HEADER) {
        Some(_) if token.is_some() => {
            return Err(Denied::Unauthenticated(format!(
                "a request carries a bearer token or {PRINCIPAL_HEADER}, not both"
            )))
        }
        Some(_) if !leader_route => {
            return Err(Denied::Forbidden(format!(
                "{PRINCIPAL_HEADER} is accepted only on the routes nodes forward to the leader"
            )))
        }
        Some(_) if member.is_none_or(|id| !forwarded_by(headers, id)) => {
            return Err(Denied::Forbidden(format!(
                "{PRINCIPAL_HEADER} is accepted only from a member node's certificate, on a request it forwards"
            )))
        }
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
    node.authenticate(token, identity, member, forwarded.as_deref())
}

/// Whether the request says node `id` forwards it.
fn forwarded_by(headers: &HeaderMap, id: u64) -> bool {
    headers
        .get(FORWARDED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == id.to_string())
}

fn refusal(denied: Denied) -> Response {
    match denied {
        Denied::Unauthenticated(m) => {
            let mut r = ApiError::new(ErrorCode::Unauthenticated, m).into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"lockd\""),
            );
            r
        }
        Denied::Forbidden(m) => ApiError::new(ErrorCode::Forbidden, m).into_response(),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The layer.
pub(crate) async fn authorize(
    State(node): State<Arc<Services>>,
    Extension(caller): Extension<Caller>,
    mut req: Request,
    next: Next,
) -> Response {
    // Where the request's `receive` stage starts (telemetry::stages).
    let received = Received(std::time::Instant::now());
    // The route, looked up once for the parse and the forwarding rule.
    let found = super::routes::find(req.uri().path());
    let parsed = parse::parse_found(found, req.method(), req.uri());
    let action = match &parsed {
        Ok(op) => op.action(),
        // Malformed: nothing is decided on it but who the caller is.
        Err(_) => Action::Any,
    };
    let leader_route = super::routes::leader_answers(found, req.method());
    let who = principal(&node, &caller, req.headers(), leader_route);
    // The connection's place: out of the opening budget with its first
    // request, and out of the unauthenticated one with a valid credential
    // (crate::transport::limits).
    if let Some(slot) = req.extensions().get::<Arc<Slot>>() {
        if let Err(why) = slot.settle(node.is_authenticated(&who)) {
            tracing::warn!(id = node.id(), peer = %caller.addr, %why, "refused an HTTP connection");
            return refused(why);
        }
    }
    let what = format!("{} {}", req.method(), req.uri().path());
    // Before any rule is asked: a rebound page learns nothing, not even
    // whether it would need a credential.
    let misdirected = super::hosts::refusal(
        node.allowed_hosts(),
        node.auth_is_on(),
        req.method(),
        req.uri(),
        req.headers(),
    );
    if let Some(refused) = misdirected {
        tracing::warn!(id = node.id(), peer = %caller.addr, request = %what, why = %refused.message, "refused a request for a name that is not this node's");
        return refused.into_response();
    }
    let access = match node.authorize(&who, &action) {
        Ok(a) => a,
        Err(Refusal {
            denied,
            principal: name,
            roles,
        }) => {
            tracing::warn!(id = node.id(), peer = %caller.addr, principal = %name, %roles, request = %what, why = %denied, "refused a request");
            return refusal(denied);
        }
    };
    let op = match parsed {
        Ok(Op::Unknown(why)) => return ApiError::not_found(why).into_response(),
        Ok(op) => op,
        Err(e) => return e.into_response(),
    };
    if let Some(refused) = super::origin::refusal(req.method(), req.headers(), &op) {
        tracing::warn!(id = node.id(), peer = %caller.addr, request = %what, why = %refused.message, "refused a cross-site or untyped request");
        return refused.into_response();
    }
    // A stream checks its caller again while it runs (a watch only: no
    // other request pays for the copy of its headers).
    if matches!(op, Op::Watch(_)) {
        let (node, caller, headers) = (node.clone(), caller.clone(), req.headers().clone());
        let again = action.clone();
        req.extensions_mut()
            .insert(super::reauth::Reauth(Arc::new(move || {
                let who = principal(&node, &caller, &headers, leader_route);
                node.authorize(&who, &again)
                    .map(|_| ())
                    .map_err(|r| r.denied.to_string())
            })));
    }
    req.extensions_mut().insert(op);
    req.extensions_mut().insert(received);
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
        id = node.id(),
        principal = %a.principal,
        action = %a.action,
        status = a.status,
        index = ?a.index,
        module = a.module_hash.as_deref().unwrap_or(""),
        "admin action"
    );
    node.record_admin(a);
}

/// The answer to a request whose connection's budget is full: 503 with
/// the reason and `Retry-After`, and the connection closed after it.
fn refused(why: String) -> axum::response::Response {
    use axum::response::IntoResponse;
    // `Retry-After` comes with the code (`ErrorCode::retry_soon`).
    let mut r = ApiError::new(ErrorCode::Overloaded, why).into_response();
    r.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    r
}

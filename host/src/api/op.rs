//! What an HTTP request asks for, parsed once ([`parse`]): the one reading
//! of a request's method, path and query that authorisation and the
//! handlers share, by what the route table ([`super::routes`]) says its
//! method asks. The authorisation layer parses every request into an
//! [`Op`], decides on [`Op::action`] and hands the same [`Op`] to the
//! handler as an extension; no handler reads its path again. A request the
//! parser does not recognise never reaches a handler (404), and one that
//! names a route with a parameter spelled other than canonically is
//! answered 400 before any handler runs (docs/security.md, "Paths").
//!
//! Canonical lock paths (`/v1/locks/{key}` and its actions): the path is
//! split into segments on `/` before decoding; an empty segment (`//`, a
//! trailing `/`), a segment that decodes to `.` or `..`, a `%` not
//! followed by two hex digits, or a key that is not UTF-8 once decoded is
//! a 400. A key holding such segments sends its slashes as `%2F`. The
//! action is the last raw segment, spelled exactly (`acquire`, `release`,
//! `keepalive`), or the last two (`holders/T`), where the token `T` is
//! ASCII digits without sign or leading zeros, at most `u64::MAX`.

use axum::extract::Query;
use axum::http::{Method, Uri};
use axum::routing::MethodFilter;

use super::error::ApiError;
use super::routes::{self, Asks, Route};
use crate::auth::Action;
use lockd_proto::ErrorCode;

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Health checks, the console page and the API document.
    Public,
    /// Who the caller is.
    WhoAmI,
    /// Status, members, metrics, audit, and the policy, capacity and
    /// module-key reads.
    Read,
    /// A page of held keys.
    List(ListQuery),
    /// The changes under a prefix, as they are applied.
    Watch(WatchQuery),
    /// A lock route.
    Lock(LockOp),
    /// A session route.
    Session(SessionOp),
    /// An admin route without path parameters (its body and query are its
    /// handler's: admin is needed whatever they say).
    Admin,
    /// `DELETE /v1/admin/module-keys/{key}`: the key as sent.
    UntrustKey(String),
    /// No such route (404 once the caller is known, with the reason).
    Unknown(String),
}

/// A lock route: which key, and what to do with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockOp {
    pub key: String,
    pub verb: Verb,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Who holds it.
    Get,
    Acquire,
    Release,
    Keepalive,
    /// Replace the holding's value.
    Proclaim,
    /// End the holding with this token (admin).
    ForceRelease(u64),
}

/// A session route: `POST /v1/sessions` (open), `GET`, `DELETE` (close)
/// and `POST .../keepalive` of `/v1/sessions/{id}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionOp {
    Open,
    Get(u64),
    Keepalive(u64),
    Close(u64),
}

impl Op {
    /// What the rules must allow for it.
    pub fn action(&self) -> Action {
        match self {
            Op::Public => Action::Public,
            Op::WhoAmI | Op::Unknown(_) => Action::Any,
            Op::Read => Action::Read,
            Op::List(q) => Action::List(q.prefix.clone()),
            // Whoever may list a prefix may follow it.
            Op::Watch(q) => Action::List(q.prefix.clone()),
            Op::Lock(l) => match l.verb {
                Verb::Get => Action::ReadKey(l.key.clone()),
                Verb::Acquire | Verb::Release | Verb::Keepalive | Verb::Proclaim => {
                    Action::Lock(l.key.clone())
                }
                Verb::ForceRelease(_) => Action::Admin,
            },
            Op::Session(_) => Action::Session,
            Op::Admin | Op::UntrustKey(_) => Action::Admin,
        }
    }
}

/// Parse a request: find its route ([`routes::find`]), then read it by
/// what its method asks. `Err`: it names a route, but not canonically
/// (400), or with a method the route does not serve (405).
pub fn parse(method: &Method, uri: &Uri) -> Result<Op, ApiError> {
    let path = uri.path();
    match routes::find(path) {
        None => Ok(unknown(method, path)),
        Some((route, None)) => fixed(route, method, uri),
        // A route with parameters is read by its parser, which reads the
        // method too: every method of the route asks the same (a unit test).
        Some((route, Some(rest))) => match route.methods.first().map(|s| s.asks) {
            Some(Asks::Lock) => lock(method, rest).map(Op::Lock),
            Some(Asks::Session) => session(method, rest).map(Op::Session),
            Some(Asks::UntrustKey) => untrust(method, path, rest),
            _ => Ok(unknown(method, path)),
        },
    }
}

/// A request for a path without parameters.
fn fixed(route: &Route, method: &Method, uri: &Uri) -> Result<Op, ApiError> {
    let asks = match route.serving(method) {
        Some(s) => s.asks,
        // Any write to an admin route asks for admin: only an admin
        // learns which it serves (the router's 405).
        None if !is_read(method) && admin_writes(route) => Asks::Admin,
        None => return Err(not_allowed(method, route.path)),
    };
    Ok(match asks {
        Asks::Public => Op::Public,
        Asks::WhoAmI => Op::WhoAmI,
        Asks::Read => Op::Read,
        Asks::Admin => Op::Admin,
        Asks::Open => Op::Session(SessionOp::Open),
        Asks::List => {
            let Query(q) = Query::<ListQuery>::try_from_uri(uri)
                .map_err(|e| ApiError::bad_request(e.body_text()))?;
            Op::List(q)
        }
        Asks::Watch => {
            let Query(q) = Query::<WatchQuery>::try_from_uri(uri)
                .map_err(|e| ApiError::bad_request(e.body_text()))?;
            if q.from == Some(0) {
                return Err(ApiError::bad_request(
                    "from: a log index, at least 1 (omit it to watch from now)",
                ));
            }
            Op::Watch(q)
        }
        // What a route with parameters asks (a unit test keeps them there).
        Asks::Lock | Asks::Session | Asks::UntrustKey => unknown(method, uri.path()),
    })
}

fn is_read(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// Whether a method other than GET the route serves asks for admin.
fn admin_writes(route: &Route) -> bool {
    route
        .methods
        .iter()
        .any(|s| s.asks == Asks::Admin && s.method != MethodFilter::GET)
}

/// A trusted-key route's path after its fixed beginning: one key.
fn untrust(method: &Method, path: &str, key: &str) -> Result<Op, ApiError> {
    if key.is_empty() || key.contains('/') {
        return Ok(unknown(method, path));
    }
    if method != Method::DELETE {
        return Err(not_allowed(method, path));
    }
    Ok(Op::UntrustKey(decode(key)?))
}

fn unknown(method: &Method, path: &str) -> Op {
    Op::Unknown(format!("no such route: {method} {path}"))
}

fn not_allowed(method: &Method, path: &str) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{method} is not a method of {path}"),
    )
}

/// A lock route's path after `/v1/locks/`.
fn lock(method: &Method, rest: &str) -> Result<LockOp, ApiError> {
    let segments: Vec<&str> = rest.split('/').collect();
    let n = segments.len();
    let last = segments[n - 1];
    let (verb, used) = match *method {
        Method::GET | Method::HEAD => (Verb::Get, 0),
        Method::POST => match last {
            "acquire" => (Verb::Acquire, 1),
            "release" => (Verb::Release, 1),
            "keepalive" => (Verb::Keepalive, 1),
            "proclaim" => (Verb::Proclaim, 1),
            other => {
                return Err(ApiError::not_found(format!(
                "unknown lock action {other:?}; expected acquire, release, keepalive or proclaim"
            )))
            }
        },
        Method::DELETE if n >= 2 && segments[n - 2] == "holders" => {
            (Verb::ForceRelease(token(last)?), 2)
        }
        Method::DELETE => {
            return Err(ApiError::not_found(
                "expected DELETE /v1/locks/{key}/holders/{token}",
            ))
        }
        _ => return Err(not_allowed(method, "the lock routes")),
    };
    let key = &segments[..n - used];
    if key.is_empty() || key == [""] {
        return Err(crate::service::ServiceError::EmptyKey.into());
    }
    // Every refusal of the key's path is the key's: `invalid_key`.
    let bad_key = |e: ApiError| ApiError::new(ErrorCode::InvalidKey, e.message);
    for s in key {
        if s.is_empty() {
            return Err(bad_key(ApiError::bad_request(
                "an empty path segment (`//` or a trailing `/`); send a key's empty segments with their slashes as %2F",
            )));
        }
        let d = decode(s).map_err(bad_key)?;
        if d == "." || d == ".." {
            return Err(bad_key(ApiError::bad_request(format!(
                "a {d:?} path segment; send a key's dot segments with their slashes as %2F"
            ))));
        }
    }
    Ok(LockOp {
        key: decode(&key.join("/")).map_err(bad_key)?,
        verb,
    })
}

/// A session route's path after `/v1/sessions/`: `ID` or `ID/keepalive`.
fn session(method: &Method, rest: &str) -> Result<SessionOp, ApiError> {
    let (raw, action) = match rest.split_once('/') {
        Some((id, a)) => (id, Some(a)),
        None => (rest, None),
    };
    // The method and action first: a method a path does not take is 405
    // whatever the id says.
    let make: fn(u64) -> SessionOp = match (method.clone(), action) {
        (Method::GET | Method::HEAD, None) => SessionOp::Get,
        (Method::DELETE, None) => SessionOp::Close,
        (Method::POST, Some("keepalive")) => SessionOp::Keepalive,
        (_, None | Some("keepalive")) => return Err(not_allowed(method, "this session route")),
        (_, Some(a)) => {
            return Err(ApiError::not_found(format!(
                "unknown session action {a:?}; expected keepalive"
            )))
        }
    };
    let id = token(raw).map_err(|_| {
        ApiError::bad_request(format!(
            "session id {raw:?}: ASCII digits, without sign or leading zeros"
        ))
    })?;
    Ok(make(id))
}

/// A fencing token in a path: ASCII digits, no sign, no leading zero.
pub fn token(raw: &str) -> Result<u64, ApiError> {
    let canonical = !raw.is_empty()
        && raw.bytes().all(|b| b.is_ascii_digit())
        && (raw == "0" || !raw.starts_with('0'));
    let bad = || {
        ApiError::bad_request(format!(
            "token {raw:?}: a token is written in ASCII digits, without sign or leading zeros"
        ))
    };
    if !canonical {
        return Err(bad());
    }
    raw.parse::<u64>().map_err(|_| bad())
}

/// Percent-decode a path part, strictly: every `%` starts two hex digits,
/// and the result is UTF-8.
fn decode(raw: &str) -> Result<String, ApiError> {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return Err(ApiError::bad_request(
                    "a `%` in the path is not followed by two hex digits",
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ApiError::bad_request(crate::service::ServiceError::KeyNotUtf8.to_string()))
}

/// The query of `GET /v1/locks`: one page of the held keys.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only keys that start with it.
    #[serde(default)]
    pub prefix: String,
    /// Only keys after it (the `next` of the page before).
    pub after: Option<String>,
    /// At most this many keys (default 100, at most 1000).
    pub limit: Option<u32>,
}

/// `GET /v1/watch`'s query.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WatchQuery {
    /// Only keys that start with it (empty or absent: every key).
    #[serde(default)]
    pub prefix: String,
    /// The first log index wanted (at least 1); absent: the next entry
    /// applied (or, on a reconnect, one past the `Last-Event-ID` header).
    #[param(minimum = 1)]
    pub from: Option<u64>,
}

#[cfg(test)]
mod tests;

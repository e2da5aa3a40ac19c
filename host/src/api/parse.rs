//! Parsing a request into its [`Op`] ([`parse`]): find its route in the
//! table ([`super::routes`]), then read it by what its method asks.
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
use super::op::{ListQuery, LockOp, Op, SessionOp, Verb, WatchQuery};
use super::routes::{Asks, Found, Route};
use lockd_proto::ErrorCode;

/// [`parse_found`] after finding the route (the tests' way in).
#[cfg(test)]
pub fn parse(method: &Method, uri: &Uri) -> Result<Op, ApiError> {
    parse_found(super::routes::find(uri.path()), method, uri)
}

/// Parse a request whose route `found` is ([`super::routes::find`]; the
/// authorisation layer looks it up once for this and for
/// [`super::routes::leader_answers`]): read it by what its method asks. `Err`: it
/// names a route, but not canonically (400), or with a method the route
/// does not serve (405).
pub fn parse_found(found: Found, method: &Method, uri: &Uri) -> Result<Op, ApiError> {
    let path = uri.path();
    match found {
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

#[cfg(test)]
mod tests;

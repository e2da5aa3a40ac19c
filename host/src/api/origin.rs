//! Requests a browser was made to send from another site (CSRF), refused
//! before authorisation: a browser that holds a client certificate, or
//! that the console's token was typed into, must not change anything for
//! a page of another origin.
//!
//! A request that can change state (any method but GET, HEAD, OPTIONS):
//!
//! * is refused (403) when its `Sec-Fetch-Site` is `cross-site` or
//!   `same-site`, or when it carries an `Origin` that is not this node's
//!   own (the `Host` it was sent to): browsers send both on such
//!   requests, other clients send neither;
//! * with a body, must say what the body is (415 otherwise):
//!   `application/json`, or for a module `application/wasm` (or
//!   `application/octet-stream`). The types a page may send another
//!   site without asking first (forms, `text/plain`) are never taken.
//!
//! A page that made its own name resolve to the node (DNS rebinding) is
//! of the node's origin to the browser: [`super::hosts`] refuses it by
//! the name it sends in `Host`.

use axum::http::{header, HeaderMap, Method};
use lockd_proto::ErrorCode;

use super::error::ApiError;
use super::op::Op;

/// Whether `method` may change state (any method but GET, HEAD, OPTIONS).
pub(crate) fn may_change_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Why `method` with `headers` is refused as cross-site or untyped.
pub fn refusal(method: &Method, headers: &HeaderMap, op: &Op) -> Option<ApiError> {
    if !may_change_state(method) {
        return None;
    }
    let forbidden = |m: String| Some(ApiError::new(ErrorCode::Forbidden, m));
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("");
        if !matches!(site, "same-origin" | "none") {
            return forbidden(format!(
                "a {site:?} request from a browser (Sec-Fetch-Site) may not change anything"
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .is_some_and(|(scheme, authority)| {
                matches!(scheme, "http" | "https") && Some(authority) == host
            });
        if !same {
            return forbidden(format!(
                "Origin {:?} is not this node's ({}); a page of another site may not change anything",
                String::from_utf8_lossy(origin.as_bytes()),
                host.unwrap_or("no Host")
            ));
        }
    }
    if !has_body(headers) {
        return None;
    }
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    let module_route = matches!(op, Op::Admin);
    let fits = match kind.as_deref() {
        Some("application/json") => true,
        Some("application/wasm" | "application/octet-stream") => module_route,
        _ => false,
    };
    (!fits).then(|| {
        ApiError::new(
            ErrorCode::BadContentType,
            format!(
                "a request body needs Content-Type: application/json{} (got {})",
                if module_route {
                    " or application/wasm"
                } else {
                    ""
                },
                kind.as_deref().unwrap_or("none")
            ),
        )
    })
}

/// Whether the request says it has a body.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, StatusCode};

    fn with(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn cross_site_and_untyped_bodies_are_refused() {
        let post = Method::POST;
        let json = [
            ("content-length", "2"),
            ("content-type", "application/json"),
        ];
        assert!(refusal(&post, &with(&json), &Op::Admin).is_none());
        let same = [
            ("content-length", "2"),
            ("content-type", "application/json"),
            ("host", "n1:7400"),
            ("origin", "http://n1:7400"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert!(refusal(&post, &with(&same), &Op::Admin).is_none());
        let other = [("origin", "https://evil.example"), ("host", "n1:7400")];
        assert_eq!(
            refusal(&post, &with(&other), &Op::Admin).map(|e| e.status),
            Some(StatusCode::FORBIDDEN)
        );
        let null = [("origin", "null"), ("host", "n1:7400")];
        assert!(refusal(&post, &with(&null), &Op::Admin).is_some());
        let site = [("sec-fetch-site", "cross-site")];
        assert!(refusal(&Method::DELETE, &with(&site), &Op::Admin).is_some());
        // A read is never refused for it.
        assert!(refusal(&Method::GET, &with(&site), &Op::Read).is_none());
        // A form's body, or a body of no type.
        let form = [
            ("content-length", "9"),
            ("content-type", "application/x-www-form-urlencoded"),
        ];
        assert_eq!(
            refusal(&post, &with(&form), &Op::Admin).map(|e| e.status),
            Some(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert!(refusal(&post, &with(&[("content-length", "9")]), &Op::Admin).is_some());
        let text = [
            ("transfer-encoding", "chunked"),
            ("content-type", "text/plain"),
        ];
        assert!(refusal(&post, &with(&text), &Op::Admin).is_some());
        // A module is a module route's only.
        let wasm = [
            ("content-length", "9"),
            ("content-type", "application/wasm"),
        ];
        assert!(refusal(&post, &with(&wasm), &Op::Admin).is_none());
        let lock = Op::Lock(super::super::op::LockOp {
            key: "k".into(),
            verb: super::super::op::Verb::Release,
        });
        assert!(refusal(&post, &with(&wasm), &lock).is_some());
        // No body: nothing to type.
        assert!(refusal(&post, &with(&[("content-length", "0")]), &lock).is_none());
    }
}

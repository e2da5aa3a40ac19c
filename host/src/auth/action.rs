//! What a request does, in the terms the rules speak ([`Action`]): one
//! table for every HTTP route and every native request, so a route
//! cannot be added without saying who may call it.

use lockd_client::proto::ClientRequest;

/// What a request does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Needs no credentials: the health checks.
    Public,
    /// Any authenticated principal (an unknown route, answered 404 once
    /// the caller is known).
    Any,
    /// Status, members, metrics, audit, policy and capacity reads.
    Read,
    /// Who holds a key.
    ReadKey(String),
    /// Held keys under a prefix.
    List(String),
    /// Acquire, release or keepalive on a key.
    Lock(String),
    /// Upgrade, shadow, membership, snapshot, force release, policy and
    /// capacity changes, trusted module keys.
    Admin,
}

impl Action {
    /// How the log line of a refusal names it.
    pub fn describe(&self) -> String {
        match self {
            Action::Public => "a public route".into(),
            Action::Any => "this route".into(),
            Action::Read => "reads (role read)".into(),
            Action::ReadKey(k) => format!("reading key {k:?}"),
            Action::List(p) => format!("listing prefix {p:?}"),
            Action::Lock(k) => format!("locking key {k:?}"),
            Action::Admin => "admin actions (role admin)".into(),
        }
    }
}

/// A lock route's path after `/v1/locks/`, percent-decoded: the key and
/// the action (`acquire`, `release`, `keepalive`, or `holders/T` after
/// the key). Keys may hold `/`, so the action is what follows the last
/// `/` (`/holders/` for a force release). The one place that splits it:
/// the authorisation layer and the handlers agree on the key.
pub fn split_lock_path(path: &str) -> Option<(&str, &str)> {
    if let Some((key, token)) = path.rsplit_once("/holders/") {
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            return Some((key, "holders"));
        }
    }
    path.rsplit_once('/')
}

/// Percent-decode a path segment as the router does; `None` when it is not
/// UTF-8 (the handler then answers 400 with the reason).
fn decode(raw: &str) -> Option<String> {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// The value of `name` in a query string, percent-decoded.
fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| decode(&v.replace('+', " ")))
}

/// The action of an HTTP request.
pub fn of_http(method: &str, path: &str, query: Option<&str>) -> Action {
    let is_get = method == "GET" || method == "HEAD";
    if let Some(rest) = path.strip_prefix("/v1/locks/") {
        let Some(decoded) = decode(rest) else {
            return Action::Any;
        };
        return match (method, split_lock_path(&decoded)) {
            ("POST", Some((key, "acquire" | "release" | "keepalive"))) => {
                Action::Lock(key.to_string())
            }
            ("DELETE", Some((_, "holders"))) => Action::Admin,
            (m, _) if m == "GET" || m == "HEAD" => Action::ReadKey(decoded),
            _ => Action::Any,
        };
    }
    match path {
        "/healthz" | "/readyz" | "/ui" | "/v1/openapi.json" if is_get => Action::Public,
        "/v1/whoami" if is_get => Action::Any,
        "/v1/locks" if is_get => Action::List(query_value(query, "prefix").unwrap_or_default()),
        "/v1/status" | "/v1/members" | "/metrics" | "/v1/audit" if is_get => Action::Read,
        "/v1/admin/policy" | "/v1/admin/capacity" | "/v1/admin/module-keys" if is_get => {
            Action::Read
        }
        p if p.starts_with("/v1/admin/") || p.starts_with("/v1/members/") => Action::Admin,
        _ => Action::Any,
    }
}

/// The action of a native request.
pub fn of_native(req: &ClientRequest) -> Action {
    let key = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    match req {
        ClientRequest::Acquire { key: k, .. }
        | ClientRequest::Release { key: k, .. }
        | ClientRequest::Keepalive { key: k, .. } => Action::Lock(key(k)),
        ClientRequest::AcquireWith(a) => Action::Lock(key(&a.key)),
        ClientRequest::Get { key: k } | ClientRequest::Holders { key: k } => {
            Action::ReadKey(key(k))
        }
        ClientRequest::List { prefix, .. } => Action::List(key(prefix)),
        ClientRequest::Status => Action::Read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_an_action() {
        let lock = |k: &str| Action::Lock(k.into());
        assert_eq!(
            of_http("POST", "/v1/locks/jobs/a/acquire", None),
            lock("jobs/a")
        );
        assert_eq!(
            of_http("POST", "/v1/locks/jobs%2Fa/release", None),
            lock("jobs/a")
        );
        assert_eq!(of_http("POST", "/v1/locks/x/keepalive", None), lock("x"));
        assert_eq!(of_http("POST", "/v1/locks/x/other", None), Action::Any);
        assert_eq!(
            of_http("GET", "/v1/locks/jobs/a", None),
            Action::ReadKey("jobs/a".into())
        );
        assert_eq!(
            of_http("DELETE", "/v1/locks/jobs/a/holders/7", None),
            Action::Admin
        );
        assert_eq!(
            of_http("GET", "/v1/locks", Some("after=b&prefix=jobs%2F")),
            Action::List("jobs/".into())
        );
        assert_eq!(
            of_http("GET", "/v1/locks", None),
            Action::List(String::new())
        );
        for p in [
            "/v1/status",
            "/v1/members",
            "/metrics",
            "/v1/audit",
            "/v1/admin/policy",
        ] {
            assert_eq!(of_http("GET", p, None), Action::Read, "{p}");
        }
        for (m, p) in [
            ("PUT", "/v1/admin/policy"),
            ("PUT", "/v1/admin/capacity"),
            ("POST", "/v1/admin/upgrade"),
            ("POST", "/v1/admin/shadow/promote"),
            ("POST", "/v1/admin/snapshot"),
            ("POST", "/v1/members/add"),
            ("POST", "/v1/admin/module-keys"),
            ("DELETE", "/v1/admin/module-keys/ab"),
        ] {
            assert_eq!(of_http(m, p, None), Action::Admin, "{m} {p}");
        }
        assert_eq!(of_http("GET", "/nowhere", None), Action::Any);
        assert_eq!(of_http("GET", "/readyz", None), Action::Public);
        assert_eq!(of_http("POST", "/healthz", None), Action::Any);
        assert_eq!(of_http("GET", "/ui", None), Action::Public);
        assert_eq!(of_http("GET", "/v1/openapi.json", None), Action::Public);
        assert_eq!(of_http("GET", "/v1/whoami", None), Action::Any);
        // Not UTF-8 once decoded: the handler says why, to a known caller.
        assert_eq!(of_http("GET", "/v1/locks/%ff", None), Action::Any);
    }

    #[test]
    fn a_key_ending_in_a_holders_segment_is_still_a_key() {
        assert_eq!(split_lock_path("a/holders/12"), Some(("a", "holders")));
        assert_eq!(
            split_lock_path("a/holders/x/acquire"),
            Some(("a/holders/x", "acquire"))
        );
        assert_eq!(split_lock_path("a/b/release"), Some(("a/b", "release")));
        assert_eq!(split_lock_path("nokey"), None);
    }
}

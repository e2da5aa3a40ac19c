//! Requests sent to a name that is not this node's, refused (421, code
//! `unknown_host`): the defence against DNS rebinding.
//!
//! A web page on a name its author controls can make that name resolve
//! to 127.0.0.1 (or any address the browser reaches) and then call the
//! node as its own origin: to the browser it is one origin, so neither
//! CORS nor the cross-site check ([`super::origin`]) stops it. What it
//! cannot change is the `Host` the browser sends: the page's name.
//!
//! A node answers to any IP literal (a rebinding always goes through a
//! name), `localhost`, the hosts of its advertised and listen addresses,
//! and the names of `--allowed-hosts`: by the host part only (the port
//! ignored), case-insensitive, a trailing dot ignored, an IPv6 literal in
//! brackets. A request without `Host` (HTTP/1.0; browsers always send
//! one) is taken. Which requests are checked:
//!
//! * with authentication off, every request: a rebound page needs no
//!   credential, and could read the locks as well as take them;
//! * with it on, a browser's request (one carrying `Origin` or a
//!   `Sec-Fetch-*` header) that can change state: a page has no
//!   credential of its own, but a browser must not be made to act under
//!   a name that is not the node's, whatever it would present.

use std::net::IpAddr;

use axum::http::{header, HeaderMap, Method, Uri};
use lockd_proto::ErrorCode;

use super::error::ApiError;

/// The names a node answers to besides IP literals and `localhost`:
/// lower case, without a trailing dot.
#[derive(Clone, Debug, Default)]
pub struct AllowedHosts {
    names: Vec<String>,
}

impl AllowedHosts {
    /// The hosts of `addrs` (the node's advertised and listen addresses,
    /// HOST:PORT) and the names of `extra` (`--allowed-hosts`).
    pub fn new<'a>(addrs: impl IntoIterator<Item = &'a str>, extra: &'a [String]) -> AllowedHosts {
        let mut names: Vec<String> = addrs
            .into_iter()
            .chain(extra.iter().map(String::as_str))
            .filter_map(host_of)
            .filter(|h| h.parse::<IpAddr>().is_err() && h != "localhost")
            .collect();
        names.sort();
        names.dedup();
        AllowedHosts { names }
    }

    /// Whether `authority` (a `Host` header, HOST[:PORT]) names this node.
    pub fn accepts(&self, authority: &str) -> bool {
        host_of(authority).is_some_and(|h| {
            h.parse::<IpAddr>().is_ok() || h == "localhost" || self.names.contains(&h)
        })
    }
}

/// `authority` (HOST[:PORT], `[V6]:PORT`) split: its host (lower case,
/// without brackets or a trailing dot) and whether it names a port.
/// `None` when it is not one.
fn split(authority: &str) -> Option<(String, bool)> {
    // A bare IPv6 literal: not the URI form, but no name either.
    if authority.parse::<std::net::Ipv6Addr>().is_ok() {
        return Some((authority.to_ascii_lowercase(), false));
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => {
            let (v6, after) = rest.split_once(']')?;
            v6.parse::<std::net::Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':')?),
            };
            return port_ok(port).then(|| (v6.to_ascii_lowercase(), port.is_some()));
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    let name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    (port_ok(port) && !host.is_empty() && host.chars().all(name))
        .then(|| (host.to_ascii_lowercase(), port.is_some()))
}

/// A port as an authority may give it: up to five digits (RFC 3986 lets
/// it be empty).
fn port_ok(port: Option<&str>) -> bool {
    port.is_none_or(|p| p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit()))
}

/// The host part of `authority`, as compared: the one reading of a
/// `Host`, of the node's own addresses and of `--allowed-hosts`.
pub(crate) fn host_of(authority: &str) -> Option<String> {
    split(authority.trim()).map(|(host, _)| host)
}

/// One `--allowed-hosts` list (comma-separated names, no ports) read:
/// each name as compared, or why one is not a name.
pub(crate) fn allowed_list(list: &str) -> Result<Vec<String>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| match split(n) {
            Some((host, false)) => Ok(host),
            _ => Err(format!(
                "{n:?} is not a host name (such as lockd.example: no scheme, no port)"
            )),
        })
        .collect()
}

/// Why a request is refused for the name it was sent to, if it is.
pub fn refusal(
    hosts: &AllowedHosts,
    auth_on: bool,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Option<ApiError> {
    if auth_on && !(super::origin::may_change_state(method) && from_browser(headers)) {
        return None;
    }
    let mut given = headers.get_all(header::HOST).iter();
    let named = given.next().map(|h| {
        h.to_str()
            .map_err(|_| String::from_utf8_lossy(h.as_bytes()))
    });
    let twice = given.next().is_some();
    // The target's authority, when the request line has one (the
    // absolute form), is what a server takes over `Host`: both must fit.
    let target = uri.authority().map(|a| a.as_str());
    let refused = match (named, target) {
        (Some(Err(bad)), _) => bad.into_owned(),
        (_, Some(t)) if !hosts.accepts(t) => t.to_string(),
        (Some(Ok(h)), _) if !hosts.accepts(h) => h.to_string(),
        // Two are malformed, and the second may be foreign.
        (Some(Ok(_)), _) if twice => {
            return Some(misdirected(
                "a request names one Host, not several (HTTP/1.1)".into(),
            ))
        }
        _ => return None,
    };
    Some(misdirected(message(&refused, auth_on)))
}

fn misdirected(message: String) -> ApiError {
    ApiError::new(ErrorCode::UnknownHost, message)
}

/// Whether a browser sent the request: only browsers send `Origin` and
/// the `Sec-Fetch-*` headers.
fn from_browser(headers: &HeaderMap) -> bool {
    headers.contains_key(header::ORIGIN)
        || headers.keys().any(|k| k.as_str().starts_with("sec-fetch-"))
}

/// What the caller is told: the name refused, why, and how to allow it.
fn message(refused: &str, auth_on: bool) -> String {
    let how = match host_of(refused) {
        Some(h) => format!("to reach the node as {h}, start it with --allowed-hosts {h}"),
        None => "it is not HOST[:PORT]".into(),
    };
    format!(
        "{}Host {refused:?} is not a name of this node (an IP address, localhost, its advertised or listen address, or a name of --allowed-hosts): refused, as a web page whose name was made to resolve to this node (DNS rebinding) would be; {how}",
        if auth_on {
            "a browser's request that can change state must name this node: "
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests;

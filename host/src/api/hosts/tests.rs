//! The Host rule: which names are a node's, and which requests it checks.

use axum::http::{HeaderValue, StatusCode};

use super::*;

/// A node advertised as `n1.internal:7400`, bound to `0.0.0.0:7400`, that
/// also answers to `lockd.example`.
fn node() -> AllowedHosts {
    AllowedHosts::new(
        ["n1.internal:7400", "0.0.0.0:7400"],
        &allowed_list("lockd.example").expect("a name"),
    )
}

fn with(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_static(v));
    }
    h
}

fn path() -> Uri {
    Uri::from_static("/v1/locks/x/acquire")
}

#[test]
fn ip_literals_localhost_and_the_nodes_names_are_accepted() {
    let n = node();
    for ok in [
        "127.0.0.1",
        "127.0.0.1:7400",
        "127.0.0.1.:7400",
        "10.1.2.3:1",
        "[::1]",
        "[::1]:7400",
        "[0:0:0:0:0:0:0:1]:80",
        "[FE80::1]:7400",
        "::1",
        "localhost",
        "localhost:7400",
        "LocalHost.:7400",
        "localhost:",
        "n1.internal:7400",
        // Another port: the host part is what is compared.
        "n1.internal:9999",
        "N1.Internal.",
        "lockd.example",
        "LOCKD.EXAMPLE.:443",
        "  lockd.example:7400 ",
    ] {
        assert!(n.accepts(ok), "{ok:?} refused");
    }
}

#[test]
fn other_names_and_malformed_hosts_are_refused() {
    let n = node();
    for bad in [
        "r.example",
        "r.example:7400",
        "R.EXAMPLE.:7400",
        // A name that only starts or ends like the node's.
        "n1.internal.r.example",
        "n1",
        "example",
        "localhost.r.example:7400",
        "127.0.0.1.r.example",
        "lockd.example.evil",
        // Not HOST[:PORT].
        "",
        ":7400",
        "r.example:port",
        "r.example:123456",
        "[::1",
        "[::1]7400",
        "[r.example]:7400",
        "user@127.0.0.1:7400",
        "127.0.0.1/x",
        "127.0.0.1:7400:7400",
        "fe80::1%eth0",
        "..",
    ] {
        assert!(!n.accepts(bad), "{bad:?} accepted");
    }
    // Without --allowed-hosts, only the node's own names.
    let plain = AllowedHosts::new(["127.0.0.1:7400"], &[]);
    assert!(!plain.accepts("lockd.example"));
    assert!(plain.accepts("127.0.0.1:7400"));
}

#[test]
fn allowed_hosts_are_names_without_ports() {
    assert_eq!(
        allowed_list(" a.example, B.Example.,,c ").expect("names"),
        ["a.example", "b.example", "c"]
    );
    assert_eq!(allowed_list("").expect("none"), Vec::<String>::new());
    for bad in [
        "a.example:7400",
        "http://a.example",
        "a example",
        "*.example",
    ] {
        let e = allowed_list(bad).expect_err(bad);
        assert!(e.contains(bad) && e.contains("no port"), "{e}");
    }
}

#[test]
fn without_authentication_every_request_is_checked() {
    let n = node();
    let rebound = [
        ("host", "r.example:7400"),
        ("origin", "http://r.example:7400"),
        ("sec-fetch-site", "same-origin"),
    ];
    let e = refusal(&n, false, &Method::POST, &path(), &with(&rebound)).expect("refused");
    assert_eq!(e.status, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(e.code, ErrorCode::UnknownHost);
    assert!(
        e.message.contains("\"r.example:7400\"") && e.message.contains("--allowed-hosts r.example"),
        "{}",
        e.message
    );
    // A read by a plain client too: the page could read the locks.
    let get = with(&[("host", "r.example")]);
    assert!(refusal(&n, false, &Method::GET, &path(), &get).is_some());
    // The node's names, and no Host at all (HTTP/1.0).
    for host in ["127.0.0.1:7400", "localhost:7400", "n1.internal:7400"] {
        let h = with(&[("host", host), ("origin", "http://x")]);
        assert!(refusal(&n, false, &Method::POST, &path(), &h).is_none());
    }
    assert!(refusal(&n, false, &Method::POST, &path(), &HeaderMap::new()).is_none());
    // Two Hosts, or one that is not text.
    let two = with(&[("host", "127.0.0.1"), ("host", "r.example")]);
    let e = refusal(&n, false, &Method::GET, &path(), &two).expect("refused");
    assert_eq!(e.code, ErrorCode::UnknownHost);
    let mut binary = HeaderMap::new();
    binary.insert(
        header::HOST,
        HeaderValue::from_bytes(b"r\xffexample").expect("a header"),
    );
    assert!(refusal(&n, false, &Method::GET, &path(), &binary).is_some());
    // A request line in the absolute form names the host a server takes.
    let absolute = Uri::from_static("http://r.example:7400/v1/locks");
    let local = with(&[("host", "127.0.0.1:7400")]);
    assert!(refusal(&n, false, &Method::GET, &absolute, &local).is_some());
    let absolute = Uri::from_static("http://127.0.0.1:7400/v1/locks");
    assert!(refusal(&n, false, &Method::GET, &absolute, &local).is_none());
}

#[test]
fn with_authentication_a_browsers_state_changing_request_is_checked() {
    let n = node();
    let post = Method::POST;
    // A browser's: Origin, or any Sec-Fetch-* header.
    for browser in [
        [
            ("host", "r.example:7400"),
            ("origin", "http://r.example:7400"),
        ],
        [("host", "r.example:7400"), ("sec-fetch-mode", "cors")],
    ] {
        let e = refusal(&n, true, &post, &path(), &with(&browser)).expect("refused");
        assert_eq!(e.status, StatusCode::MISDIRECTED_REQUEST);
        assert!(e.message.contains("browser"), "{}", e.message);
        assert!(refusal(&n, true, &Method::DELETE, &path(), &with(&browser)).is_some());
        // A read is authorised as any other.
        assert!(refusal(&n, true, &Method::GET, &path(), &with(&browser)).is_none());
    }
    // Another client (no browser headers) may name any host: its
    // credential is what counts.
    let client = with(&[("host", "r.example:7400"), ("authorization", "Bearer t")]);
    assert!(refusal(&n, true, &post, &path(), &client).is_none());
    let own = with(&[("host", "[::1]:7400"), ("origin", "http://[::1]:7400")]);
    assert!(refusal(&n, true, &post, &path(), &own).is_none());
}

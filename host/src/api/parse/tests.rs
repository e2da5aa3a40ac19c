//! The route parser: every route has its action, and the parameters have
//! exactly one accepted spelling.

use super::*;
use crate::auth::Action;

fn at(method: &str, uri: &str) -> Result<Op, u16> {
    let m: Method = method.parse().expect("method");
    let u: Uri = uri.parse().expect("uri");
    parse(&m, &u).map_err(|e| e.status.as_u16())
}

fn lock(key: &str, verb: Verb) -> Result<Op, u16> {
    Ok(Op::Lock(LockOp {
        key: key.into(),
        verb,
    }))
}

#[test]
fn every_route_has_its_action() {
    assert_eq!(
        at("POST", "/v1/locks/jobs/a/acquire"),
        lock("jobs/a", Verb::Acquire)
    );
    assert_eq!(
        at("POST", "/v1/locks/jobs%2Fa/release"),
        lock("jobs/a", Verb::Release)
    );
    assert_eq!(
        at("POST", "/v1/locks/x/keepalive"),
        lock("x", Verb::Keepalive)
    );
    assert_eq!(at("POST", "/v1/locks/x/other"), Err(404));
    assert_eq!(at("GET", "/v1/locks/jobs/a"), lock("jobs/a", Verb::Get));
    assert_eq!(
        at("DELETE", "/v1/locks/jobs/a/holders/7"),
        lock("jobs/a", Verb::ForceRelease(7))
    );
    let list = at("GET", "/v1/locks?after=b&prefix=jobs%2F").map(|o| o.action());
    assert_eq!(list, Ok(Action::List("jobs/".into())));
    assert_eq!(
        at("GET", "/v1/locks").map(|o| o.action()),
        Ok(Action::List(String::new()))
    );
    for p in [
        "/v1/status",
        "/v1/members",
        "/metrics",
        "/v1/audit",
        "/v1/admin/policy",
    ] {
        assert_eq!(at("GET", p), Ok(Op::Read), "{p}");
    }
    for (m, p) in [
        ("PUT", "/v1/admin/policy"),
        ("PUT", "/v1/admin/capacity"),
        ("POST", "/v1/admin/upgrade"),
        ("POST", "/v1/admin/shadow/promote"),
        ("POST", "/v1/admin/snapshot"),
        ("GET", "/v1/admin/snapshot"),
        ("POST", "/v1/members/add"),
        ("POST", "/v1/admin/module-keys"),
        ("DELETE", "/v1/admin/module-keys/ab"),
    ] {
        assert_eq!(at(m, p).map(|o| o.action()), Ok(Action::Admin), "{m} {p}");
    }
    assert!(matches!(at("GET", "/nowhere"), Ok(Op::Unknown(_))));
    assert_eq!(at("GET", "/readyz"), Ok(Op::Public));
    assert_eq!(at("POST", "/healthz"), Err(405));
    assert_eq!(at("GET", "/ui"), Ok(Op::Public));
    assert_eq!(at("GET", "/v1/openapi.json"), Ok(Op::Public));
    assert_eq!(at("GET", "/v1/whoami"), Ok(Op::WhoAmI));
    assert_eq!(at("GET", "/v1/locks/%ff"), Err(400));
}

#[test]
fn a_force_release_takes_only_a_canonical_token() {
    for t in ["1", "0", "18446744073709551615", "42"] {
        let want: u64 = t.parse().expect("u64");
        assert_eq!(
            at("DELETE", &format!("/v1/locks/jobs/n/holders/{t}")),
            lock("jobs/n", Verb::ForceRelease(want)),
            "{t}"
        );
    }
    for t in [
        "+1",
        "%2B1",
        "01",
        "00",
        "-1",
        "1%20",
        "%31",
        "1.0",
        "0x1",
        "18446744073709551616",
        "",
        "１",
    ] {
        let uri = format!("/v1/locks/jobs/n/holders/{t}");
        if uri.parse::<Uri>().is_err() {
            continue;
        }
        let got = at("DELETE", &uri);
        assert!(
            matches!(got, Err(400) | Err(404)),
            "{t:?} must be refused, not {got:?}"
        );
    }
}

#[test]
fn paths_that_a_proxy_or_a_browser_would_rewrite_are_refused() {
    for p in [
        "/v1/locks/a//b/acquire",
        "/v1/locks/a/./acquire",
        "/v1/locks/a/../b/acquire",
        "/v1/locks/a/%2e%2e/b/acquire",
        "/v1/locks/a/%2E/acquire",
        "/v1/locks/a%zz/acquire",
        "/v1/locks/a%2/acquire",
        "/v1/locks//acquire",
        "/v1/locks/acquire",
    ] {
        assert_eq!(at("POST", p), Err(400), "{p}");
    }
    for p in ["/v1/locks/a/b/", "/v1/locks/a//b", "/v1/locks/./a"] {
        assert_eq!(at("GET", p), Err(400), "{p}");
    }
    // The same keys, sent with their slashes encoded, are keys.
    assert_eq!(
        at("POST", "/v1/locks/a%2F..%2Fb/acquire"),
        lock("a/../b", Verb::Acquire)
    );
    assert_eq!(at("GET", "/v1/locks/a%2F%2Fb"), lock("a//b", Verb::Get));
    // The action is spelled exactly; a key may end in an action's name
    // when its last slash is encoded.
    assert_eq!(at("POST", "/v1/locks/a/ACQUIRE"), Err(404));
    assert_eq!(at("POST", "/v1/locks/a%2Facquire"), Err(404));
    assert_eq!(
        at("GET", "/v1/locks/a/holders/12"),
        lock("a/holders/12", Verb::Get)
    );
    assert_eq!(
        at("POST", "/v1/locks/a/holders/x/acquire"),
        lock("a/holders/x", Verb::Acquire)
    );
}

#[test]
fn other_routes_match_exactly() {
    for p in [
        "/v1/status/",
        "/v1//status",
        "/V1/status",
        "/v1/admin/upgrad%65",
        "/v1/admin/upgrade/",
        "/v1/admin/module-keys/a/b",
    ] {
        let got = at("POST", p);
        assert!(matches!(got, Ok(Op::Unknown(_))), "{p}: {got:?}");
    }
    assert_eq!(at("GET", "/v1/locks?prefix=a&prefix=b"), Err(400));
    assert_eq!(
        at("GET", "/v1/locks?pre%66ix=a"),
        Ok(Op::List(ListQuery {
            prefix: "a".into(),
            after: None,
            limit: None,
        }))
    );
    assert_eq!(at("GET", "/v1/locks?nope=1"), Err(400));
}

/// Many spellings of one request: whatever is accepted means exactly
/// what its canonical spelling means, so authorisation (which reads the
/// parsed key and token) and the handler (which gets the same parse)
/// cannot disagree.
#[test]
fn spellings_are_either_refused_or_canonical() {
    let keys = ["jobs/nightly", "a", "a b", "ü/x"];
    let tokens = ["7", "+7", "07", "%37", "7 ", "7%00"];
    let tails = ["", "/", "//", "/."];
    for key in keys {
        for raw_key in [
            key.to_string(),
            key.replace('/', "%2F"),
            key.replace('/', "%2f"),
            key.replace(' ', "%20"),
            percent_encoding::utf8_percent_encode(key, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
        ] {
            for t in tokens {
                for tail in tails {
                    let uri = format!("/v1/locks/{raw_key}/holders/{t}{tail}");
                    let Ok(u) = uri.parse::<Uri>() else { continue };
                    match parse(&Method::DELETE, &u) {
                        Ok(Op::Lock(l)) => {
                            assert_eq!(l.verb, Verb::ForceRelease(7), "{uri}");
                            assert_eq!(t, "7", "{uri}");
                            assert!(tail.is_empty(), "{uri}");
                            assert_eq!(l.key, key.replace("%2F", "/"), "{uri}");
                        }
                        Ok(other) => panic!("{uri}: {other:?}"),
                        Err(_) => {}
                    }
                }
            }
        }
    }
}

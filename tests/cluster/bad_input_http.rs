//! Every bad input of the HTTP API gets its precise error and changes
//! nothing: same applied index, same state hash before and after.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use lockd_tests::cluster::Cluster;
use serde_json::json;

fn raw(addr: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(request).expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn bad_input_gets_precise_errors_and_changes_nothing() {
    let c = Cluster::start(1, &["--max-lease-ms", "60000"]);
    c.wait_leader(Duration::from_secs(20));
    let r = c.acquire(1, "held", 60_000).expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    let before = c.wait_converged(Duration::from_secs(10));

    let long = "k".repeat(1025);
    let cases: Vec<(&str, String, serde_json::Value, u16, &str, String)> = vec![
        (
            "acquire",
            "".into(),
            json!({"lease_ms": 1000}),
            400,
            "invalid_key",
            "key must not be empty".into(),
        ),
        (
            "acquire",
            long.clone(),
            json!({"lease_ms": 1000}),
            400,
            "invalid_key",
            "key is 1025 bytes; at most 1024 are allowed".into(),
        ),
        (
            "acquire",
            "k".into(),
            json!({"lease_ms": 0}),
            400,
            "invalid_lease",
            "lease_ms must be above 0".into(),
        ),
        (
            "acquire",
            "k".into(),
            json!({"lease_ms": 60001}),
            400,
            "invalid_lease",
            "lease_ms 60001 is above this cluster's maximum of 60000".into(),
        ),
        (
            "acquire",
            "k".into(),
            json!({"wait_ms": 5}),
            400,
            "bad_request",
            "malformed JSON body: missing field `lease_ms`".into(),
        ),
        (
            "acquire",
            "k".into(),
            json!({"lease_ms": "ten"}),
            400,
            "bad_request",
            "malformed JSON body: invalid type: string \"ten\", expected u64".into(),
        ),
        (
            "acquire",
            "k".into(),
            json!({"lease_ms": 10, "lease": 5}),
            400,
            "bad_request",
            "malformed JSON body: unknown field `lease`".into(),
        ),
        (
            "acquire",
            "held".into(),
            json!({"lease_ms": 1000}),
            409,
            "held",
            "lock \"held\" is held by another holder".into(),
        ),
        (
            "release",
            "held".into(),
            json!({"token": token + 1}),
            409,
            "wrong_token",
            format!("token {} does not hold lock \"held\"", token + 1),
        ),
        (
            "release",
            "free".into(),
            json!({"token": 1}),
            404,
            "not_held",
            "lock \"free\" is not held".into(),
        ),
        (
            "keepalive",
            "free".into(),
            json!({"token": 1}),
            404,
            "not_held",
            "lock \"free\" is not held".into(),
        ),
        (
            "keepalive",
            "held".into(),
            json!({"token": 999}),
            409,
            "wrong_token",
            "token 999 does not hold lock \"held\"".into(),
        ),
        (
            "grab",
            "k".into(),
            json!({}),
            404,
            "not_found",
            "unknown lock action \"grab\"; expected acquire, release, keepalive or proclaim".into(),
        ),
    ];
    for (action, key, body, status, code, error) in cases {
        let path = if key.is_empty() {
            format!("/v1/locks/{action}")
        } else {
            format!("/v1/locks/{key}/{action}")
        };
        // An empty key: "/v1/locks//acquire".
        let path = if key.is_empty() {
            path.replace("/v1/locks/", "/v1/locks//")
        } else {
            path
        };
        let r = c.post(1, &path, body.clone()).expect("answer");
        assert_eq!(r.status, status, "{action} {key:.20} {body}: {r:?}");
        assert_eq!(
            r.body["code"].as_str(),
            Some(code),
            "{action} {key:.20} {body}: {r:?}"
        );
        assert!(
            r.error().starts_with(&error),
            "{action} {key:.20} {body}: got {:?}, want {error:?}",
            r.error()
        );
    }

    // Malformed JSON, oversized bodies, non-UTF-8 keys: sent raw.
    let addr = c.addr(1).to_string();
    let post = |path: &str, body: &[u8]| {
        let mut req =
            format!("POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len())
                .into_bytes();
        req.extend_from_slice(body);
        raw(&addr, &req)
    };
    let resp = post("/v1/locks/k/acquire", b"{\"lease_ms\": 10");
    assert!(
        resp.starts_with("HTTP/1.1 400") && resp.contains("malformed JSON body: EOF while parsing"),
        "{resp}"
    );
    let resp = post("/v1/locks/k/acquire", &vec![b' '; 70 * 1024]);
    assert!(
        resp.starts_with("HTTP/1.1 413") && resp.contains("request body is over 65536 bytes"),
        "{resp}"
    );
    let resp = post("/v1/locks/%FF%FE/acquire", b"{\"lease_ms\": 10}");
    assert!(
        resp.starts_with("HTTP/1.1 400") && resp.contains("key is not valid UTF-8"),
        "{resp}"
    );
    let resp = raw(
        &addr,
        b"GET /v1/nope HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n",
    );
    assert!(
        resp.starts_with("HTTP/1.1 404")
            && resp.contains("{\"error\":\"no such route: GET /v1/nope\",\"code\":\"not_found\"}"),
        "{resp}"
    );
    // Not HTTP at all: hyper answers 400 (an answer, not a silent close) and
    // the node carries on.
    let resp = raw(&addr, b"\x00\x01garbage\r\n\r\n");
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");

    let after = c.wait_converged(Duration::from_secs(10));
    assert_eq!(
        after.applied_index, before.applied_index,
        "bad input reached the log"
    );
    assert_eq!(after.state_hash, before.state_hash);
    let r = c.lock(1, "held").expect("get");
    assert_eq!(r.body["token"].as_u64(), Some(token));
}

//! The OpenAPI document against the server that serves it (issue 15): it
//! must not drift.
//!
//! * Routes, both ways: every documented operation is answered (not the
//!   fallback's "no such route", not 405), and every other method on a
//!   documented path is 405. (That the document names every path the
//!   router serves is a unit test beside the route table.)
//! * Fields, both ways: real answers of the operations, successes and
//!   errors, are checked strictly against their documented schemas (a
//!   field the document does not name fails, as does a documented field
//!   that is missing); every request schema is sent with all its fields,
//!   and the server (which refuses unknown fields) must take them.
//! * `docs/api.md` and `docs/openapi.json` are what this server serves
//!   (`LOCKD_BLESS=1` rewrites them).

use std::path::PathBuf;
use std::time::Duration;

use lockd_tests::cluster::Cluster;
use lockd_tests::contract::{self, call, concrete, Answer};
use lockd_tests::openapi::{full_body, markdown, methods, operations};
use serde_json::{json, Value};

const WITHIN: Duration = Duration::from_secs(20);

/// `answer` fits what the document says `method path` answers.
fn fits(doc: &Value, path: &str, method: &str, answer: &Answer) {
    if let Err(e) = contract::fits(doc, path, method, answer) {
        panic!("{e}");
    }
}

#[test]
fn the_openapi_document_matches_the_server_both_ways() {
    let c = Cluster::start(1, &[]);
    c.wait_leader(WITHIN);
    let addr = c.addr(1).to_string();
    let served = call(&addr, "get", "/v1/openapi.json", None);
    assert_eq!(served.status, 200);
    let doc = served.json();
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
        "{}",
        served.text
    );

    // Every documented operation is served; every other method is not.
    for (path, method) in operations(&doc) {
        let a = call(&addr, method, &concrete(&path), None);
        assert!(
            a.status != 405 && !a.text.contains("no such route"),
            "{} {path} is documented but not served: {} {}",
            method.to_uppercase(),
            a.status,
            a.text
        );
    }
    for (path, item) in doc["paths"].as_object().expect("paths") {
        // Keys may contain `/`: GET of `/v1/locks/K/acquire` reads the
        // key `K/acquire`, POST to `/v1/locks/K` is the action `K`'s. The
        // lock actions are checked by a unit test beside the handlers.
        if path.starts_with("/v1/locks/{key}") {
            continue;
        }
        for m in methods().into_iter().filter(|m| item.get(m).is_none()) {
            let a = call(&addr, m, &concrete(path), None);
            assert_eq!(
                a.status,
                405,
                "{} {path} is served but not documented: {}",
                m.to_uppercase(),
                a.text
            );
        }
    }

    // Real answers, strictly against their schemas.
    let key = "/v1/locks/{key}";
    let acquired = call(
        &addr,
        "post",
        "/v1/locks/contract/a/acquire",
        Some(&json!({"lease_ms": 60000, "owner": "me", "request_id": "r-1"})),
    );
    fits(&doc, &format!("{key}/acquire"), "post", &acquired);
    let token = acquired.json()["token"].as_u64().expect("token");
    let answers = [
        ("/v1/status", "get", "/v1/status", None),
        ("/v1/members", "get", "/v1/members", None),
        ("/v1/whoami", "get", "/v1/whoami", None),
        ("/healthz", "get", "/healthz", None),
        ("/readyz", "get", "/readyz", None),
        ("/ui", "get", "/ui", None),
        ("/metrics", "get", "/metrics", None),
        ("/v1/audit", "get", "/v1/audit", None),
        ("/v1/admin/capacity", "get", "/v1/admin/capacity", None),
        (
            "/v1/admin/module-keys",
            "get",
            "/v1/admin/module-keys",
            None,
        ),
        ("/v1/admin/policy", "get", "/v1/admin/policy", None),
        ("/v1/admin/snapshot", "get", "/v1/admin/snapshot", None),
        ("/v1/admin/snapshot", "post", "/v1/admin/snapshot", None),
        (
            "/v1/admin/shadow/abort",
            "post",
            "/v1/admin/shadow/abort",
            None,
        ),
        ("/v1/locks", "get", "/v1/locks?prefix=contract/", None),
        (key, "get", "/v1/locks/contract/a", None),
        (
            "/v1/locks/{key}/keepalive",
            "post",
            "/v1/locks/contract/a/keepalive",
            Some(json!({"token": token})),
        ),
        (
            "/v1/locks/{key}/release",
            "post",
            "/v1/locks/contract/a/release",
            Some(json!({"token": token + 1})),
        ),
        (
            "/v1/locks/{key}/release",
            "post",
            "/v1/locks/contract/a/release",
            Some(json!({"token": token})),
        ),
        (
            "/v1/locks/{key}/release",
            "post",
            "/v1/locks/contract/a/release",
            Some(json!({"token": token})),
        ),
        (
            "/v1/locks/{key}/acquire",
            "post",
            "/v1/locks/contract/a/acquire",
            Some(json!({"lease_ms": 0})),
        ),
        (
            "/v1/locks/{key}/holders/{token}",
            "delete",
            "/v1/locks/contract/a/holders/1",
            None,
        ),
        (
            "/v1/members/promote",
            "post",
            "/v1/members/promote",
            Some(json!({"id": 99})),
        ),
    ];
    for (path, method, url, body) in &answers {
        fits(&doc, path, method, &call(&addr, method, url, body.as_ref()));
    }
    let held = call(
        &addr,
        "post",
        "/v1/locks/contract/b/acquire",
        Some(&json!({"lease_ms": 60000})),
    );
    let listed = call(&addr, "get", "/v1/locks?prefix=contract/", None);
    fits(&doc, "/v1/locks", "get", &listed);
    assert!(listed.text.contains("lease_left_ms"), "{}", listed.text);
    assert_eq!(held.status, 200);

    // Every request schema with all its fields: the server knows each one.
    // Values that would change the cluster are picked to be refused later
    // than the body's parsing (an unknown member, a bad key).
    let pick = |field: &str| match field {
        "id" => Some(json!(99)),
        "lease_ms" => Some(json!(1000)),
        "max_held" | "max_key_bytes" => Some(json!(1_000_000)),
        _ => None,
    };
    for (path, method) in operations(&doc) {
        let Some(schema) =
            doc["paths"][&path][method]["requestBody"]["content"]["application/json"].get("schema")
        else {
            continue;
        };
        let body = full_body(&doc, schema, &pick);
        let a = call(&addr, method, &concrete(&path), Some(&body));
        assert!(
            !a.text.contains("unknown field"),
            "{} {path} refused a documented field: {body} -> {}",
            method.to_uppercase(),
            a.text
        );
        fits(&doc, &path, method, &a);
    }

    // The codes the document names are every code the server has.
    let named: Vec<&str> = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode is documented as an enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let all: Vec<&str> = lockd_proto::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(named, all, "the documented error codes");

    // The reference in docs/ is this document.
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let pretty = serde_json::to_string_pretty(&doc).expect("json") + "\n";
    let rendered = markdown(&doc);
    if std::env::var_os("LOCKD_BLESS").is_some() {
        std::fs::write(docs.join("openapi.json"), &pretty).expect("write");
        std::fs::write(docs.join("api.md"), &rendered).expect("write");
    }
    let stale = |name: &str, want: &str| {
        let have = std::fs::read_to_string(docs.join(name)).unwrap_or_default();
        assert!(
            have == want,
            "docs/{name} is not what the server documents: run this test with LOCKD_BLESS=1"
        );
    };
    stale("openapi.json", &pretty);
    stale("api.md", &rendered);
}

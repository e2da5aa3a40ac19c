//! Generated requests against the OpenAPI document (issue 32, "bad input
//! is a 4xx with a code"): for every operation that takes a JSON body,
//! bodies drawn from the document's request schema.
//!
//! * A body the document allows is never refused as malformed (400 or
//!   413): every constraint the server enforces is in the document.
//! * No body, allowed or one step past the document, gets an internal
//!   error (500); the 5xx answers left are the documented ones that are
//!   not the caller's mistake (502 an unreachable node, 503 no leader,
//!   504 a learner catching up, 507 the capacity bound).
//! * Every answer is one the document lists, with its schema (an error's
//!   `code` among the documented codes).
//!
//! The negative control: the same run against a copy of the document
//! without one constraint the server enforces (`lease_ms`'s minimum) must
//! find a valid body refused as malformed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lockd_tests::cluster::Cluster;
use lockd_tests::contract::{call, concrete, fits, Gen};
use lockd_tests::openapi::operations;
use serde_json::Value;

const WITHIN: Duration = Duration::from_secs(20);
const ROUNDS: usize = 25;

/// Narrow what the test should not sit through: a wait for a busy key.
fn cap(name: &str, v: Value) -> Value {
    match (name, v.as_u64()) {
        ("wait_ms", Some(ms)) => Value::from(ms.min(100)),
        _ => v,
    }
}

/// Every JSON request body of `doc`, tried `ROUNDS` times valid and as
/// often one step past; what went wrong, one line each, and the statuses
/// each operation answered.
fn violations(
    addr: &str,
    doc: &Value,
    served: &Value,
    seed: u64,
) -> (Vec<String>, BTreeMap<String, BTreeSet<u16>>) {
    let mut gen = Gen::new(seed);
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    // The lock routes first: the admin bodies that follow may set a
    // capacity bound or a policy under which no acquire is granted.
    let mut ops = operations(doc);
    ops.sort_by_key(|(path, _)| !path.starts_with("/v1/locks"));
    for (path, method) in ops {
        let Some(schema) = doc["paths"][&path][method]["requestBody"]["content"]
            ["application/json"]["schema"]
            .as_object()
            .map(|o| Value::Object(o.clone()))
        else {
            continue;
        };
        let url = concrete(&path);
        for round in 0..2 * ROUNDS {
            let valid = round % 2 == 0;
            let body = if valid {
                gen.valid(doc, &schema, &cap)
            } else {
                gen.hostile(doc, &schema, &cap)
            };
            let a = call(addr, method, &url, Some(&body));
            let m = method.to_uppercase();
            seen.entry(format!("{m} {path}"))
                .or_default()
                .insert(a.status);
            if valid && matches!(a.status, 400 | 413) {
                out.push(format!(
                    "{m} {path} {body}: a valid body refused: {} {}",
                    a.status, a.text
                ));
            }
            if a.status == 500 || (a.status > 500 && ![502, 503, 504, 507].contains(&a.status)) {
                out.push(format!("{m} {path} {body}: {} {}", a.status, a.text));
            }
            // Answers are checked against what the node serves.
            if let Err(e) = fits(served, &path, method, &a) {
                out.push(format!("{m} {path} {body}: {e}"));
            }
        }
    }
    (out, seen)
}

#[test]
fn generated_bodies_are_taken_as_documented_and_never_fail_the_node() {
    let c = Cluster::start(1, &[]);
    c.wait_leader(WITHIN);
    let addr = c.addr(1).to_string();
    let doc = call(&addr, "get", "/v1/openapi.json", None).json();
    let seed = std::env::var("LOCKD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let (found, seen) = violations(&addr, &doc, &doc, seed);
    assert!(
        found.is_empty(),
        "seed {seed} (LOCKD_SEED replays it):\n{}",
        found.join("\n")
    );
    // Not vacuous: every operation with a body was tried and refused
    // something, and the ones a random body can satisfy took one.
    assert!(seen.len() >= 9, "{seen:?}");
    for (op, statuses) in &seen {
        assert!(
            statuses.iter().any(|s| (400..500).contains(s)),
            "{op}: only {statuses:?}"
        );
    }
    for op in [
        "POST /v1/locks/{key}/acquire",
        "PUT /v1/admin/capacity",
        "PUT /v1/admin/policy",
        "POST /v1/admin/module-keys",
    ] {
        let took = seen
            .get(op)
            .is_some_and(|s| s.iter().any(|s| (200..300).contains(s)));
        assert!(took, "{op} took no body: {seen:?}");
    }

    // The negative control: a document that forgets lease_ms's minimum.
    let mut weak = doc.clone();
    let lease = &mut weak["components"]["schemas"]["AcquireBody"]["properties"]["lease_ms"];
    lease.as_object_mut().expect("lease_ms").remove("minimum");
    let (found, _) = violations(&addr, &weak, &doc, seed);
    assert!(
        found
            .iter()
            .any(|v| v.contains("a valid body refused") && v.contains("lease_ms")),
        "the weakened document went unnoticed: {found:?}"
    );
}

//! Authorisation on a real cluster with TLS and authentication on (see
//! `lockd_tests::secure` for the principals): for every HTTP route and
//! every native request, one check per outcome — no credentials (and an
//! unknown token), the wrong role, the wrong key prefix, the right role.
//! Then holder-bound locks (another principal is refused even with the
//! right token; an admin may force release; tokens shown only to the
//! holder and admins, also after a leader change with a world-0.2
//! module), forwarding (the caller's principal travels; nobody but a node
//! may claim to forward), the roles file read again on SIGHUP, and the
//! admin audit trail.

use std::time::{Duration, Instant};

use lockd_client::{AcquireOptions, Client, ClientError, ClientOptions};
use lockd_proto::WireError;
use lockd_tests::cluster::{Cluster, Reply};
use lockd_tests::secure::Who;
use serde_json::{json, Value};

mod holders;
mod native;

const ALICE: Who = Who::Cert("alice");
const BOB: Who = Who::Cert("bob");
const ADMIN: Who = Who::Cert("admin");
const READER: Who = Who::Token("reader");
const WORKER: Who = Who::Token("worker");
const STRANGER: Who = Who::Cert("stranger");

/// One HTTP request: what it is, and who is allowed it.
struct Route {
    method: &'static str,
    path: String,
    body: Option<Value>,
    right: Who<'static>,
    wrong_role: Who<'static>,
    /// The same request on a key (or prefix) outside the right one's.
    wrong_prefix: Option<String>,
}

fn route(method: &'static str, path: &str, right: Who<'static>, wrong: Who<'static>) -> Route {
    Route {
        method,
        path: path.to_string(),
        body: None,
        right,
        wrong_role: wrong,
        wrong_prefix: None,
    }
}

fn call(c: &Cluster, node: u64, who: Who, method: &str, path: &str, body: Option<Value>) -> Reply {
    c.as_who(who)
        .request(c.addr(node), method, path, body)
        .unwrap_or_else(|e| panic!("{method} {path} as {who:?}: no answer: {e}"))
}

fn is_auth_refusal(r: &Reply) -> bool {
    r.status == 401 || r.status == 403
}

#[test]
fn every_route_refuses_the_unknown_and_the_unentitled() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    // A holding of alice's for the release and keepalive routes.
    let r = call(
        &c,
        leader,
        ALICE,
        "POST",
        "/v1/locks/jobs/held/acquire",
        Some(json!({"lease_ms": 60_000})),
    );
    assert!(r.ok(), "{r:?}");
    let token = r.body["token"].as_u64().expect("token");
    let other = call(
        &c,
        leader,
        ADMIN,
        "POST",
        "/v1/locks/db/x/acquire",
        Some(json!({"lease_ms": 60_000})),
    );
    assert!(other.ok(), "{other:?}");

    let with_body = |mut r: Route, body: Value| {
        r.body = Some(body);
        r
    };
    let prefix = |mut r: Route, path: &str| {
        r.wrong_prefix = Some(path.to_string());
        r
    };
    let routes = vec![
        route("GET", "/v1/status", READER, ALICE),
        route("GET", "/v1/members", READER, ALICE),
        route("GET", "/metrics", READER, ALICE),
        route("GET", "/v1/audit", READER, ALICE),
        route("GET", "/v1/admin/policy", READER, ALICE),
        route("GET", "/v1/admin/capacity", READER, ALICE),
        prefix(
            route("GET", "/v1/locks?prefix=jobs/", ALICE, STRANGER),
            "/v1/locks?prefix=db/",
        ),
        prefix(
            route("GET", "/v1/locks/jobs/held", ALICE, STRANGER),
            "/v1/locks/db/x",
        ),
        prefix(
            with_body(
                route("POST", "/v1/locks/jobs/new/acquire", ALICE, READER),
                json!({"lease_ms": 5000}),
            ),
            "/v1/locks/db/new/acquire",
        ),
        prefix(
            with_body(
                route("POST", "/v1/locks/jobs/held/keepalive", ALICE, READER),
                json!({"token": token}),
            ),
            "/v1/locks/db/x/keepalive",
        ),
        prefix(
            with_body(
                route("POST", "/v1/locks/jobs/new/release", ALICE, READER),
                json!({"token": token + 100}),
            ),
            "/v1/locks/db/x/release",
        ),
        route(
            "DELETE",
            &format!("/v1/locks/db/x/holders/{}", token + 100),
            ADMIN,
            WORKER,
        ),
        with_body(
            route("PUT", "/v1/admin/policy", ADMIN, WORKER),
            json!({"rules": []}),
        ),
        with_body(
            route("PUT", "/v1/admin/capacity", ADMIN, WORKER),
            json!({"max_held": 100000, "max_key_bytes": 8388608}),
        ),
        route("POST", "/v1/admin/shadow/promote", ADMIN, WORKER),
        route("POST", "/v1/admin/shadow/abort", ADMIN, WORKER),
        route("POST", "/v1/admin/snapshot", ADMIN, WORKER),
        route("GET", "/v1/admin/module-keys", READER, ALICE),
        with_body(
            route("POST", "/v1/admin/module-keys", ADMIN, WORKER),
            json!({"key": "00"}),
        ),
        route(
            "DELETE",
            &format!("/v1/admin/module-keys/{}", "ab".repeat(32)),
            ADMIN,
            WORKER,
        ),
        with_body(
            route("POST", "/v1/members/add", ADMIN, WORKER),
            json!({"id": 9, "addr": "127.0.0.1:1"}),
        ),
        with_body(
            route("POST", "/v1/members/promote", ADMIN, WORKER),
            json!({"id": 9}),
        ),
        with_body(
            route("POST", "/v1/members/remove", ADMIN, WORKER),
            json!({"id": 9}),
        ),
        route("GET", "/v1/nowhere", STRANGER, Who::Nobody),
    ];
    for r in &routes {
        let what = format!("{} {}", r.method, r.path);
        for nobody in [Who::Nobody, Who::BadToken] {
            let got = call(&c, leader, nobody, r.method, &r.path, r.body.clone());
            assert_eq!(got.status, 401, "{what} as {nobody:?}: {got:?}");
        }
        if r.wrong_role != Who::Nobody {
            let got = call(&c, leader, r.wrong_role, r.method, &r.path, r.body.clone());
            assert_eq!(got.status, 403, "{what} as {:?}: {got:?}", r.wrong_role);
            assert!(got.error().contains("is not allowed"), "{what}: {got:?}");
        }
        if let Some(p) = &r.wrong_prefix {
            let got = call(&c, leader, r.right, r.method, p, r.body.clone());
            assert_eq!(
                got.status, 403,
                "{} {p} as {:?}: {got:?}",
                r.method, r.right
            );
        }
        let got = call(&c, leader, r.right, r.method, &r.path, r.body.clone());
        assert!(!is_auth_refusal(&got), "{what} as {:?}: {got:?}", r.right);
    }
    // The module routes take bytes: the right role gets the module's
    // refusal (not a module), the others the authorisation's.
    for path in ["/v1/admin/upgrade", "/v1/admin/shadow"] {
        let send = |who| {
            c.as_who(who)
                .post_bytes(c.addr(leader), path, b"not a module")
                .expect("answer")
        };
        assert_eq!(send(Who::Nobody).status, 401, "{path}");
        assert_eq!(send(WORKER).status, 403, "{path}");
        assert_eq!(send(ADMIN).status, 400, "{path}");
    }
    // Every refusal was logged with the principal and its roles.
    let log = std::fs::read_to_string(&c.nodes[&leader].log).expect("log");
    assert!(
        log.contains("refused a request")
            && log.contains("principal=worker")
            && log.contains("roles=all"),
        "no log line names the refused principal and its roles"
    );
}

/// A native client presenting `who`, that gives up quickly.
fn client(c: &Cluster, who: Who) -> Client {
    Client::with_options(
        c.endpoints(),
        ClientOptions {
            retry_for: Duration::from_secs(5),
            ..c.client_options(who)
        },
    )
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Which refusal, if any, `r` is.
fn refusal<T>(r: Result<T, ClientError>) -> &'static str {
    match r {
        Err(ClientError::Rejected {
            error: WireError::Unauthenticated(_),
            ..
        }) => "unauthenticated",
        Err(ClientError::Rejected {
            error: WireError::Forbidden(_),
            ..
        }) => "forbidden",
        Ok(_) => "ok",
        Err(e) => panic!("an unexpected error: {e}"),
    }
}

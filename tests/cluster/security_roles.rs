//! Authorisation on a real cluster with TLS and authentication on (see
//! `lock_tests::secure` for the principals): for every HTTP route and
//! every native request, one check per outcome — no credentials (and an
//! unknown token), the wrong role, the wrong key prefix, the right role.
//! Then holder-bound locks (another principal is refused even with the
//! right token; an admin may force release; tokens shown only to the
//! holder and admins, also after a leader change with a world-0.2
//! module), forwarding (the caller's principal travels; nobody but a node
//! may claim to forward), the roles file read again on SIGHUP, and the
//! admin audit trail.

use std::time::{Duration, Instant};

use lock_tests::cluster::{Cluster, Reply};
use lock_tests::secure::Who;
use lockd_client::{AcquireOptions, Client, ClientError, ClientOptions};
use lockd_proto::WireError;
use serde_json::{json, Value};

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
        Err(ClientError::Rejected(WireError::Unauthenticated(_))) => "unauthenticated",
        Err(ClientError::Rejected(WireError::Forbidden(_))) => "forbidden",
        Ok(_) => "ok",
        Err(e) => panic!("an unexpected error: {e}"),
    }
}

#[test]
fn every_native_request_refuses_the_unknown_and_the_unentitled() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let rt = rt();
    let lease = Duration::from_secs(30);
    // (right, wrong role, wrong prefix) for each request, on `jobs/` keys
    // (alice's) and `db/` keys (nobody's but worker's and admin's).
    let outcomes = |who: Who| {
        let cl = client(&c, who);
        rt.block_on(async {
            let key = format!("jobs/native-{who:?}");
            let acquired = cl.acquire(&key, lease, Duration::ZERO).await;
            let token = acquired.as_ref().map(|g| g.token()).unwrap_or(1);
            let with = cl
                .acquire_with(&format!("{key}-2"), AcquireOptions::exclusive(lease))
                .await;
            vec![
                ("acquire", refusal(acquired)),
                ("acquire_with", refusal(with)),
                ("keepalive", refusal(cl.keepalive(&key, token).await)),
                ("get", refusal(cl.get(&key).await)),
                ("holders", refusal(cl.holders(&key).await)),
                ("list", refusal(cl.list("jobs/", None, 10).await)),
                ("release", refusal(cl.release(&key, token).await)),
                (
                    "acquire db/",
                    refusal(cl.acquire("db/n", lease, Duration::ZERO).await),
                ),
                ("list db/", refusal(cl.list("db/", None, 10).await)),
                ("status", refusal(cl.status_of(c.addr(leader)).await)),
            ]
        })
    };
    let expect = |who: Who, want: &[(&str, &str)]| {
        let got = outcomes(who);
        for (what, outcome) in want {
            let seen = got.iter().find(|(w, _)| w == what).map(|x| x.1);
            assert_eq!(seen, Some(*outcome), "{what} as {who:?}: {got:?}");
        }
    };
    // No credentials, or a token nobody knows.
    for who in [Who::Nobody, Who::BadToken] {
        let all: Vec<(&str, &str)> = [
            "acquire",
            "acquire_with",
            "keepalive",
            "get",
            "holders",
            "list",
            "release",
            "status",
        ]
        .iter()
        .map(|w| (*w, "unauthenticated"))
        .collect();
        expect(who, &all);
    }
    // The right role (lock use under jobs/), and the wrong prefix.
    expect(
        ALICE,
        &[
            ("acquire", "ok"),
            ("acquire_with", "ok"),
            ("keepalive", "ok"),
            ("get", "ok"),
            ("holders", "ok"),
            ("list", "ok"),
            ("release", "ok"),
            ("acquire db/", "forbidden"),
            ("list db/", "forbidden"),
            ("status", "forbidden"),
        ],
    );
    // The wrong role: reads only.
    expect(
        READER,
        &[
            ("acquire", "forbidden"),
            ("acquire_with", "forbidden"),
            ("keepalive", "forbidden"),
            ("release", "forbidden"),
            ("get", "ok"),
            ("holders", "ok"),
            ("list", "ok"),
            ("status", "ok"),
        ],
    );
    // A known certificate without roles.
    expect(
        STRANGER,
        &[
            ("acquire", "forbidden"),
            ("get", "forbidden"),
            ("status", "forbidden"),
        ],
    );
}

#[test]
fn locks_are_bound_to_their_holder_and_tokens_shown_only_to_it() {
    let mut c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    // World 0.2 keeps the holder in the replicated grant.
    let r = c
        .post_bytes(
            leader,
            "/v1/admin/upgrade",
            lock_tests::fixtures::LOCK_SM_V3,
        )
        .expect("upgrade");
    assert!(r.ok(), "{r:?}");
    let r = call(
        &c,
        leader,
        ALICE,
        "POST",
        "/v1/locks/jobs/bound/acquire",
        Some(json!({"lease_ms": 60_000})),
    );
    assert!(r.ok(), "{r:?}");
    let token = r.body["token"].as_u64().expect("token");

    let check = |c: &Cluster, leader: u64| {
        // Bob may lock jobs/ keys, knows the token, and is refused.
        for action in ["release", "keepalive"] {
            let got = call(
                c,
                leader,
                BOB,
                "POST",
                &format!("/v1/locks/jobs/bound/{action}"),
                Some(json!({"token": token})),
            );
            assert_eq!(got.status, 403, "{action}: {got:?}");
            assert!(
                got.error().contains("is held by principal \"alice\""),
                "{got:?}"
            );
        }
        let e = rt()
            .block_on(client(c, BOB).release("jobs/bound", token))
            .unwrap_err();
        assert!(
            matches!(e, ClientError::Rejected(WireError::Forbidden(_))),
            "{e}"
        );
        // Everyone with read sees the holder; only alice and admins the token.
        for (who, sees) in [(ALICE, true), (ADMIN, true), (BOB, false), (READER, false)] {
            let got = call(c, leader, who, "GET", "/v1/locks/jobs/bound", None);
            assert!(got.ok(), "{got:?}");
            assert_eq!(
                got.body["holders"][0]["holder"]["principal"], "alice",
                "{got:?}"
            );
            let shown = got.body["holders"][0]["token"].as_u64();
            assert_eq!(shown, sees.then_some(token), "{who:?}: {got:?}");
            assert_eq!(
                got.body["token"].as_u64(),
                sees.then_some(token),
                "{who:?}: {got:?}"
            );
            let native = rt()
                .block_on(client(c, who).holders("jobs/bound"))
                .expect("holders");
            assert_eq!(native[0].token, if sees { token } else { 0 }, "{who:?}");
        }
        let got = call(
            c,
            leader,
            ALICE,
            "POST",
            "/v1/locks/jobs/bound/keepalive",
            Some(json!({"token": token})),
        );
        assert!(got.ok(), "{got:?}");
    };
    check(&c, leader);
    // The binding is in the replicated state: a new leader keeps it.
    c.kill(leader);
    let new = c.wait_leader(Duration::from_secs(20));
    assert_ne!(new, leader);
    check(&c, new);
    // An admin may force release it.
    let got = call(
        &c,
        new,
        ADMIN,
        "DELETE",
        &format!("/v1/locks/jobs/bound/holders/{token}"),
        None,
    );
    assert!(got.ok(), "{got:?}");
    let got = call(&c, new, ALICE, "GET", "/v1/locks/jobs/bound", None);
    assert_eq!(got.body["held"], false, "{got:?}");
    c.spawn(leader);
}

#[test]
fn forwarding_carries_the_principal_and_only_nodes_may_forward() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let follower = (1..=3).find(|i| *i != leader).expect("a follower");
    // Through a follower: the leader records alice, and binds the lock.
    let r = call(
        &c,
        follower,
        ALICE,
        "POST",
        "/v1/locks/jobs/fw/acquire",
        Some(json!({"lease_ms": 60_000})),
    );
    assert!(r.ok(), "{r:?}");
    let token = r.body["token"].as_u64().expect("token");
    let got = call(&c, leader, READER, "GET", "/v1/locks/jobs/fw", None);
    assert_eq!(
        got.body["holders"][0]["holder"]["principal"], "alice",
        "{got:?}"
    );
    let got = call(
        &c,
        follower,
        BOB,
        "POST",
        "/v1/locks/jobs/fw/release",
        Some(json!({"token": token})),
    );
    assert_eq!(got.status, 403, "{got:?}");
    // A follower refuses what the rules refuse before anything is forwarded.
    let got = call(
        &c,
        follower,
        ALICE,
        "POST",
        "/v1/locks/db/fw/acquire",
        Some(json!({"lease_ms": 1000})),
    );
    assert_eq!(got.status, 403, "{got:?}");
    // A client cannot claim to forward for someone else.
    let http = c.as_who(ALICE);
    let agent_reply = ureq::AgentBuilder::new()
        .tls_config(
            c.secure()
                .credentials(ALICE)
                .tls
                .expect("tls")
                .config(lockd_client::tls::Alpn::Http),
        )
        .build()
        .post(&http.url(c.addr(leader), "/v1/locks/db/forged/acquire"))
        .set("x-lockd-principal", "admin")
        .set("x-lockd-forwarded", "2")
        .send_json(json!({"lease_ms": 1000}));
    match agent_reply {
        Err(ureq::Error::Status(403, r)) => {
            let body: Value = r.into_json().unwrap_or(Value::Null);
            assert!(
                body["error"]
                    .as_str()
                    .unwrap_or("")
                    .contains("only from a member node"),
                "{body}"
            );
        }
        other => panic!("a forged principal was not refused: {other:?}"),
    }
    let got = call(&c, leader, ADMIN, "GET", "/v1/locks/db/forged", None);
    assert_eq!(got.body["held"], false, "{got:?}");
}

#[test]
fn roles_are_read_again_on_sighup_and_a_bad_file_keeps_the_old_rules() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let status = |c: &Cluster| call(c, leader, STRANGER, "GET", "/v1/status", None).status;
    assert_eq!(status(&c), 403);
    let file = c.secure().auth_file.clone();
    let rules = std::fs::read_to_string(&file).expect("rules");
    let hup = |c: &Cluster| {
        for id in c.running() {
            let pid = c.nodes[&id].child.as_ref().expect("running").id();
            let ok = std::process::Command::new("kill")
                .args(["-HUP", &pid.to_string()])
                .status()
                .expect("kill")
                .success();
            assert!(ok);
        }
    };
    std::fs::write(
        &file,
        format!("{rules}\n[principals.stranger]\nroles = [\"read\"]\n"),
    )
    .expect("write");
    hup(&c);
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&c) != 200 {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not give stranger the read role"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A file that does not parse: refused, the rules in force stay.
    std::fs::write(&file, "[principals.stranger\nroles = ").expect("write");
    hup(&c);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&c.nodes[&leader].log).unwrap_or_default();
        if log.contains("the auth file is refused; the rules in force stay") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no log line for the refused file"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(status(&c), 200);
}

#[test]
fn admin_actions_are_recorded_with_who_what_and_where() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c
        .post_bytes(
            leader,
            "/v1/admin/upgrade",
            lock_tests::fixtures::LOCK_SM_V2,
        )
        .expect("upgrade");
    assert!(r.ok(), "{r:?}");
    let index = r.body["index"].as_u64().expect("index");
    let module = r.body["module_hash"].as_str().expect("module").to_string();
    // Through a follower too: the leader, which served it, records it.
    let follower = (1..=3).find(|i| *i != leader).expect("a follower");
    let got = call(
        &c,
        follower,
        ADMIN,
        "PUT",
        "/v1/admin/capacity",
        Some(json!({"max_held": 500, "max_key_bytes": 100000})),
    );
    assert!(got.ok(), "{got:?}");
    // A refused one is recorded too (a bad module, by admin).
    let bad = c
        .post_bytes(leader, "/v1/admin/upgrade", b"junk")
        .expect("answer");
    assert_eq!(bad.status, 400);
    let s = c.status(leader).expect("status");
    let actions: Vec<_> = s
        .admin_actions
        .iter()
        .map(|a| (a.principal.as_str(), a.action.as_str(), a.status))
        .collect();
    let up = s
        .admin_actions
        .iter()
        .find(|a| a.action == "POST /v1/admin/upgrade" && a.status == 200)
        .unwrap_or_else(|| panic!("{actions:?}"));
    assert_eq!(up.principal, "admin");
    assert_eq!(up.index, Some(index));
    assert_eq!(up.module_hash.as_deref(), Some(module.as_str()));
    assert!(
        actions.contains(&("admin", "PUT /v1/admin/capacity", 200)),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("admin", "POST /v1/admin/upgrade", 400)),
        "{actions:?}"
    );
    let follower_status = c.status(follower).expect("status");
    assert!(
        follower_status.admin_actions.is_empty(),
        "{:?}",
        follower_status.admin_actions
    );
    let log = std::fs::read_to_string(&c.nodes[&leader].log).expect("log");
    assert!(
        log.contains("admin action") && log.contains(&module),
        "no admin log line"
    );
}

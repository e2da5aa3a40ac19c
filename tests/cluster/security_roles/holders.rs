//! Holder-bound locks and who sees tokens, forwarding of the caller's
//! principal, the roles file read again on SIGHUP, the admin audit trail.

use super::*;

#[test]
fn locks_are_bound_to_their_holder_and_tokens_shown_only_to_it() {
    let mut c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    // World 0.2 (a new cluster's module) keeps the holder in the
    // replicated grant.
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
            // Refused without naming the holder (another principal).
            assert!(
                got.error().contains("is held by another principal"),
                "{got:?}"
            );
            assert!(!got.error().contains("alice"), "{got:?}");
        }
        let e = rt()
            .block_on(client(c, BOB).release("jobs/bound", token))
            .unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::Rejected {
                    error: WireError::Forbidden(_),
                    ..
                }
            ),
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
    // A session is its principal's: another's read, renewal or close is
    // refused without naming whose it is.
    let opened = call(
        &c,
        leader,
        ALICE,
        "POST",
        "/v1/sessions",
        Some(json!({"ttl_ms": 60_000})),
    );
    assert!(opened.ok(), "{opened:?}");
    let id = opened.body["id"].as_u64().expect("session id");
    for (method, path) in [
        ("GET", format!("/v1/sessions/{id}")),
        ("POST", format!("/v1/sessions/{id}/keepalive")),
        ("DELETE", format!("/v1/sessions/{id}")),
    ] {
        let body = (method == "POST").then(|| json!({}));
        let got = call(&c, leader, BOB, method, &path, body);
        assert_eq!(got.status, 403, "{method} {path}: {got:?}");
        assert_eq!(got.body["code"], "not_session_holder", "{got:?}");
        assert!(!got.error().contains("alice"), "{got:?}");
    }
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
    // On world 0.1's module: version 2 of it is an upgrade (a version
    // above), not a swap back.
    let c = Cluster::start_secure(3, &["--initial-module", "world-0.1"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c
        .post_bytes(
            leader,
            "/v1/admin/upgrade",
            lockd_tests::fixtures::LOCK_SM_WORLD01_V2,
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

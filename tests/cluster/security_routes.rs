//! One reading of every request (issue 29), on a real cluster with TLS and
//! authentication (see `lockd_tests::secure` for the principals):
//!
//! * Route fuzz: many spellings of a force release's token and key, and
//!   of the lock actions (signs, leading zeros, percent-encoding, doubled
//!   and trailing slashes, dot segments, case), sent byte for byte over
//!   TLS. A principal without the admin role never gets a 2xx for any of
//!   them and the lock stays held; an admin's canonical spelling works
//!   (the positive control).
//! * A forwarded principal is believed only from a member node's
//!   certificate, on a request it says it forwards, to a forwarded route.
//! * Revocation: a token removed from the auth file is refused, once the
//!   nodes have read it again, on a native connection that stays open and
//!   on HTTP through a follower that has not read it yet.

use std::time::Duration;

use lockd_client::security;
use lockd_client::tls::{Alpn, TlsClient};
use lockd_tests::cluster::Cluster;
use lockd_tests::secure::Who;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WITHIN: Duration = Duration::from_secs(20);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Send `head` (a request line and headers, without the blank line) and
/// `body` byte for byte over TLS as `who`; the status code.
fn raw(c: &Cluster, node: u64, who: Who, head: &str, extra: &[(&str, String)], body: &str) -> u16 {
    let creds = c.secure().credentials(who);
    let mut headers: Vec<(&str, String)> = extra.to_vec();
    if let Some(t) = &creds.token {
        headers.push(("authorization", format!("Bearer {}", t.expose())));
    }
    send(&creds.tls.expect("tls"), c.addr(node), head, &headers, body)
}

/// `head`, `headers` and a JSON `body` over TLS with `tls` to `addr`,
/// exactly as written; the answer's status code.
fn send(tls: &TlsClient, addr: &str, head: &str, headers: &[(&str, String)], body: &str) -> u16 {
    let mut req = format!("{head}\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    rt().block_on(async {
        let mut stream = security::connect(addr, Some(tls), Alpn::Http, None)
            .await
            .expect("connect");
        stream.write_all(req.as_bytes()).await.expect("write");
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out).await;
        let text = String::from_utf8_lossy(&out);
        text.split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("{head}: not an HTTP answer: {text:?}"))
    })
}

fn held(c: &Cluster, leader: u64, key: &str) -> Option<u64> {
    let r = c
        .as_who(Who::Cert("admin"))
        .request(c.addr(leader), "GET", &format!("/v1/locks/{key}"), None)
        .expect("get");
    r.body["token"].as_u64()
}

#[test]
fn no_spelling_of_a_route_lets_a_principal_past_its_roles() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(WITHIN);
    let alice = c.as_who(Who::Cert("alice"));
    let r = alice
        .request(
            c.addr(leader),
            "POST",
            "/v1/locks/jobs/nightly/acquire",
            Some(serde_json::json!({"lease_ms": 600_000})),
        )
        .expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    let before = c.wait_converged(WITHIN);
    let t = token.to_string();
    let keys = [
        "jobs/nightly",
        "jobs%2Fnightly",
        "jobs%2fnightly",
        "jobs//nightly",
        "jobs/./nightly",
        "jobs/../jobs/nightly",
        "jobs/%2e/nightly",
        "jobs/nightly/",
        "JOBS/nightly",
        "%6Aobs/nightly",
    ];
    let tokens = [
        t.clone(),
        format!("+{t}"),
        format!("%2B{t}"),
        format!("0{t}"),
        format!("00{t}"),
        format!("{t}%20"),
        format!("%3{t}"),
        format!("{t}/"),
        format!("{t}."),
        format!("-{t}"),
        format!("{t}%00"),
    ];
    let holders = ["holders", "Holders", "holders/", "%68olders"];
    // Principals that are not admins: the holder itself (a jobs/ role),
    // another holder of the role, a reader, one without roles.
    let others = [
        Who::Cert("alice"),
        Who::Cert("bob"),
        Who::Token("reader"),
        Who::Cert("stranger"),
    ];
    let mut sent = 0;
    for key in keys {
        for tok in &tokens {
            for h in holders {
                let path = format!("/v1/locks/{key}/{h}/{tok}");
                for (i, who) in others.iter().enumerate() {
                    // Each spelling by one of them, in turn: every one is
                    // refused, so which one asks does not matter.
                    if (sent + i) % others.len() != 0 {
                        continue;
                    }
                    let status = raw(
                        &c,
                        leader,
                        *who,
                        &format!("DELETE {path} HTTP/1.1"),
                        &[],
                        "",
                    );
                    assert!(
                        !(200..300).contains(&status),
                        "DELETE {path} as {who:?} answered {status}"
                    );
                }
                sent += 1;
            }
        }
    }
    // Releases by bob (may lock jobs/, but it is alice's holding) in many
    // spellings of the action and the key: never done.
    let body = format!("{{\"token\":{token}}}");
    for key in keys {
        for action in ["release", "RELEASE", "release/", "%72elease", "./release"] {
            let path = format!("/v1/locks/{key}/{action}");
            let status = raw(
                &c,
                leader,
                Who::Cert("bob"),
                &format!("POST {path} HTTP/1.1"),
                &[],
                &body,
            );
            assert!(
                !(200..300).contains(&status),
                "POST {path} as bob answered {status}"
            );
        }
    }
    assert_eq!(held(&c, leader, "jobs/nightly"), Some(token), "still held");
    let after = c.wait_converged(WITHIN);
    assert_eq!(
        after.applied_index, before.applied_index,
        "nothing was proposed"
    );
    // The positive control: the admin's canonical spelling releases it.
    let path = format!("/v1/locks/jobs/nightly/holders/{token}");
    let status = raw(
        &c,
        leader,
        Who::Cert("admin"),
        &format!("DELETE {path} HTTP/1.1"),
        &[],
        "",
    );
    assert_eq!(status, 200);
    assert_eq!(held(&c, leader, "jobs/nightly"), None);
}

#[test]
fn a_forwarded_principal_is_believed_only_on_a_forwarded_route_from_its_node() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(WITHIN);
    let follower = (1..=3).find(|i| *i != leader).expect("a follower");
    let s = c.secure();
    // A member node's own certificate, as the tests' callers present it.
    let node_cert = s.issue(
        "as-node",
        &[lockd_client::tls::node_name(follower), "127.0.0.1".into()],
        true,
        30,
    );
    let tls = TlsClient::from_files(&s.ca(), Some((&node_cert.0, &node_cert.1))).expect("tls");
    let leader_addr = c.addr(leader).to_string();
    let send = |path: &str, headers: &[(&str, String)]| -> u16 {
        let head = format!("POST {path} HTTP/1.1");
        send(&tls, &leader_addr, &head, headers, "{\"lease_ms\":60000}")
    };
    let admin = ("x-lockd-principal", "admin".to_string());
    let by_follower = ("x-lockd-forwarded", follower.to_string());
    let by_other = ("x-lockd-forwarded", (follower % 3 + 1).to_string());
    // Not said to be forwarded, or forwarded by another node: refused.
    assert_eq!(
        send("/v1/locks/db/a/acquire", std::slice::from_ref(&admin)),
        403
    );
    assert_eq!(
        send("/v1/locks/db/a/acquire", &[admin.clone(), by_other]),
        403
    );
    // A route nodes never forward (a snapshot build on the node asked).
    assert_eq!(
        send("/v1/admin/snapshot", &[admin.clone(), by_follower.clone()]),
        403
    );
    // Both a token and a forwarded principal: refused.
    let worker = ("authorization", format!("Bearer {}", s.token("worker")));
    assert_eq!(
        send(
            "/v1/locks/db/a/acquire",
            &[admin.clone(), by_follower.clone(), worker]
        ),
        401
    );
    assert_eq!(held(&c, leader, "db/a"), None);
    // What a follower does forward is taken (the node is trusted for it).
    assert_eq!(send("/v1/locks/db/a/acquire", &[admin, by_follower]), 200);
}

#[test]
fn a_revoked_token_is_refused_on_open_connections_and_through_a_follower() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(WITHIN);
    let follower = (1..=3).find(|i| *i != leader).expect("a follower");
    let rt = rt();
    let client = lockd_client::Client::with_options(
        c.endpoints(),
        lockd_client::ClientOptions {
            retry_for: Duration::from_secs(5),
            ..c.client_options(Who::Token("worker"))
        },
    );
    let lease = Duration::from_secs(30);
    let g = rt
        .block_on(client.acquire("db/before", lease, Duration::ZERO))
        .expect("worker may lock db/");
    let via_follower = |c: &Cluster| {
        c.as_who(Who::Token("worker"))
            .request(
                c.addr(follower),
                "POST",
                "/v1/locks/db/http/acquire",
                Some(serde_json::json!({"lease_ms": 1000})),
            )
            .expect("answer")
            .status
    };
    assert_eq!(via_follower(&c), 200);
    // Remove worker from the file, and have the leader alone read it.
    c.revoke("worker", &[leader], WITHIN);
    // The follower still has the old rules; the leader checks the token.
    assert_eq!(
        via_follower(&c),
        401,
        "through a follower that kept the token"
    );
    // The native connection, still open: its next request is refused.
    let next = rt
        .block_on(client.acquire("db/after", lease, Duration::ZERO))
        .map(|g| g.token());
    assert!(
        matches!(
            next,
            Err(lockd_client::ClientError::Rejected {
                error: lockd_proto::WireError::Unauthenticated(_),
                ..
            })
        ),
        "{next:?}"
    );
    drop(g);
}

//! World 0.2 on a running cluster: before the upgrade a shared lock or a
//! semaphore is refused naming the active 0.1 module; right after a live
//! upgrade (see `upgrade_live`), on the same processes, shared locks and
//! semaphores of 3 work through HTTP, lockctl and the Rust client, with
//! holders, listings, force release and policy data.

use std::time::Duration;

use lockd_client::{AcquireOptions, Client};
use lockd_tests::cluster::Cluster;
use serde_json::{json, Value};

fn acquire(c: &Cluster, id: u64, key: &str, body: Value) -> lockd_tests::cluster::Reply {
    c.post(id, &format!("/v1/locks/{key}/acquire"), body)
        .expect("acquire")
}

/// What a cluster still on the 0.1 module says to the options of 0.2.
pub fn refused_on_0_1(c: &Cluster, leader: u64) {
    let r = acquire(
        c,
        leader,
        "early/rw",
        json!({"lease_ms": 5000, "mode": "shared", "limit": 2}),
    );
    assert_eq!(r.status, 422, "{r:?}");
    assert!(r.error().contains("lock-sm@0.1.0"), "{r:?}");
    assert!(r.error().contains("no shared locks"), "{r:?}");
    let r = acquire(
        c,
        leader,
        "early/sem",
        json!({"lease_ms": 5000, "limit": 3}),
    );
    assert_eq!(r.status, 422, "{r:?}");
    assert!(
        r.error().contains("limit 3 is above its largest, 1"),
        "{r:?}"
    );
    let out = c
        .lockctl()
        .args(["acquire", "early/sem", "--lease", "5s", "--limit", "3"])
        .output()
        .expect("lockctl");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lock-sm@0.1.0"), "{err}");
    let r = c
        .put(leader, "/v1/admin/policy", json!({"rules": []}))
        .expect("put");
    assert_eq!(r.status, 422, "{r:?}");
    assert!(r.error().contains("keeps no policy data"), "{r:?}");
}

/// Shared locks and semaphores through every interface, on a cluster
/// whose module is the 0.2 reference module. `across` is a key held
/// since before the upgrade.
pub fn used_after_upgrade(c: &Cluster, leader: u64, across: &str) {
    // The holding from before the upgrade: nobody recorded its holder.
    let r = c.lock(leader, across).expect("get");
    assert_eq!(r.body["holders"][0]["holder"], Value::Null, "{r:?}");

    // HTTP: two readers share; a writer and a third reader are refused.
    let shared = json!({"lease_ms": 30000, "mode": "shared", "limit": 2, "owner": "http"});
    let a = acquire(c, leader, "h/rw", shared.clone());
    let b = acquire(c, leader, "h/rw", shared.clone());
    assert!(a.ok() && b.ok(), "{a:?} {b:?}");
    assert!(b.body["token"].as_u64() > a.body["token"].as_u64());
    let w = acquire(c, leader, "h/rw", json!({"lease_ms": 30000}));
    assert_eq!(w.status, 409, "{w:?}");
    let r = c.lock(leader, "h/rw").expect("get");
    let holders = r.body["holders"].as_array().expect("holders").clone();
    assert_eq!(holders.len(), 2, "{r:?}");
    assert!(holders
        .iter()
        .all(|h| h["mode"] == "shared" && h["limit"] == 2));
    assert_eq!(holders[0]["holder"]["owner"], "http");

    // HTTP: a semaphore of 3; the fourth waits its turn behind a force
    // release by an admin.
    let sem = json!({"lease_ms": 30000, "limit": 3});
    let tokens: Vec<u64> = (0..3)
        .map(|_| {
            let r = acquire(c, leader, "h/sem", sem.clone());
            assert!(r.ok(), "{r:?}");
            r.body["token"].as_u64().expect("token")
        })
        .collect();
    let r = acquire(c, leader, "h/sem", sem.clone());
    assert_eq!(r.status, 409, "{r:?}");
    let r = c
        .delete(leader, &format!("/v1/locks/h/sem/holders/{}", tokens[1]))
        .expect("delete");
    assert!(r.ok(), "{r:?}");
    let r = acquire(c, leader, "h/sem", sem.clone());
    assert!(r.ok(), "{r:?}");
    let r = acquire(c, leader, "h/sem", json!({"lease_ms": 30000, "limit": 4}));
    assert_eq!(r.status, 422, "a limit unlike the holders': {r:?}");

    // An Idempotency-Key header survives forwarding: the same acquire sent
    // twice through a follower is the same grant.
    let follower = *c
        .nodes
        .keys()
        .find(|id| **id != leader)
        .expect("a follower");
    let by_key = || -> Value {
        ureq::post(&format!(
            "http://{}/v1/locks/h/idem/acquire",
            c.addr(follower)
        ))
        .set("idempotency-key", "retry-1")
        .send_json(json!({"lease_ms": 30000}))
        .expect("acquire through a follower")
        .into_json()
        .expect("json")
    };
    let (first, again) = (by_key(), by_key());
    assert_eq!(first["token"], again["token"], "{first} {again}");
    let token = first["token"].as_u64().expect("token");
    assert!(c.release(leader, "h/idem", token).expect("release").ok());

    // Listing, paged.
    let r = c.get(leader, "/v1/locks?prefix=h/&limit=1").expect("list");
    assert_eq!(r.body["locks"][0]["key"], "h/rw", "{r:?}");
    assert_eq!(r.body["next"], "h/rw", "{r:?}");
    let r = c
        .get(leader, "/v1/locks?prefix=h/&after=h/rw&limit=10")
        .expect("list");
    assert_eq!(r.body["locks"][0]["key"], "h/sem", "{r:?}");
    assert_eq!(
        r.body["locks"][0]["holders"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(r.body.get("next"), None, "{r:?}");
    // The lease left on the leader's clock, asked of a follower too.
    for via in [leader, follower] {
        let listed = c
            .get(via, "/v1/locks?prefix=h/&after=h/rw&limit=10")
            .expect("list");
        let one = c.lock(via, "h/sem").expect("get");
        let lists = [&listed.body["locks"][0]["holders"], &one.body["holders"]];
        for h in lists.iter().flat_map(|l| l.as_array().expect("holders")) {
            let (left, lease) = (h["lease_left_ms"].as_u64(), h["lease_ms"].as_u64());
            assert!(
                matches!((left, lease), (Some(l), Some(g)) if l > 0 && l <= g),
                "via node {via}: {h}"
            );
        }
    }

    // Policy data through the log: a reserved prefix and a lease cap.
    let rules = json!({"rules": [
        {"prefix": "frozen/", "reserved": true},
        {"prefix": "short/", "max_lease_ms": 2000}
    ]});
    let r = c.put(leader, "/v1/admin/policy", rules).expect("put");
    assert!(r.ok(), "{r:?}");
    let r = acquire(c, leader, "frozen/x", json!({"lease_ms": 1000}));
    assert_eq!(r.status, 403, "{r:?}");
    let r = acquire(c, leader, "short/x", json!({"lease_ms": 60000}));
    assert_eq!(r.body["lease_ms"], 2000, "the module shortened it: {r:?}");

    // lockctl: a semaphore, a reader, list, get, policy.
    let lockctl = |args: &[&str]| {
        let out = c.lockctl().args(args).output().expect("lockctl");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    for _ in 0..3 {
        let (code, out, err) = lockctl(&[
            "--json", "acquire", "cli/sem", "--lease", "30s", "--limit", "3", "--owner", "cli",
        ]);
        assert_eq!(code, Some(0), "{out} {err}");
    }
    let (code, _, err) = lockctl(&["acquire", "cli/sem", "--lease", "30s", "--limit", "3"]);
    assert_eq!(code, Some(2), "the semaphore is full: {err}");
    let (code, out, err) = lockctl(&[
        "acquire", "cli/rw", "--lease", "30s", "--mode", "shared", "--limit", "5",
    ]);
    assert_eq!(code, Some(0), "{out} {err}");
    let (code, out, _) = lockctl(&["--json", "get", "cli/sem"]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["holders"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(v["holders"][0]["holder"]["owner"], "cli", "{v}");
    let (code, out, _) = lockctl(&["list", "cli/"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("cli/rw: token") && out.contains("shared limit 5"),
        "{out}"
    );
    assert_eq!(out.matches("cli/sem: token").count(), 3, "{out}");
    let (code, out, _) = lockctl(&["--json", "policy", "get"]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["rules"][0]["prefix"], "frozen/", "{v}");

    // The Rust client: a semaphore of 3 and a reader, and the holders.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = Client::new(c.endpoints());
        let lease = Duration::from_secs(30);
        let mut guards = Vec::new();
        for _ in 0..3 {
            guards.push(
                client
                    .semaphore("rs/sem", 3, lease, Duration::ZERO)
                    .await
                    .expect("a slot"),
            );
        }
        let full = client.semaphore("rs/sem", 3, lease, Duration::ZERO).await;
        assert!(
            full.as_ref().is_err_and(|e| e.is_held()),
            "{:?}",
            full.err()
        );
        // Waiting for a slot: one is released while the fourth waits.
        let waiter = client.acquire_with(
            "rs/sem",
            AcquireOptions::semaphore(lease, 3).wait(Duration::from_secs(10)),
        );
        let release = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let g = guards.pop().expect("a guard");
            g.release().await.expect("release");
        };
        let (fourth, ()) = tokio::join!(waiter, release);
        let fourth = fourth.expect("the fourth gets the freed slot");
        let holders = client.holders("rs/sem").await.expect("holders");
        assert_eq!(holders.len(), 3);
        assert!(holders.iter().any(|h| h.token == fourth.token()));
        assert!(holders
            .iter()
            .all(|h| h.holder.as_ref().is_some_and(|x| x.owner == client.owner())));
        let r = client
            .acquire_shared("rs/rw", 2, lease, Duration::ZERO)
            .await
            .expect("a reader");
        let r2 = client
            .acquire_shared("rs/rw", 2, lease, Duration::ZERO)
            .await
            .expect("a second reader");
        assert!(r2.token() > r.token());
        let writer = client.acquire("rs/rw", lease, Duration::ZERO).await;
        assert!(writer.is_err_and(|e| e.is_held()));
    });
}

/// A shadow of the 0.2 module beside the 0.1 module under exclusive load,
/// on every node of a live cluster: every command compared, no outcome
/// differs.
#[test]
fn a_0_2_shadow_of_exclusive_0_1_traffic_differs_in_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};

    use lockd_tests::fixtures::LOCK_SM_WORLD02;
    use lockd_tests::load;

    // 0.1 traffic: a cluster started on world 0.1's module.
    let c = Cluster::start(3, &["--initial-module", "world-0.1"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c
        .post_bytes(leader, "/v1/admin/shadow", LOCK_SM_WORLD02)
        .expect("shadow");
    assert!(r.ok(), "{r:?}");
    let stop = AtomicBool::new(false);
    let logs = std::thread::scope(|s| {
        let clients = s.spawn(|| load::run(&c, &[1, 2, 3], 3, &stop));
        let _stop = load::StopOnDrop(&stop);
        // Waiters and handoffs too: two clients on one key.
        for _ in 0..20 {
            let a = acquire(&c, leader, "shadow/k", json!({"lease_ms": 5000}));
            let b = c
                .post(
                    leader,
                    "/v1/locks/shadow/k/acquire",
                    json!({"lease_ms": 5000, "wait_ms": 0}),
                )
                .expect("acquire");
            assert_eq!(b.status, 409, "{b:?}");
            let token = a.body["token"].as_u64().expect("token");
            assert!(c.release(leader, "shadow/k", token).expect("release").ok());
        }
        std::thread::sleep(Duration::from_millis(1000));
        stop.store(true, Ordering::Relaxed);
        clients.join().expect("clients")
    });
    assert!(
        logs.iter().all(|l| l.failures.is_empty()),
        "client failures"
    );
    let grants: usize = logs.iter().map(|l| l.grants.len()).sum();
    c.wait_converged(Duration::from_secs(20));
    for id in 1..=3 {
        let st = c.status(id).expect("status");
        let sh = st.shadow.expect("a shadow runs");
        assert!(
            sh.commands_compared as usize >= 2 * grants,
            "node {id}: {sh:?}"
        );
        assert_eq!(sh.failed, None, "node {id}");
        assert_eq!(sh.outcome_diffs, 0, "node {id}: {:?}", sh.examples);
    }
}

/// A node restarted after the upgrade to 0.2 has applied nothing of its
/// log yet: its applied module is the built-in 0.1 until it catches up.
/// It must not refuse a shared lock or a semaphore "as the 0.1 module"
/// meanwhile (found by a long nemesis run with mixed clients): from the
/// moment the processes start, every node is asked again and again, and
/// none may answer 422 before the asks are granted.
#[test]
fn a_restarted_node_never_refuses_as_the_module_it_has_not_caught_up_from() {
    // The upgrade from 0.1 is what a restarted node must catch up from.
    let mut c = Cluster::start(3, &["--initial-module", "world-0.1"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c
        .post_bytes(
            leader,
            "/v1/admin/upgrade",
            lockd_tests::fixtures::LOCK_SM_WORLD02,
        )
        .expect("upgrade");
    assert!(r.ok(), "{r:?}");
    // Some entries after the upgrade, far fewer than a snapshot needs: a
    // restarted node replays the upgrade from its log.
    let within = Duration::from_secs(20);
    for i in 0..20 {
        let token = c.acquire_on_leader(&format!("before/{i}"), 60_000, within);
        c.release_on_leader(&format!("before/{i}"), token, within);
    }
    c.wait_converged(within);
    for id in 1..=3 {
        c.kill(id);
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (mut granted, mut asks) = (0, 0);
    while granted < 6 && std::time::Instant::now() < deadline {
        for id in 1..=3 {
            asks += 1;
            let key = format!("after/{asks}");
            let body = if asks % 2 == 0 {
                json!({"lease_ms": 5000, "mode": "shared", "limit": 2})
            } else {
                json!({"lease_ms": 5000, "limit": 3})
            };
            let Ok(r) = c.post(id, &format!("/v1/locks/{key}/acquire"), body) else {
                continue; // not listening yet
            };
            assert_ne!(
                r.status, 422,
                "node {id} refused as a module it has not caught up from: {r:?}"
            );
            if r.ok() {
                granted += 1;
            }
        }
    }
    assert!(
        granted >= 6,
        "the restarted cluster granted only {granted} of {asks} asks"
    );
}

//! Reentrant locks on a real 3-node cluster: a holder that acquires again
//! gets the same token and a count, never waiting behind itself or behind
//! the waiters; a release takes one count off and the lock stays held; the
//! count is replicated state, so it survives a leader change, a snapshot
//! and a restart from it; at 0 the next waiter gets the lock.

use std::time::Duration;

use lockd_tests::cluster::{wait_for, Cluster, Reply};
use serde_json::{json, Value};

const WITHIN: Duration = Duration::from_secs(30);

fn acquire(c: &Cluster, id: u64, key: &str, body: Value) -> Reply {
    c.post(id, &format!("/v1/locks/{key}/acquire"), body)
        .expect("acquire")
}

fn release(c: &Cluster, id: u64, key: &str, token: u64) -> Reply {
    c.post(
        id,
        &format!("/v1/locks/{key}/release"),
        json!({"token": token}),
    )
    .expect("release")
}

/// (token, count) of the key's holder.
fn holder(c: &Cluster, id: u64, key: &str) -> Option<(u64, u64)> {
    let r = c.lock(id, key).expect("get");
    let h = &r.body["holders"][0];
    Some((h["token"].as_u64()?, h["count"].as_u64()?))
}

#[test]
fn a_reentrant_count_survives_a_leader_change_and_a_snapshot() {
    let mut c = Cluster::start(3, &[]);
    let mut leader = c.wait_leader(WITHIN);
    let mine = json!({"lease_ms": 60_000, "owner": "worker-1", "reentrant": true});
    let first = acquire(&c, leader, "jobs/r", mine.clone());
    assert!(first.ok(), "{first:?}");
    let token = first.body["token"].as_u64().expect("token");
    assert_eq!(first.body["count"], 1);

    // Someone else waits; the holder enters again at once, ahead of it.
    let other = json!({"lease_ms": 60_000, "wait_ms": 25_000, "owner": "other"});
    let addr = c.addr(leader).to_string();
    let waiter = std::thread::spawn(move || {
        let http = lockd_tests::secure::Http::new(None);
        http.request(&addr, "POST", "/v1/locks/jobs/r/acquire", Some(other))
    });
    wait_for("the waiter queues", WITHIN, || {
        c.metric(leader, "lockd_lock_waiters").unwrap_or(0) >= 1
    });
    let again = acquire(&c, leader, "jobs/r", mine.clone());
    assert!(again.ok(), "{again:?}");
    assert_eq!(
        (again.body["token"].as_u64(), again.body["count"].as_u64()),
        (Some(token), Some(2))
    );
    // Without `reentrant` the same holder is refused as busy.
    let plain = acquire(
        &c,
        leader,
        "jobs/r",
        json!({"lease_ms": 1000, "owner": "worker-1"}),
    );
    assert_eq!(plain.status, 409, "{plain:?}");

    // One release: still held, count 1.
    let r = release(&c, leader, "jobs/r", token);
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.body["count"], 1);
    assert_eq!(holder(&c, leader, "jobs/r"), Some((token, 1)));
    // In again (count 2), then a leader change and a snapshot.
    let again = acquire(&c, leader, "jobs/r", mine.clone());
    assert_eq!(again.body["count"], 2, "{again:?}");
    c.kill(leader);
    let old = leader;
    leader = c.wait_leader(WITHIN);
    assert_ne!(leader, old);
    assert_eq!(holder(&c, leader, "jobs/r"), Some((token, 2)));
    for id in c.running() {
        let s = c
            .post(id, "/v1/admin/snapshot", json!({}))
            .expect("snapshot");
        assert!(s.ok(), "node {id}: {s:?}");
    }
    // A follower restarts from its snapshot; then the old leader returns.
    let follower = *c
        .running()
        .iter()
        .find(|&&id| id != leader)
        .expect("a follower");
    c.kill(follower);
    c.spawn(follower);
    c.spawn(old);
    c.wait_up(follower, WITHIN);
    c.wait_up(old, WITHIN);
    c.wait_converged(WITHIN);
    assert_eq!(holder(&c, leader, "jobs/r"), Some((token, 2)));

    // Two releases: the first leaves it held; the second hands it to the
    // waiter (which may have retried on the new leader by now).
    let r = release(&c, leader, "jobs/r", token);
    assert_eq!(r.body["count"], 1, "{r:?}");
    let r = release(&c, leader, "jobs/r", token);
    assert_eq!(r.body["count"], 0, "{r:?}");
    let _ = waiter.join();
    wait_for("the lock is free for others", WITHIN, || {
        // The waiter's request went to the old leader and was cut by its
        // death: take it here as another caller would.
        holder(&c, leader, "jobs/r").is_some()
            || acquire(
                &c,
                leader,
                "jobs/r",
                json!({"lease_ms": 60_000, "owner": "other"}),
            )
            .ok()
    });
    let (t, n) = holder(&c, leader, "jobs/r").expect("held");
    assert!(t > token && n == 1, "the waiter's own holding: {t} {n}");

    // A reentrant acquire needs an owner or a session.
    let anon = acquire(
        &c,
        leader,
        "jobs/anon",
        json!({"lease_ms": 1000, "owner": "", "reentrant": true}),
    );
    assert_eq!(anon.status, 422, "{anon:?}");
}

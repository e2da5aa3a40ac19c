//! Keepalive: keeps a lock past its lease on a live leader; fails on a
//! leader that can no longer confirm its leadership with a quorum.

use std::time::{Duration, Instant};

use lock_tests::cluster::Cluster;

#[test]
fn keepalive_keeps_a_lock_past_its_lease_and_stopping_lets_it_expire() {
    // Alone: keepalives every 150 ms must each land within a 600 ms lease,
    // and the expiry is timed; a second cluster on the same two cores could
    // delay one past the lease.
    let _alone = lock_tests::turns::alone();
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let follower = (1..=3).find(|i| *i != leader).expect("follower");
    let r = c.acquire(leader, "kept", 600).expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2000) {
        // Through a follower too: it forwards to the leader.
        let via = if start.elapsed().as_millis() % 2 == 0 {
            leader
        } else {
            follower
        };
        let r = c.keepalive(via, "kept", token).expect("keepalive");
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.body["lease_ms"], 600);
        std::thread::sleep(Duration::from_millis(150));
    }
    let r = c.lock(leader, "kept").expect("get");
    assert_eq!(
        r.body["token"].as_u64(),
        Some(token),
        "held past 3 leases by keepalive: {r:?}"
    );
    // Keepalive with the wrong token is refused and extends nothing.
    let r = c.keepalive(leader, "kept", token + 1).expect("keepalive");
    assert_eq!(r.status, 409, "{r:?}");
    // Stop: the lease runs out and the lock is expired.
    let stopped = Instant::now();
    loop {
        let r = c.lock(leader, "kept").expect("get");
        if r.body["held"] == false {
            break;
        }
        assert!(stopped.elapsed() < Duration::from_secs(5), "never expired");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        stopped.elapsed() >= Duration::from_millis(400),
        "expired before its lease: {:?}",
        stopped.elapsed()
    );
    let r = c.keepalive(leader, "kept", token).expect("keepalive");
    assert_eq!(r.status, 404, "{r:?}");
}

#[test]
fn keepalive_to_a_deposed_leader_fails() {
    let c = Cluster::start(3, &[]);
    let old = c.wait_leader(Duration::from_secs(20));
    let r = c.acquire(old, "fenced", 60_000).expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    c.wait_converged(Duration::from_secs(10));
    // The old leader freezes; the others elect a new one.
    c.pause(old);
    let others: Vec<u64> = (1..=3).filter(|i| *i != old).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = loop {
        let leaders: Vec<u64> = others
            .iter()
            .filter_map(|i| c.status(*i))
            .filter(|s| s.role == "leader")
            .map(|s| s.id)
            .collect();
        if let Some(l) = leaders.first() {
            break *l;
        }
        assert!(Instant::now() < deadline, "no new leader: {}", c.describe());
        std::thread::sleep(Duration::from_millis(50));
    };
    // It wakes up still believing it leads, and is asked first thing.
    c.resume(old);
    // Marked as already forwarded, so the old leader answers itself rather
    // than passing the request on once it learns who leads now.
    let url = format!("http://{}/v1/locks/fenced/keepalive", c.addr(old));
    let r = match ureq::post(&url)
        .set("x-lockd-forwarded", "test")
        .send_json(serde_json::json!({ "token": token }))
    {
        Ok(r) => lock_tests::cluster::Reply {
            status: r.status(),
            body: r.into_json().unwrap_or_default(),
        },
        Err(ureq::Error::Status(code, r)) => lock_tests::cluster::Reply {
            status: code,
            body: r.into_json().unwrap_or_default(),
        },
        Err(e) => panic!("keepalive not answered: {e}"),
    };
    assert_ne!(r.status, 200, "a deposed leader extended a lease: {r:?}");
    assert!(r.status == 503, "{r:?}");
    // The lock itself is intact under the new leader, same token.
    let r = c.lock(new, "fenced").expect("get");
    assert_eq!(r.body["token"].as_u64(), Some(token));
}

#[test]
fn keepalive_without_a_quorum_fails() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c.acquire(leader, "alone", 60_000).expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    for f in (1..=3).filter(|i| *i != leader) {
        c.kill(f);
    }
    let r = c
        .keepalive(leader, "alone", token)
        .expect("keepalive answered");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        r.error().contains("could not confirm its leadership"),
        "{r:?}"
    );
}

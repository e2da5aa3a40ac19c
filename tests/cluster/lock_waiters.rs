//! Waiters for a held key are served in FIFO order, each by a handoff that
//! commits the release and the next grant together.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

#[test]
fn waiters_are_served_in_fifo_order() {
    let c = Arc::new(Cluster::start(3, &[]));
    let leader = c.wait_leader(Duration::from_secs(20));
    let follower = (1..=3).find(|i| *i != leader).expect("follower");
    // Through whichever node leads: an election may follow the start.
    let first = c.acquire_on_leader("queue", 60_000, Duration::from_secs(20));
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for w in 0..4u64 {
        let (cw, order) = (c.clone(), order.clone());
        // Waiters 1 and 3 come through a follower (forwarded).
        let via = if w % 2 == 1 { follower } else { leader };
        handles.push(std::thread::spawn(move || {
            let c = cw;
            let r = c
                .post(
                    via,
                    "/v1/locks/queue/acquire",
                    serde_json::json!({ "lease_ms": 60_000, "wait_ms": 20_000 }),
                )
                .expect("acquire");
            assert!(r.ok(), "waiter {w}: {r:?}");
            let token = r.body["token"].as_u64().expect("token");
            order.lock().unwrap().push((w, token));
            std::thread::sleep(Duration::from_millis(100));
            assert!(c.release(via, "queue", token).expect("release").ok());
        }));
        // Make the arrival order unambiguous.
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.metric(leader, "lockd_lock_waiters") != Some(w + 1) {
            assert!(Instant::now() < deadline, "waiter {w} never queued");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert!(c.release(leader, "queue", first).expect("release").ok());
    for h in handles {
        h.join().expect("waiter");
    }
    let order = order.lock().unwrap().clone();
    let who: Vec<u64> = order.iter().map(|(w, _)| *w).collect();
    assert_eq!(who, [0, 1, 2, 3], "not FIFO: {order:?}");
    assert!(
        order.windows(2).all(|p| p[0].1 < p[1].1),
        "tokens must increase: {order:?}"
    );
    assert_eq!(
        c.metric(leader, "lockd_lock_events_total{event=\"handoff\"}"),
        Some(4),
        "every waiter was served by a handoff"
    );
}

#[test]
fn a_waiter_gives_up_at_its_wait_limit_with_409() {
    let c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    assert!(c.acquire(1, "busy", 60_000).expect("acquire").ok());
    let t = Instant::now();
    let r = c
        .post(
            1,
            "/v1/locks/busy/acquire",
            serde_json::json!({ "lease_ms": 1000, "wait_ms": 300 }),
        )
        .expect("acquire");
    assert_eq!(r.status, 409, "{r:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "gave up early: {:?}",
        t.elapsed()
    );
    assert_eq!(r.error(), "lock \"busy\" is held by another holder");
}

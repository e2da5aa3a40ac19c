//! A release whose answer lands after the leader rebuilt its lock mirror
//! must not make the next holder's release look "not held" (the refusal
//! seen inside a lease under leader kills and pauses).
//!
//! The node runs with the test-only fault `LOCKD_FAULT_STALE_DONE`: when a
//! client's release commits, the leader rebuilds its mirror (as after a
//! failed proposal) while that release's completion is held back until the
//! key is granted again. A leader that loads the table without waiting for
//! the completions of earlier proposals then applies the old release on top
//! of the new grant in flight: the new holder vanishes from its mirror, its
//! release is refused as "not held" and its lease never ends.

use std::time::Duration;

use lockd_tests::cluster::{fault_binary, Cluster};

#[test]
fn a_release_completed_after_a_reload_does_not_erase_the_next_holder() {
    let fault = fault_binary();
    let mut c = Cluster::configure(1, &[]);
    {
        let n1 = c.nodes.get_mut(&1).expect("node 1");
        n1.bin = Some(fault);
        n1.env.push(("LOCKD_FAULT_STALE_DONE".into(), "1".into()));
    }
    c.spawn(1);
    let leader = c.wait_leader(Duration::from_secs(20));

    let first = c.acquire(leader, "race/k", 60_000).expect("acquire");
    assert!(first.ok(), "{first:?}");
    let a = first.body["token"].as_u64().expect("token");

    // The release commits, the mirror is rebuilt, and the release's own
    // completion waits for the next grant of the key (or two seconds).
    let releaser = {
        let addr = c.addr(leader).to_string();
        std::thread::spawn(move || {
            ureq::post(&format!("http://{addr}/v1/locks/race/k/release"))
                .send_json(serde_json::json!({ "token": a }))
                .map(|r| r.status())
                .map_err(|e| e.to_string())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // Willing to wait: on a slow machine the release may still be in flight.
    let second = c
        .post(
            leader,
            "/v1/locks/race/k/acquire",
            serde_json::json!({ "lease_ms": 60_000, "wait_ms": 10_000 }),
        )
        .expect("acquire");
    assert!(second.ok(), "second acquire: {second:?}");
    let b = second.body["token"].as_u64().expect("token");
    assert!(b > a, "tokens {a} then {b}");

    // The holder of the second grant can release it, well inside its lease.
    let r = c.release(leader, "race/k", b).expect("release");
    assert!(r.ok(), "the holder of token {b} was refused: {r:?}");
    assert_eq!(releaser.join().expect("releaser thread"), Ok(200));
    let state = c.lock(leader, "race/k").expect("get");
    assert_eq!(state.body["held"], false, "{state:?}");
}

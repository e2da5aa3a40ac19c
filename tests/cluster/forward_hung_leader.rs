//! A follower passes a waiting acquire on to its leader, and the leader
//! hangs (SIGSTOP): the follower abandons the request once it stops
//! hearing the leader (about an election timeout), with a 503 the client
//! retries elsewhere, instead of holding its caller for the whole wait
//! (docs/architecture.md, "Replication after a fault").

use std::time::{Duration, Instant};

use lockd_tests::cluster::{wait_for, Cluster};
use serde_json::json;

#[test]
fn a_request_passed_on_to_a_leader_that_hangs_is_abandoned() {
    let c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    let leader = c.wait_leader(patience);
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    // The key is held, so the acquire passed on waits at the leader.
    let held = c.acquire(leader, "hung/k", 60_000).expect("acquire");
    assert!(held.ok(), "{held:?}");
    let (reply, took) = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let sent = Instant::now();
            let r = c.post(
                follower,
                "/v1/locks/hung/k/acquire",
                json!({ "lease_ms": 1000, "wait_ms": 9000 }),
            );
            (r, sent.elapsed())
        });
        wait_for("the acquire waits at the leader", patience, || {
            c.metric(leader, "lockd_lock_waiters") == Some(1)
        });
        c.pause(leader);
        waiter.join().expect("the waiter")
    });
    c.resume(leader);
    let reply = reply.expect("an answer, not the client's own timeout");
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.body["code"], "unavailable", "{reply:?}");
    assert!(
        reply.body["error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped hearing")),
        "{reply:?}"
    );
    // Answered, not waited out: the wait asked for was 9 s.
    assert!(took < Duration::from_secs(9), "{took:?}");
}

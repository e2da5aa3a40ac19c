//! A membership change on a leader that has lost its quorum is answered,
//! not waited on: once the leader has gone ten election timeouts without
//! a quorum's acknowledgement, the change is abandoned with a 503 that
//! says it may or may not take effect (before, it waited for a quorum
//! that might never come back).

use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

#[test]
fn a_membership_change_without_a_quorum_is_answered_unavailable() {
    let mut c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    let leader = c.wait_leader(patience);
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    for f in &followers {
        c.kill(*f);
    }
    let sent = Instant::now();
    let r = c
        .post(
            leader,
            "/v1/members/remove",
            serde_json::json!({ "id": followers[0] }),
        )
        .expect("an answer, not the client's own timeout");
    let took = sent.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.body["code"], "unavailable", "{r:?}");
    assert!(
        r.body["error"]
            .as_str()
            .is_some_and(|e| e.contains("may or may not take effect")),
        "{r:?}"
    );
    // Ten election timeouts of silence, not the client's 10 s.
    assert!(took < Duration::from_secs(9), "{took:?}");
}

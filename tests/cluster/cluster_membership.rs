//! Membership: add a 4th node as a learner, promote it, remove another node;
//! the cluster keeps serving throughout.

use std::time::Duration;

use lock_tests::cluster::{free_port, Cluster};
use serde_json::json;

#[test]
fn add_learner_promote_remove_keeps_serving() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    for i in 0..10 {
        c.acquire_on_leader(&format!("m{i}"), 60_000, Duration::from_secs(10));
    }
    let addr = format!("127.0.0.1:{}", free_port());
    c.add_proc(4, addr.clone(), &["--join"]);
    c.spawn(4);
    c.wait_up(4, Duration::from_secs(20));

    let r = c
        .post(leader, "/v1/members/add", json!({ "id": 4, "addr": addr }))
        .expect("add");
    assert!(r.ok(), "{r:?}");
    let st = c.status(4).expect("node 4 answers");
    assert_eq!(st.role, "learner");
    c.acquire_on_leader("while-learner", 60_000, Duration::from_secs(10));

    let r = c
        .post(leader, "/v1/members/promote", json!({ "id": 4 }))
        .expect("promote");
    assert!(r.ok(), "{r:?}");
    let members = r.body.as_array().expect("members").clone();
    assert!(
        members.iter().any(|m| m["id"] == 4 && m["voter"] == true),
        "{members:?}"
    );

    // Remove a follower that is not node 4.
    let victim = (1..=3).find(|id| *id != leader).expect("a follower");
    let r = c
        .post(leader, "/v1/members/remove", json!({ "id": victim }))
        .expect("remove");
    assert!(r.ok(), "{r:?}");
    assert!(!r
        .body
        .as_array()
        .expect("members")
        .iter()
        .any(|m| m["id"] == victim));
    c.kill(victim);
    c.acquire_on_leader("after-remove", 60_000, Duration::from_secs(10));
    let s = c.wait_converged(Duration::from_secs(20));
    assert_eq!(s.locks_held, 12);
    assert_eq!(s.members.len(), 3);

    // Bad admin requests get precise errors and change nothing.
    let r = c
        .post(leader, "/v1/members/promote", json!({ "id": 99 }))
        .expect("promote");
    assert_eq!((r.status, r.error()), (404, "node 99 is not a member"));
    let r = c
        .post(leader, "/v1/members/add", json!({ "id": 5 }))
        .expect("add");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("missing field `addr`"), "{r:?}");
}

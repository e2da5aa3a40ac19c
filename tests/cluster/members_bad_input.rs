//! Membership requests that are the caller's mistake get a 4xx with the
//! reason and change nothing: an address that is not HOST:PORT (400, never
//! dialled), a node id that another node answers at that address (422),
//! and removing the only voter (409).

use std::time::Duration;

use lockd_tests::cluster::Cluster;
use serde_json::json;

#[test]
fn bad_membership_requests_are_the_callers_and_change_nothing() {
    let c = Cluster::start(1, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let before = c.status(leader).expect("status");

    for addr in ["", "no-port", "127.0.0.1:0", "http://127.0.0.1:7400"] {
        let r = c
            .post(leader, "/v1/members/add", json!({ "id": 0, "addr": addr }))
            .expect("add");
        assert_eq!(r.status, 400, "{addr:?}: {r:?}");
        assert!(r.error().contains("is not HOST:PORT"), "{r:?}");
    }
    // Node 1 answers at its own address, not node 4.
    let r = c
        .post(
            leader,
            "/v1/members/add",
            json!({ "id": 4, "addr": c.addr(leader) }),
        )
        .expect("add");
    assert_eq!(r.status, 422, "{r:?}");
    assert!(r.error().contains("node 1, not node 4"), "{r:?}");
    let r = c
        .post(leader, "/v1/members/remove", json!({ "id": leader }))
        .expect("remove");
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.error().contains("only voter"), "{r:?}");

    let after = c.status(leader).expect("status");
    assert_eq!(after.members, before.members);
    assert_eq!((after.leader, after.term), (Some(leader), before.term));
}

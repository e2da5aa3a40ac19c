//! SIGKILL the leader: a new leader is elected, no acknowledged entry is
//! lost, and the killed node restarts from its data dir and catches up to the
//! same state hash.

use std::time::Duration;

use lockd_tests::cluster::Cluster;

#[test]
fn leader_killed_new_leader_nothing_acknowledged_lost() {
    let mut c = Cluster::start(3, &[]);
    let old = c.wait_leader(Duration::from_secs(20));
    let mut acked = Vec::new();
    for i in 0..30 {
        let key = format!("before/{i}");
        acked.push((
            key.clone(),
            c.acquire_on_leader(&key, 60_000, Duration::from_secs(10)),
        ));
    }
    c.kill(old);
    let new = c.wait_leader(Duration::from_secs(20));
    assert_ne!(new, old);
    for (key, token) in &acked {
        let r = c.lock(new, key).expect("get");
        assert_eq!(r.body["held"], true, "{key} lost after failover: {r:?}");
        assert_eq!(r.body["token"].as_u64(), Some(*token), "{key}");
    }
    // The cluster keeps serving with two of three nodes.
    let after = c.acquire_on_leader("after/0", 60_000, Duration::from_secs(10));
    assert!(
        after > acked.last().expect("acked").1,
        "tokens keep increasing across the failover"
    );
    // The killed node restarts from its data dir and catches up.
    c.spawn(old);
    let s = c.wait_converged(Duration::from_secs(30));
    assert_eq!(s.locks_held, 31);
    let st = c.status(old).expect("restarted node answers");
    assert_eq!(st.state_hash, s.state_hash);
}

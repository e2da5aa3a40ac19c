//! A node kept down while the others pass the snapshot threshold (and purge
//! their logs) catches up through snapshot install.
//!
//! A leader keeps log entries that a replication stream still has in flight,
//! even to a dead node, so whether *it* has purged is a matter of timing.
//! Followers purge as soon as their snapshot is built. So the test makes the
//! purged follower the leader: the old leader is stopped, the lagging node
//! comes back, and the only node that can lead has no log left to send it.

use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

#[test]
fn lagging_node_catches_up_by_snapshot() {
    let mut c = Cluster::start(
        3,
        &["--snapshot-threshold", "50", "--keep-after-snapshot", "0"],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let mut followers = (1..=3).filter(|id| *id != leader);
    let (lagging, survivor) = (
        followers.next().expect("follower"),
        followers.next().expect("follower"),
    );
    c.wait_converged(Duration::from_secs(20));
    c.kill(lagging);
    for i in 0..160 {
        let key = format!("snap/{i}");
        let r = c.acquire(leader, &key, 60_000).expect("acquire");
        assert!(r.ok(), "{r:?}");
        if i % 2 == 0 {
            let token = r.body["token"].as_u64().expect("token");
            assert!(c.release(leader, &key, token).expect("release").ok());
        }
    }
    // Everything the leader applied is what every node must end up with.
    let done = c.status(leader).expect("leader status");
    // The surviving follower applies it all, snapshots, and purges what the
    // lagging node lacks.
    let deadline = Instant::now() + Duration::from_secs(20);
    let st = loop {
        let st = c.status(survivor).expect("status");
        if st.applied_index >= done.applied_index && st.purged_index.unwrap_or(0) > 100 {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "node {survivor} did not catch up, snapshot and purge: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(st.snapshots_built >= 1);
    assert_eq!(st.state_hash, done.state_hash);
    let expected_hash = done.state_hash.clone();

    c.kill(leader);
    c.spawn(lagging);
    let new_leader = c.wait_leader(Duration::from_secs(30));
    assert_eq!(
        new_leader, survivor,
        "only the up-to-date node can win the election"
    );
    let s = c.wait_converged(Duration::from_secs(30));
    let lag = c.status(lagging).expect("status");
    assert!(
        lag.snapshots_installed >= 1,
        "node {lagging} caught up without a snapshot install: {lag:?}"
    );
    assert_eq!(lag.state_hash, expected_hash);
    assert_eq!(lag.locks_held, 80);
    assert!(lag.last_snapshot_bytes > 0, "{lag:?}");
    assert_eq!(
        lag.module_hash, s.module_hash,
        "the snapshot carries the active module"
    );

    // The old leader comes back too and all three agree.
    c.spawn(leader);
    let all = c.wait_converged(Duration::from_secs(30));
    assert_eq!(all.state_hash, expected_hash);
}

#[test]
fn a_snapshot_is_built_on_request_on_the_node_asked() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    for i in 0..20 {
        let r = c
            .acquire(leader, &format!("ask/{i}"), 60_000)
            .expect("acquire");
        assert!(r.ok(), "{r:?}");
    }
    let done = c.wait_converged(Duration::from_secs(20));
    let follower = (1..=3).find(|id| *id != leader).expect("follower");
    let before: Vec<u64> = (1..=3)
        .map(|id| c.status(id).expect("status").snapshots_built)
        .collect();
    let r = c
        .post(follower, "/v1/admin/snapshot", serde_json::json!({}))
        .expect("snapshot");
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.body["node"], follower, "{r:?}");
    let index = r.body["index"].as_u64().expect("index");
    let bytes = r.body["bytes"].as_u64().expect("bytes");
    assert!(index >= done.applied_index, "{r:?} {done:?}");
    assert!(bytes > 0, "{r:?}");
    for id in 1..=3 {
        let st = c.status(id).expect("status");
        let i = (id - 1) as usize;
        if id == follower {
            assert_eq!(st.snapshots_built, before[i] + 1, "node {id}");
            assert_eq!(st.snapshot_index, Some(index), "node {id}");
            assert_eq!(st.last_snapshot_bytes, bytes, "node {id}");
            assert_eq!(
                c.metric(id, "lockd_snapshot_last_bytes"),
                Some(bytes),
                "node {id}"
            );
        } else {
            // Only the node asked builds one.
            assert_eq!(st.snapshots_built, before[i], "node {id}");
        }
        assert!(st.guest_memory_bytes > 0, "node {id}");
    }
}

//! A node that was down during an upgrade comes back onto the new module:
//! by replaying the log (the upgrade entry is in it), and by installing a
//! snapshot taken after the upgrade (the snapshot carries the module).

use std::time::{Duration, Instant};

use lock_tests::cluster::Cluster;
use lock_tests::fixtures::LOCK_SM_V2;
use lockd::engine::ModuleHash;

/// Take and free a few locks on `via`, keeping every other one.
fn traffic(c: &Cluster, via: u64, prefix: &str, n: usize) {
    for i in 0..n {
        let key = format!("{prefix}/{i}");
        let r = c.acquire(via, &key, 60_000).expect("acquire");
        assert!(r.ok(), "{r:?}");
        if i % 2 == 0 {
            let token = r.body["token"].as_u64().expect("token");
            assert!(c.release(via, &key, token).expect("release").ok());
        }
    }
}

fn upgrade(c: &Cluster, via: u64) -> u64 {
    let r = c
        .post_bytes(via, "/v1/admin/upgrade", LOCK_SM_V2)
        .expect("upgrade");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["result"], "swapped");
    r.body["index"].as_u64().expect("index")
}

#[test]
fn node_down_during_upgrade_catches_up_by_log() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let down = (1..=3).find(|i| *i != leader).expect("follower");
    traffic(&c, leader, "a", 10);
    c.wait_converged(Duration::from_secs(20));
    c.kill(down);
    let index = upgrade(&c, leader);
    traffic(&c, leader, "b", 10);
    c.spawn(down);
    let s = c.wait_converged(Duration::from_secs(30));
    let st = c.status(down).expect("status");
    assert_eq!(st.module_hash, ModuleHash::of(LOCK_SM_V2).to_string());
    assert_eq!(st.module_since_index, index);
    assert_eq!(st.state_hash, s.state_hash);
    assert_eq!(st.snapshots_installed, 0, "this one catches up by log: {st:?}");
    let rec = st.upgrades.last().expect("upgrade record");
    assert!(rec.swapped() && rec.index == index, "{rec:?}");
    // It runs version 2 now: as leader it would refuse reserved keys too.
    assert_eq!(c.acquire(down, "reserved/k", 1000).expect("acquire").status, 403);
}

#[test]
fn node_down_during_upgrade_catches_up_by_snapshot() {
    // The shape of `cluster_snapshot_catchup`: the follower that stayed up
    // snapshots and purges, then leads, so the lagging node can only be
    // brought up to date by a snapshot.
    let mut c = Cluster::start(
        3,
        &["--snapshot-threshold", "40", "--keep-after-snapshot", "0"],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let mut followers = (1..=3).filter(|id| *id != leader);
    let (lagging, survivor) = (
        followers.next().expect("follower"),
        followers.next().expect("follower"),
    );
    traffic(&c, leader, "a", 10);
    c.wait_converged(Duration::from_secs(20));
    c.kill(lagging);
    let index = upgrade(&c, leader);
    traffic(&c, leader, "b", 120);
    let done = c.status(leader).expect("status");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st = c.status(survivor).expect("status");
        if st.applied_index >= done.applied_index && st.purged_index.unwrap_or(0) > index + 5 {
            break;
        }
        assert!(Instant::now() < deadline, "node {survivor} did not snapshot and purge: {st:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    c.kill(leader);
    c.spawn(lagging);
    assert_eq!(c.wait_leader(Duration::from_secs(30)), survivor);
    let s = c.wait_converged(Duration::from_secs(30));
    let st = c.status(lagging).expect("status");
    assert!(st.snapshots_installed >= 1, "caught up without a snapshot: {st:?}");
    assert_eq!(st.module_hash, ModuleHash::of(LOCK_SM_V2).to_string());
    assert_eq!(st.module_since_index, index, "the snapshot carries when the module became active");
    assert_eq!(st.state_hash, done.state_hash);
    assert_eq!(s.state_hash, done.state_hash);
    assert!(st.upgrades.iter().any(|u| u.index == index && u.swapped()), "{:?}", st.upgrades);

    // A full restart of the old leader resumes on version 2 as well.
    c.spawn(leader);
    c.wait_converged(Duration::from_secs(30));
    assert_eq!(c.status(leader).expect("status").module_hash, ModuleHash::of(LOCK_SM_V2).to_string());
}

//! A module that fails on some commands fails those commands, not the
//! cluster (trap isolation; docs/writing-a-lock-module.md, "When a module
//! fails").
//!
//! The chaos fixture passes the upgrade's dry run and becomes the active
//! module. Under load on other keys, a grant of `chaos:trap` (a trap) and
//! one of `chaos:loop` (a runaway loop that burns its fuel budget) are
//! each refused with `module_failed`, naming the failure; every other
//! request is served, every node applies on with the same state hash and
//! records the same failures (status, metrics), and stays ready. A node
//! restarted replays the failures from its log; a node that comes back
//! behind a snapshot gets them with it; both reach the same state.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lockd_core::engine::ModuleHash;
use lockd_proto::Status;
use lockd_tests::cluster::{wait_for, Cluster};
use lockd_tests::fixtures::CHAOS_GUEST;

/// A small fuel budget (the same on every node: it is in the engine's
/// fingerprint), so the runaway loop is stopped in a fraction of a second.
const FLAGS: &[&str] = &[
    "--fuel-per-call",
    "200000000",
    "--snapshot-threshold",
    "40",
    "--keep-after-snapshot",
    "0",
];

/// A hostile grant: refused with `module_failed`, naming `why`.
fn refused(c: &Cluster, id: u64, key: &str, why: &str) {
    let r = c.acquire(id, key, 60_000).expect("an answer");
    assert_eq!(r.status, 500, "{key}: {r:?}");
    assert_eq!(r.body["code"], "module_failed", "{key}: {r:?}");
    assert!(r.error().contains(why), "{key}: {r:?}");
}

/// Every running node has applied the same index with the same state hash
/// and recorded `failures` failures.
fn agreed(c: &Cluster, failures: u64) -> Status {
    let mut agreed = None;
    wait_for(
        &format!("every node agreeing on {failures} failures"),
        Duration::from_secs(30),
        || {
            let s = c.wait_converged(Duration::from_secs(30));
            let all: Vec<Status> = c.running().iter().filter_map(|id| c.status(*id)).collect();
            let same = all.len() == c.running().len()
                && all.iter().all(|x| {
                    x.module_failures_total == Some(failures)
                        && x.state_hash == s.state_hash
                        && x.module_failures == s.module_failures
                });
            agreed = same.then_some(s);
            same
        },
    );
    agreed.expect("agreed")
}

#[test]
fn a_module_failing_on_one_key_fails_that_command_and_the_cluster_serves_on() {
    let mut c = Cluster::start(3, FLAGS);
    let leader = c.wait_leader(Duration::from_secs(20));
    for i in 0..3 {
        assert!(c
            .acquire(leader, &format!("k{i}"), 600_000)
            .expect("acquire")
            .ok());
    }
    let r = c
        .post_bytes(leader, "/v1/admin/upgrade", CHAOS_GUEST)
        .expect("upgrade");
    assert_eq!(r.status, 200, "the dry run passes: {r:?}");
    assert_eq!(r.body["result"], "swapped");
    let chaos = ModuleHash::of(CHAOS_GUEST).to_string();
    assert_eq!(agreed(&c, 0).module_hash, chaos);

    // Load on other keys while the hostile grants go in: every request of
    // it is served.
    let stop = AtomicBool::new(false);
    let served = AtomicU64::new(0);
    std::thread::scope(|s| {
        let load = s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) || i < 20 {
                let key = format!("load/{}", i % 8);
                let r = c.acquire(leader, &key, 60_000).expect("acquire answered");
                assert!(r.ok(), "{key}: {r:?}");
                let token = r.body["token"].as_u64().expect("token");
                let r = c.release(leader, &key, token).expect("release answered");
                assert!(r.ok(), "{key}: {r:?}");
                served.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        });
        refused(&c, leader, "chaos:trap", "the module trapped in `apply`");
        refused(&c, leader, "chaos:loop", "ran out of fuel");
        // The same command fails again the same way: the state decides.
        refused(&c, leader, "chaos:trap", "the module trapped in `apply`");
        stop.store(true, Ordering::Relaxed);
        load.join().expect("the load ran without an error");
    });
    assert!(served.load(Ordering::Relaxed) >= 20);

    let s = agreed(&c, 3);
    assert_eq!(s.locks_held, 3, "only k0..k2 are held: {s:?}");
    let failed = s
        .module_failures
        .clone()
        .expect("this build reports failures");
    let reasons: Vec<&str> = failed.iter().map(|f| f.reason.as_str()).collect();
    assert_eq!(failed.len(), 3, "{reasons:?}");
    assert!(failed[0].command.contains("chaos:trap"), "{s:?}");
    assert!(failed[1].command.contains("chaos:loop"), "{s:?}");
    assert!(failed.iter().all(|f| f.module_hash == chaos));
    for id in 1..=3 {
        let st = c.status(id).expect("status");
        assert_eq!(st.poisoned, None, "node {id}");
        assert_eq!(
            c.metric(id, "lockd_module_failures_total"),
            Some(3),
            "node {id}"
        );
        assert!(
            c.metric(id, "lockd_guest_rebuilds_total").unwrap_or(0) >= 3,
            "node {id}"
        );
        assert_eq!(c.get(id, "/readyz").map(|r| r.status), Ok(200), "node {id}");
        // Reads are served from the table on every node.
        let k0 = c.lock(id, "k0").expect("get");
        assert!(k0.ok(), "node {id}: {k0:?}");
    }

    // A restarted follower replays its log, failures included.
    let mut followers = (1..=3).filter(|id| *id != leader);
    let (restarted, lagging) = (
        followers.next().expect("follower"),
        followers.next().expect("follower"),
    );
    c.kill(restarted);
    c.spawn(restarted);
    agreed(&c, 3);

    // A follower kept down while the others pass the snapshot threshold,
    // with one more failure in what it missed, comes back through a
    // snapshot install (see cluster_snapshot_catchup: the purged follower
    // is made the leader).
    let behind = c.status(lagging).expect("status").applied_index;
    c.kill(lagging);
    refused(&c, leader, "chaos:trap", "the module trapped in `apply`");
    for i in 0..60 {
        let key = format!("snap/{i}");
        let r = c.acquire(leader, &key, 60_000).expect("acquire");
        assert!(r.ok(), "{r:?}");
        let token = r.body["token"].as_u64().expect("token");
        assert!(c.release(leader, &key, token).expect("release").ok());
    }
    let done = c.status(leader).expect("leader status");
    c.wait_purged_past(
        restarted,
        done.applied_index,
        behind,
        Duration::from_secs(30),
    );
    c.kill(leader);
    c.spawn(lagging);
    assert_eq!(c.wait_leader(Duration::from_secs(30)), restarted);
    c.spawn(leader);
    let all = agreed(&c, 4);
    let lag = c.status(lagging).expect("status");
    assert!(lag.snapshots_installed >= 1, "node {lagging}: {lag:?}");
    assert_eq!(lag.state_hash, all.state_hash);
    assert_eq!(lag.module_failures, all.module_failures);
    // And the cluster still grants.
    let now = c.wait_leader(Duration::from_secs(30));
    assert!(c.acquire(now, "after", 60_000).expect("acquire").ok());
}

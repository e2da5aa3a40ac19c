//! Hot upgrade under load: a 3-node cluster serving several clients swaps
//! its lock module through the log, to version 2 (world 0.1) and to the
//! reference module of world 0.2. No client operation fails, tokens keep
//! increasing across the swap, and every node runs the new module from the
//! same index with the same state.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::Cluster;
use lockd_tests::fixtures::{LOCK_SM_WORLD01_V2, LOCK_SM_WORLD02};
use lockd_tests::load;

#[test]
fn upgrade_under_load_swaps_every_node_at_one_index() {
    let (c, leader) = swap_under_load(LOCK_SM_WORLD01_V2, "snapshot format 2", "0.1");
    // Version 2's policy is now what the cluster does.
    let r = c.acquire(leader, "reserved/x", 10_000).expect("acquire");
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.error().contains("refused"), "{r:?}");

    // And the audit from outside agrees.
    let out = c
        .lockctl()
        .args(["audit", "--json"])
        .output()
        .expect("lockctl audit");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["common_indices"].as_u64().unwrap_or(0) >= 2, "{v}");
    assert_eq!(v["divergences"], serde_json::json!([]));
}

/// Then, on the same processes, shared locks and semaphores through HTTP,
/// lockctl and the Rust client (`world02_live`).
#[test]
fn upgrade_to_world_0_2_under_exclusive_load_loses_nothing() {
    let (c, leader) = swap_under_load(LOCK_SM_WORLD02, "world lockd:sm@0.2.0", "0.2");
    crate::world02_live::used_after_upgrade(&c, leader, "held/across");
}

/// Start 3 nodes, put six clients on them, swap to `module` through a
/// follower in the middle, and check what every swap must keep.
/// `version` is part of the new module's version, `world` the world
/// status names for it.
fn swap_under_load(module: &[u8], version: &str, world: &str) -> (Cluster, u64) {
    // Alone: six clients keep both cores busy, and more than 20 grants are
    // required in each 1.5 s window around the swap.
    let _alone = lockd_tests::turns::alone();
    // A cluster of world 0.1's module, as before 0.2 was built in.
    let c = Cluster::start(
        3,
        &[
            "--initial-module",
            "world-0.1",
            "--audit-interval",
            "25",
            "--audit-check-ms",
            "200",
        ],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let v1 = c.status(leader).expect("status").module_hash;
    assert_eq!(v1, ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string());
    let v2 = ModuleHash::of(module).to_string();
    crate::world02_live::refused_on_0_1(&c, leader);
    // A lock held across the swap keeps its token and its holder.
    let held_token = c.acquire_on_leader("held/across", 60_000, Duration::from_secs(20));

    let stop = AtomicBool::new(false);
    let (logs, reply, swapped_at) = std::thread::scope(|s| {
        let clients = s.spawn(|| load::run(&c, &[1, 2, 3], 6, &stop));
        let _stop = load::StopOnDrop(&stop);
        std::thread::sleep(Duration::from_millis(1500));
        // Through a follower: the admin route is forwarded to the leader.
        let via = (1..=3).find(|i| *i != leader).expect("follower");
        let reply = c
            .post_bytes(via, "/v1/admin/upgrade", module)
            .expect("upgrade request");
        let swapped_at = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        (clients.join().expect("clients"), reply, swapped_at)
    });
    assert_eq!(reply.status, 200, "upgrade: {reply:?}");
    assert_eq!(reply.body["result"], "swapped", "{reply:?}");
    assert_eq!(reply.body["module_hash"], v2.as_str());
    assert_eq!(reply.body["replaces"], v1.as_str());
    let index = reply.body["index"].as_u64().expect("index");

    let mut before = 0;
    let mut after = 0;
    for (i, log) in logs.iter().enumerate() {
        assert!(
            log.failures.is_empty(),
            "client {i} saw failures: {:?}",
            log.failures
        );
        assert!(
            log.grants.windows(2).all(|w| w[0].token < w[1].token),
            "client {i}: tokens must keep increasing"
        );
        before += log.grants.iter().filter(|g| g.at < swapped_at).count();
        after += log.grants.iter().filter(|g| g.at > swapped_at).count();
    }
    assert!(
        before > 20 && after > 20,
        "load on both sides of the swap: {before} before, {after} after"
    );

    // Every node: the new module, active from the same index, same state.
    let s = c.wait_converged(Duration::from_secs(20));
    for id in 1..=3 {
        let st = c.status(id).expect("status");
        assert_eq!(st.module_hash, v2, "node {id}");
        assert_eq!(st.module_since_index, index, "node {id}");
        assert_eq!(st.state_hash, s.state_hash, "node {id}");
        let rec = st.upgrades.last().expect("an upgrade record");
        assert!(rec.swapped() && rec.index == index, "node {id}: {rec:?}");
        assert!(
            st.module_version.contains(version),
            "node {id}: {}",
            st.module_version
        );
        assert_eq!(st.module_world.as_deref(), Some(world), "node {id}");
        // The audit point of the swap is the same on every node.
        let audit = c.audit(id).expect("audit");
        let at_swap: Vec<_> = audit.records.iter().filter(|r| r.index == index).collect();
        assert_eq!(at_swap.len(), 1, "node {id}: {:?}", audit.records);
        assert_eq!(at_swap[0].kind, lockd_proto::AuditKind::Upgrade);
    }
    let swap_hashes: Vec<String> = (1..=3)
        .map(|id| {
            c.audit(id)
                .expect("audit")
                .records
                .into_iter()
                .find(|r| r.index == index)
                .expect("point")
                .state_hash
        })
        .collect();
    assert!(
        swap_hashes.windows(2).all(|w| w[0] == w[1]),
        "{swap_hashes:?}"
    );

    // The lock held across the swap is still held, with its token; the
    // next grant gets a higher token.
    let r = c.lock(leader, "held/across").expect("get");
    assert_eq!(r.body["token"].as_u64(), Some(held_token), "{r:?}");
    let max_seen = logs
        .iter()
        .flat_map(|l| l.grants.iter().map(|g| g.token))
        .max()
        .unwrap_or(0);
    let next = c.acquire(leader, "after/swap", 10_000).expect("acquire");
    assert!(next.body["token"].as_u64().expect("token") > max_seen);
    (c, leader)
}

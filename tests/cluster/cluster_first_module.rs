//! A cluster keeps the module it started with, whatever a later binary's
//! built-in module is (docs/lock-modules.md, "The first module"). Three
//! nodes whose built-in module is version 2 of world 0.1's (the test-only
//! fault `LOCKD_FAULT_BUILTIN`, standing for a binary with another
//! built-in) start a new cluster: its first leader records that module in
//! the log before it serves. A lock is taken; then every node is killed
//! and restarted without the fault, as this binary, whose new clusters
//! record world 0.2's module.
//! Every node replays the log from index 1 (no snapshot yet) and runs the
//! recorded module again, identically (same module and state hash on
//! every node), with the lock still held under its token. Every node's
//! status names that module as the one the cluster started with, before
//! and after.

use std::time::Duration;

use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::{fault_binary, Cluster};
use lockd_tests::fixtures::LOCK_SM_WORLD01_V2;

const WITHIN: Duration = Duration::from_secs(30);

#[test]
fn a_cluster_keeps_its_first_module_when_restarted_by_a_binary_with_another() {
    let fault = fault_binary();
    let mut c = Cluster::configure(3, &[]);
    let module_file = c.dir.path().join("first-module.wasm");
    std::fs::write(&module_file, LOCK_SM_WORLD01_V2).expect("write module");
    for id in 1..=3 {
        let n = c.nodes.get_mut(&id).expect("node");
        n.bin = Some(fault.clone());
        n.env.push((
            "LOCKD_FAULT_BUILTIN".into(),
            module_file.display().to_string(),
        ));
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let first = ModuleHash::of(LOCK_SM_WORLD01_V2).to_string();
    for builtin in [
        lockd_core::builtin::LOCK_SM,
        lockd_core::builtin::LOCK_SM_0_2,
    ] {
        let builtin = ModuleHash::of(builtin).to_string();
        assert_ne!(first, builtin, "the test needs another module");
    }

    let leader = c.wait_leader(WITHIN);
    let granted = c.acquire(leader, "db/primary", 600_000).expect("acquire");
    assert!(granted.ok(), "{:?}", granted.body);
    let token = granted.body["token"].as_u64().expect("token");
    let before = c.wait_converged(WITHIN);
    assert_eq!(before.module_hash, first, "the recorded first module runs");
    assert!(before.module_since_index > 0, "swapped in by a log entry");
    every_node_names_the_first_module(&c, &first);

    // The binary changes under every node; the data dirs stay.
    for id in 1..=3 {
        c.kill(id);
        let n = c.nodes.get_mut(&id).expect("node");
        n.bin = None;
        n.env.retain(|(k, _)| k != "LOCKD_FAULT_BUILTIN");
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let leader = c.wait_leader(WITHIN);
    let after = c.wait_converged(WITHIN);
    assert_eq!(after.module_hash, first, "still the cluster's first module");
    assert_eq!(after.module_since_index, before.module_since_index);
    every_node_names_the_first_module(&c, &first);
    let held = c.lock(leader, "db/primary").expect("get");
    assert_eq!(held.body["token"].as_u64(), Some(token), "{:?}", held.body);
    // And it goes on granting, with later tokens.
    let next = c.acquire(leader, "db/other", 60_000).expect("acquire");
    assert!(next.body["token"].as_u64() > Some(token), "{:?}", next.body);
}

/// A cluster started on world 0.1's module (`--initial-module world-0.1`,
/// which writes the log an earlier binary wrote: no first-module entry)
/// that has served a lock keeps world 0.1 when every node restarts with
/// the default, world 0.2: nothing is recorded, the lock is held under its
/// token, and a shared lock is still refused naming world 0.1.
#[test]
fn a_cluster_that_served_on_world_0_1_keeps_it_under_the_new_default() {
    let mut c = Cluster::start(3, &["--initial-module", "world-0.1"]);
    let v1 = ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string();
    let leader = c.wait_leader(WITHIN);
    let granted = c.acquire(leader, "db/primary", 600_000).expect("acquire");
    assert!(granted.ok(), "{:?}", granted.body);
    let token = granted.body["token"].as_u64().expect("token");
    let before = c.wait_converged(WITHIN);
    assert_eq!(before.module_hash, v1);
    assert_eq!(before.module_since_index, 0, "nothing recorded");

    c.extra
        .retain(|a| a != "--initial-module" && a != "world-0.1");
    for id in 1..=3 {
        c.kill(id);
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let leader = c.wait_leader(WITHIN);
    // The new leader served: a lock is granted after its load.
    let next = c.acquire(leader, "db/other", 60_000).expect("acquire");
    assert!(next.body["token"].as_u64() > Some(token), "{:?}", next.body);
    let after = c.wait_converged(WITHIN);
    assert_eq!(after.module_hash, v1, "still world 0.1's module");
    assert_eq!(after.module_since_index, 0);
    assert!(after.upgrades.is_empty(), "{:?}", after.upgrades);
    let held = c.lock(leader, "db/primary").expect("get");
    assert_eq!(held.body["token"].as_u64(), Some(token), "{:?}", held.body);
    let r = c
        .post(
            leader,
            "/v1/locks/cfg/acquire",
            serde_json::json!({"lease_ms": 1000, "mode": "shared"}),
        )
        .expect("acquire");
    assert_eq!(r.status, 422, "{r:?}");
    assert!(r.error().contains("lock-sm@0.1.0"), "{r:?}");
}

fn every_node_names_the_first_module(c: &Cluster, first: &str) {
    for id in 1..=3 {
        let s = c.status(id).expect("status");
        assert_eq!(
            s.first_module_hash.as_deref(),
            Some(first),
            "node {id}: the module the cluster started with"
        );
    }
}

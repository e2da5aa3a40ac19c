//! The short, fixed-seed fault-injection runs that CI does. Every checker
//! is active; a run passes only with zero violations.

use std::time::Duration;

use lock_tests::jepsen::run::{run, Fault, RunConfig, PARTITIONS};
use lock_tests::netns::NetHosts;

/// One run at a time: each is a whole cluster plus clients, and the machine
/// has two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn assert_clean(cfg: RunConfig) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let r = run(cfg.clone());
    eprintln!(
        "seed {}: {} ops, {} grants, {} stale accesses refused, faults: {:#?}",
        cfg.seed, r.ops, r.granted, r.rejected_stale, r.faults
    );
    assert!(r.granted > 20, "too little work to mean anything: {r:?}");
    assert!(
        !r.faults.is_empty() || cfg.faults.is_empty(),
        "no fault was injected"
    );
    assert!(
        r.violations.is_empty(),
        "violations:\n{}",
        r.violations.join("\n")
    );
}

#[test]
fn three_nodes_kills_pauses_storms_seed_1() {
    assert_clean(RunConfig {
        seed: 1,
        ..RunConfig::default()
    });
}

#[test]
fn five_nodes_kills_and_pauses_seed_2() {
    assert_clean(RunConfig {
        nodes: 5,
        seed: 2,
        faults: vec![Fault::KillLeader, Fault::PauseLeader, Fault::KillFollower],
        ..RunConfig::default()
    });
}

/// A hot upgrade in the middle of leader kills and pauses: every checker
/// still passes across the swap, and every node ends on version 2.
#[test]
fn three_nodes_upgrade_amid_kills_seed_5() {
    let r = {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        run(RunConfig {
            seed: 5,
            upgrade_at: Some(Duration::from_secs(4)),
            faults: vec![Fault::KillLeader, Fault::PauseLeader, Fault::KillFollower],
            ..RunConfig::default()
        })
    };
    eprintln!(
        "seed 5: {} ops, {} grants, faults: {:#?}",
        r.ops, r.granted, r.faults
    );
    assert!(r.granted > 20, "too little work to mean anything: {r:?}");
    assert!(
        r.faults.iter().any(|f| f.contains("version 2")),
        "the upgrade did not go in: {:?}",
        r.faults
    );
    assert!(
        r.violations.is_empty(),
        "violations:\n{}",
        r.violations.join("\n")
    );
}

/// The checkers can fail: with a resource that ignores fencing tokens and
/// holders that all stall past their leases, updates are lost and found.
#[test]
fn an_unfenced_resource_loses_updates_and_the_checker_sees_it() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let r = run(RunConfig {
        seed: 3,
        clients: 4,
        keys: 1,
        duration: Duration::from_secs(5),
        pause_one_in: 1,
        faults: vec![],
        unfenced_register: true,
        ..RunConfig::default()
    });
    assert!(
        r.violations.iter().any(|v| v.starts_with("lost update")),
        "expected lost updates: {r:?}"
    );
}

/// Partitions between separate hosts (one network namespace per node):
/// an isolated leader, majority/minority, a bridge — plus kills.
#[test]
fn partitions_on_separate_hosts_seed_4() {
    assert!(
        NetHosts::available(),
        "network namespaces are needed (run as root with iproute2)"
    );
    let mut faults = PARTITIONS.to_vec();
    faults.push(Fault::KillLeader);
    assert_clean(RunConfig {
        nodes: 5,
        seed: 4,
        hosts: true,
        faults,
        ..RunConfig::default()
    });
}

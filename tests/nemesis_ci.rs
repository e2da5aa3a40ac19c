//! The short, fixed-seed fault-injection runs that CI does. Every checker
//! is active; a run passes only with zero violations, and only if the
//! faults it was given really happened: every configured fault kind at
//! least once, partitions that made nodes stand for election, at least
//! one leader change, and stale accesses refused by the fenced register.
//! Two deliberately broken servers show the mutual-exclusion checker
//! catching what the register cannot.

use std::time::Duration;

use lockd_tests::cluster::fault_binary;
use lockd_tests::jepsen::check::Checker;
use lockd_tests::jepsen::{run, Fault, Report, RunConfig, Server, PARTITIONS};
use lockd_tests::netns::NetHosts;

/// One run at a time: each is a whole cluster plus clients, and the machine
/// has two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_alone(cfg: RunConfig) -> Report {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let r = run(cfg.clone());
    eprintln!(
        "seed {}: {} ops, {} grants, {} stale accesses refused, {} leader changes, {} keeper renewals, {} ledger keys, {} readers and {} semaphore slots at once at most",
        cfg.seed, r.ops, r.granted, r.rejected_stale, r.leader_changes, r.keeper_renewals, r.ledger_keys, r.most_readers, r.most_slots
    );
    for e in &r.faults {
        eprintln!(
            "  {:>6.0}..{:>6.0} ms {:?}: {} (term {} -> {})",
            e.from, e.to, e.fault, e.what, e.term_before, e.term_after
        );
    }
    // A broken server's run finds hundreds; the first few say enough.
    for v in r.violations.iter().take(12) {
        eprintln!("  violation {v}");
    }
    if r.violations.len() > 12 {
        eprintln!("  ... {} violations in all", r.violations.len());
    }
    r
}

/// What a run must have done to mean anything.
fn assert_covered(cfg: &RunConfig, r: &Report) {
    assert!(r.granted > 20, "too little work to mean anything: {r:?}");
    for kind in &cfg.faults {
        assert!(
            r.faults.iter().any(|e| e.fault == Some(*kind)),
            "seed {}: no {kind:?} was injected",
            cfg.seed
        );
    }
    for e in r
        .faults
        .iter()
        .filter(|e| e.fault.is_some_and(Fault::is_partition))
    {
        assert!(
            e.term_after > e.term_before,
            "seed {}: a partition had no effect (no node stood for election): {e:?}",
            cfg.seed
        );
    }
    assert!(r.leader_changes > 0, "seed {}: no leader change", cfg.seed);
    assert!(
        r.rejected_stale > 0,
        "seed {}: the register refused no stale access",
        cfg.seed
    );
    assert!(
        r.keeper_renewals > 0 && r.ledger_keys > 0,
        "seed {}: nothing to check survival with: {r:?}",
        cfg.seed
    );
    if cfg.mixed {
        assert!(
            r.most_readers >= 2 && r.most_slots >= 2,
            "seed {}: readers or semaphore slots never held a key together: {r:?}",
            cfg.seed
        );
    }
}

fn assert_clean(cfg: RunConfig) {
    let r = run_alone(cfg.clone());
    assert_covered(&cfg, &r);
    assert!(
        r.violations.is_empty(),
        "violations:\n{}",
        r.violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn three_nodes_kills_pauses_storms_seed_1() {
    assert_clean(seed_1());
}

/// Every process fault, each at least once in the first round.
fn seed_1() -> RunConfig {
    RunConfig {
        seed: 1,
        duration: Duration::from_secs(15),
        ..RunConfig::default()
    }
}

/// Mutexes, readers and writers, and semaphore slots on the 0.2 module.
#[test]
fn five_nodes_kills_and_pauses_mixed_clients_seed_2() {
    assert_clean(RunConfig {
        nodes: 5,
        seed: 2,
        faults: vec![Fault::KillLeader, Fault::PauseLeader, Fault::KillFollower],
        mixed: true,
        ..RunConfig::default()
    });
}

/// A hot upgrade in the middle of leader kills and pauses: every checker
/// still passes across the swap, and every node ends on version 2.
#[test]
fn three_nodes_upgrade_amid_kills_seed_5() {
    let cfg = RunConfig {
        seed: 5,
        upgrade_at: Some(Duration::from_secs(4)),
        faults: vec![Fault::KillLeader, Fault::PauseLeader, Fault::KillFollower],
        ..RunConfig::default()
    };
    let r = run_alone(cfg.clone());
    assert_covered(&cfg, &r);
    assert!(
        r.faults.iter().any(|e| e.fault.is_none()
            && e.what.contains("version 2")
            && !e.what.contains("FAILED")),
        "the upgrade did not go in: {:?}",
        r.faults
    );
    assert!(r.violations.is_empty(), "violations: {:?}", r.violations);
}

/// Partitions between separate hosts (one network namespace per node):
/// an isolated leader, majority/minority, a bridge — plus kills. Mutexes
/// only: partitions leave few operations, and with mixed clients too few
/// reached the register for it to refuse a stale access every time.
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
        duration: Duration::from_secs(15),
        ..RunConfig::default()
    });
}

/// The lost-update checker can fail: with a resource that ignores fencing
/// tokens and holders that all stall past their leases, updates are lost
/// and found.
#[test]
fn an_unfenced_resource_loses_updates_and_the_checker_sees_it() {
    let r = run_alone(RunConfig {
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
        r.violations
            .iter()
            .any(|v| v.checker == Checker::LostUpdate),
        "expected lost updates: {r:?}"
    );
}

/// Seed 1's run against a broken server (the test-only fault `var` set).
fn broken(var: &str, value: &str) -> Report {
    run_alone(RunConfig {
        server: Some(Server {
            bin: fault_binary(),
            env: vec![(var.into(), value.into())],
        }),
        ..seed_1()
    })
}

/// Found by the checker of the lease promise itself: mutual exclusion,
/// with each holder's window ending where the *server* promised (the lease
/// asked, from the acquire's invocation), never at the client library's
/// deadline. Not "any checker": a catch by another (linearizability, a
/// refusal inside a lease) does not count here.
fn caught_by_mutual_exclusion(r: &Report) -> bool {
    r.violations
        .iter()
        .any(|v| v.checker == Checker::MutualExclusion)
}

/// Leases that end after a quarter of their time, in CI seed 1.
#[test]
fn leases_ending_early_are_caught_by_the_mutual_exclusion_checker() {
    let r = broken("LOCKD_FAULT_EARLY_EXPIRY", "1");
    assert!(
        caught_by_mutual_exclusion(&r),
        "leases ending early went unseen by the mutual-exclusion checker: {r:?}"
    );
}

/// One grant in 25 expires at once, so the key goes to a second client
/// while the first still holds it. Every token stays unique and increasing,
/// so the fenced register cannot see it (and does not); the mutual-exclusion
/// checker must.
#[test]
fn a_rare_double_grant_is_caught_though_the_register_cannot_see_it() {
    let r = broken("LOCKD_FAULT_DOUBLE_GRANT", "25");
    assert!(
        caught_by_mutual_exclusion(&r),
        "a double grant went unseen by the mutual-exclusion checker: {r:?}"
    );
    assert!(
        !r.violations
            .iter()
            .any(|v| v.checker == Checker::LostUpdate),
        "the fenced register cannot lose an update with unique increasing tokens: {r:?}"
    );
}

//! The determinism audit names a node whose state diverges.
//!
//! Node 2 runs `lockd-fault`: lockd built with the test-only `fault-diverge`
//! feature (never in normal builds), which makes a node apply one extra
//! command once its applied index reaches `LOCKD_FAULT_DIVERGE_AT`. From
//! there its state hash differs from the others' at every audit point. The
//! nodes' background checkers raise the alarm (log + metric) and `lockctl
//! audit` names node 2.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lock_tests::cluster::{lockd_bin, Cluster};

/// `lockd-fault`, built next to `lockd`: in the same target dir and
/// profile, with the same packages selected as the build that ran the tests
/// (`cargo test` at the workspace root), so every dependency is reused and
/// only the `lockd` crate is compiled again, with the fault; under its own
/// file name, so the `lockd` binary the other tests run is never replaced
/// (checked). Built once per test process, whoever asks first.
fn fault_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build_fault_binary).clone()
}

fn build_fault_binary() -> PathBuf {
    // Alone: the build keeps both cores busy for a while, which would stretch
    // the time windows of any cluster running beside it.
    let _alone = lock_tests::turns::alone();
    let bin = lockd_bin().with_file_name("lockd-fault");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf();
    let profile_dir = lockd_bin().parent().expect("profile dir").to_path_buf();
    let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
    let lockd_before = std::fs::read(lockd_bin()).expect("read lockd");
    // No `-p lockd`: cargo unifies dependency features over the selected
    // packages, and `-p lockd` alone would select fewer than the outer build
    // (the workspace's default members) and so compile many dependencies
    // again with other features. `lockd/fault-diverge` changes the `lockd`
    // crate only; `--bin lockd-fault` builds nothing else.
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace).args([
        "build",
        "--features",
        "lockd/fault-diverge",
        "--bin",
        "lockd-fault",
        "--target-dir",
    ]);
    cmd.arg(&target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build for lockd-fault");
    assert!(status.success(), "building lockd-fault failed");
    assert!(bin.exists(), "{} was not built", bin.display());
    assert!(
        std::fs::read(lockd_bin()).expect("read lockd") == lockd_before,
        "building lockd-fault changed {}, which the other tests run",
        lockd_bin().display()
    );
    bin
}

#[test]
fn audit_names_the_divergent_node() {
    let fault = fault_binary();
    let mut c = Cluster::configure(3, &["--audit-interval", "10", "--audit-check-ms", "200"]);
    {
        let n2 = c.nodes.get_mut(&2).expect("node 2");
        n2.bin = Some(fault);
        n2.env.push(("LOCKD_FAULT_DIVERGE_AT".into(), "25".into()));
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let leader = c.wait_leader(Duration::from_secs(20));
    // Enough entries to pass index 25 and several audit points after it.
    for i in 0..40 {
        let key = format!("audit/{i}");
        let r = c.acquire(leader, &key, 60_000).expect("acquire");
        assert!(r.ok(), "{r:?}");
    }

    // The nodes' own checkers raise the alarm.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let counts: Vec<u64> = (1..=3)
            .map(|id| c.metric(id, "lockd_audit_divergences_total").unwrap_or(0))
            .collect();
        if counts.iter().all(|n| *n > 0) {
            break;
        }
        assert!(Instant::now() < deadline, "no divergence alarm on every node: {counts:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(&c.nodes[&1].log).expect("node 1 log");
    assert!(
        log.contains("DETERMINISM AUDIT: node 2 has a different state hash"),
        "node 1 did not log the divergence of node 2"
    );

    // `lockctl audit` names node 2, and only node 2.
    let out = c.lockctl().args(["audit", "--json"]).output().expect("lockctl audit");
    assert_eq!(out.status.code(), Some(1), "audit must fail: {}", String::from_utf8_lossy(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["divergent_nodes"], serde_json::json!([2]), "{v}");
    let first = v["divergences"][0]["index"].as_u64().expect("index");
    assert!(first >= 25, "no divergence before the fault: {v}");
    let human = c.lockctl().arg("audit").output().expect("lockctl audit");
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("DIVERGENCE at index") && text.contains("node 2"), "{text}");
}

#[test]
fn audit_of_a_healthy_cluster_finds_nothing() {
    let c = Cluster::start(3, &["--audit-interval", "10", "--audit-check-ms", "200"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    for i in 0..30 {
        assert!(c.acquire(leader, &format!("ok/{i}"), 60_000).expect("acquire").ok());
    }
    c.wait_converged(Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(600));
    let out = c.lockctl().args(["audit", "--json"]).output().expect("lockctl audit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["common_indices"].as_u64().unwrap_or(0) >= 3, "{v}");
    assert_eq!(v["nodes"].as_array().map(|a| a.len()), Some(3), "{v}");
    for id in 1..=3 {
        assert_eq!(c.metric(id, "lockd_audit_divergences_total"), Some(0));
    }
}

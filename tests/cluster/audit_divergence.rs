//! The determinism audit names a node whose state diverges.
//!
//! Node 2 runs with the test-only fault `LOCKD_FAULT_DIVERGE_AT` set
//! (docs/testing.md, "Test-only faults"), which makes a node apply one
//! extra command once its applied index reaches it. From
//! there its state hash differs from the others' at every audit point. The
//! nodes' background checkers raise the alarm (log + metric) and `lockctl
//! audit` names node 2.

use std::time::{Duration, Instant};

use lockd_tests::cluster::{fault_binary, Cluster};

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
    c.wait_leader(Duration::from_secs(20));
    // Enough entries to pass index 25 and several audit points after it.
    for i in 0..40 {
        let key = format!("audit/{i}");
        c.acquire_on_leader(&key, 60_000, Duration::from_secs(20));
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
        assert!(
            Instant::now() < deadline,
            "no divergence alarm on every node: {counts:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(&c.nodes[&1].log).expect("node 1 log");
    assert!(
        log.contains("DETERMINISM AUDIT: node 2 has a different state hash"),
        "node 1 did not log the divergence of node 2"
    );

    // Status names it too (the console shows it).
    let seen = c
        .status(1)
        .expect("status")
        .last_divergence
        .expect("a divergence");
    assert_eq!(seen.node, 2, "{seen:?}");
    assert!(seen.index >= 25, "{seen:?}");

    // `lockctl audit` names node 2, and only node 2.
    let out = c
        .lockctl()
        .args(["audit", "--json"])
        .output()
        .expect("lockctl audit");
    assert_eq!(
        out.status.code(),
        Some(1),
        "audit must fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["divergent_nodes"], serde_json::json!([2]), "{v}");
    let first = v["divergences"][0]["index"].as_u64().expect("index");
    assert!(first >= 25, "no divergence before the fault: {v}");
    let human = c.lockctl().arg("audit").output().expect("lockctl audit");
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("DIVERGENCE at index") && text.contains("node 2"),
        "{text}"
    );
}

#[test]
fn audit_of_a_healthy_cluster_finds_nothing() {
    let c = Cluster::start(3, &["--audit-interval", "10", "--audit-check-ms", "200"]);
    c.wait_leader(Duration::from_secs(20));
    for i in 0..30 {
        c.acquire_on_leader(&format!("ok/{i}"), 60_000, Duration::from_secs(20));
    }
    c.wait_converged(Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(600));
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
    assert!(v["common_indices"].as_u64().unwrap_or(0) >= 3, "{v}");
    assert_eq!(v["nodes"].as_array().map(|a| a.len()), Some(3), "{v}");
    for id in 1..=3 {
        assert_eq!(c.metric(id, "lockd_audit_divergences_total"), Some(0));
    }
}

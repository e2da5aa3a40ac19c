//! `lockd replay`: a stopped node's log replayed through another module,
//! reporting every outcome that would have been different.

use std::process::Command;
use std::time::Duration;

use lockd_tests::cluster::{lockd_bin, Cluster};
use lockd_tests::fixtures::LOCK_SM_WORLD01_V2;
use serde_json::Value;

fn cycle(c: &Cluster, key: &str) {
    let r = c.acquire(1, key, 60_000).expect("acquire");
    assert!(r.ok(), "{key}: {r:?}");
    let token = r.body["token"].as_u64().expect("token");
    assert!(c.release(1, key, token).expect("release").ok());
}

fn replay(data_dir: &std::path::Path, module: &std::path::Path) -> (Option<i32>, Value) {
    let out = Command::new(lockd_bin())
        .arg("replay")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--module")
        .arg(module)
        .arg("--json")
        .output()
        .expect("lockd replay");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "replay output is not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

#[test]
fn replay_reports_the_outcomes_a_module_would_change() {
    let mut c = Cluster::start(
        1,
        &[
            "--initial-module",
            "world-0.1",
            "--snapshot-threshold",
            "30",
        ],
    );
    c.wait_leader(Duration::from_secs(20));
    let dir = tempfile::tempdir().expect("tempdir");
    let v1 = dir.path().join("v1.wasm");
    let v2 = dir.path().join("v2.wasm");
    std::fs::write(&v1, lockd_core::builtin::LOCK_SM).expect("write");
    std::fs::write(&v2, LOCK_SM_WORLD01_V2).expect("write");
    let data = c.nodes[&1].data_dir.clone();

    for i in 0..20 {
        cycle(&c, &format!("k{i}"));
    }
    // Past the threshold a snapshot follows (built in the background);
    // what comes after it is in the log, for replay.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let st = c.status(1).expect("status");
        if st.snapshot_index.unwrap_or(0) > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no snapshot after the threshold: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    cycle(&c, "reserved/a");
    cycle(&c, "after");
    c.kill(1);

    // The same module: nothing differs.
    let (code, v) = replay(&data, &v1);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["differences"], serde_json::json!([]));
    assert_eq!(v["active_state_hash"], v["candidate_state_hash"]);
    assert!(
        v["from_index"].as_u64().unwrap_or(0) > 0,
        "starts from the snapshot: {v}"
    );

    // Version 2 would have refused reserved/a, and (using no token for it)
    // handed every later grant a token one lower.
    let (code, v) = replay(&data, &v2);
    assert_eq!(code, Some(2), "{v}");
    let diffs = v["differences"].as_array().expect("differences");
    assert_eq!(
        diffs[0]["command"], "grant \"reserved/a\" lease_ms=60000",
        "{v}"
    );
    // Outcomes in world 0.2's terms: the 0.1 module's refusal of a free
    // key is its policy.
    assert_eq!(
        diffs[0]["candidate"],
        "rejected (policy: refused by the active lock module)"
    );
    assert!(
        diffs[1]["command"]
            .as_str()
            .is_some_and(|c| c.starts_with("release \"reserved/a\" token=")),
        "{v}"
    );
    assert_eq!(diffs[1]["candidate"], "not-found");
    assert_eq!(diffs.len(), 3, "{v}");
    assert_eq!(
        v["candidate_version"].as_str().map(|s| s.contains("0.2.0")),
        Some(true)
    );

    // A log with an upgrade in it: the active side follows the upgrade.
    c.spawn(1);
    c.wait_leader(Duration::from_secs(20));
    let r = c
        .post_bytes(1, "/v1/admin/upgrade", LOCK_SM_WORLD01_V2)
        .expect("upgrade");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        c.acquire(1, "reserved/z", 1000).expect("acquire").status,
        403
    );
    c.kill(1);
    let (code, v) = replay(&data, &v1);
    assert_eq!(code, Some(2), "{v}");
    assert_eq!(v["upgrades"], 1, "{v}");
    let diffs = v["differences"].as_array().expect("differences");
    let z = diffs
        .iter()
        .find(|d| d["command"] == "grant \"reserved/z\" lease_ms=1000")
        .unwrap_or_else(|| panic!("no difference for reserved/z: {v}"));
    assert_eq!(
        z["active"],
        "rejected (policy: refused by the active lock module)"
    );
    assert!(
        z["candidate"].as_str().unwrap_or("").starts_with("granted"),
        "{z}"
    );

    // A running node's log is locked: replay refuses rather than race it.
    c.spawn(1);
    c.wait_leader(Duration::from_secs(20));
    let out = Command::new(lockd_bin())
        .args(["replay", "--data-dir"])
        .arg(&data)
        .arg("--module")
        .arg(&v1)
        .output()
        .expect("lockd replay");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lock"), "{err}");
}

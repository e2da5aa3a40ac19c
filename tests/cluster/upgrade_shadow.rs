//! Shadow mode: a candidate module runs beside the active one on every
//! node, fed the same committed batches, with differences counted.
//!
//! An identical module shows no difference; version 2 (which refuses keys
//! under `reserved/`) shows exactly the grants it would have refused, and
//! the state-hash differences that follow. Promotion swaps it in through a
//! normal upgrade entry; abort drops it. Driven through `lockctl`.

use std::time::{Duration, Instant};

use lockd::api::status::Status;
use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::Cluster;
use lockd_tests::fixtures::LOCK_SM_WORLD01_V2;

fn lockctl_ok(c: &Cluster, args: &[&str]) -> String {
    let out = c.lockctl().args(args).output().expect("lockctl");
    assert!(
        out.status.success(),
        "lockctl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Wait until every node has applied the same index, and return their
/// statuses.
fn settled(c: &Cluster) -> Vec<Status> {
    c.wait_converged(Duration::from_secs(20));
    (1..=3).map(|id| c.status(id).expect("status")).collect()
}

fn traffic(c: &Cluster, via: u64, keys: &[&str]) {
    for k in keys {
        let r = c.acquire(via, k, 60_000).expect("acquire");
        assert!(r.ok(), "{k}: {r:?}");
        let token = r.body["token"].as_u64().expect("token");
        assert!(c.release(via, k, token).expect("release").ok());
    }
}

#[test]
fn shadow_mode_counts_differences_then_promotes_or_aborts() {
    let c = Cluster::start(
        3,
        &["--initial-module", "world-0.1", "--audit-interval", "5"],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let dir = tempfile::tempdir().expect("tempdir");
    let v1_file = dir.path().join("lock_sm_0_1.wasm");
    let v2_file = dir.path().join("lock_sm_0_1_v2.wasm");
    std::fs::write(&v1_file, lockd_core::builtin::LOCK_SM).expect("write");
    std::fs::write(&v2_file, LOCK_SM_WORLD01_V2).expect("write");
    let v1 = ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string();
    let v2 = ModuleHash::of(LOCK_SM_WORLD01_V2).to_string();

    // 1. The identical module as a shadow: no difference at all.
    let out = lockctl_ok(
        &c,
        &["upgrade", "--shadow", v1_file.to_str().expect("path")],
    );
    assert!(
        out.contains("shadow module") && out.contains("started"),
        "{out}"
    );
    traffic(
        &c,
        leader,
        &["a", "b", "reserved/a", "c", "a", "b", "c", "d"],
    );
    for st in settled(&c) {
        let sh = st
            .shadow
            .as_ref()
            .unwrap_or_else(|| panic!("node {}: no shadow", st.id));
        assert_eq!(sh.module_hash, v1);
        assert_eq!(sh.commands_compared, 16, "node {}: {sh:?}", st.id);
        assert_eq!(
            (sh.outcome_diffs, sh.hash_diffs),
            (0, 0),
            "node {}: {sh:?}",
            st.id
        );
        assert!(sh.hash_checks >= 2, "node {}: {sh:?}", st.id);
        assert!(sh.failed.is_none());
    }
    assert_eq!(c.metric(leader, "lockd_shadow_active"), Some(1));
    let out = lockctl_ok(&c, &["upgrade", "--abort"]);
    assert!(out.contains("stopped"), "{out}");
    for st in settled(&c) {
        assert!(st.shadow.is_none(), "node {}", st.id);
        assert_eq!(st.module_hash, v1);
    }

    // 2. Version 2 as a shadow: it would refuse the reserved key.
    lockctl_ok(
        &c,
        &["upgrade", "--shadow", v2_file.to_str().expect("path")],
    );
    traffic(&c, leader, &["x", "reserved/b", "y", "z", "w"]);
    let statuses = settled(&c);
    for st in &statuses {
        let sh = st
            .shadow
            .as_ref()
            .unwrap_or_else(|| panic!("node {}: no shadow", st.id));
        assert_eq!(sh.module_hash, v2);
        assert_eq!(sh.commands_compared, 10, "node {}: {sh:?}", st.id);
        // The grant of reserved/b (granted vs refused), its release
        // (released vs not-found), and the three grants after it: version 2
        // used no token on the refusal, so its tokens run one behind.
        assert_eq!(sh.outcome_diffs, 5, "node {}: {sh:?}", st.id);
        assert_eq!(sh.examples[4].active, "granted token=13 lease_ms=60000");
        assert_eq!(sh.examples[4].candidate, "granted token=12 lease_ms=60000");
        assert_eq!(
            sh.examples[0].command,
            "grant \"reserved/b\" lease_ms=60000"
        );
        assert_eq!(
            sh.examples[0].candidate,
            "rejected (policy: refused by the active lock module)"
        );
        assert!(sh.examples[0].active.starts_with("granted"), "{sh:?}");
        // Same everywhere: shadow mode is deterministic too.
        assert_eq!(
            Some(sh),
            statuses[0].shadow.as_ref(),
            "node {} differs from node {}",
            st.id,
            statuses[0].id
        );
    }
    // While reserved/c is held by v1 and refused by v2, the tables differ,
    // and the next audit points say so.
    let r = c.acquire(leader, "reserved/c", 60_000).expect("acquire");
    assert!(r.ok());
    traffic(&c, leader, &["p", "q", "r", "s", "t"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = c.status(leader).expect("status");
        if st.shadow.as_ref().is_some_and(|s| s.hash_diffs > 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no state-hash difference counted: {:?}",
            st.shadow
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        c.metric(leader, "lockd_shadow_diffs_total{kind=\"outcome\"}")
            .unwrap_or(0)
            >= 3
    );
    let status = lockctl_ok(&c, &["status"]);
    assert!(status.contains("shadow"), "{status}");
    // Both modules are of world 0.1, and say so before their versions
    // (which count releases: the candidate's is lock-sm/0.2.0).
    assert!(
        status.contains(&format!("node {leader}: module world 0.1, lock-sm/0.1.0")),
        "{status}"
    );
    assert!(status.contains("(world 0.1, lock-sm/0.2.0"), "{status}");
    let token = r.body["token"].as_u64().expect("token");
    assert!(c
        .release(leader, "reserved/c", token)
        .expect("release")
        .ok());

    // 3. Promote: a normal upgrade entry with the shadow's bytes.
    let out = lockctl_ok(&c, &["upgrade", "--promote"]);
    assert!(out.contains("upgraded at index"), "{out}");
    for st in settled(&c) {
        assert_eq!(st.module_hash, v2, "node {}", st.id);
        assert!(
            st.shadow.is_none(),
            "promotion ends shadow mode on node {}",
            st.id
        );
    }
    assert_eq!(
        c.acquire(leader, "reserved/d", 1000)
            .expect("acquire")
            .status,
        403
    );
}

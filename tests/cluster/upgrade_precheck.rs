//! The quorum pre-check on real processes (docs/writing-a-lock-module.md,
//! "The quorum pre-check"): node 3 runs with `--max-module-bytes` below
//! the world-0.2 module's size, so it cannot run it.
//!
//! * By default a refusal blocks it: the upgrade is refused with
//!   `precheck_refused` naming node 3 and its reason, each node records
//!   the verdicts at one index, and the cluster keeps its module and
//!   serves.
//! * With `--quorum` a refusal does not block, two of three are enough: nodes 1 and 2 swap; node 3
//!   stops before the swap's index, says why in status, and its Raft has
//!   stopped (it neither votes nor leads). Restarted with a bound that
//!   fits, it replays to the swap, runs the module and catches up.

use std::time::Duration;

use lockd_core::builtin::LOCK_SM;
use lockd_core::engine::ModuleHash;
use lockd_proto::Role;
use lockd_tests::cluster::{wait_for, Cluster};
use lockd_tests::fixtures::LOCK_SM_WORLD02;

const WITHIN: Duration = Duration::from_secs(30);

/// `lockctl upgrade FILE ARGS…`: its exit code and output.
fn lockctl_upgrade(c: &Cluster, module: &[u8], args: &[&str]) -> (Option<i32>, String) {
    let file = c.dir.path().join("module.wasm");
    std::fs::write(&file, module).expect("write module");
    let out = c
        .lockctl()
        .arg("upgrade")
        .arg(&file)
        .args(args)
        .output()
        .expect("lockctl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// A leader other than node 3 (which would refuse the upload itself):
/// while node 3 leads, it is stopped until nodes 1 and 2 elect one of
/// them, then started again (it follows the leader in the newer term).
fn leader_not_3(c: &mut Cluster) -> u64 {
    loop {
        let leader = c.wait_leader(WITHIN);
        if leader != 3 {
            return leader;
        }
        c.kill(3);
        c.wait_leader(WITHIN);
        c.spawn(3);
    }
}

#[test]
fn a_voter_that_cannot_run_a_module_keeps_it_out_unless_a_quorum_is_enough() {
    let bound = (LOCK_SM_WORLD02.len() - 1).to_string();
    assert!(
        LOCK_SM.len() < LOCK_SM_WORLD02.len() - 1,
        "the first module fits"
    );
    let mut c = Cluster::configure(3, &["--initial-module", "world-0.1"]);
    c.nodes
        .get_mut(&3)
        .expect("node 3")
        .args
        .extend(["--max-module-bytes".to_string(), bound.clone()]);
    for id in 1..=3 {
        c.spawn(id);
    }
    let leader = leader_not_3(&mut c);
    let (v01, v02) = (
        ModuleHash::of(LOCK_SM).to_string(),
        ModuleHash::of(LOCK_SM_WORLD02).to_string(),
    );
    // (World 0.1's module is the built-in one: no first-module entry.)
    assert_eq!(c.wait_converged(WITHIN).module_hash, v01);
    let held = c.acquire_on_leader("held/before", 60_000, WITHIN);

    // A refusal blocks: refused, node 3 named, nothing swapped.
    let r = c
        .post_bytes(leader, "/v1/admin/upgrade", LOCK_SM_WORLD02)
        .expect("answer");
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["code"], "precheck_refused", "{}", r.body);
    let message = r.body["error"].as_str().unwrap_or("");
    assert!(
        message.contains("node 3") && message.contains("--max-module-bytes"),
        "{message}"
    );
    let verdicts = r.body["verdicts"].as_array().expect("verdicts");
    let accepted: Vec<bool> = verdicts
        .iter()
        .map(|v| v["accepted"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(accepted, [true, true, false], "{}", r.body);
    assert_eq!(verdicts[2]["answered"], true, "{}", r.body);
    let record_index = r.body["index"].as_u64().expect("index");
    // lockctl says the same.
    let (code, out) = lockctl_upgrade(&c, LOCK_SM_WORLD02, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("node 3") && out.contains("--max-module-bytes"),
        "{out}"
    );
    // Each node recorded the verdicts through the log and kept 0.1.
    wait_for("the verdicts on every node", WITHIN, || {
        (1..=3).all(|id| {
            c.status(id).is_some_and(|s| {
                s.module_precheck
                    .as_ref()
                    .is_some_and(|p| p.index > record_index && !p.enacted)
            })
        })
    });
    for id in 1..=3 {
        let s = c.status(id).expect("status");
        assert_eq!(s.module_hash, v01, "node {id}");
        let p = s.module_precheck.expect("pre-check");
        assert_eq!(p.module_hash, v02);
        assert!(!p.quorum);
        let refused: Vec<u64> = p
            .verdicts
            .iter()
            .filter(|v| !v.accepted)
            .map(|v| v.node)
            .collect();
        assert_eq!(refused, [3], "node {id}");
        assert!(s.module_cannot_run.is_none(), "node {id}");
    }
    c.acquire_on_leader("served/after-refusal", 60_000, WITHIN);

    // With --quorum it does not: nodes 1 and 2 swap, node 3 stops before it.
    let (code, out) = lockctl_upgrade(&c, LOCK_SM_WORLD02, &["--quorum"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("node 1: accepted"), "{out}");
    assert!(out.contains("node 3: refused"), "{out}");
    let leader = c.wait_leader(WITHIN);
    assert_ne!(leader, 3);
    let swapped_at = c.status(leader).expect("status").module_since_index;
    wait_for("node 3 to say it cannot run the module", WITHIN, || {
        c.status(3).is_some_and(|s| s.module_cannot_run.is_some())
    });
    let s3 = c.status(3).expect("status");
    let cannot = s3.module_cannot_run.clone().expect("cannot run");
    assert_eq!(cannot.index, swapped_at, "{cannot:?}");
    assert_eq!(cannot.module_hash, v02);
    assert!(cannot.reason.contains("--max-module-bytes"), "{cannot:?}");
    assert!(s3.applied_index < swapped_at, "{s3:?}");
    assert_eq!(s3.module_hash, v01);
    // Its Raft has stopped: it neither votes nor stands.
    assert_eq!(s3.role, Role::Shutdown, "{s3:?}");
    for id in [1, 2] {
        wait_for("the swap on nodes 1 and 2", WITHIN, || {
            c.status(id).is_some_and(|s| s.module_hash == v02)
        });
    }
    // The lock held from before the swap is still held, with its token.
    let lock = c.lock(leader, "held/before").expect("lock");
    assert_eq!(lock.body["token"].as_u64(), Some(held), "{}", lock.body);
    c.acquire_on_leader("served/after-swap", 60_000, WITHIN);

    // Restarted with a bound that fits, node 3 runs the module.
    c.kill(3);
    let args = &mut c.nodes.get_mut(&3).expect("node 3").args;
    let at = args
        .iter()
        .position(|a| a == "--max-module-bytes")
        .expect("flag");
    args.drain(at..at + 2);
    c.spawn(3);
    let converged = c.wait_converged(WITHIN);
    assert_eq!(converged.module_hash, v02);
    let s3 = c.status(3).expect("status");
    assert!(s3.module_cannot_run.is_none(), "{s3:?}");
    assert_ne!(s3.role, Role::Shutdown);
}

//! The way back on a live cluster (docs/writing-a-lock-module.md,
//! "Versions and the way back"): three nodes on world 0.1's module upgrade
//! to the 0.2 reference module with `lockctl upgrade`; an upgrade back
//! down is refused for its version; then, with locks held from before and
//! after the upgrade and callers queued behind them, `lockctl upgrade
//! --rollback` returns every node to 0.1 at one index: every holding keeps
//! its token, each waiter is granted when its key is released, with a
//! token above every earlier one, and every node ends with the same state.

use std::sync::Arc;
use std::time::Duration;

use lockd_core::builtin::LOCK_SM;
use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::{wait_for, Cluster};
use lockd_tests::fixtures::LOCK_SM_WORLD02;
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(30);

/// `lockctl upgrade ARGS…` with `module` written to a file: its exit code
/// and output.
fn lockctl_upgrade(c: &Cluster, module: Option<&[u8]>, args: &[&str]) -> (Option<i32>, String) {
    let file = c.dir.path().join("module.wasm");
    let mut cmd = c.lockctl();
    cmd.arg("upgrade");
    if let Some(bytes) = module {
        std::fs::write(&file, bytes).expect("write module");
        cmd.arg(&file);
    }
    let out = cmd.args(args).output().expect("lockctl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn a_rollback_from_0_2_to_0_1_keeps_every_holding_and_serves_the_waiters() {
    let c = Arc::new(Cluster::start(3, &["--initial-module", "world-0.1"]));
    let leader = c.wait_leader(WITHIN);
    let (v01, v02) = (
        ModuleHash::of(LOCK_SM).to_string(),
        ModuleHash::of(LOCK_SM_WORLD02).to_string(),
    );
    assert_eq!(c.status(leader).expect("status").module_hash, v01);
    let before = c.acquire_on_leader("held/before", 60_000, WITHIN);

    let (code, out) = lockctl_upgrade(&c, Some(LOCK_SM_WORLD02), &["--on-failure", "rollback"]);
    assert_eq!(code, Some(0), "{out}");
    let s = c.status(leader).expect("status");
    assert_eq!(s.module_hash, v02);
    let way = s.module_way_back.expect("way back");
    assert_eq!(way.previous_module_hash.as_deref(), Some(v01.as_str()));
    assert_eq!(way.on_failure, lockd_proto::OnModuleFailure::Rollback);
    let after = c.acquire_on_leader("held/after", 60_000, WITHIN);

    // Bad options: a precise error, nothing proposed.
    let applied = c.wait_settled(leader, WITHIN).applied_index;
    for (path, body, what) in [
        (
            "/v1/admin/upgrade?on_failure=maybe",
            LOCK_SM_WORLD02,
            "expected refuse or rollback",
        ),
        (
            "/v1/admin/upgrade?rollback=yes",
            LOCK_SM_WORLD02,
            "expected true or false",
        ),
        (
            "/v1/admin/shadow?on_failure=rollback",
            LOCK_SM_WORLD02,
            "apply to upgrades",
        ),
        (
            "/v1/admin/rollback?on_failure=rollback",
            &[][..],
            "takes only precheck",
        ),
    ] {
        let r = c.post_bytes(leader, path, body).expect("post");
        assert_eq!(
            (r.status, r.body["code"].as_str()),
            (400, Some("bad_request")),
            "{path}: {r:?}"
        );
        assert!(r.error().contains(what), "{path}: {r:?}");
    }
    assert_eq!(c.wait_settled(leader, WITHIN).applied_index, applied);

    // Down without --rollback: refused before anything is proposed.
    let (code, out) = lockctl_upgrade(&c, Some(LOCK_SM), &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("module_not_newer") || out.contains("not above"),
        "{out}"
    );
    assert_eq!(c.status(leader).expect("status").module_hash, v02);

    // A caller queued behind each holding.
    let mut waiters = Vec::new();
    for (n, key) in ["held/before", "held/after"].into_iter().enumerate() {
        let cw = c.clone();
        waiters.push(std::thread::spawn(move || {
            let r = cw
                .post(
                    leader,
                    &format!("/v1/locks/{key}/acquire"),
                    json!({ "lease_ms": 60_000, "wait_ms": 60_000 }),
                )
                .expect("acquire");
            assert!(r.ok(), "waiter on {key}: {r:?}");
            r.body["token"].as_u64().expect("token")
        }));
        let queued = n as u64 + 1;
        wait_for("the waiter queued", WITHIN, || {
            c.metric(leader, "lockd_lock_waiters") == Some(queued)
        });
    }

    // While a module key is trusted, the route back is refused: the
    // previous module may have been signed by a key untrusted since
    // (docs/security.md, "Signed modules").
    let key = hex::encode(
        ed25519_dalek::SigningKey::from_bytes(&[3; 32])
            .verifying_key()
            .to_bytes(),
    );
    let r = c
        .post(leader, "/v1/admin/module-keys", json!({ "key": key }))
        .expect("trust");
    assert!(r.ok(), "{r:?}");
    let r = c
        .post(leader, "/v1/admin/rollback", json!({}))
        .expect("rollback");
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(r.body["code"], "bad_signature", "{r:?}");
    assert!(r.error().contains("with --rollback"), "{r:?}");
    assert_eq!(c.status(leader).expect("status").module_hash, v02);
    let r = c
        .delete(leader, &format!("/v1/admin/module-keys/{key}"))
        .expect("untrust");
    assert!(r.ok(), "{r:?}");

    // The way back is pre-checked by every voter, as an upgrade is.
    let (code, out) = lockctl_upgrade(&c, None, &["--rollback"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&v01), "{out}");
    for id in 1..=3 {
        assert!(
            out.contains(&format!("node {id}")),
            "a verdict of node {id}: {out}"
        );
    }
    let s = c.status(leader).expect("status");
    assert_eq!(s.module_hash, v01);
    assert_eq!(
        s.module_way_back.expect("way back").previous_module_hash,
        None,
        "one step back"
    );
    // A second rollback has nowhere to go.
    let (code, out) = lockctl_upgrade(&c, None, &["--rollback"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("no_previous_module") || out.contains("no previous module"),
        "{out}"
    );

    // Every holding kept its token.
    for (key, token) in [("held/before", before), ("held/after", after)] {
        let r = c.lock(leader, key).expect("get");
        assert_eq!(
            r.body["holders"][0]["token"].as_u64(),
            Some(token),
            "{key}: {r:?}"
        );
    }
    // Each waiter is served by a release, above every earlier token.
    assert!(c
        .release(leader, "held/before", before)
        .expect("release")
        .ok());
    assert!(c
        .release(leader, "held/after", after)
        .expect("release")
        .ok());
    for w in waiters {
        let token = w.join().expect("waiter");
        assert!(token > before.max(after), "{token}");
    }

    // Every node ends on 0.1 with the same state.
    let settled = c.wait_settled(leader, WITHIN);
    for id in 1..=3 {
        wait_for("every node at the leader's index", WITHIN, || {
            c.status(id)
                .is_some_and(|s| s.applied_index >= settled.applied_index)
        });
        let s = c.wait_settled(id, WITHIN);
        assert_eq!(s.module_hash, v01, "node {id}");
        if s.applied_index == settled.applied_index {
            assert_eq!(s.state_hash, settled.state_hash, "node {id}");
        }
    }
}

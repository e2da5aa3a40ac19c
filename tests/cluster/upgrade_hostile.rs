//! Hostile upgrades are rejected — the same way on every node — while
//! locks keep being served.
//!
//! Each bad module is tried twice: through the normal route, where the
//! leader's dry run refuses it before anything is proposed; and with
//! `precheck=false`, where the entry goes into the log and every node's
//! apply rejects it at the same index with the same reason, keeping the
//! old module. The restore-time failures use the chaos fixture, whose
//! `restore` misbehaves when the table it restores holds a magic key.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::Cluster;
use lockd_tests::fixtures::{CHAOS_GUEST, EMPTY_CORE_MODULE, IMPORT_GUEST, LOCK_SM_WORLD01_V2};
use lockd_tests::load;

struct Case {
    name: &'static str,
    module: &'static [u8],
    /// A key to hold while trying (the chaos fixture's trigger).
    hold: Option<&'static str>,
    /// Query string beyond precheck.
    query: &'static str,
    /// HTTP status of the dry-run refusal.
    precheck_status: u16,
    /// Words the rejection reason must contain.
    reason: &'static str,
}

const STALE: &str = "replaces=00000000000000000000000000000000000000000000000000000000000000aa";

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "invalid bytes",
            module: b"definitely not wasm",
            hold: None,
            query: "",
            precheck_status: 400,
            reason: "not WebAssembly",
        },
        Case {
            name: "core module",
            module: EMPTY_CORE_MODULE,
            hold: None,
            query: "",
            precheck_status: 400,
            reason: "core WebAssembly module",
        },
        Case {
            name: "imports",
            module: IMPORT_GUEST,
            hold: None,
            query: "",
            precheck_status: 400,
            reason: "imports",
        },
        Case {
            name: "trap in restore",
            module: CHAOS_GUEST,
            hold: Some("chaos:restore:trap"),
            query: "",
            precheck_status: 422,
            reason: "trapped in `restore`",
        },
        Case {
            name: "infinite loop in restore",
            module: CHAOS_GUEST,
            hold: Some("chaos:restore:loop"),
            query: "",
            precheck_status: 422,
            reason: "ran out of fuel in `restore`",
        },
        Case {
            name: "memory bomb in restore",
            module: CHAOS_GUEST,
            hold: Some("chaos:restore:bomb"),
            query: "",
            precheck_status: 422,
            reason: "memory limit",
        },
        Case {
            name: "migration that drops a lock",
            module: CHAOS_GUEST,
            hold: Some("chaos:restore:drop"),
            query: "",
            precheck_status: 422,
            reason: "would drop held locks",
        },
        Case {
            name: "migration that gives a lock a new token",
            module: CHAOS_GUEST,
            hold: Some("chaos:restore:retoken"),
            query: "",
            precheck_status: 422,
            reason: "would change the holding of \"chaos:restore:retoken\"",
        },
        Case {
            name: "stale replaces hash",
            module: LOCK_SM_WORLD01_V2,
            hold: None,
            query: STALE,
            precheck_status: 409,
            reason: "stale upgrade",
        },
    ]
}

#[test]
fn hostile_upgrades_are_rejected_identically_while_locks_are_served() {
    // Alone: guests burning their whole fuel budget on three nodes, beside
    // three clients that must never fail, keep both cores busy.
    let _alone = lockd_tests::turns::alone();
    // Small fuel and memory budgets, so that the loop and the bomb end fast.
    let c = Cluster::start(
        3,
        &[
            "--initial-module",
            "world-0.1",
            "--fuel-per-call",
            "200000000",
            "--memory-limit-bytes",
            "134217728",
        ],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let v1 = ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string();
    let stop = AtomicBool::new(false);
    let logs = std::thread::scope(|s| {
        let clients = s.spawn(|| load::run(&c, &[1, 2, 3], 3, &stop));
        let _stop = load::StopOnDrop(&stop);
        for case in cases() {
            let held = case.hold.map(|k| {
                let r = c.acquire(leader, k, 600_000).expect("acquire");
                assert!(r.ok(), "{}: {r:?}", case.name);
                (k, r.body["token"].as_u64().expect("token"))
            });
            let sep = if case.query.is_empty() { "" } else { "&" };

            // 1. The leader's dry run refuses it; nothing is proposed.
            let before = c.status(leader).expect("status");
            let path = format!("/v1/admin/upgrade?{}", case.query);
            let r = c.post_bytes(leader, &path, case.module).expect("upgrade");
            assert_eq!(r.status, case.precheck_status, "{}: {r:?}", case.name);
            assert!(
                r.error().contains("refused before proposing"),
                "{}: {r:?}",
                case.name
            );
            assert!(r.error().contains(case.reason), "{}: {r:?}", case.name);
            let after = c.status(leader).expect("status");
            assert_eq!(
                after.upgrades.len(),
                before.upgrades.len(),
                "{}: proposed anyway",
                case.name
            );
            assert_eq!(after.module_hash, v1);

            // 2. Straight into the log: every node rejects it at apply.
            let path = format!("/v1/admin/upgrade?precheck=false{sep}{}", case.query);
            let r = c.post_bytes(leader, &path, case.module).expect("upgrade");
            assert_eq!(r.status, 422, "{}: {r:?}", case.name);
            assert_eq!(r.body["result"], "rejected", "{}: {r:?}", case.name);
            let index = r.body["index"].as_u64().expect("index");
            let reason = r.body["reason"].as_str().expect("reason").to_string();
            assert!(reason.contains(case.reason), "{}: {reason}", case.name);
            c.wait_applied(index, Duration::from_secs(30));
            for id in 1..=3 {
                let st = c.status(id).expect("status");
                assert_eq!(st.module_hash, v1, "{} on node {id}", case.name);
                assert!(
                    st.poisoned.is_none(),
                    "{} on node {id}: {:?}",
                    case.name,
                    st.poisoned
                );
                let rec = st
                    .upgrades
                    .iter()
                    .find(|u| u.index == index)
                    .unwrap_or_else(|| {
                        panic!("{}: node {id} has no record of index {index}", case.name)
                    });
                assert_eq!(
                    rec.result,
                    lockd_proto::UpgradeResult::Rejected,
                    "{} on node {id}",
                    case.name
                );
                assert_eq!(
                    rec.reason.as_deref(),
                    Some(reason.as_str()),
                    "{} on node {id}",
                    case.name
                );
            }
            if let Some((k, token)) = held {
                assert!(
                    c.release(leader, k, token).expect("release").ok(),
                    "{}",
                    case.name
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        clients.join().expect("clients")
    });
    // With the load stopped, every node at one index with one state.
    c.wait_converged(Duration::from_secs(30));
    for (i, log) in logs.iter().enumerate() {
        assert!(log.failures.is_empty(), "client {i}: {:?}", log.failures);
        assert!(
            log.grants.len() > 10,
            "client {i} was barely served: {}",
            log.grants.len()
        );
    }
    let metrics: Vec<Option<u64>> = (1..=3)
        .map(|id| c.metric(id, "lockd_upgrades_total{result=\"rejected\"}"))
        .collect();
    assert!(
        metrics.iter().all(|m| *m == Some(cases().len() as u64)),
        "{metrics:?}"
    );
    // After all that, a good upgrade still works.
    let r = c
        .post_bytes(leader, "/v1/admin/upgrade", LOCK_SM_WORLD01_V2)
        .expect("upgrade");
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn upgrade_route_refuses_bad_requests() {
    let c = Cluster::start(1, &["--initial-module", "world-0.1"]);
    c.wait_leader(Duration::from_secs(20));
    let r = c.post_bytes(1, "/v1/admin/upgrade", b"").expect("post");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("empty"), "{r:?}");
    let r = c
        .post_bytes(1, "/v1/admin/upgrade?replaces=xyz", LOCK_SM_WORLD01_V2)
        .expect("post");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("64-digit hex"), "{r:?}");
    let r = c
        .post_bytes(1, "/v1/admin/upgrade?bogus=1", LOCK_SM_WORLD01_V2)
        .expect("post");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("unknown query parameter"), "{r:?}");
    let r = c
        .post_bytes(1, "/v1/admin/upgrade", lockd_core::builtin::LOCK_SM)
        .expect("post");
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.error().contains("already the active module"), "{r:?}");
    let r = c
        .post(1, "/v1/admin/shadow/abort", serde_json::json!({}))
        .expect("post");
    assert_eq!(r.status, 404, "{r:?}");
    assert!(r.error().contains("no shadow"), "{r:?}");
    let st = c.status(1).expect("status");
    assert!(st.upgrades.is_empty());
    assert_eq!(
        st.module_hash,
        ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string()
    );
}

/// One upgrade request: status, `Retry-After` header, error text.
fn upgrade_raw(addr: &str, module: &[u8]) -> (u16, Option<String>, String) {
    let url = format!("http://{addr}/v1/admin/upgrade");
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build();
    let r = match agent
        .post(&url)
        .set("content-type", "application/wasm")
        .send_bytes(module)
    {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("upgrade request: {e}"),
    };
    let (status, retry) = (r.status(), r.header("Retry-After").map(str::to_string));
    (status, retry, r.into_string().unwrap_or_default())
}

#[test]
fn a_second_dry_run_while_one_runs_is_answered_busy() {
    // A migration that spins through a state-call budget of seconds (the
    // chaos module's restore loops while `chaos:restore:loop` is held):
    // a second upgrade sent beside it finds the one dry run taken.
    let c = Cluster::start(
        1,
        &[
            "--initial-module",
            "world-0.1",
            "--fuel-per-state-call",
            "10000000000",
        ],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c
        .acquire(leader, "chaos:restore:loop", 600_000)
        .expect("acquire");
    assert!(r.ok(), "{r:?}");
    let addr = c.addr(leader).to_string();
    let mut answers = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| upgrade_raw(&addr, CHAOS_GUEST)))
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("request"))
            .collect::<Vec<_>>()
    });
    answers.sort();
    let (ran, busy) = (&answers[0], &answers[1]);
    assert_eq!(ran.0, 422, "{answers:?}");
    assert!(
        ran.2.contains("ran out of fuel in `restore`"),
        "{answers:?}"
    );
    assert_eq!(busy.0, 503, "{answers:?}");
    assert_eq!(busy.1.as_deref(), Some("1"), "{answers:?}");
    assert!(
        busy.2.contains("another module is being checked on node 1"),
        "{answers:?}"
    );
    // Nothing was proposed, and the dry run is free again.
    let st = c.status(leader).expect("status");
    assert!(st.upgrades.is_empty(), "{:?}", st.upgrades);
    let r = c
        .post_bytes(leader, "/v1/admin/upgrade", LOCK_SM_WORLD01_V2)
        .expect("upgrade");
    assert_eq!(r.status, 200, "{r:?}");
}

//! Rolling binary upgrade (docs/operations.md, "Rolling binary upgrades"):
//! a node of another implementation (another wasmtime version, played by
//! the test-only fault `LOCKD_FAULT_IMPLEMENTATION`, a fingerprint
//! override) joins as a learner, and `members promote` refuses it, saying
//! why, until the determinism audit has seen its state hash equal to the
//! leader's at three audit points; then restarted in place without the
//! override, over the data dir the other implementation wrote.

use std::time::{Duration, Instant};

use lockd_tests::cluster::{fault_binary, free_port, wait_for, Cluster};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(30);

#[test]
fn a_learner_of_another_implementation_is_promoted_only_after_matching_audit_points() {
    let fault = fault_binary();
    let mut c = Cluster::start(3, &["--audit-interval", "10", "--audit-check-ms", "200"]);
    let leader = c.wait_leader(WITHIN);
    let ours = c.status(leader).expect("status").engine_implementation;
    // The learner joins while the log is short: no audit point yet.
    assert!(c.status(leader).expect("status").commit_index < 10);

    let addr4 = format!("127.0.0.1:{}", free_port());
    c.add_proc(4, addr4.clone(), &["--join"]);
    {
        let n4 = c.nodes.get_mut(&4).expect("node 4");
        n4.bin = Some(fault);
        n4.env
            .push(("LOCKD_FAULT_IMPLEMENTATION".into(), "99.0.0-test".into()));
    }
    c.spawn(4);
    c.wait_up(4, WITHIN);
    let theirs = c.status(4).expect("status").engine_implementation;
    assert!(theirs.contains("wasmtime=99.0.0-test"), "{theirs}");
    assert_ne!(theirs, ours);

    // Another implementation is welcome as a learner...
    let r = c
        .post(leader, "/v1/members/add", json!({"id": 4, "addr": addr4}))
        .expect("add");
    assert!(r.ok(), "{:?}", r.body);
    // ...but not as a voter before the audit has seen it agree.
    let r = c
        .post(leader, "/v1/members/promote", json!({"id": 4}))
        .expect("promote");
    assert_eq!(r.status, 409, "{:?}", r.body);
    let why = r.body["error"].as_str().unwrap_or_default().to_string();
    // How many it has seen depends on the checker's timing (every 200 ms):
    // the first module's entry is an audit point the learner may already
    // have matched. Fewer than three, whatever the timing.
    let seen = why
        .split("and it has seen ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(
        why.contains("runs another implementation")
            && why.contains("equal at 3 audit points")
            && seen.is_some_and(|n| n < 3),
        "{why}"
    );
    let s = c.status(leader).expect("status");
    assert!(
        s.members.iter().any(|m| m.id == 4 && !m.voter),
        "{:?}",
        s.members
    );

    // Entries commit; the learner applies them and records the same
    // audit points; then the promotion goes through.
    for i in 0..40 {
        c.acquire_on_leader(&format!("roll/{i}"), 60_000, WITHIN);
    }
    let start = Instant::now();
    loop {
        let r = c
            .post(leader, "/v1/members/promote", json!({"id": 4}))
            .expect("promote");
        if r.ok() {
            break;
        }
        assert_eq!(r.status, 409, "{:?}", r.body);
        assert!(start.elapsed() < WITHIN, "never promoted: {:?}", r.body);
        std::thread::sleep(Duration::from_millis(100));
    }
    // The leader answers once the change commits; node 4 learns the
    // commit with the next append, so its own view follows a moment later.
    wait_for("node 4 sees four voters", WITHIN, || {
        c.status(4)
            .is_some_and(|s| s.members.len() == 4 && s.members.iter().all(|m| m.voter))
    });
    // It serves as a voter: a lock taken through it, equal state hashes.
    let r = c.acquire(4, "roll/after", 30_000).expect("acquire");
    assert!(r.ok(), "{:?}", r.body);
    let converged = c.wait_converged(WITHIN);
    assert_eq!(converged.members.len(), 4);
    for id in 1..=4 {
        assert_eq!(c.metric(id, "lockd_audit_divergences_total"), Some(0));
    }

    // The same node restarted in place on this binary: its data dir was
    // written by the other implementation, which is no reason to refuse.
    c.kill(4);
    {
        let n4 = c.nodes.get_mut(&4).expect("node 4");
        n4.bin = None;
        n4.env.clear();
    }
    c.spawn(4);
    c.wait_up(4, WITHIN);
    assert_eq!(c.status(4).expect("status").engine_implementation, ours);
    let log = std::fs::read_to_string(&c.nodes[&4].log).expect("log");
    assert!(
        log.contains("the data dir was written by another lockd implementation"),
        "{log}"
    );
    let s = c.wait_converged(WITHIN);
    assert_eq!(s.members.len(), 4);
}

//! A node that was down during an upgrade comes back onto the new module:
//! by replaying the log (the upgrade entry is in it), and by installing a
//! snapshot taken after the upgrade (the snapshot carries the module).
//!
//! A lock request sent to a follower is forwarded to the leader, so it says
//! nothing about the follower's state machine. Each test therefore checks
//! the caught-up node's own record (its status, and its audit point at the
//! upgrade index against the leader's), then makes it the leader and has it
//! serve: only its own instance of version 2 answers then.

use std::time::Duration;

use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::{Cluster, ELECTION_MS};
use lockd_tests::fixtures::LOCK_SM_WORLD01_V2;

/// Take and free a few locks on `via`, keeping every other one.
fn traffic(c: &Cluster, via: u64, prefix: &str, n: usize) {
    for i in 0..n {
        let key = format!("{prefix}/{i}");
        let r = c.acquire(via, &key, 60_000).expect("acquire");
        assert!(r.ok(), "{r:?}");
        if i % 2 == 0 {
            let token = r.body["token"].as_u64().expect("token");
            assert!(c.release(via, &key, token).expect("release").ok());
        }
    }
}

/// Make `node` the leader by an election it wins on its own: every other
/// node but the leader is restarted with an election timeout ten times the
/// cluster's (it does not campaign before `node` does, and grants its vote
/// once its lease on the old leader has run out), then the leader is killed.
fn make_leader(c: &mut Cluster, node: u64) {
    let leader = c.wait_leader(Duration::from_secs(30));
    if leader == node {
        return;
    }
    let slow = (ELECTION_MS * 10).to_string();
    for id in c.running() {
        if id == node || id == leader {
            continue;
        }
        c.kill(id);
        let args = &mut c.nodes.get_mut(&id).expect("node").args;
        let at = args
            .iter()
            .position(|a| a == "--election-timeout-ms")
            .expect("every node is given its election timeout");
        args[at + 1] = slow.clone();
        c.spawn(id);
    }
    c.wait_converged(Duration::from_secs(30));
    c.kill(leader);
    // The slow voters' lease is a quarter of their timeout; `node` asks
    // again at most half of its own timeout after a refusal, so it wins
    // soon after that lease, before any of them stands (a 32nd of their
    // timeout later at the earliest).
    assert_eq!(
        c.wait_leader(Duration::from_millis(ELECTION_MS * 10 * 5)),
        node,
        "node {node} did not win the election"
    );
}

/// `node`, as leader, serves from its own state: version 2 refuses the
/// reserved prefix, the locks taken before (every odd one of `prefix`, `n`
/// of them) are held, and a new lock gets a token above the last of them,
/// the last one granted.
fn serves_as_v2_leader(c: &Cluster, node: u64, prefix: &str, n: usize) {
    let st = c.status(node).expect("status");
    assert_eq!(st.role, lockd_proto::Role::Leader, "{st:?}");
    let r = c.acquire(node, "reserved/k", 1000).expect("acquire");
    assert_eq!(r.status, 403, "{r:?}");
    for i in 0..n {
        let r = c.lock(node, &format!("{prefix}/{i}")).expect("get");
        assert_eq!(r.body["held"], i % 2 == 1, "{prefix}/{i}: {r:?}");
    }
    let r = c.acquire(node, "c/new", 60_000).expect("acquire");
    assert!(r.ok(), "{r:?}");
    let token = r.body["token"].as_u64().expect("token");
    let before = c
        .lock(node, &format!("{prefix}/{}", n - 1))
        .expect("get")
        .body["token"]
        .as_u64()
        .expect("held");
    assert!(token > before, "token {token} after {before}");
}

/// Node `node`'s audit point at `index` is the leader's: the same state hash
/// right after the upgrade entry, computed by its own instance.
fn same_audit_point(c: &Cluster, node: u64, leader: u64, index: u64) {
    let point = |id: u64| {
        c.audit(id)
            .expect("audit report")
            .records
            .into_iter()
            .find(|r| r.index == index && r.kind == lockd_proto::AuditKind::Upgrade)
            .unwrap_or_else(|| panic!("node {id} has no audit point at upgrade index {index}"))
    };
    assert_eq!(point(node), point(leader));
}

fn upgrade(c: &Cluster, via: u64) -> u64 {
    let r = c
        .post_bytes(via, "/v1/admin/upgrade", LOCK_SM_WORLD01_V2)
        .expect("upgrade");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["result"], "swapped");
    r.body["index"].as_u64().expect("index")
}

#[test]
fn node_down_during_upgrade_catches_up_by_log() {
    // On world 0.1's module, which version 2 is above.
    let mut c = Cluster::start(3, &["--initial-module", "world-0.1"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let down = (1..=3).find(|i| *i != leader).expect("follower");
    traffic(&c, leader, "a", 10);
    c.wait_converged(Duration::from_secs(20));
    c.kill(down);
    let index = upgrade(&c, leader);
    traffic(&c, leader, "b", 10);
    c.spawn(down);
    let s = c.wait_converged(Duration::from_secs(30));
    let st = c.status(down).expect("status");
    assert_eq!(
        st.module_hash,
        ModuleHash::of(LOCK_SM_WORLD01_V2).to_string()
    );
    assert_eq!(st.module_since_index, index);
    assert_eq!(st.state_hash, s.state_hash);
    assert_eq!(
        st.snapshots_installed, 0,
        "this one catches up by log: {st:?}"
    );
    let rec = st.upgrades.last().expect("upgrade record");
    assert!(rec.swapped() && rec.index == index, "{rec:?}");
    same_audit_point(&c, down, leader, index);
    make_leader(&mut c, down);
    serves_as_v2_leader(&c, down, "b", 10);
}

#[test]
fn node_down_during_upgrade_catches_up_by_snapshot() {
    // The shape of `cluster_snapshot_catchup`: the follower that stayed up
    // snapshots and purges, then leads, so the lagging node can only be
    // brought up to date by a snapshot.
    let mut c = Cluster::start(
        3,
        &[
            "--snapshot-threshold",
            "40",
            "--keep-after-snapshot",
            "0",
            "--initial-module",
            "world-0.1",
        ],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let mut followers = (1..=3).filter(|id| *id != leader);
    let (lagging, survivor) = (
        followers.next().expect("follower"),
        followers.next().expect("follower"),
    );
    traffic(&c, leader, "a", 10);
    c.wait_converged(Duration::from_secs(20));
    c.kill(lagging);
    let index = upgrade(&c, leader);
    traffic(&c, leader, "b", 120);
    let done = c.status(leader).expect("status");
    c.wait_purged_past(
        survivor,
        done.applied_index,
        index + 5,
        Duration::from_secs(20),
    );
    c.kill(leader);
    c.spawn(lagging);
    assert_eq!(c.wait_leader(Duration::from_secs(30)), survivor);
    let s = c.wait_converged(Duration::from_secs(30));
    let st = c.status(lagging).expect("status");
    assert!(
        st.snapshots_installed >= 1,
        "caught up without a snapshot: {st:?}"
    );
    assert_eq!(
        st.module_hash,
        ModuleHash::of(LOCK_SM_WORLD01_V2).to_string()
    );
    assert_eq!(
        st.module_since_index, index,
        "the snapshot carries when the module became active"
    );
    assert_eq!(st.state_hash, done.state_hash);
    assert_eq!(s.state_hash, done.state_hash);
    assert!(
        st.upgrades.iter().any(|u| u.index == index && u.swapped()),
        "{:?}",
        st.upgrades
    );

    // A full restart of the old leader resumes on version 2 as well.
    c.spawn(leader);
    c.wait_converged(Duration::from_secs(30));
    assert_eq!(
        c.status(leader).expect("status").module_hash,
        ModuleHash::of(LOCK_SM_WORLD01_V2).to_string()
    );
    make_leader(&mut c, lagging);
    serves_as_v2_leader(&c, lagging, "b", 120);
}

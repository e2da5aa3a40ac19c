//! A guest that traps in `apply` on a live cluster: every node stops at the
//! same log entry and none hands out a lock after it.
//!
//! The chaos fixture passes the upgrade's dry run (no magic key is held)
//! and becomes the active module; then a grant of `chaos:trap` is committed
//! and traps on every node that applies it. Such a node's instance is
//! poisoned and its Raft stops (role `shutdown`): its applied index stays
//! at the entry before, and `GET /v1/status` names the failure and the
//! entry. A node that never learned that the entry was committed stays at
//! the same applied index unpoisoned, and can never lead: a majority has
//! stopped. No node grants a lock again (every node answers an acquire
//! with an error, none leaves it unanswered), and reads are refused with 503.
//! (Recovery needs an operator; restarting replays the entry and fails the
//! same way.)

use std::time::{Duration, Instant};

use lock_tests::cluster::{Cluster, ELECTION_MS};
use lock_tests::fixtures::CHAOS_GUEST;
use lockd_core::engine::ModuleHash;
use lockd_proto::{PoisonedAt, Role, Status};

/// Every node's status, once a majority is poisoned and stopped (nothing
/// can be committed any more) and every other node has not learned that
/// entry `trap` was committed and does not lead.
fn settled(c: &Cluster, trap: u64) -> Vec<Status> {
    // Time for the leader's lease to end and for the followers to elect
    // one of them, which commits the entry and fails in turn.
    let timeout = Duration::from_millis(ELECTION_MS * 50);
    let deadline = Instant::now() + timeout;
    loop {
        let statuses: Vec<Status> = (1..=3).filter_map(|id| c.status(id)).collect();
        if statuses.len() == 3
            && statuses.iter().filter(|s| s.poisoned.is_some()).count() >= 2
            && statuses.iter().all(|s| match s.poisoned {
                // The module is poisoned first; Raft stops an instant later.
                Some(_) => s.role == Role::Shutdown,
                None => s.role != Role::Leader && s.commit_index < trap,
            })
        {
            return statuses;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes did not settle within {timeout:?}: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Node `s` stopped before entry `trap`: it applied the entry before, and
/// is either poisoned at `trap` (its Raft stopped) or never applied it and
/// still has the state of `before` and does not lead.
fn stopped_before(c: &Cluster, s: &Status, trap: u64, before: &Status) {
    assert_eq!(
        s.applied_index,
        trap - 1,
        "node {} did not stop before the failing entry: {s:?}",
        s.id
    );
    assert_eq!(s.module_hash, before.module_hash, "node {}", s.id);
    match &s.poisoned {
        Some(why) => {
            assert!(
                why.contains("guest trapped in `apply`"),
                "node {}: {why}",
                s.id
            );
            assert_eq!(
                s.poisoned_at,
                Some(PoisonedAt {
                    first: trap,
                    last: trap
                }),
                "node {}",
                s.id
            );
            assert_eq!(s.role, Role::Shutdown, "node {}", s.id);
            assert!(s.state_hash.starts_with("unavailable"), "{s:?}");
            assert_eq!(
                c.metric(s.id, "lockd_state_machine_poisoned"),
                Some(1),
                "node {}",
                s.id
            );
            // Alive, but not ready: a balancer takes it out of rotation.
            let ready = c.get(s.id, "/readyz").expect("readyz");
            assert_eq!(ready.status, 503, "node {}: {:?}", s.id, ready.body);
            assert!(
                ready.body["reasons"]
                    .to_string()
                    .contains("the lock module is poisoned"),
                "node {}: {:?}",
                s.id,
                ready.body
            );
            assert_eq!(c.get(s.id, "/healthz").map(|r| r.status), Ok(200));
        }
        None => {
            assert_eq!(s.poisoned_at, None, "node {}", s.id);
            assert_eq!(s.state_hash, before.state_hash, "node {}", s.id);
            assert_ne!(s.role, Role::Leader, "node {}", s.id);
        }
    }
}

#[test]
fn a_guest_trap_in_apply_stops_every_node_at_the_same_entry() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    for i in 0..3 {
        let r = c
            .acquire(leader, &format!("k{i}"), 600_000)
            .expect("acquire");
        assert!(r.ok(), "{r:?}");
    }
    let r = c
        .post_bytes(leader, "/v1/admin/upgrade", CHAOS_GUEST)
        .expect("upgrade");
    assert_eq!(r.status, 200, "the dry run passes: {r:?}");
    assert_eq!(r.body["result"], "swapped");
    let before = c.wait_converged(Duration::from_secs(20));
    let chaos = ModuleHash::of(CHAOS_GUEST).to_string();
    assert_eq!(before.module_hash, chaos);

    // Nothing else is proposed, so the grant is the next entry, alone in
    // its guest call on every node.
    let trap = before.applied_index + 1;
    let r = c.acquire(leader, "chaos:trap", 60_000).expect("an answer");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.error().contains("guest trapped in `apply`"), "{r:?}");

    // And it stays so: no node applies anything more or leads again, over
    // several election timeouts.
    let settled_at = settled(&c, trap);
    std::thread::sleep(Duration::from_millis(ELECTION_MS * 5));
    let later: Vec<Status> = (1..=3).map(|id| c.status(id).expect("status")).collect();
    for statuses in [&settled_at, &later] {
        for s in statuses {
            stopped_before(&c, s, trap, &before);
        }
        let poisoned: Vec<u64> = statuses
            .iter()
            .filter(|s| s.poisoned.is_some())
            .map(|s| s.id)
            .collect();
        assert!(
            poisoned.contains(&leader) && poisoned.len() >= 2,
            "the leader and a majority must have stopped on the entry: {poisoned:?}"
        );
    }
    // No node hands out a lock or answers a read from its table.
    std::thread::scope(|s| {
        let tries: Vec<_> = (1..=3)
            .map(|id| {
                let c = &c;
                s.spawn(move || (id, c.acquire(id, "after", 1000), c.lock(id, "k0")))
            })
            .collect();
        for t in tries {
            let (id, acquire, read) = t.join().expect("request thread");
            // Answered, not left to time out (the former leader once kept
            // writes queued forever while it retried its table load).
            let acquire = acquire.expect("an acquire is answered");
            assert!(
                acquire.status >= 500,
                "node {id} must refuse a grant: {acquire:?}"
            );
            let read = read.expect("a read is answered");
            assert_eq!(read.status, 503, "node {id}: {read:?}");
        }
    });
}

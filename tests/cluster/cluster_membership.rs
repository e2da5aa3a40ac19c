//! Membership: add a 4th node as a learner, promote it, remove another node;
//! the cluster keeps serving throughout.
//!
//! "Throughout" is checked with clients that take and free locks without a
//! pause from before the first change to after the last, through the
//! leader, the follower that stays, and node 4 once it has joined: every
//! operation must succeed, after each change every client must be served
//! again, and each client's tokens must keep increasing. A failed request
//! may be retried (on a fresh key) only if an election intervened, and the
//! operation must then succeed within a bound derived from the election
//! timeout.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lockd_tests::cluster::{free_port, Cluster, ELECTION_MS};
use serde_json::json;

const CLIENTS: usize = 3;

/// How long one operation may take when an election intervenes: the
/// voters' lease (1.5 × the timeout) plus a few election rounds, with room
/// for a slow machine.
const RETRY_FOR: Duration = Duration::from_millis(ELECTION_MS * 25);

/// What one load client saw.
#[derive(Debug, Default)]
struct ClientLog {
    /// The token of every grant, in the order they were answered.
    tokens: Vec<u64>,
    /// Failed requests that were retried.
    retried: Vec<String>,
    /// Operations that did not succeed, even within `RETRY_FOR`.
    failed: Vec<String>,
    /// Keys whose acquire got no clear answer (they may be held).
    unsure: Vec<String>,
}

/// An answer that may be retried: none at all, or "unavailable" (no leader
/// known, or the leader changed under the request).
fn transient(r: &Result<lockd_tests::cluster::Reply, String>) -> bool {
    match r {
        Err(_) => true,
        Ok(r) => r.status == 503,
    }
}

/// Send a request through `via`; a node that knows the leader but cannot
/// pass the request on (a node that just joined has not yet applied the
/// configuration with the leader's address) answers 503 naming the leader,
/// and that redirect is followed at once, as every client does: an
/// answer, not an outage.
fn follow(
    via: u64,
    send: impl Fn(u64) -> Result<lockd_tests::cluster::Reply, String>,
) -> Result<lockd_tests::cluster::Reply, String> {
    let r = send(via);
    match &r {
        Ok(a) if a.status == 503 => match a.body["leader"].as_u64() {
            Some(leader) if leader != via => send(leader),
            _ => r,
        },
        _ => r,
    }
}

/// Note a request of the operation begun at `started` that got no answer
/// or a 503: a retry (after a pause) while `RETRY_FOR` has not passed, else
/// a failure of the operation.
fn may_retry(log: &mut ClientLog, started: Instant, what: String) -> bool {
    if started.elapsed() < RETRY_FOR {
        log.retried.push(what);
        std::thread::sleep(Duration::from_millis(50));
        true
    } else {
        log.failed.push(what);
        false
    }
}

/// Client `i`: acquire a fresh key and release it, over and over, through
/// the nodes in `targets` in turn, until `stop`; `served` counts its
/// completed operations.
fn client(
    c: &Cluster,
    i: usize,
    targets: &Mutex<Vec<u64>>,
    stop: &AtomicBool,
    served: &AtomicUsize,
) -> ClientLog {
    let mut log = ClientLog::default();
    let mut n = 0usize;
    'ops: while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let (via, key, token) = loop {
            let via = {
                let t = targets.lock().expect("targets");
                t[(i + n) % t.len()]
            };
            let key = format!("load/{i}/{n}");
            n += 1;
            let r = follow(via, |to| c.acquire(to, &key, 60_000));
            match &r {
                Ok(a) if a.ok() => match a.body["token"].as_u64() {
                    Some(token) => break (via, key, token),
                    None => {
                        log.failed.push(format!("acquire {key} via {via}: {a:?}"));
                        continue 'ops;
                    }
                },
                _ if transient(&r) => {
                    log.unsure.push(key.clone());
                    if !may_retry(&mut log, started, format!("acquire {key} via {via}: {r:?}")) {
                        continue 'ops;
                    }
                }
                _ => {
                    log.failed.push(format!("acquire {key} via {via}: {r:?}"));
                    continue 'ops;
                }
            }
        };
        log.tokens.push(token);
        let mut unclear = false;
        loop {
            let r = follow(via, |to| c.release(to, &key, token));
            match &r {
                Ok(a) if a.ok() => break,
                // An earlier attempt without an answer did release it.
                Ok(a) if unclear && a.status == 404 => break,
                _ if transient(&r) => {
                    unclear = true;
                    if !may_retry(&mut log, started, format!("release {key} via {via}: {r:?}")) {
                        continue 'ops;
                    }
                }
                _ => {
                    log.failed.push(format!("release {key} via {via}: {r:?}"));
                    continue 'ops;
                }
            }
        }
        served.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2));
    }
    log
}

/// Wait until every client has completed `more` operations since now.
fn every_client_served(what: &str, served: &[AtomicUsize], more: usize) {
    let from: Vec<usize> = served.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    let deadline = Instant::now() + RETRY_FOR * 2;
    while served
        .iter()
        .zip(&from)
        .any(|(s, f)| s.load(Ordering::Relaxed) < f + more)
    {
        assert!(
            Instant::now() < deadline,
            "{what}: not every client was served again within {:?}",
            RETRY_FOR * 2
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn add_learner_promote_remove_keeps_serving() {
    // Alone: clients that must never fail without an election to show for
    // it, beside membership changes, on two cores.
    let _alone = lockd_tests::turns::alone();
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    for i in 0..10 {
        c.acquire_on_leader(&format!("m{i}"), 60_000, Duration::from_secs(10));
    }
    // The follower to remove later; the load never goes through it.
    let victim = (1..=3).find(|id| *id != leader).expect("a follower");
    let stays = (1..=3)
        .find(|id| *id != leader && *id != victim)
        .expect("another follower");
    let addr = format!("127.0.0.1:{}", free_port());
    c.add_proc(4, addr.clone(), &["--join"]);
    c.spawn(4);
    c.wait_up(4, Duration::from_secs(20));
    let term_before = c.status(leader).expect("status").term;

    let targets = Mutex::new(vec![leader, stays]);
    let stop = AtomicBool::new(false);
    let served: Vec<AtomicUsize> = (0..CLIENTS).map(|_| AtomicUsize::new(0)).collect();
    let logs = std::thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (c, targets, stop, served) = (&c, &targets, &stop, &served[i]);
                s.spawn(move || client(c, i, targets, stop, served))
            })
            .collect();
        let changes = || {
            every_client_served("before any change", &served, 5);

            let r = c
                .post(leader, "/v1/members/add", json!({ "id": 4, "addr": addr }))
                .expect("add");
            assert!(r.ok(), "{r:?}");
            let st = c.status(4).expect("node 4 answers");
            assert_eq!(st.role, lockd_proto::Role::Learner);
            targets.lock().expect("targets").push(4);
            every_client_served("after adding a learner", &served, 5);

            let r = c
                .post(leader, "/v1/members/promote", json!({ "id": 4 }))
                .expect("promote");
            assert!(r.ok(), "{r:?}");
            let members = r.body.as_array().expect("members").clone();
            assert!(
                members.iter().any(|m| m["id"] == 4 && m["voter"] == true),
                "{members:?}"
            );
            every_client_served("after promoting it", &served, 5);

            let r = c
                .post(leader, "/v1/members/remove", json!({ "id": victim }))
                .expect("remove");
            assert!(r.ok(), "{r:?}");
            assert!(!r
                .body
                .as_array()
                .expect("members")
                .iter()
                .any(|m| m["id"] == victim));
            // Gone as far as the others can tell (killed once the clients
            // are done: the cluster helpers need `&mut` for that).
            c.pause(victim);
            every_client_served("after removing a voter", &served, 5);
        };
        // Stop the clients even when a change fails, so the scope ends and
        // the failure is reported.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(changes));
        stop.store(true, Ordering::Relaxed);
        let logs: Vec<ClientLog> = clients
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect();
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
        logs
    });
    c.kill(victim);
    let term_after = c.status(leader).expect("status").term;

    let mut all_tokens = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        assert!(log.failed.is_empty(), "client {i}: {:?}", log.failed);
        assert!(
            log.retried.is_empty() || term_after > term_before,
            "client {i} had to retry, yet no election happened (term {term_before}): {:?}",
            log.retried
        );
        assert!(
            log.tokens.windows(2).all(|w| w[0] < w[1]),
            "client {i}'s tokens did not keep increasing: {:?}",
            log.tokens
        );
        all_tokens.extend_from_slice(&log.tokens);
    }
    let grants = all_tokens.len();
    all_tokens.sort_unstable();
    all_tokens.dedup();
    assert_eq!(all_tokens.len(), grants, "a token was granted twice");

    c.acquire_on_leader("after-remove", 60_000, Duration::from_secs(10));
    let s = c.wait_converged(Duration::from_secs(20));
    // The load freed its locks, except any whose acquire got no answer.
    let unsure_held = logs
        .iter()
        .flat_map(|l| &l.unsure)
        .filter(|k| c.lock(leader, k).expect("get").body["held"] == true)
        .count() as u64;
    assert_eq!(s.locks_held, 11 + unsure_held);
    assert_eq!(s.members.len(), 3);

    // Bad admin requests get precise errors and change nothing.
    let r = c
        .post(leader, "/v1/members/promote", json!({ "id": 99 }))
        .expect("promote");
    assert_eq!((r.status, r.error()), (404, "node 99 is not a member"));
    let r = c
        .post(leader, "/v1/members/add", json!({ "id": 5 }))
        .expect("add");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("missing field `addr`"), "{r:?}");
}

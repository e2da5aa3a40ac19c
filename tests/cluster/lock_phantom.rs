//! A client that vanishes with its acquire in flight leaves no lock behind:
//! a grant that commits after its caller left is released at once (a
//! phantom release), and a waiter that left before its turn is skipped
//! without a grant.
//!
//! Each test makes its case happen for certain and checks that it did:
//! tokens are issued one by one, so the next grant's token tells how many
//! grants were made in between, and the leader counts phantom releases.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

/// Longer than any test: only a phantom release can free such a lock here.
const VANISHED_LEASE_MS: u64 = 600_000;

/// Send an acquire over a raw HTTP connection; nothing is read.
fn send_acquire(addr: &str, key: &str, lease_ms: u64, wait_ms: u64) -> TcpStream {
    let body = format!("{{\"lease_ms\":{lease_ms},\"wait_ms\":{wait_ms}}}");
    let req = format!(
        "POST /v1/locks/{key}/acquire HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(req.as_bytes()).expect("send");
    s
}

/// Close our side, as a client process killed at that moment does, and wait
/// until the node has closed the connection too: it has then dropped the
/// request and with it the acquire's answer channel. `Err` with what the
/// node sent instead, if it answered first.
fn vanish(mut s: TcpStream, within: Duration) -> Result<(), String> {
    s.shutdown(Shutdown::Write).expect("half-close");
    s.set_read_timeout(Some(within)).expect("read timeout");
    let mut answer = Vec::new();
    match s.read_to_end(&mut answer) {
        Ok(_) if answer.is_empty() => Ok(()),
        Ok(_) => Err(String::from_utf8_lossy(&answer).into_owned()),
        // A reset also means the node closed the connection.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
        Err(e) => panic!("the node kept the connection of a vanished client open: {e}"),
    }
}

fn metric(c: &Cluster, id: u64, name: &str) -> u64 {
    c.metric(id, name)
        .unwrap_or_else(|| panic!("{name} missing on node {id}"))
}

fn term(c: &Cluster, id: u64) -> u64 {
    c.status(id).expect("status").term
}

fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why an attempt was abandoned: an election intervened, which legitimately
/// changes what happens to a request in flight (its caller is answered, or
/// the grant is left to its lease).
struct Intervened(String);

#[test]
fn a_grant_whose_client_vanished_is_released_at_once() {
    let c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    let mut last = String::new();
    for attempt in 0..5 {
        match phantom_grant(&c, &format!("phantom/{attempt}"), patience) {
            Ok(()) => return,
            Err(Intervened(why)) => last = why,
        }
    }
    panic!("every attempt was cut short by an election; last: {last}");
}

/// The grant is proposed while both followers are paused, so it cannot
/// commit; the client vanishes; then the followers resume and the grant
/// commits for a caller that is certainly gone.
fn phantom_grant(c: &Cluster, key: &str, patience: Duration) -> Result<(), Intervened> {
    // The key's previous token, and the leader's state with nothing in flight.
    let before = c.acquire_on_leader(key, 60_000, patience);
    let leader = c.wait_leader(patience);
    assert!(c.release(leader, key, before).expect("release").ok());
    let term0 = term(c, leader);
    let grants0 = metric(c, leader, "lockd_lock_events_total{event=\"grant\"}");
    let phantoms0 = metric(
        c,
        leader,
        "lockd_lock_events_total{event=\"phantom_release\"}",
    );
    let last0 = c.status(leader).expect("status").last_log_index;

    // The pause lasts well under an election timeout on a sane machine; if
    // not, the followers may elect on resuming, which the term check sees.
    let followers: Vec<u64> = c.running().into_iter().filter(|i| *i != leader).collect();
    for f in &followers {
        c.pause(*f);
    }
    let s = send_acquire(c.addr(leader), key, VANISHED_LEASE_MS, 0);
    let proposed = Instant::now();
    while c.status(leader).expect("status").last_log_index == last0 {
        assert!(
            proposed.elapsed() < patience,
            "the grant was never proposed: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let vanished = vanish(s, patience);
    for f in &followers {
        c.resume(*f);
    }
    if let Err(answer) = vanished {
        return Err(Intervened(format!("answered before the commit: {answer}")));
    }

    // The grant commits, finds its caller gone and is released at once.
    wait_for("the phantom release", patience, || {
        c.metric(leader, "lockd_lock_events_total{event=\"phantom_release\"}") != Some(phantoms0)
            || c.status(leader).is_some_and(|s| s.term != term0)
    });
    if term(c, leader) != term0 {
        return Err(Intervened(format!("term {term0} ended: {}", c.describe())));
    }
    assert_eq!(
        metric(
            c,
            leader,
            "lockd_lock_events_total{event=\"phantom_release\"}"
        ),
        phantoms0 + 1
    );
    assert_eq!(
        metric(c, leader, "lockd_lock_events_total{event=\"grant\"}"),
        grants0 + 1
    );
    let r = c.lock(leader, key).expect("get");
    assert_eq!(r.body["held"], false, "a phantom lock is left: {r:?}");
    // The key is usable again at once; the token in between went to the
    // vanished client.
    let next = c.acquire_on_leader(key, 1000, patience);
    assert_eq!(
        next,
        before + 2,
        "exactly one grant between ours and the next: the vanished client's"
    );
    Ok(())
}

#[test]
fn a_waiter_whose_client_vanished_is_skipped() {
    let c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    let mut last = String::new();
    for attempt in 0..5 {
        match skipped_waiter(&c, &format!("w/{attempt}"), patience) {
            Ok(()) => return,
            Err(Intervened(why)) => last = why,
        }
    }
    panic!("every attempt was cut short by an election; last: {last}");
}

fn skipped_waiter(c: &Cluster, key: &str, patience: Duration) -> Result<(), Intervened> {
    let holder = c.acquire_on_leader(key, 60_000, patience);
    let leader = c.wait_leader(patience);
    let term0 = term(c, leader);
    let grants0 = metric(c, leader, "lockd_lock_events_total{event=\"grant\"}");
    let phantoms0 = metric(
        c,
        leader,
        "lockd_lock_events_total{event=\"phantom_release\"}",
    );
    // A waiter queues, willing to wait far longer than the test (so it is
    // skipped for having left, not for having waited too long)...
    let s = send_acquire(c.addr(leader), key, VANISHED_LEASE_MS, VANISHED_LEASE_MS);
    wait_for("the waiter to queue", patience, || {
        c.metric(leader, "lockd_lock_waiters") == Some(1)
    });
    // ...then its process dies while waiting.
    if let Err(answer) = vanish(s, patience) {
        return Err(Intervened(format!("the waiter was answered: {answer}")));
    }
    let r = c.release(leader, key, holder).expect("release");
    if term(c, leader) != term0 || !r.ok() {
        return Err(Intervened(format!("release: {r:?}; {}", c.describe())));
    }
    // Nobody live was waiting: the key is free, and no grant was made.
    assert_eq!(metric(c, leader, "lockd_lock_waiters"), 0);
    let r = c.lock(leader, key).expect("get");
    assert_eq!(r.body["held"], false, "held after the release: {r:?}");
    assert_eq!(
        metric(c, leader, "lockd_lock_events_total{event=\"grant\"}"),
        grants0
    );
    assert_eq!(
        metric(
            c,
            leader,
            "lockd_lock_events_total{event=\"phantom_release\"}"
        ),
        phantoms0,
        "the vanished waiter was granted the lock, then released"
    );
    let next = c.acquire_on_leader(key, 1000, patience);
    assert_eq!(next, holder + 1, "a grant was made to the vanished waiter");
    Ok(())
}

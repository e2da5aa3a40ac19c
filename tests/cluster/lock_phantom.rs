//! A client killed after sending its acquire, before the answer, leaves no
//! lock behind — well before the lease would end.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use lock_tests::cluster::Cluster;

/// Send an acquire over a raw connection and close it before reading the
/// answer, as a client process killed at that moment does.
fn acquire_and_vanish(addr: &str, key: &str, lease_ms: u64, wait_ms: u64, linger: Duration) {
    let body = format!("{{\"lease_ms\":{lease_ms},\"wait_ms\":{wait_ms}}}");
    let req = format!(
        "POST /v1/locks/{key}/acquire HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(req.as_bytes()).expect("send");
    std::thread::sleep(linger);
    drop(s);
}

fn wait_free(c: &Cluster, leader: u64, key: &str, within: Duration) {
    let start = Instant::now();
    loop {
        let r = c.lock(leader, key).expect("get");
        if r.body["held"] == false {
            return;
        }
        assert!(
            start.elapsed() < within,
            "{key} still held {:?} after its client vanished: {r:?}",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_grant_whose_client_vanished_is_released_at_once() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    for i in 0..10 {
        let key = format!("phantom/{i}");
        acquire_and_vanish(c.addr(leader), &key, 600_000, 0, Duration::from_millis(0));
        // The lease is ten minutes; the lock must be gone within seconds.
        wait_free(&c, leader, &key, Duration::from_secs(3));
    }
    // The key is usable again at once.
    assert!(c.acquire(leader, "phantom/0", 1000).expect("acquire").ok());
}

#[test]
fn a_waiter_whose_client_vanished_is_skipped() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c.acquire(leader, "w", 60_000).expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    // A waiter queues, then its process dies while waiting.
    acquire_and_vanish(
        c.addr(leader),
        "w",
        600_000,
        30_000,
        Duration::from_millis(300),
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(c.release(leader, "w", token).expect("release").ok());
    // Nobody live was waiting: the key is free, not held for ten minutes by
    // a client that is gone.
    wait_free(&c, leader, "w", Duration::from_secs(3));
}

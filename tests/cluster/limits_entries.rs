//! Big log entries on real processes: a module over `--max-module-bytes`
//! is refused up front (the 30 MiB upgrade that once deposed the leader),
//! and a follower that was stopped while the leader committed many
//! maximum-size upgrade entries (80 MiB, more than one peer frame may
//! carry) and lock traffic catches up once resumed: AppendEntries batches
//! are cut by bytes, so replication never wedges on one too big to send.

use std::time::{Duration, Instant};

use lockd::api::body::DEFAULT_MAX_MODULE;
use lockd_tests::cluster::Cluster;
use serde_json::json;

/// A body of exactly `len` bytes that looks like wasm and is not: with
/// `precheck=false` it is committed and rejected at apply on every node.
fn fake_module(len: usize, seed: u8) -> Vec<u8> {
    let mut b = vec![seed; len];
    b[..8].copy_from_slice(b"\0asm\x0d\0\x01\0");
    b
}

/// Announce an upgrade body of `len` bytes, send none of it, and read
/// the answer.
fn head_only(addr: &str, len: usize) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "POST /v1/admin/upgrade?precheck=false HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/wasm\r\ncontent-length: {len}\r\n\r\n"
    )
    .expect("write");
    let mut buf = [0u8; 4096];
    let mut out = Vec::new();
    while !out.windows(4).any(|w| w == b"\r\n\r\n") || !out.ends_with(b"}") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_module_over_the_bound_is_refused_before_the_log() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    // Settled: the first module recorded (an upgrade in the status) and
    // everything the leader has committed, so only the refused request
    // could change what is compared below.
    lockd_tests::cluster::wait_for("the first module recorded", Duration::from_secs(20), || {
        c.status(leader)
            .is_some_and(|s| s.module_since_index > 0 && s.commit_index == s.last_log_index)
    });
    let before = c.status(leader).expect("status");
    let term = before.term;
    // The node answers from the announced length, before the body: an
    // HTTP client that sends the whole body first may see its write cut
    // off instead of the answer, so only the head is sent.
    let answer = head_only(c.addr(leader), 30 << 20);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("--max-module-bytes"), "{answer}");
    // Nothing reached the log: same leader, same term, locks served.
    std::thread::sleep(Duration::from_secs(1));
    let s = c.status(leader).expect("status");
    assert_eq!((s.leader, s.term), (Some(leader), term));
    assert_eq!(s.upgrades, before.upgrades);
    c.acquire_on_leader("after", 5000, Duration::from_secs(5));
}

#[test]
fn a_follower_stopped_behind_80_mib_of_entries_catches_up() {
    // Alone: 80 MiB written and synced on two nodes loads the machine's
    // disk (an entry once took 11 s to commit beside other clusters), and
    // the acquire after the catch-up is timed.
    let _alone = lockd_tests::turns::alone();
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let stopped = c
        .running()
        .into_iter()
        .find(|&id| id != leader)
        .expect("a follower");
    c.pause(stopped);

    // Lock traffic beside the big entries.
    let addr = c.addr(leader).to_string();
    let traffic = std::thread::spawn(move || {
        let mut done = 0;
        for i in 0..200 {
            let url = format!("http://{addr}/v1/locks/traffic/{}/acquire", i % 10);
            let ok = ureq::post(&url)
                .timeout(Duration::from_secs(10))
                .send_json(json!({"lease_ms": 200}))
                .is_ok();
            done += u32::from(ok);
        }
        done
    });
    for i in 0..20u8 {
        let r = c
            .post_bytes(
                leader,
                "/v1/admin/upgrade?precheck=false",
                &fake_module(DEFAULT_MAX_MODULE, i),
            )
            .expect("post");
        // Committed by the leader and the running follower, rejected at
        // apply: not a valid component.
        assert_eq!(r.status, 422, "entry {i}: {r:?}");
    }
    assert!(traffic.join().expect("traffic") > 0);
    let s = c.status(leader).expect("status");
    assert_eq!(s.leader, Some(leader), "the leader held on: {s:?}");

    c.resume(stopped);
    let started = Instant::now();
    let converged = c.wait_converged(Duration::from_secs(60));
    assert!(converged.poisoned.is_none());
    let caught_up = c.status(stopped).expect("status");
    assert_eq!(caught_up.applied_index, converged.applied_index);
    eprintln!("caught up in {:?}", started.elapsed());
    // And a new acquire commits within a few seconds.
    let t = Instant::now();
    c.acquire_on_leader("afterwards", 5000, Duration::from_secs(5));
    assert!(t.elapsed() < Duration::from_secs(5));
}

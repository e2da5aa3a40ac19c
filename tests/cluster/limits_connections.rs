//! Connection limits on real processes: slow and idle connections are
//! closed on time; the opening budget is bounded per address (past it a
//! connection is closed at accept, unread) while other addresses are
//! served; the client caps (per address, in all) hold while clients from
//! elsewhere are served and the cluster keeps its leader; a client that
//! pipelines past the in-flight cap is throttled, not served unboundedly,
//! and still gets every answer. (With authentication on, the
//! unauthenticated budget: `limits_unauthenticated`.)

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;

use lockd_client::wire::{self, Envelope, HelloReply};
use lockd_proto::{ClientRequest, ClientResponse};
use lockd_tests::cluster::Cluster;
use lockd_tests::raw::{self, closed_within, read_frame, send_frame};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// One HTTP request on `s`; the answer's head and body.
fn http_get(s: &mut TcpStream, path: &str) -> String {
    // One write: `write!` on a socket sends each formatted piece apart.
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").as_bytes())
        .expect("write");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Enough for a status or an error: stop at the first read that ends a
    // JSON body.
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.ends_with(b"}") {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn slow_and_idle_connections_are_closed_on_time() {
    let c = Cluster::start(
        1,
        &[
            "--hello-timeout-ms",
            "1000",
            "--header-timeout-ms",
            "1000",
            "--idle-timeout-ms",
            "1500",
        ],
    );
    c.wait_leader(Duration::from_secs(20));
    let addr = c.addr(1);
    let closed = |s: &mut TcpStream, what: &str| {
        let t = closed_within(s, Duration::from_secs(8))
            .unwrap_or_else(|| panic!("{what}: still open after 8 s"));
        assert!(
            t >= Duration::from_millis(800),
            "{what}: closed early ({t:?})"
        );
        t
    };

    // Silent from the start.
    closed(&mut TcpStream::connect(addr).expect("connect"), "silent");
    // The framed preface, then nothing.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&wire::PREFACE).expect("preface");
    closed(&mut s, "preface without a hello");
    // Half an HTTP head.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /v1/status HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .expect("head");
    closed(&mut s, "half an HTTP head");
    // A kept-alive HTTP connection after one request.
    let mut s = TcpStream::connect(addr).expect("connect");
    let answer = http_get(&mut s, "/v1/status");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    closed(&mut s, "idle kept-alive HTTP");
    // A framed client that says nothing after its hello.
    let mut s = raw::framed_client(addr);
    let t = closed(&mut s, "idle framed client");
    assert!(
        t >= Duration::from_millis(1300),
        "idle closed early ({t:?})"
    );

    // A framed client that keeps asking is not idle.
    let mut s = raw::framed_client(addr);
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    for id in 1..=8u64 {
        let req = wire::encode(&Envelope {
            id,
            body: ClientRequest::Get { key: b"k".to_vec() },
        })
        .expect("encode");
        send_frame(&mut s, &req);
        let env: Envelope<ClientResponse> =
            wire::decode(&read_frame(&mut s).expect("answer")).expect("decode");
        assert_eq!(env.id, id);
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A client connection from `src` that has made one request (so it holds
/// a client's place), kept alive; `None` if it was refused.
fn served_from(src: &str, addr: &str) -> Option<TcpStream> {
    let mut s = raw::connect_from(ip(src), addr).ok()?;
    http_get(&mut s, "/v1/status")
        .starts_with("HTTP/1.1 200")
        .then_some(s)
}

#[test]
fn the_opening_phase_is_bounded_per_address_and_others_are_served() {
    let c = Cluster::start(1, &["--max-handshakes-per-ip", "4"]);
    c.wait_leader(Duration::from_secs(20));
    let addr = c.addr(1).to_string();
    // Four silent connections from one address fill its opening budget...
    let _silent: Vec<TcpStream> = (0..4)
        .map(|_| raw::connect_from(ip("127.0.0.2"), &addr).expect("connect"))
        .collect();
    // ...so the next one from there is closed at once, its request unread
    // and unanswered (the node accepts before it counts, so a few may get
    // through while the silent ones are still being accepted).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = raw::connect_from(ip("127.0.0.2"), &addr).expect("connect");
        let _ = s.write_all(b"GET /v1/status HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => assert!(
                std::time::Instant::now() < deadline,
                "never closed at accept"
            ),
        }
    }
    // Another address is served meanwhile.
    let mut other = raw::connect_from(ip("127.0.0.3"), &addr).expect("connect");
    let answer = http_get(&mut other, "/v1/status");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn the_caps_hold_while_others_are_served_and_peers_are_never_refused() {
    let c = Cluster::start(
        3,
        &[
            "--max-connections-per-ip",
            "6",
            "--max-connections",
            "24",
            "--header-timeout-ms",
            "60000",
        ],
    );
    let leader = c.wait_leader(Duration::from_secs(20));
    let term = c.status(leader).expect("status").term;
    let addr = c.addr(leader).to_string();

    // One address takes its six places; the seventh is refused, by name.
    let mut held: Vec<TcpStream> = (0..6)
        .map(|_| served_from("127.0.0.2", &addr).expect("served"))
        .collect();
    let mut seventh = raw::connect_from(ip("127.0.0.2"), &addr).expect("connect");
    let answer = http_get(&mut seventh, "/v1/status");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(answer.contains("--max-connections-per-ip"), "{answer}");
    // A native client from there gets a refused hello with the reason.
    let mut native = raw::connect_from(ip("127.0.0.2"), &addr).expect("connect");
    match raw::client_hello(&mut native) {
        HelloReply::Refused(r) => assert!(r.reason.contains("--max-connections-per-ip"), "{r:?}"),
        other => panic!("{other:?}"),
    }
    // Others are served meanwhile.
    let token = c.acquire_on_leader("served", 60_000, Duration::from_secs(5));

    // Fill the node: past the total, everyone new is refused...
    for n in 3..=6 {
        for _ in 0..6 {
            if let Some(s) = served_from(&format!("127.0.0.{n}"), &addr) {
                held.push(s);
            }
        }
    }
    let mut late = raw::connect_from(ip("127.0.0.9"), &addr).expect("connect");
    let answer = http_get(&mut late, "/v1/status");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("(--max-connections)"), "{answer}");
    // ...but not peers: the leader keeps office, and the followers commit
    // what it proposes through connections it opened before.
    std::thread::sleep(Duration::from_secs(2));
    for id in c.running() {
        let s = c.status(id);
        if id != leader {
            let s = s.expect("follower status");
            assert_eq!((s.leader, s.term), (Some(leader), term), "node {id}");
        }
    }

    // Once the crowd leaves, the node serves new connections again.
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while served_from("127.0.0.9", &addr).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "places never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    c.release_on_leader("served", token, Duration::from_secs(5));
    c.acquire_on_leader("after", 5000, Duration::from_secs(5));
}

#[test]
fn a_client_pipelining_past_the_in_flight_cap_is_throttled_and_answered() {
    let c = Cluster::start(1, &["--max-in-flight", "4"]);
    c.wait_leader(Duration::from_secs(20));
    // Twenty held keys, and twenty acquires that must wait for them, sent
    // at once on one connection.
    let tokens: Vec<u64> = (0..20)
        .map(|i| c.acquire_on_leader(&format!("busy/{i}"), 60_000, Duration::from_secs(5)))
        .collect();
    let mut s = raw::framed_client(c.addr(1));
    for i in 0..20u64 {
        let req = wire::encode(&Envelope {
            id: i + 1,
            body: ClientRequest::Acquire {
                key: format!("busy/{i}").into_bytes(),
                lease_ms: 5_000,
                wait_ms: 30_000,
            },
        })
        .expect("encode");
        send_frame(&mut s, &req);
    }
    // Only four are taken in; the rest wait in the socket, not in the node.
    let waiting = || c.metric(1, "lockd_lock_waiters").unwrap_or(0);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while waiting() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(waiting(), 4, "in flight on the node");

    // Freed keys let them all through, four at a time.
    for (i, t) in tokens.iter().enumerate() {
        c.release_on_leader(&format!("busy/{i}"), *t, Duration::from_secs(5));
    }
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < 20 {
        let env: Envelope<ClientResponse> =
            wire::decode(&read_frame(&mut s).expect("answer")).expect("decode");
        assert!(
            matches!(env.body, ClientResponse::Acquired { .. }),
            "{:?}",
            env.body
        );
        answered.insert(env.id);
    }
}

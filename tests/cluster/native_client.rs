//! The Rust client over the native protocol: leader discovery, the lock
//! guard, keepalive, following a failover, and abandoned requests.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use lockd_client::wire::{self, Envelope, Hello, HelloReply, Role};
use lockd_client::{Client, ClientError, ClientOptions, LockGuard};
use lockd_proto::{ClientRequest, ErrorCode, WireError};
use lockd_tests::cluster::Cluster;
use tokio::time::Instant;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// How long to wait for what must happen, from the cluster's election bound.
fn patience(c: &Cluster) -> Duration {
    Duration::from_millis(50 * c.election_ms)
}

/// Take `key`, retrying while an election (right after the start) leaves
/// the outcome unknown; such an attempt must not have taken the key.
async fn acquire_retrying(
    client: &Client,
    key: &str,
    lease: Duration,
    patience: Duration,
) -> LockGuard {
    let start = Instant::now();
    loop {
        match client.acquire(key, lease, Duration::ZERO).await {
            Ok(g) => return g,
            Err(e @ (ClientError::Unknown(_) | ClientError::Unreachable { .. })) => {
                assert!(start.elapsed() < patience, "acquire {key}: {e}");
                let holder = client.get(key).await.expect("get");
                assert_eq!(holder, None, "an acquire that failed ({e}) took {key}");
            }
            Err(e) => panic!("acquire {key}: {e}"),
        }
    }
}

/// Wait until `key` is free; panics after `within`.
async fn wait_free(client: &Client, key: &str, within: Duration) {
    let start = Instant::now();
    while client.get(key).await.expect("get").is_some() {
        assert!(
            start.elapsed() < within,
            "{key} still held after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Endpoints with the leader last, so the client must follow a redirect.
fn endpoints(c: &Cluster, leader: u64) -> Vec<String> {
    let mut ids: Vec<u64> = c.nodes.keys().copied().filter(|i| *i != leader).collect();
    ids.push(leader);
    ids.into_iter().map(|i| c.addr(i).to_string()).collect()
}

#[test]
fn acquire_release_get_and_guard_through_a_follower() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let client = Client::new(endpoints(&c, leader));
    rt().block_on(async {
        let g = acquire_retrying(&client, "svc/a", Duration::from_secs(30), patience(&c)).await;
        assert!(g.token() >= 1);
        assert!(g.is_valid());
        assert!(
            g.deadline() <= tokio::time::Instant::now() + Duration::from_secs(30),
            "the local deadline is conservative"
        );
        let v = client.get("svc/a").await.expect("get").expect("held");
        assert_eq!(v.token, g.token());
        // Held: try_acquire says so without an error.
        assert!(client
            .try_acquire("svc/a", Duration::from_secs(1))
            .await
            .expect("try")
            .is_none());
        // A wrong token is refused, with its precise code.
        match client.release("svc/a", g.token() + 1).await {
            Err(ClientError::Rejected {
                error: WireError::WrongToken(m),
                code,
            }) => {
                assert!(m.contains("does not hold"), "{m}");
                assert_eq!(code, ErrorCode::WrongToken);
            }
            other => panic!("{other:?}"),
        }
        // So is a bad key, before anything is proposed.
        let long = "k".repeat(1025);
        match client.try_acquire(&long, Duration::from_secs(1)).await {
            Err(e @ ClientError::Rejected { .. }) => {
                assert_eq!(e.code(), Some(ErrorCode::InvalidKey), "{e}")
            }
            Err(e) => panic!("{e}"),
            Ok(g) => panic!("a 1025-byte key was served: {:?}", g.map(|g| g.token())),
        }
        let token = g.token();
        g.release().await.expect("release");
        assert_eq!(client.get("svc/a").await.expect("get"), None);
        // Tokens keep increasing.
        let g2 = client
            .try_acquire("svc/a", Duration::from_secs(30))
            .await
            .expect("try")
            .expect("free");
        assert!(g2.token() > token);
        let g2_deadline = g2.deadline();
        // release_on_drop frees it when the guard goes, long before the
        // lease would.
        drop(g2.release_on_drop(true));
        wait_free(&client, "svc/a", patience(&c)).await;
        assert!(
            Instant::now() < g2_deadline,
            "freed by the lease, not by release_on_drop"
        );
    });
}

#[test]
fn the_guard_keeps_its_lock_alive_past_the_lease() {
    // Alone: the guard's keepalives must each land within the lease, and
    // the expiry is timed; a second cluster on the same two cores could
    // move either.
    let _alone = lockd_tests::turns::alone();
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(patience(&c));
    let client = Client::new(endpoints(&c, leader));
    let lease = Duration::from_millis(600);
    rt().block_on(async {
        // No keep_alive() call: a guard renews by default.
        let g = acquire_retrying(&client, "kept", lease, patience(&c)).await;
        // Three leases: only renewals can keep it that long.
        tokio::time::sleep(3 * lease).await;
        assert!(g.is_valid(), "keepalive should have moved the deadline");
        assert_eq!(
            client.get("kept").await.expect("get").map(|v| v.token),
            Some(g.token())
        );
        let (token, promised) = (g.token(), g.deadline());
        drop(g); // stops the keepalive; the lease ends the lock
        let dropped = Instant::now();
        // Held until at least the deadline the guard was promised (counted
        // from before its last renewal was sent), then expired.
        loop {
            let v = client.get("kept").await.expect("get");
            let now = Instant::now();
            match v {
                Some(v) => assert_eq!(v.token, token),
                None => {
                    assert!(
                        now >= promised,
                        "token {token} expired {:?} before its promised deadline",
                        promised - now
                    );
                    break;
                }
            }
            assert!(
                dropped.elapsed() < lease + patience(&c) / 5,
                "token {token} outlived its lease"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn the_client_follows_a_failover() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(patience(&c));
    let client = Client::with_options(
        endpoints(&c, leader),
        ClientOptions {
            retry_for: patience(&c),
            ..ClientOptions::default()
        },
    );
    let rt = rt();
    let g = rt.block_on(acquire_retrying(
        &client,
        "before",
        Duration::from_secs(60),
        patience(&c),
    ));
    let leader = c.wait_leader(patience(&c));
    c.kill(leader);
    rt.block_on(async {
        let v = client.get("before").await.expect("get after failover");
        assert_eq!(v.map(|v| v.token), Some(g.token()));
        // The new leader may still be settling: a grant it could not
        // confirm is retried.
        let g2 = acquire_retrying(&client, "after", Duration::from_secs(5), patience(&c)).await;
        assert!(g2.token() > g.token());
    });
}

/// Write one frame: 4-byte big-endian length, then the postcard body.
fn write_frame<T: serde::Serialize>(s: &mut TcpStream, value: &T) {
    let body = wire::encode(value).expect("encode");
    let len = u32::try_from(body.len()).expect("frame length");
    s.write_all(&len.to_be_bytes()).expect("send");
    s.write_all(&body).expect("send");
}

/// Queue an acquire of `key` on a raw native connection to `addr`.
fn native_waiter(addr: &str, key: &str, lease_ms: u64, wait_ms: u64) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&wire::PREFACE).expect("preface");
    write_frame(&mut s, &Hello { role: Role::Client });
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("hello reply");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("hello reply");
    assert!(matches!(
        wire::decode::<HelloReply>(&body).expect("hello reply"),
        HelloReply::Welcome(_)
    ));
    let req = ClientRequest::Acquire {
        key: key.as_bytes().to_vec(),
        lease_ms,
        wait_ms,
    };
    write_frame(&mut s, &Envelope { id: 1, body: req });
    s
}

#[test]
fn a_waiting_acquire_on_a_closed_connection_is_dropped() {
    // One node: no election can intervene.
    let c = Cluster::start(1, &[]);
    let patience = patience(&c);
    c.wait_leader(patience);
    let rt = rt();
    let holder = Client::new([c.addr(1)]);
    let g = rt
        .block_on(holder.acquire("q", Duration::from_secs(60), Duration::ZERO))
        .expect("acquire");
    let g_token = g.token();
    let metric = |name| c.metric(1, name).expect("metric");
    let (grants, phantoms) = (
        metric("lockd_lock_events_total{event=\"grant\"}"),
        metric("lockd_lock_events_total{event=\"phantom_release\"}"),
    );
    // A client waits (far longer than the test) on its own connection...
    let mut s = native_waiter(c.addr(1), "q", 600_000, 600_000);
    let start = Instant::now();
    while metric("lockd_lock_waiters") != 1 {
        assert!(start.elapsed() < patience, "the waiter never queued");
        std::thread::sleep(Duration::from_millis(20));
    }
    // ...then goes away; once the node has closed the connection too, it
    // has dropped the waiting request.
    s.shutdown(Shutdown::Write).expect("half-close");
    s.set_read_timeout(Some(patience)).expect("read timeout");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)
        .expect("the node closes the connection");
    assert!(rest.is_empty(), "the waiter was answered: {rest:?}");
    rt.block_on(async {
        g.release().await.expect("release");
        assert_eq!(holder.get("q").await.expect("get"), None);
    });
    // Skipped, not granted and then released: no grant was made.
    assert_eq!(metric("lockd_lock_waiters"), 0);
    assert_eq!(metric("lockd_lock_events_total{event=\"grant\"}"), grants);
    assert_eq!(
        metric("lockd_lock_events_total{event=\"phantom_release\"}"),
        phantoms,
        "the lock went to a client that had left"
    );
    let next = rt
        .block_on(holder.acquire("q", Duration::from_secs(1), Duration::ZERO))
        .expect("acquire");
    assert_eq!(
        next.token(),
        g_token + 1,
        "a grant was made to a client that had left"
    );
}

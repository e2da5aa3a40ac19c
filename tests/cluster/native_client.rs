//! The Rust client over the native protocol: leader discovery, the lock
//! guard, keepalive, following a failover, and abandoned requests.

use std::time::Duration;

use lock_tests::cluster::Cluster;
use lockd_client::proto::WireError;
use lockd_client::{Client, ClientError, ClientOptions};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
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
        let g = client
            .acquire("svc/a", Duration::from_secs(30), Duration::ZERO)
            .await
            .expect("acquire");
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
        // A wrong token is refused.
        match client.release("svc/a", g.token() + 1).await {
            Err(ClientError::Rejected(WireError::WrongToken(m))) => {
                assert!(m.contains("does not hold"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        let token = g.token();
        g.release().await.expect("release");
        assert_eq!(client.get("svc/a").await.expect("get"), None);
        // Tokens keep increasing.
        let g2 = client
            .try_acquire("svc/a", Duration::from_secs(1))
            .await
            .expect("try")
            .expect("free");
        assert!(g2.token() > token);
        // release_on_drop frees it when the guard goes.
        drop(g2.release_on_drop(true));
        for _ in 0..100 {
            if client.get("svc/a").await.expect("get").is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("release_on_drop did not release");
    });
}

#[test]
fn the_guard_keeps_its_lock_alive_past_the_lease() {
    // Alone: the guard's keepalives must each land within a 600 ms lease,
    // and the lock must be gone 1.5 s after the guard; a second cluster on
    // the same two cores could move either.
    let _alone = lock_tests::turns::alone();
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let client = Client::new(endpoints(&c, leader));
    rt().block_on(async {
        let mut g = client
            .acquire("kept", Duration::from_millis(600), Duration::ZERO)
            .await
            .expect("acquire");
        g.keep_alive();
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert!(g.is_valid(), "keepalive should have moved the deadline");
        assert_eq!(
            client.get("kept").await.expect("get").map(|v| v.token),
            Some(g.token())
        );
        let token = g.token();
        drop(g); // stops the keepalive; the lease ends the lock
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(
            client.get("kept").await.expect("get"),
            None,
            "token {token} outlived its lease"
        );
    });
}

#[test]
fn the_client_follows_a_failover() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let client = Client::with_options(
        endpoints(&c, leader),
        ClientOptions {
            retry_for: Duration::from_secs(20),
            ..ClientOptions::default()
        },
    );
    let rt = rt();
    let g = rt
        .block_on(client.acquire("before", Duration::from_secs(60), Duration::ZERO))
        .expect("acquire");
    c.kill(leader);
    rt.block_on(async {
        let v = client.get("before").await.expect("get after failover");
        assert_eq!(v.map(|v| v.token), Some(g.token()));
        let g2 = client
            .acquire("after", Duration::from_secs(5), Duration::ZERO)
            .await
            .expect("acquire after failover");
        assert!(g2.token() > g.token());
    });
}

#[test]
fn a_waiting_acquire_on_a_closed_connection_is_dropped() {
    // Alone: the node must notice the closed connection within the 200 ms
    // before the release; a second cluster on the same two cores could delay
    // that.
    let _alone = lock_tests::turns::alone();
    let c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    let rt = rt();
    let holder = Client::new([c.addr(1)]);
    let g = rt
        .block_on(holder.acquire("q", Duration::from_secs(60), Duration::ZERO))
        .expect("acquire");
    rt.block_on(async {
        // A second client waits on its own connection, then goes away.
        let waiter = Client::new([c.addr(1)]);
        let w = waiter.clone();
        let task = tokio::spawn(async move {
            w.acquire("q", Duration::from_secs(600), Duration::from_secs(30))
                .await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        task.abort();
        drop(waiter);
        tokio::time::sleep(Duration::from_millis(200)).await;
        g.release().await.expect("release");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            holder.get("q").await.expect("get"),
            None,
            "the lock went to a client that had left"
        );
    });
}

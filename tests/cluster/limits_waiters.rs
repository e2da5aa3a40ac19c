//! The bounds on waiting, on real processes: a key with as many waiters as
//! `--max-waiters-per-key` refuses one more at once (HTTP 429 with
//! `Retry-After`, the native protocol's `TooManyWaiters`), a `wait_ms`
//! above `--max-wait-ms` is refused as bad input, and the waiters already
//! queued are served in order as before; and past `--max-requests` any
//! request gets 503 with `Retry-After`.

use std::time::Duration;

use lockd_client::{Client, ClientError};
use lockd_proto::WireError;
use lockd_tests::cluster::Cluster;
use serde_json::json;

#[test]
fn a_key_full_of_waiters_refuses_one_more_and_serves_the_rest() {
    let c = Cluster::start(3, &["--max-waiters-per-key", "2", "--max-wait-ms", "10000"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let within = Duration::from_secs(20);
    let token = c.acquire_on_leader("full", 60_000, within);

    // Two callers wait for the key.
    let addr = c.addr(leader).to_string();
    let waiters: Vec<_> = (0..2)
        .map(|i| {
            let url = format!("http://{addr}/v1/locks/full/acquire");
            let handle = std::thread::spawn(move || {
                ureq::post(&url)
                    .timeout(Duration::from_secs(15))
                    .send_json(json!({"lease_ms": 5000, "wait_ms": 8000}))
                    .map(|r| r.into_json::<serde_json::Value>().expect("json"))
            });
            // In order: the second asks once the first waits.
            std::thread::sleep(Duration::from_millis(300 + 100 * i));
            handle
        })
        .collect();

    // A third is one too many: refused at once, with Retry-After.
    let started = std::time::Instant::now();
    let third = ureq::post(&format!("http://{addr}/v1/locks/full/acquire"))
        .timeout(Duration::from_secs(15))
        .send_json(json!({"lease_ms": 5000, "wait_ms": 8000}));
    match third {
        Err(ureq::Error::Status(429, r)) => {
            assert_eq!(r.header("Retry-After"), Some("1"));
            let body: serde_json::Value = r.into_json().expect("json");
            let msg = body["error"].as_str().unwrap_or_default().to_string();
            assert!(msg.contains("--max-waiters-per-key"), "{msg}");
        }
        other => panic!("expected 429 for a third waiter, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "not refused at once"
    );

    // The native protocol says the same.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = Client::new(c.endpoints());
    let native =
        rt.block_on(client.acquire("full", Duration::from_secs(5), Duration::from_secs(8)));
    assert!(
        matches!(
            native,
            Err(ClientError::Rejected {
                error: WireError::TooManyWaiters(_),
                ..
            })
        ),
        "{:?}",
        native.map(|g| g.token())
    );

    // A wait above --max-wait-ms is bad input, and changes nothing.
    let r = c
        .post(
            leader,
            "/v1/locks/other/acquire",
            json!({"lease_ms": 5000, "wait_ms": 20000}),
        )
        .expect("post");
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.error()
            .contains("wait_ms 20000 is above this cluster's maximum of 10000"),
        "{r:?}"
    );
    assert_eq!(c.lock(leader, "other").expect("get").body["held"], false);

    // The two waiters are served, in order, as the key is handed on.
    c.release_on_leader("full", token, within);
    let mut waiters = waiters.into_iter();
    let mut next = || {
        let h = waiters.next().expect("a waiter");
        let granted = h.join().expect("waiter thread").expect("granted");
        granted["token"].as_u64().expect("a token")
    };
    let first = next();
    assert!(first > token);
    c.release_on_leader("full", first, within);
    let second = next();
    assert!(second > first);
}

#[test]
fn requests_past_the_node_bound_get_503_with_retry_after() {
    let c = Cluster::start(1, &["--max-requests", "3"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let token = c.acquire_on_leader("full", 60_000, Duration::from_secs(20));
    let addr = c.addr(leader).to_string();
    // Three callers wait: the node holds three requests.
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let url = format!("http://{addr}/v1/locks/full/acquire");
            std::thread::spawn(move || {
                ureq::post(&url)
                    .timeout(Duration::from_secs(15))
                    .send_json(json!({"lease_ms": 5000, "wait_ms": 3000}))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // A fourth request of any kind is one too many, and says so.
    let r = ureq::post(&format!("http://{addr}/v1/locks/other/acquire"))
        .timeout(Duration::from_secs(5))
        .send_json(json!({"lease_ms": 5000}));
    match r {
        Err(ureq::Error::Status(503, r)) => {
            assert_eq!(r.header("Retry-After"), Some("1"));
            let body: serde_json::Value = r.into_json().expect("json");
            let msg = body["error"].as_str().unwrap_or_default().to_string();
            assert!(msg.contains("--max-requests"), "{msg}");
        }
        other => panic!("expected 503, got {other:?}"),
    }
    // When the waiters give up, there is room again.
    for w in waiting {
        assert!(w.join().expect("thread").is_err(), "the key stayed held");
    }
    c.release_on_leader("full", token, Duration::from_secs(5));
    c.acquire_on_leader("other", 5000, Duration::from_secs(5));
}

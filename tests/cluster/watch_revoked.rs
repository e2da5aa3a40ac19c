//! A watch outlives no revocation, and no principal takes every watch
//! slot (issue 55, item 3), on a real node with TLS and authentication:
//!
//! * `worker` (a token) holds an SSE watch and a native watch on `db/`;
//!   with `--max-watchers-per-principal 2` a third is refused (429,
//!   `too_many_watchers`) while `admin` still gets one.
//! * `worker` is removed from the auth file and the node reads it again:
//!   both of its streams end with a `revoked` cut. `admin`'s stream, the
//!   control, goes on and sees a grant made after the reload.

use std::time::{Duration, Instant};

use futures::StreamExt;
use lockd_client::{ClientError, WatchEvent};
use lockd_tests::cluster::Cluster;
use lockd_tests::secure::Who;
use lockd_tests::sse::{Message, Watch};

const WITHIN: Duration = Duration::from_secs(20);

/// Read `w` until a message that `stop` picks, within [`WITHIN`].
fn until(w: &mut Watch, stop: impl Fn(&Message) -> bool) -> Message {
    let deadline = Instant::now() + WITHIN;
    loop {
        assert!(Instant::now() < deadline, "the stream never got there");
        let m = w.next_message().expect("the stream ended without a cut");
        if stop(&m) {
            return m;
        }
    }
}

#[test]
fn a_revoked_principal_s_watches_end_and_its_share_is_bounded() {
    let c = Cluster::start_secure(1, &["--max-watchers-per-principal", "2"]);
    c.wait_leader(WITHIN);
    let (addr, query) = (c.addr(1), "prefix=db/");
    let as_ = |who| c.secure().credentials(who);
    let worker = as_(Who::Token("worker"));
    let mut sse = Watch::open_as(Some(&worker), addr, query, None).expect("worker's SSE watch");
    until(&mut sse, |m| m.event == "progress");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = lockd_client::Client::with_options(
        c.endpoints(),
        lockd_client::ClientOptions {
            retry_for: Duration::from_secs(5),
            ..c.client_options(Who::Token("worker"))
        },
    );
    let mut native = rt.block_on(async { client.watch("db/", None) });
    let first = rt.block_on(async { tokio::time::timeout(WITHIN, native.next()).await });
    assert!(
        matches!(first, Ok(Some(Ok(WatchEvent::Progress(_))))),
        "{first:?}"
    );
    // The principal's share is taken; another principal's is not.
    let third = Watch::open_as(Some(&worker), addr, query, None)
        .err()
        .expect("refused");
    assert_eq!(
        (third.status, third.body["code"].as_str()),
        (429, Some("too_many_watchers")),
        "{:?}",
        third.body
    );
    let admin = as_(Who::Cert("admin"));
    let mut control = Watch::open_as(Some(&admin), addr, query, None).expect("admin's watch");
    until(&mut control, |m| m.event == "progress");

    c.revoke("worker", &[1], WITHIN);
    let cut = until(&mut sse, |m| m.event == "cut");
    assert_eq!(cut.data["code"], "revoked", "{:?}", cut.data);
    assert!(sse.next_message().is_none(), "nothing after the cut");
    let ended = rt.block_on(async {
        loop {
            match tokio::time::timeout(WITHIN, native.next()).await {
                Ok(Some(Ok(WatchEvent::Progress(_) | WatchEvent::Changes(_)))) => continue,
                other => break other,
            }
        }
    });
    match ended {
        Ok(Some(Err(ClientError::WatchCut(cut)))) => {
            assert_eq!(cut.code, "revoked", "{cut:?}")
        }
        other => panic!("the native watch went on: {other:?}"),
    }
    // The control: a principal still in the file keeps its stream.
    let r = c
        .as_who(Who::Cert("admin"))
        .request(
            addr,
            "POST",
            "/v1/locks/db/after/acquire",
            Some(serde_json::json!({"lease_ms": 10000})),
        )
        .expect("answer");
    assert_eq!(r.status, 200, "{:?}", r.body);
    let seen = until(&mut control, |m| m.event != "progress");
    assert_eq!(seen.event, "changes", "{:?}", seen.data);
    assert_eq!(seen.data["changes"][0]["key"], "db/after");
}

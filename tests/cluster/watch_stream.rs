//! Watch: a watcher on a follower sees every grant and release under its
//! prefix, in log order, across a leader kill; a second watcher resuming
//! from an index (by `from`, and by `Last-Event-ID`) on another node gets
//! exactly the rest, without a gap or a duplicate. A watcher that reads
//! nothing is cut once the node's kept changes pass it, while every
//! acquire goes on being served; an index older than the kept changes is
//! answered 410 `compacted`, and a list's `index` is where to watch from.

use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;
use lockd_tests::sse::{Message, Watch};

/// (type, key, token) of every change of every `changes` message.
fn changes(messages: &[Message]) -> Vec<(String, String, u64)> {
    messages
        .iter()
        .filter(|m| m.event == "changes")
        .flat_map(|m| m.data["changes"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            (
                c["type"].as_str().unwrap_or("?").to_string(),
                c["key"].as_str().unwrap_or("?").to_string(),
                c["token"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Read `w` until `done` holds of what was read, within `within`.
fn read_until(w: &mut Watch, within: Duration, done: impl Fn(&[Message]) -> bool) -> Vec<Message> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while !done(&got) {
        assert!(
            Instant::now() < deadline,
            "the watch did not get there: {got:#?}"
        );
        match w.next_message() {
            Some(m) => got.push(m),
            None => panic!("the stream ended early: {got:#?}"),
        }
    }
    got
}

/// Take and free `keys` one after the other through the leader; the
/// (type, key, token) changes they make, in order.
fn take_and_free(c: &Cluster, keys: &[String]) -> Vec<(String, String, u64)> {
    let mut made = Vec::new();
    for key in keys {
        let token = c.acquire_on_leader(key, 60_000, Duration::from_secs(20));
        c.release_on_leader(key, token, Duration::from_secs(20));
        made.push(("granted".to_string(), key.clone(), token));
        made.push(("released".to_string(), key.clone(), token));
    }
    made
}

#[test]
fn a_watcher_sees_every_change_in_log_order_across_a_leader_kill_and_resumes_exactly() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let other = (1..=3)
        .find(|id| *id != leader && *id != follower)
        .expect("another follower");
    let mut w = Watch::open(c.addr(follower), "prefix=w/", None).expect("watch");
    let start = w.next_message().expect("a first message");
    assert_eq!(start.event, "progress", "{start:?}");

    let first: Vec<String> = (0..8).map(|i| format!("w/a{i}")).collect();
    let mut want = take_and_free(&c, &first);
    // Outside the prefix: never seen.
    let t = c.acquire_on_leader("elsewhere", 60_000, Duration::from_secs(20));
    c.release_on_leader("elsewhere", t, Duration::from_secs(20));
    let n = want.len();
    let mut got = read_until(&mut w, Duration::from_secs(30), |m| changes(m).len() >= n);

    c.kill(leader);
    c.wait_leader(Duration::from_secs(20));
    let second: Vec<String> = (0..8).map(|i| format!("w/b{i}")).collect();
    want.extend(take_and_free(&c, &second));
    let more = want.len() - changes(&got).len();
    got.extend(read_until(&mut w, Duration::from_secs(30), |m| {
        changes(m).len() >= more
    }));

    assert_eq!(changes(&got), want, "every change, in log order, once");
    let indexes: Vec<u64> = got
        .iter()
        .filter(|m| m.event == "changes")
        .map(|m| m.id.expect("an id"))
        .collect();
    assert!(indexes.windows(2).all(|p| p[0] < p[1]), "{indexes:?}");
    for m in got.iter().filter(|m| m.event == "changes") {
        assert_eq!(m.data["index"].as_u64(), m.id, "{m:?}");
    }

    // Resume after the 5th message, on the other surviving node: exactly
    // the rest, by `from` and by `Last-Event-ID`.
    let changes_msgs: Vec<&Message> = got.iter().filter(|m| m.event == "changes").collect();
    let cut_at = changes_msgs[4].id.expect("id");
    let rest: Vec<Message> = changes_msgs[5..].iter().map(|m| (*m).clone()).collect();
    let last = rest.last().and_then(|m| m.id).expect("a last index");
    let done = |m: &[Message]| m.iter().any(|m| m.id.is_some_and(|id| id >= last));
    let mut by_from = Watch::open(
        c.addr(other),
        &format!("prefix=w/&from={}", cut_at + 1),
        None,
    )
    .expect("resume by from");
    let resumed = read_until(&mut by_from, Duration::from_secs(30), done);
    assert_eq!(changes(&resumed), changes(&rest));
    let mut by_header =
        Watch::open(c.addr(other), "prefix=w/", Some(cut_at)).expect("resume by Last-Event-ID");
    let resumed = read_until(&mut by_header, Duration::from_secs(30), done);
    assert_eq!(changes(&resumed), changes(&rest));
}

#[test]
fn a_watcher_that_reads_nothing_is_cut_while_acquires_go_on() {
    // Alone: a load of 1 KiB keys until the node's socket buffers fill.
    let _alone = lockd_tests::turns::alone();
    let c = Cluster::start(1, &["--watch-history", "32"]);
    let node = c.wait_leader(Duration::from_secs(20));
    // Opened (its headers read) and then never read again.
    let mut stalled = Watch::open(c.addr(node), "prefix=s/", None).expect("watch");
    let mut reader = Watch::open(c.addr(node), "prefix=s/", None).expect("watch");
    let pad = "x".repeat(1000);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut ops = 0u64;
    while c.metric(node, "lockd_watchers_cut_total").unwrap_or(0) == 0 {
        assert!(
            Instant::now() < deadline,
            "after {ops} acquires the stalled watcher was still not cut"
        );
        for _ in 0..20 {
            let key = format!("s/{ops}{pad}");
            let r = c.acquire(node, &key, 60_000).expect("acquire answered");
            assert!(r.ok(), "{r:?}");
            let token = r.body["token"].as_u64().expect("token");
            let r = c.release(node, &key, token).expect("release answered");
            assert!(r.ok(), "{r:?}");
            ops += 1;
            // The watcher that reads keeps up: a message per entry (the
            // grant's and the release's).
            for _ in 0..2 {
                let m = reader.next_message().expect("the reading watcher goes on");
                assert_ne!(m.event, "cut", "{m:?}");
            }
        }
    }
    // Read at last, the stalled stream ends with the cut and where to
    // resume.
    let mut rest = Vec::new();
    while let Some(m) = stalled.next_message() {
        rest.push(m);
    }
    let last = rest.last().expect("a last message");
    assert_eq!(last.event, "cut", "{last:?}");
    assert_eq!(last.data["code"], "watch_behind", "{last:?}");
    assert!(last.data["resume_from"].as_u64().is_some(), "{last:?}");
    // Still served after the cut.
    let r = c
        .acquire(node, "s/after", 60_000)
        .expect("acquire answered");
    assert!(r.ok(), "{r:?}");

    // The kept changes start far past 1: an old index is refused, with
    // where they start; a list says where to watch from.
    let refused = Watch::open(c.addr(node), "prefix=s/&from=1", None)
        .err()
        .expect("from=1 refused");
    assert_eq!(refused.status, 410, "{refused:?}");
    assert_eq!(refused.body["code"], "compacted");
    assert!(
        refused.body["first"].as_u64().unwrap_or(0) > 1,
        "{refused:?}"
    );
    let list = c.get(node, "/v1/locks?prefix=s/").expect("list");
    assert!(list.ok(), "{list:?}");
    let index = list.body["index"].as_u64().expect("index");
    let mut fresh = Watch::open(c.addr(node), &format!("prefix=s/&from={}", index + 1), None)
        .expect("a watch from the list's index");
    let r = c
        .release(node, "s/after", r.body["token"].as_u64().expect("token"))
        .expect("release");
    assert!(r.ok(), "{r:?}");
    let m = read_until(&mut fresh, Duration::from_secs(30), |m| {
        !changes(m).is_empty()
    });
    assert_eq!(
        changes(&m)[0].0.as_str(),
        "released",
        "the release after the list, and nothing before it: {m:?}"
    );
}

#[test]
fn the_rust_client_resumes_on_another_node_and_lockctl_follows_a_prefix() {
    use futures::StreamExt;
    use lockd_client::proto::ChangeKind;
    use lockd_client::{Client, WatchEvent};

    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let from = c.status(leader).expect("status").applied_index + 1;
    // lockctl from an index, so it misses nothing however late it starts.
    let mut lockctl = c
        .lockctl()
        .args([
            "--json",
            "watch",
            "r/",
            "--from",
            &from.to_string(),
            "--count",
            "12",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("lockctl watch");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The follower first: the node this watch starts on is the one killed.
    let client = Client::new([c.addr(follower), c.addr(leader)]);
    let mut w = rt.block_on(async { client.watch("r/", None) });
    let mut next = || {
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), w.next()).await })
            .expect("an event within 30 s")
            .expect("the stream goes on")
            .expect("not an error")
    };
    assert!(matches!(next(), WatchEvent::Progress(_)));
    let mut got: Vec<(String, String, u64)> = Vec::new();
    let mut indexes = Vec::new();
    let mut read = |want: usize, next: &mut dyn FnMut() -> WatchEvent| {
        while got.len() < want {
            if let WatchEvent::Changes(b) = next() {
                indexes.push(b.index);
                for ch in b.changes {
                    let (kind, token) = match ch.kind {
                        ChangeKind::Granted { token, .. } => ("granted", token),
                        ChangeKind::Released { token } => ("released", token),
                        ChangeKind::Expired { token } => ("expired", token),
                        ChangeKind::Value { token, .. } => ("value", token),
                    };
                    got.push((kind.into(), ch.key, token));
                }
            }
        }
    };
    let first: Vec<String> = (0..3).map(|i| format!("r/a{i}")).collect();
    let mut want = take_and_free(&c, &first);
    read(want.len(), &mut next);
    c.kill(follower);
    let second: Vec<String> = (0..3).map(|i| format!("r/b{i}")).collect();
    want.extend(take_and_free(&c, &second));
    read(want.len(), &mut next);
    assert_eq!(
        got, want,
        "every change once, in order, across the node's death"
    );
    assert!(indexes.windows(2).all(|p| p[0] < p[1]), "{indexes:?}");

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = lockctl.try_wait().expect("try_wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "lockctl watch did not end after 12 changes"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut lockctl.stdout.take().expect("stdout"), &mut out)
        .expect("lockctl output");
    assert!(status.success(), "{status:?}: {out}");
    let lines: Vec<(String, String, u64)> = out
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            (
                v["type"].as_str().unwrap_or("?").into(),
                v["key"].as_str().unwrap_or("?").into(),
                v["token"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(lines, want, "lockctl watch --json: {out}");
}

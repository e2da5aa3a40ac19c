//! The ring: order, prefixes, resumes, bounds, cuts.

use lockd_core::changes::{Change, ChangeKind};

use super::*;

fn released(index: u64, key: &str) -> Change {
    Change {
        index,
        key: key.into(),
        kind: ChangeKind::Released { token: index },
    }
}

fn batches(read: Result<Read, Cut>) -> Vec<(u64, Vec<String>)> {
    match read {
        Ok(Read::Changes(b)) => b
            .into_iter()
            .map(|b| (b.index, b.changes.into_iter().map(|c| c.key).collect()))
            .collect(),
        other => panic!("expected changes, got {other:?}"),
    }
}

#[test]
fn a_watcher_reads_its_prefix_in_log_order_and_resumes_without_gap_or_duplicate() {
    let hub = WatchHub::new(100, 10, 10);
    hub.restart_at(4, false);
    let mut live = hub.watch("a/".into(), None, "").expect("watch");
    assert_eq!(live.read_now(), Ok(Read::Caught(4)));
    hub.publish(
        5,
        5,
        vec![released(5, "a/1"), released(5, "b/1"), released(5, "a/2")],
    );
    hub.publish(6, 7, vec![released(7, "b/2")]);
    hub.publish(8, 8, vec![released(8, "a/3")]);
    assert_eq!(
        batches(live.read_now()),
        vec![
            (5, vec!["a/1".into(), "a/2".into()]),
            (8, vec!["a/3".into()])
        ]
    );
    assert_eq!(live.read_now(), Ok(Read::Caught(8)));
    // A resume from any kept index gets exactly what follows it.
    let mut again = hub.watch("a/".into(), Some(6), "").expect("resume");
    assert_eq!(batches(again.read_now()), vec![(8, vec!["a/3".into()])]);
    // From the ring's start: everything.
    let mut all = hub
        .watch(String::new(), Some(5), "")
        .expect("from the start");
    assert_eq!(batches(all.read_now()).len(), 3);
    // Before it: compacted, with where the history starts.
    assert_eq!(
        hub.watch("a/".into(), Some(4), "").err(),
        Some(WatchError::Compacted {
            from: 4,
            first: 5,
            applied: 8
        })
    );
}

#[test]
fn the_ring_keeps_whole_entries_and_cuts_a_watcher_left_behind() {
    let hub = WatchHub::new(3, 10, 10);
    hub.restart_at(0, false);
    let mut slow = hub.watch(String::new(), None, "").expect("watch");
    hub.publish(1, 1, vec![released(1, "a"), released(1, "b")]);
    hub.publish(2, 2, vec![released(2, "c"), released(2, "d")]);
    // Counted cut as soon as the ring dropped what it had not read, before
    // it reads again (a caller that reads nothing is noticed too).
    assert_eq!(hub.cut_count(), 1);
    // Entry 1 went whole (not half of it), so the history starts at 2.
    assert_eq!(
        hub.watch(String::new(), Some(1), "")
            .err()
            .map(|e| e.code().as_str()),
        Some("compacted")
    );
    assert_eq!(
        slow.read_now(),
        Err(Cut::Behind {
            history: 3,
            resume_from: 1
        })
    );
    assert_eq!(hub.cut_count(), 1);
    let mut fresh = hub.watch(String::new(), Some(2), "").expect("watch");
    assert_eq!(
        batches(fresh.read_now()),
        vec![(2, vec!["c".into(), "d".into()])]
    );
}

#[test]
fn a_snapshot_install_cuts_watchers_behind_it_and_the_bound_refuses_one_more() {
    let hub = WatchHub::new(100, 2, 2);
    hub.restart_at(0, false);
    let mut w = hub.watch(String::new(), None, "").expect("watch");
    let _other = hub.watch(String::new(), None, "").expect("watch");
    assert_eq!(
        hub.watch(String::new(), None, "").err(),
        Some(WatchError::TooMany { limit: 2 })
    );
    hub.restart_at(40, true);
    let cut = w.read_now().expect_err("cut");
    assert_eq!((cut.code(), cut.resume_from()), ("compacted", 1));
    drop(w);
    // The slot is free again, and a watch from the snapshot on works.
    let mut after = hub.watch(String::new(), Some(41), "").expect("watch");
    hub.publish(41, 41, vec![released(41, "k")]);
    assert_eq!(batches(after.read_now()), vec![(41, vec!["k".into()])]);
}

#[test]
fn one_principal_holds_at_most_its_share_and_a_revoked_watch_frees_it() {
    let hub = WatchHub::new(100, 10, 2);
    hub.restart_at(0, false);
    let a = hub.watch(String::new(), None, "alice").expect("watch");
    let _b = hub.watch(String::new(), None, "alice").expect("watch");
    assert_eq!(
        hub.watch(String::new(), None, "alice").err(),
        Some(WatchError::TooManyForPrincipal { limit: 2 })
    );
    // Another principal, and an unauthenticated caller, are not affected.
    let _c = hub.watch(String::new(), None, "bob").expect("bob's watch");
    let _d = hub.watch(String::new(), None, "").expect("no principal");
    let _e = hub.watch(String::new(), None, "").expect("no principal");
    let _f = hub.watch(String::new(), None, "").expect("no principal");
    // A revoked watch resumes where it was and, once dropped, frees its place.
    let cut = a.revoked("token removed".into());
    assert_eq!((cut.code(), cut.resume_from()), ("revoked", 1));
    drop(a);
    hub.watch(String::new(), None, "alice")
        .expect("a place again");
}

#[test]
fn a_read_is_bounded_but_never_splits_an_entry() {
    let hub = WatchHub::new(10_000, 1, 1);
    hub.restart_at(0, false);
    let mut w = hub.watch(String::new(), None, "").expect("watch");
    let many: Vec<Change> = (0..READ_BATCH as u64 + 10)
        .map(|i| released(1 + i / 10, "k"))
        .collect();
    let last = many.last().map(|c| c.index).expect("changes");
    hub.publish(1, last, many);
    let mut seen = 0;
    let mut reads = 0;
    loop {
        match w.read_now().expect("read") {
            Read::Changes(b) => {
                reads += 1;
                for batch in b {
                    assert_eq!(
                        batch.changes.len(),
                        if batch.index == last {
                            (READ_BATCH + 10) % 10
                        } else {
                            10
                        }
                    );
                    seen += batch.changes.len();
                }
            }
            Read::Caught(at) => {
                assert_eq!(at, last);
                break;
            }
        }
    }
    assert_eq!(seen, READ_BATCH + 10);
    assert!(reads > 1, "one read took everything");
}

#[tokio::test]
async fn a_publish_wakes_a_waiting_watcher_and_close_ends_it() {
    let hub = WatchHub::new(10, 1, 1);
    hub.restart_at(0, false);
    let mut w = hub.watch(String::new(), None, "").expect("watch");
    assert_eq!(w.read_now(), Ok(Read::Caught(0)));
    let h = hub.clone();
    let publisher = tokio::spawn(async move { h.publish(1, 1, vec![released(1, "k")]) });
    w.changed().await;
    publisher.await.expect("publisher");
    assert_eq!(batches(w.read_now()), vec![(1, vec!["k".into()])]);
    hub.close();
    w.changed().await;
    assert_eq!(w.read_now(), Err(Cut::Closed { resume_from: 2 }));
    assert_eq!(
        hub.watch(String::new(), None, "").err(),
        Some(WatchError::Closed)
    );
}

//! The stream's timing, on paused time: a progress comes
//! [`PROGRESS_EVERY`] after the last message even while other prefixes'
//! changes keep waking the watcher.

use std::time::Duration;

use lockd_core::changes::{Change, ChangeKind};

use super::*;
use crate::watch::{WatchHub, PROGRESS_EVERY};

fn kind(e: &Event) -> &'static str {
    let text = format!("{e:?}");
    ["progress", "changes", "cut"]
        .into_iter()
        .find(|k| text.contains(&format!("event: {k}")))
        .unwrap_or("other")
}

fn stream(hub: &Arc<WatchHub>, prefix: &str) -> Stream_ {
    stream_checked(hub, prefix, Reauth(Arc::new(|| Ok(()))))
}

fn stream_checked(hub: &Arc<WatchHub>, prefix: &str, reauth: Reauth) -> Stream_ {
    Stream_ {
        watcher: hub.watch(prefix.into(), None, "").expect("watch"),
        access: Access::open(),
        reauth,
        due: Due::new(),
        ready: Default::default(),
        done: false,
    }
}

async fn next_timed(s: &mut Stream_) -> (&'static str, Duration) {
    let start = tokio::time::Instant::now();
    let e = s.next().await.expect("an event");
    (kind(&e), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn progress_comes_on_time_while_other_prefixes_change() {
    let hub = WatchHub::new(1000, 10, 10);
    hub.restart_at(1, false);
    let mut s = stream(&hub, "a/");
    assert_eq!(next_timed(&mut s).await.0, "progress", "first message");
    // A change under another prefix every 100 ms for 16 s. The time is
    // paused: the sleep is the simulated clock that paces the writer,
    // not a wait for something to happen.
    let busy = hub.clone();
    let writer = tokio::spawn(async move {
        for i in 2..=161 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let c = Change {
                index: i,
                key: format!("b/{i}"),
                kind: ChangeKind::Released { token: i },
            };
            busy.publish(i, i, vec![c]);
        }
    });
    for _ in 0..3 {
        let (k, after) = next_timed(&mut s).await;
        assert_eq!(k, "progress");
        assert!(
            after <= PROGRESS_EVERY + Duration::from_millis(100),
            "a progress came {after:?} after the last message"
        );
    }
    // A change under the prefix comes at once, and the progress clock
    // starts again from it.
    writer.await.expect("writer");
    let mine = Change {
        index: 162,
        key: "a/1".into(),
        kind: ChangeKind::Released { token: 1 },
    };
    hub.publish(162, 162, vec![mine]);
    assert_eq!(next_timed(&mut s).await, ("changes", Duration::ZERO));
    let (k, after) = next_timed(&mut s).await;
    assert_eq!(k, "progress");
    assert!(
        after >= PROGRESS_EVERY - Duration::from_millis(100),
        "{after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_whose_caller_is_revoked_ends_within_a_second() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let hub = WatchHub::new(1000, 10, 10);
    hub.restart_at(1, false);
    let allowed = Arc::new(AtomicBool::new(true));
    let check = allowed.clone();
    let mut s = stream_checked(
        &hub,
        "a/",
        Reauth(Arc::new(move || {
            if check.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err("the bearer token is not known to this node".into())
            }
        })),
    );
    assert_eq!(next_timed(&mut s).await.0, "progress", "first message");
    // Still allowed: the stream goes on (a progress, not a cut).
    assert_eq!(next_timed(&mut s).await.0, "progress");
    allowed.store(false, Ordering::Relaxed);
    let start = tokio::time::Instant::now();
    let e = s.next().await.expect("the cut");
    let text = format!("{e:?}");
    assert!(
        text.contains("event: cut") && text.contains("revoked"),
        "{text}"
    );
    assert!(
        start.elapsed() <= Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    // And nothing after the cut.
    assert!(s.next().await.is_none());
}

//! When a node builds a snapshot: after `--snapshot-threshold` entries
//! since its last one (as openraft's own policy would), and only once the
//! log written since then is at least as big as the lock state the last
//! snapshot held. The log's bytes are the write-ahead log's own count
//! ([`super::log_store::LogStats::bytes`]): nothing on the apply path
//! measures anything for this rule.
//!
//! The second rule is what keeps a big table cheap to serve. A snapshot
//! re-encodes and writes the whole state; with a million locks that is
//! 70 MB and about 0.4 s of a core, and by entry count alone every node
//! did it every few seconds under load, which cost serving about a fifth
//! (`scale-bench`). Weighed against the log, snapshot work never exceeds
//! the log's own bytes, and a restart never replays more log than the
//! state it would otherwise have restored. Small tables are unchanged:
//! their state is smaller than any threshold's worth of log.
//!
//! The log kept in memory and on disk between snapshots grows with the
//! table in turn (about as many bytes as the state): the price of the
//! rule, bounded by the capacity bounds like the state itself.

use std::time::Duration;

use tokio::sync::watch;

use super::log_store::LogStore;
use super::state_machine::StateMachineStore;
use super::Raft;

/// How often the rule is checked.
const CHECK_EVERY: Duration = Duration::from_millis(100);
/// How long a trigger may go without a snapshot before it is repeated.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// Whether a snapshot is due: `entries` applied and `bytes` of log written
/// since the last snapshot, whose lock state took `state_bytes`.
pub fn due(entries: u64, bytes: u64, state_bytes: u64, threshold: u64) -> bool {
    entries >= threshold && bytes >= state_bytes
}

/// Trigger snapshots by [`due`] until `shutdown` turns true. openraft's own
/// policy is off (`SnapshotPolicy::Never`); it builds when told.
pub async fn run(
    raft: Raft,
    sm: StateMachineStore,
    log: LogStore,
    threshold: u64,
    mut shutdown: watch::Receiver<bool>,
) {
    // The applied index and time of the last trigger: not again until a
    // snapshot past it exists (openraft builds one at a time), or a
    // minute has passed (a build that failed).
    let mut asked: Option<(u64, tokio::time::Instant)> = None;
    // The last snapshot's index and the log's bytes at it: the log since
    // then is what the rule weighs. For a snapshot this task asked for,
    // the bytes when it asked (the snapshot is of the state then); for
    // any other (an install, an admin's), when it was first seen. Taking
    // "when seen" for our own would miss what was written during the
    // build and the check period: under a burst, most of it.
    let written = || log.stats().bytes.load(std::sync::atomic::Ordering::Relaxed);
    let mut mark: Option<(u64, u64)> = None;
    let mut asked_bytes = 0u64;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(CHECK_EVERY) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let (applied, snapshot) = {
            let m = raft.metrics().borrow().clone();
            (
                m.last_applied.map_or(0, |l| l.index),
                m.snapshot.map_or(0, |l| l.index),
            )
        };
        if mark.is_none_or(|(index, _)| index != snapshot) {
            let ours = asked.is_some_and(|(a, _)| snapshot >= a);
            mark = Some((snapshot, if ours { asked_bytes } else { written() }));
        }
        if asked.is_some_and(|(a, at)| snapshot < a && at.elapsed() < RETRY_AFTER) {
            continue;
        }
        let bytes = written().saturating_sub(mark.map_or(0, |(_, b)| b));
        let state_bytes = sm.snapshot_stats().last_state_bytes;
        let entries = applied.saturating_sub(snapshot);
        if due(entries, bytes, state_bytes, threshold) {
            tracing::debug!(applied, entries, bytes, state_bytes, "snapshot due");
            if raft.trigger().snapshot().await.is_err() {
                return;
            }
            asked = Some((applied, tokio::time::Instant::now()));
            asked_bytes = written();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::due;

    #[test]
    fn a_snapshot_waits_for_entries_and_for_a_state_worth_of_log() {
        // A small state: the entry threshold decides, as before.
        assert!(!due(9_999, 1 << 20, 4_000, 10_000));
        assert!(due(10_000, 1 << 20, 4_000, 10_000));
        // A 70 MB state: 10 000 entries of 100 bytes are not enough.
        assert!(!due(10_000, 1_000_000, 70 << 20, 10_000));
        assert!(due(800_000, 80 << 20, 70 << 20, 10_000));
    }
}

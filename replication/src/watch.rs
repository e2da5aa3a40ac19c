//! The watch: every change of the lock table, in log order, for callers
//! that follow a prefix (docs/watch.md).
//!
//! The state machine publishes what each applied range changed
//! ([`lockd_core::changes`]) into one ring shared by every watcher; a
//! watcher is a cursor (the next log index it wants) and a prefix, and
//! reads the ring at its own pace. So apply never waits for a watcher and
//! memory is the ring's bound, whatever the watchers do: one that falls
//! so far behind that the changes it has not read are gone is cut, with
//! the index to resume from. The ring also serves resumes: a watch may
//! start at any index the ring still covers (`first`..); older is
//! `compacted` (the caller lists the prefix, then watches from the list's
//! index). A node's ring starts at its state at boot or at the last
//! snapshot it installed; every node derives the same changes, so a
//! watcher may resume on any node.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use lockd_core::changes::Change;
use lockd_proto::ErrorCode;
use tokio::sync::watch;

/// How long a stream stays silent before it says where it is (which also
/// tells a proxy the connection is alive, and the node that the caller is
/// still there).
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The most changes one read hands a watcher, so a reader far behind
/// takes the ring's lock for short turns.
const READ_BATCH: usize = 512;

/// What may not be watched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    #[error("a prefix is at most {max} bytes (got {len})")]
    PrefixTooLong { len: usize, max: usize },
    #[error("index {from} is no longer kept here (changes are kept from index {first}; the state is at index {applied}): list the prefix, then watch from the list's index")]
    Compacted { from: u64, first: u64, applied: u64 },
    #[error("{limit} watchers are open on this node already (--max-watchers)")]
    TooMany { limit: usize },
    #[error("this principal has {limit} watchers open on this node already (--max-watchers-per-principal)")]
    TooManyForPrincipal { limit: usize },
    #[error("the node is shutting down")]
    Closed,
}

impl WatchError {
    /// The stable code of the error (docs/watch.md).
    pub fn code(&self) -> ErrorCode {
        match self {
            WatchError::PrefixTooLong { .. } => ErrorCode::InvalidKey,
            WatchError::Compacted { .. } => ErrorCode::Compacted,
            WatchError::TooMany { .. } | WatchError::TooManyForPrincipal { .. } => {
                ErrorCode::TooManyWatchers
            }
            WatchError::Closed => ErrorCode::ShuttingDown,
        }
    }
}

/// Why a watch ended; `resume_from` is where a new watch would go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cut {
    #[error(
        "this watcher fell more than {history} changes behind; resume from index {resume_from}"
    )]
    Behind { history: usize, resume_from: u64 },
    #[error("this node installed a snapshot at index {at}; resume from index {resume_from} (elsewhere, or list the prefix first)")]
    Snapshot { at: u64, resume_from: u64 },
    #[error("the node is shutting down; resume from index {resume_from} on another node")]
    Closed { resume_from: u64 },
    /// The caller may watch no more: its token or role was removed by a
    /// reload of the rules, or its certificate expired.
    #[error("the caller's right to watch was revoked ({why}); resume from index {resume_from} with valid credentials")]
    Revoked { why: String, resume_from: u64 },
}

impl Cut {
    /// `watch_behind` (not an error answer, so not an [`ErrorCode`]),
    /// `compacted` or `shutting_down`.
    pub fn code(&self) -> &'static str {
        match self {
            Cut::Behind { .. } => "watch_behind",
            Cut::Snapshot { .. } => ErrorCode::Compacted.as_str(),
            Cut::Closed { .. } => ErrorCode::ShuttingDown.as_str(),
            Cut::Revoked { .. } => ErrorCode::Revoked.as_str(),
        }
    }

    pub fn resume_from(&self) -> u64 {
        match self {
            Cut::Behind { resume_from, .. }
            | Cut::Snapshot { resume_from, .. }
            | Cut::Closed { resume_from }
            | Cut::Revoked { resume_from, .. } => *resume_from,
        }
    }
}

/// What the hub was told, as an observer sees it: the simulation's record
/// of what each node applied, which its checkers compare with what clients
/// were acknowledged (docs/testing.md).
#[derive(Debug)]
pub enum Applied<'a> {
    /// The entries `from..=to` were applied, changing `changes`.
    Entries {
        from: u64,
        to: u64,
        changes: &'a [Change],
    },
    /// The state is at `applied` with no history: at boot, or after a
    /// snapshot was installed (`installed`).
    Restart { applied: u64, installed: bool },
}

/// Sees every [`Applied`], on the thread that applies.
pub type Observer = Arc<dyn Fn(Applied<'_>) + Send + Sync>;

/// The changes kept, oldest first.
struct Ring {
    changes: VecDeque<Change>,
    /// The history is complete from this index on: every change at
    /// `first..next` is in `changes`.
    first: u64,
    /// One past the last index applied and published.
    next: u64,
    /// The last snapshot installed, if any (changes before it are gone).
    snapshot_at: u64,
}

/// What the hub knows of one watcher: where it is, and whether the ring
/// has left it behind (marked when the ring drops what it has not read,
/// so a watcher whose caller reads nothing is counted cut at once, not
/// when its connection is next written).
struct Slot {
    cursor: AtomicU64,
    behind: AtomicBool,
}

/// The ring and its watchers; one per node.
pub struct WatchHub {
    ring: Mutex<Ring>,
    slots: Mutex<Vec<Arc<Slot>>>,
    /// `next` after each publish: what wakes the watchers.
    tick: watch::Sender<u64>,
    history: usize,
    max_watchers: usize,
    /// Per principal (authentication on; off, every caller is one).
    max_per_principal: usize,
    per_principal: Mutex<std::collections::HashMap<String, usize>>,
    open: AtomicUsize,
    closed: AtomicBool,
    cut: AtomicU64,
    /// Set once, before the first publish; one check per applied batch.
    observer: OnceLock<Observer>,
}

impl WatchHub {
    /// A hub keeping `history` changes for at most `max_watchers`, at
    /// most `max_per_principal` of them one principal's.
    pub fn new(history: usize, max_watchers: usize, max_per_principal: usize) -> Arc<WatchHub> {
        Arc::new(WatchHub {
            ring: Mutex::new(Ring {
                changes: VecDeque::new(),
                first: 1,
                next: 1,
                snapshot_at: 0,
            }),
            slots: Mutex::new(Vec::new()),
            tick: watch::channel(1).0,
            history: history.max(1),
            max_watchers,
            max_per_principal,
            per_principal: Mutex::new(std::collections::HashMap::new()),
            open: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            cut: AtomicU64::new(0),
            observer: OnceLock::new(),
        })
    }

    /// Show `observer` everything published from now on (once; a second
    /// observer is ignored).
    pub fn observe(&self, observer: Observer) {
        let _ = self.observer.set(observer);
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // Every change under the lock is a few field writes: nothing is
        // left half-done by a panic elsewhere.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state is at `applied` with no history: at boot, and after a
    /// snapshot was installed (`installed`).
    pub fn restart_at(&self, applied: u64, installed: bool) {
        if let Some(o) = self.observer.get() {
            o(Applied::Restart { applied, installed });
        }
        let mut r = self.ring();
        r.changes.clear();
        r.first = applied + 1;
        r.next = applied + 1;
        if installed {
            r.snapshot_at = applied;
        }
        drop(r);
        self.tick.send_replace(applied + 1);
    }

    /// The entries `from..=to` were applied, changing `changes`.
    pub fn publish(&self, from: u64, to: u64, changes: Vec<Change>) {
        if let Some(o) = self.observer.get() {
            o(Applied::Entries {
                from,
                to,
                changes: &changes,
            });
        }
        let mut r = self.ring();
        if from != r.next {
            // Not contiguous with what is kept: start over from here.
            r.changes.clear();
            r.first = from;
        }
        r.changes.extend(changes);
        let first_before = r.first;
        while r.changes.len() > self.history {
            let Some(old) = r.changes.pop_front() else {
                break;
            };
            // An index is kept whole or not at all.
            r.first = old.index + 1;
            while r.changes.front().is_some_and(|c| c.index < r.first) {
                r.changes.pop_front();
            }
        }
        r.next = r.next.max(to + 1);
        let (next, first) = (r.next, r.first);
        drop(r);
        if first != first_before {
            self.mark_behind(first);
        }
        self.tick.send_replace(next);
    }

    /// Count every watcher whose next index the ring no longer holds.
    fn mark_behind(&self, first: u64) {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        for slot in slots.iter() {
            if slot.cursor.load(Ordering::Acquire) < first
                && !slot.behind.swap(true, Ordering::AcqRel)
            {
                self.cut.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Follow the keys under `prefix` from index `from` (`None`: from the
    /// next entry applied), for `principal` (empty: authentication off,
    /// no bound of its own).
    pub fn watch(
        self: &Arc<Self>,
        prefix: String,
        from: Option<u64>,
        principal: &str,
    ) -> Result<Watcher, WatchError> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(WatchError::Closed);
        }
        if prefix.len() > lockd_proto::MAX_KEY_BYTES {
            return Err(WatchError::PrefixTooLong {
                len: prefix.len(),
                max: lockd_proto::MAX_KEY_BYTES,
            });
        }
        let r = self.ring();
        let cursor = match from {
            None => r.next,
            Some(from) if from < r.first => {
                return Err(WatchError::Compacted {
                    from,
                    first: r.first,
                    applied: r.next - 1,
                })
            }
            Some(from) => from,
        };
        drop(r);
        let principal = (!principal.is_empty()).then(|| principal.to_string());
        if let Some(p) = &principal {
            let mut per = self.per_principal.lock().unwrap_or_else(|e| e.into_inner());
            let n = per.entry(p.clone()).or_insert(0);
            if *n >= self.max_per_principal {
                return Err(WatchError::TooManyForPrincipal {
                    limit: self.max_per_principal,
                });
            }
            *n += 1;
        }
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.max_watchers {
            self.open.fetch_sub(1, Ordering::AcqRel);
            self.release(principal.as_deref());
            return Err(WatchError::TooMany {
                limit: self.max_watchers,
            });
        }
        let slot = Arc::new(Slot {
            cursor: AtomicU64::new(cursor),
            behind: AtomicBool::new(false),
        });
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(slot.clone());
        Ok(Watcher {
            hub: self.clone(),
            principal,
            prefix,
            cursor,
            slot,
            tick: self.tick.subscribe(),
            fresh: true,
            last_sent: tokio::time::Instant::now(),
        })
    }

    /// A watcher of `principal` ended.
    fn release(&self, principal: Option<&str>) {
        let Some(p) = principal else { return };
        let mut per = self.per_principal.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = per.get_mut(p) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per.remove(p);
            }
        }
    }

    /// End every watch (shutdown): each gets [`Cut::Closed`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.tick.send_modify(|_| {});
    }

    /// Watchers open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Watchers cut so far (behind, snapshot, shutdown).
    pub fn cut_count(&self) -> u64 {
        self.cut.load(Ordering::Relaxed)
    }
}

mod watcher;
pub use watcher::{Batch, Next, Read, Watcher};

#[cfg(test)]
mod tests;

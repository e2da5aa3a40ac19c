//! [`Watcher`]: one stream's cursor on the hub's ring, and what it reads.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use lockd_core::changes::Change;
use tokio::sync::watch;

use super::{Cut, Slot, WatchHub, PROGRESS_EVERY, READ_BATCH};

/// One entry's changes under a watcher's prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub index: u64,
    pub changes: Vec<Change>,
}

/// What a watcher reads next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Changes, in log order, one batch per entry.
    Changes(Vec<Batch>),
    /// Nothing under the prefix up to this index (the state is there).
    Caught(u64),
}

/// A cursor on the hub's ring.
pub struct Watcher {
    pub(super) hub: Arc<WatchHub>,
    /// Whose watch it is, when it counts against a principal's bound.
    pub(super) principal: Option<String>,
    pub(super) prefix: String,
    /// The next index wanted.
    pub(super) cursor: u64,
    pub(super) slot: Arc<Slot>,
    pub(super) tick: watch::Receiver<u64>,
    /// Nothing told yet, or silent for [`PROGRESS_EVERY`]: the next
    /// message is a progress if there are no changes.
    pub(super) fresh: bool,
    /// When [`Watcher::next`] last returned a message.
    pub(super) last_sent: tokio::time::Instant,
}

/// A stream's next message ([`Watcher::next`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Changes(Vec<Batch>),
    /// Nothing under the prefix up to this index.
    Progress(u64),
}

impl Watcher {
    /// Everything past the cursor now, without waiting: `Caught` when
    /// there is nothing under the prefix up to the newest entry.
    pub(crate) fn read_now(&mut self) -> Result<Read, Cut> {
        // Before the read: a publish after it wakes the next `changed`.
        self.tick.mark_unchanged();
        if self.hub.closed.load(Ordering::Relaxed) {
            return Err(self.cut(Cut::Closed {
                resume_from: self.cursor,
            }));
        }
        let r = self.hub.ring();
        if self.cursor < r.first {
            let cut = if r.snapshot_at >= self.cursor {
                Cut::Snapshot {
                    at: r.snapshot_at,
                    resume_from: self.cursor,
                }
            } else {
                Cut::Behind {
                    history: self.hub.history,
                    resume_from: self.cursor,
                }
            };
            drop(r);
            return Err(self.cut(cut));
        }
        let start = r.changes.partition_point(|c| c.index < self.cursor);
        let mut batches: Vec<Batch> = Vec::new();
        let mut upto = r.next;
        for (taken, c) in r.changes.range(start..).enumerate() {
            if taken >= READ_BATCH && batches.last().is_none_or(|b| b.index != c.index) {
                // Stop at an entry's start: a batch is always whole.
                upto = c.index;
                break;
            }
            if !c.key.starts_with(&self.prefix) {
                continue;
            }
            match batches.last_mut() {
                Some(b) if b.index == c.index => b.changes.push(c.clone()),
                _ => batches.push(Batch {
                    index: c.index,
                    changes: vec![c.clone()],
                }),
            }
        }
        drop(r);
        let caught = upto.max(self.cursor);
        self.cursor = caught;
        self.slot.cursor.store(caught, Ordering::Release);
        Ok(match batches.is_empty() {
            true => Read::Caught(caught - 1),
            false => Read::Changes(batches),
        })
    }

    /// A stream's next message, for every transport alike: changes as
    /// soon as there are any; a progress first, and again
    /// [`PROGRESS_EVERY`] after the last message, however often other
    /// prefixes' changes wake the watcher; a cut ends the stream.
    pub async fn next(&mut self) -> Result<Next, Cut> {
        loop {
            let message = match self.read_now()? {
                Read::Changes(batches) => Next::Changes(batches),
                Read::Caught(at) if self.fresh => Next::Progress(at),
                Read::Caught(_) => {
                    let quiet_until = self.last_sent + PROGRESS_EVERY;
                    if tokio::time::timeout_at(quiet_until, self.changed())
                        .await
                        .is_err()
                    {
                        self.fresh = true;
                    }
                    continue;
                }
            };
            self.fresh = false;
            self.last_sent = tokio::time::Instant::now();
            return Ok(message);
        }
    }

    /// Wait until something may have changed since the last read (a
    /// publish, a restart of the ring, shutdown).
    pub async fn changed(&mut self) {
        // An error is the hub gone, which the next read reports as closed.
        if self.tick.changed().await.is_err() {
            self.hub.closed.store(true, Ordering::Relaxed);
        }
    }

    /// The next index this watcher wants.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The caller's right to watch was revoked (`why`): the cut that
    /// ends its stream.
    pub fn revoked(&self, why: String) -> Cut {
        self.cut(Cut::Revoked {
            why,
            resume_from: self.cursor,
        })
    }

    /// Counted once per watcher, whoever noticed first.
    fn cut(&self, cut: Cut) -> Cut {
        if !self.slot.behind.swap(true, Ordering::AcqRel) {
            self.hub.cut.fetch_add(1, Ordering::Relaxed);
        }
        cut
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.hub
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|s| !Arc::ptr_eq(s, &self.slot));
        self.hub.open.fetch_sub(1, Ordering::AcqRel);
        self.hub.release(self.principal.as_deref());
    }
}

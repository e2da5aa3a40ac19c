//! How this node's snapshot sends ended (`raft::snapshot_send`), for the
//! metrics: a leaf, so the peer client that carries them
//! (`raft::peer_client`) and the sender do not import each other.

use std::sync::atomic::{AtomicU64, Ordering};

/// How snapshot sends ended, since the node started.
#[derive(Debug, Default)]
pub struct SendCounts {
    in_flight: AtomicU64,
    pub(super) installed: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) abandoned: AtomicU64,
}

impl SendCounts {
    /// (installed, failed, abandoned): installed by the follower (or
    /// refused for a newer term), failed (unreachable, refused, or an
    /// error), abandoned by openraft (this node stopped leading or
    /// replicating to it).
    pub fn read(&self) -> (u64, u64, u64) {
        (
            self.installed.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.abandoned.load(Ordering::Relaxed),
        )
    }

    /// Sends under way now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// One send under way: counted in flight until it ends, and as abandoned
/// if it is dropped before (openraft drops the task of a stream it ends).
pub(super) struct Sending<'a> {
    counts: &'a SendCounts,
    ended: bool,
}

impl<'a> Sending<'a> {
    pub(super) fn start(counts: &'a SendCounts) -> Sending<'a> {
        counts.in_flight.fetch_add(1, Ordering::Relaxed);
        Sending {
            counts,
            ended: false,
        }
    }

    pub(super) fn ended(&mut self, how: &AtomicU64) {
        how.fetch_add(1, Ordering::Relaxed);
        self.ended = true;
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.counts.in_flight.fetch_sub(1, Ordering::Relaxed);
        if !self.ended {
            self.counts.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

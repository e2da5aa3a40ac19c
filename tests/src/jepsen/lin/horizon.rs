//! [`Horizon`]: the latest a holder may last, from what the run knows of
//! its faults (the windows in which leadership may change or links held
//! their messages) and of its lease's clock.

use crate::jepsen::history::{Call, Op, Ret};

/// The latest a lease may end, from where its timer can have been armed.
#[derive(Clone, Debug, Default)]
pub struct Horizon {
    /// Added to `armed + lease_ms` outside fault windows: the time an
    /// `Expire` takes to commit, from the leader's timer to the answers.
    pub slack_ms: f64,
    /// Added instead after a fault window's end (`to + lease_ms +
    /// rearm_ms`): what a leader change or a quorum's return adds beyond
    /// the window (a new leader's table loaded, an expiry retried) and the
    /// commit.
    pub rearm_ms: f64,
    /// Windows (from, to) in which leadership may change (a fault and the
    /// elections after it), sorted by `from`. A leader change re-arms
    /// every lease, so a holder alive in a window may last until
    /// `to + lease + slack`.
    pub unstable: Vec<(f64, f64)>,
    /// A lease of `L` may last `L × (1 + stretch)` of real time: the
    /// leader's drift margin (1 %) and how slow its clock may run.
    pub stretch: f64,
    /// Acquires carry request ids and the client library retries them: a
    /// granted acquire may also have been granted by an earlier try whose
    /// answer was lost (see the module docs).
    pub retried_grants: bool,
    /// The acquires answered at their first try (client, invoke bits):
    /// with no other try, they have no lost grant to model.
    pub first_try: std::collections::HashSet<(usize, u64)>,
    /// Windows (from, to) in which some link held its messages (a paused
    /// node, a slow link), sorted by `from`. A request sent before one
    /// ends may arrive, and take effect, only when it ends: long after its
    /// client gave up.
    pub held: Vec<(f64, f64)>,
}

impl Horizon {
    /// The latest a request sent between `sent` and `gave_up` (its
    /// client's invoke and giving up) can take effect: at once, or when
    /// the last hold it can have been caught in ends (a hold it is released
    /// into may catch it again).
    pub fn delivered_by(&self, sent: f64, gave_up: f64) -> f64 {
        let mut by = gave_up;
        for &(from, to) in &self.held {
            if from <= by && to >= sent {
                by = by.max(to);
            }
        }
        by
    }

    /// The latest an acquire of unknown outcome can have armed its lease:
    /// when it can have taken effect ([`Horizon::delivered_by`]) until its
    /// client gave up or, if later, its wait ended and the grant after it
    /// committed. A client that dies while its request waits for a busy
    /// key gives up at once, but the leader may still grant it when the
    /// key frees (and only then find its caller gone and release it).
    ///
    /// A request a hold caught when it was sent reaches the leader only
    /// when the hold ends, and its wait starts there: a waiting acquire
    /// sent to a paused node at 9 770 ms with 1 500 ms to wait was queued
    /// at 10 726 ms and granted at 12 186 ms, after its client had been
    /// answered 503 (simulation seed 319276).
    pub fn armed_by(&self, op: &Op) -> f64 {
        let waits = match op.call {
            Call::Acquire { wait_ms, .. } => wait_ms as f64 + self.slack_ms,
            Call::Release { .. } => 0.0,
        };
        let answered = self.delivered_by(op.invoke, op.complete.max(op.invoke + waits));
        let queued = self.delivered_by(op.invoke, op.invoke);
        answered.max(queued + waits)
    }

    /// The latest `op` can take effect: its answer, or for an operation
    /// of unknown outcome, [`Horizon::armed_by`]. A holder may have ended
    /// before that.
    pub fn latest_point(&self, op: &Op) -> f64 {
        match op.ret {
            Ret::Unknown => self.armed_by(op),
            _ => op.complete,
        }
    }

    /// The latest a lease of `lease_ms` armed at or before `armed` ends.
    pub fn latest_end(&self, armed: f64, lease_ms: f64) -> f64 {
        let lease_ms = lease_ms * (1.0 + self.stretch);
        let mut end = armed + lease_ms + self.slack_ms;
        for &(from, to) in &self.unstable {
            if from < end && to > armed {
                end = end.max(to + lease_ms + self.rearm_ms);
            }
        }
        end
    }
}

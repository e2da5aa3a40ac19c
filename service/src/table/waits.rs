//! The deadlines of the waiters that have one, ordered for the timer and
//! indexed by request, so a caller that leaves is found at once instead of
//! by a walk over every waiter of every key; and the bounds on waiting.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use super::ReqId;

/// How many callers may wait, per key and in all (queued behind a key, or
/// for a new leader's table to load). A caller past a bound is refused at
/// once with the bound named; the cluster serves everyone else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitLimits {
    pub per_key: usize,
    pub total: usize,
}

impl Default for WaitLimits {
    fn default() -> Self {
        WaitLimits {
            per_key: 1024,
            total: 65_536,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Waits {
    by_time: BTreeSet<(Duration, String, ReqId)>,
    by_req: HashMap<ReqId, (Duration, String)>,
}

impl Waits {
    pub fn insert(&mut self, until: Duration, key: String, req: ReqId) {
        self.by_req.insert(req, (until, key.clone()));
        self.by_time.insert((until, key, req));
    }

    /// Forget the wait of `req`, returning its deadline and key.
    pub fn take(&mut self, req: ReqId) -> Option<(Duration, String)> {
        let (until, key) = self.by_req.remove(&req)?;
        self.by_time.remove(&(until, key.clone(), req));
        Some((until, key))
    }

    /// The earliest deadline.
    pub fn first(&self) -> Option<Duration> {
        self.by_time.first().map(|w| w.0)
    }

    /// The earliest wait whose deadline is at or before `now`, forgotten.
    pub(crate) fn pop_due(&mut self, now: Duration) -> Option<(String, ReqId)> {
        let (until, _, _) = self.by_time.first()?;
        if *until > now {
            return None;
        }
        let (_, key, req) = self.by_time.pop_first()?;
        self.by_req.remove(&req);
        Some((key, req))
    }

    pub fn clear(&mut self) {
        self.by_time.clear();
        self.by_req.clear();
    }
}

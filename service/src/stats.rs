//! The lock service's counters, published from the table's after every
//! step of the actor, for metrics.

use std::sync::atomic::{AtomicU64, Ordering};

use super::table::Counters;

/// Counters of the lock service (for metrics).
#[derive(Default, Debug)]
pub struct ServiceStats {
    pub grants: AtomicU64,
    pub releases: AtomicU64,
    pub expires: AtomicU64,
    pub handoffs: AtomicU64,
    pub phantom_releases: AtomicU64,
    pub keepalives: AtomicU64,
    pub waiting: AtomicU64,
    /// Keys handed to a waiter other than the oldest (the module's `pick`).
    pub picked: AtomicU64,
    /// How long acquires took, from the request's checks to its answer,
    /// by outcome.
    pub acquire_latency: lockd_replication::telemetry::ByResult,
}

impl ServiceStats {
    pub(super) fn publish(&self, c: &Counters) {
        let r = Ordering::Relaxed;
        self.grants.store(c.grants, r);
        self.releases.store(c.releases, r);
        self.expires.store(c.expires, r);
        self.handoffs.store(c.handoffs, r);
        self.phantom_releases.store(c.phantom_releases, r);
        self.keepalives.store(c.keepalives, r);
        self.waiting.store(c.waiting, r);
        self.picked.store(c.picked, r);
    }
}

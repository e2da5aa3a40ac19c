//! The determinism audit: every node records its state hash at the same log
//! indices, and the records are compared across the cluster.
//!
//! Points are recorded at every multiple of the audit interval (the apply
//! path splits its guest call there, so the hash is exactly the state *at*
//! that index), right after every upgrade entry, and right after a snapshot
//! is installed. A node keeps its most recent points in memory and serves
//! them at `GET /v1/audit`. Each node also compares its points with its
//! peers' in the background (the host's audit checker); a difference at a common index
//! is logged as an error naming the node in the minority and counted in
//! `lockd_audit_divergences_total`. The comparison is
//! [`lockd_proto::audit::compare`], the one `lockctl audit` makes from
//! outside.

use std::collections::VecDeque;

use lockd_proto::{AuditKind, AuditRecord, AuditReport};

use crate::engine::ModuleHash;

/// Points kept per node.
const KEEP: usize = 4096;

pub struct AuditLog {
    interval: u64,
    records: VecDeque<AuditRecord>,
}

impl AuditLog {
    /// `interval` 0 records only at upgrades and snapshot installs.
    pub fn new(interval: u64) -> AuditLog {
        AuditLog {
            interval,
            records: VecDeque::new(),
        }
    }

    pub fn interval(&self) -> u64 {
        self.interval
    }

    /// Whether `index` is a fixed audit point.
    pub fn due(&self, index: u64) -> bool {
        self.interval > 0 && index > 0 && index.is_multiple_of(self.interval)
    }

    /// Record a point; a second point at the same index (an upgrade entry
    /// that falls on an interval) is the same state and is not repeated.
    pub fn record(&mut self, index: u64, hash: &[u8; 32], module: ModuleHash, kind: AuditKind) {
        if self.records.back().is_some_and(|r| r.index == index) {
            return;
        }
        self.records.push_back(AuditRecord {
            index,
            state_hash: hex::encode(hash),
            module_hash: module.to_string(),
            kind,
        });
        while self.records.len() > KEEP {
            self.records.pop_front();
        }
    }

    pub fn report(&self, id: u64) -> AuditReport {
        AuditReport {
            id,
            interval: self.interval,
            records: self.records.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_point_per_index() {
        let mut log = AuditLog::new(10);
        let m = ModuleHash([7; 32]);
        log.record(10, &[1; 32], m, AuditKind::Upgrade);
        log.record(10, &[1; 32], m, AuditKind::Interval);
        log.record(20, &[2; 32], m, AuditKind::Interval);
        let r = log.report(1);
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[0].kind, AuditKind::Upgrade);
        assert!(log.due(20) && !log.due(25) && !log.due(0));
    }
}

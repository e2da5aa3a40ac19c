//! The determinism audit: every node records its state hash at the same log
//! indices, and the records are compared across the cluster.
//!
//! Points are recorded at every multiple of the audit interval (the apply
//! path splits its guest call there, so the hash is exactly the state *at*
//! that index), right after every upgrade entry, and right after a snapshot
//! is installed. A node keeps its most recent points in memory and serves
//! them at `GET /v1/audit`. Each node also compares its points with its
//! peers' in the background ([`run_checker`]); a difference at a common index
//! is logged as an error naming the node in the minority and counted in
//! `lockd_audit_divergences_total`. The comparison is
//! [`lockd_client::audit::compare`], the one `lockctl audit` makes from
//! outside.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use lockd_client::admin::Http;
use lockd_client::audit::compare;
use lockd_client::proto::{AuditRecord, AuditReport};

use crate::engine::ModuleHash;
use crate::node::Node;

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
        self.interval > 0 && index > 0 && index % self.interval == 0
    }

    /// Record a point; a second point at the same index (an upgrade entry
    /// that falls on an interval) is the same state and is not repeated.
    pub fn record(&mut self, index: u64, hash: &[u8; 32], module: ModuleHash, kind: &str) {
        if self.records.back().is_some_and(|r| r.index == index) {
            return;
        }
        self.records.push_back(AuditRecord {
            index,
            state_hash: hex::encode(hash),
            module_hash: module.to_string(),
            kind: kind.to_string(),
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

/// Compare this node's audit points with every peer's, every `every`, and
/// raise the alarm for each divergence not seen before.
pub async fn run_checker(node: Arc<Node>, every: Duration) {
    let mut seen: BTreeSet<(u64, u64)> = BTreeSet::new();
    // One client for the whole run, so peer connections are reused.
    let http = Http::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = node.stopped() => return,
        }
        let mut reports = vec![node.sm.audit_report()];
        for m in crate::api::status::members_of(&node) {
            if m.id == node.id {
                continue;
            }
            match http.get_json::<AuditReport>(&m.addr, "/v1/audit").await {
                Ok(r) if r.id == m.id => reports.push(r),
                Ok(r) => tracing::warn!(
                    node = node.id,
                    peer = m.id,
                    answered = r.id,
                    "audit: a peer answered with another id"
                ),
                Err(e) => {
                    tracing::debug!(node = node.id, peer = m.id, error = %e, "audit: peer unreachable")
                }
            }
        }
        for d in compare(&reports).divergences {
            if seen.insert((d.node, d.index)) {
                node.sm.count_divergence();
                tracing::error!(
                    node = node.id,
                    divergent_node = d.node,
                    index = d.index,
                    hash = %d.hash,
                    majority = d.majority.as_deref().unwrap_or("none"),
                    "DETERMINISM AUDIT: node {} has a different state hash at index {}",
                    d.node,
                    d.index
                );
            }
        }
        // Forget what fell out of every node's window.
        if seen.len() > 65_536 {
            seen.clear();
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
        log.record(10, &[1; 32], m, "upgrade");
        log.record(10, &[1; 32], m, "interval");
        log.record(20, &[2; 32], m, "interval");
        let r = log.report(1);
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[0].kind, "upgrade");
        assert!(log.due(20) && !log.due(25) && !log.due(0));
    }
}

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
//! `lockd_audit_divergences_total`. `lockctl audit` does the same comparison
//! from outside with [`compare`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use lockd_client::proto::{AuditRecord, AuditReport};

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

/// A node whose state hash differs from the others' at an index.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Divergence {
    pub index: u64,
    pub node: u64,
    pub hash: String,
    /// The hash most nodes have, when more than half agree.
    pub majority: Option<String>,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Comparison {
    /// Indices recorded by at least two of the nodes.
    pub common_indices: u64,
    /// The highest such index.
    pub last_common: Option<u64>,
    pub divergences: Vec<Divergence>,
}

impl Comparison {
    /// The nodes named in any divergence.
    pub fn divergent_nodes(&self) -> BTreeSet<u64> {
        self.divergences.iter().map(|d| d.node).collect()
    }
}

/// Compare the reports of several nodes at every index two or more share.
/// At an index where the hashes differ, the nodes outside a strict majority
/// are named; with no strict majority, every node at that index is.
pub fn compare(reports: &[AuditReport]) -> Comparison {
    let mut at: BTreeMap<u64, BTreeMap<u64, String>> = BTreeMap::new();
    for r in reports {
        for rec in &r.records {
            at.entry(rec.index)
                .or_default()
                .insert(r.id, rec.state_hash.clone());
        }
    }
    let mut out = Comparison::default();
    for (index, hashes) in at {
        if hashes.len() < 2 {
            continue;
        }
        out.common_indices += 1;
        out.last_common = Some(index);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for h in hashes.values() {
            *counts.entry(h.as_str()).or_default() += 1;
        }
        if counts.len() == 1 {
            continue;
        }
        let majority = counts
            .iter()
            .find(|(_, &n)| n * 2 > hashes.len())
            .map(|(h, _)| h.to_string());
        for (node, hash) in &hashes {
            if majority.as_deref() != Some(hash.as_str()) {
                out.divergences.push(Divergence {
                    index,
                    node: *node,
                    hash: hash.clone(),
                    majority: majority.clone(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: u64, points: &[(u64, &str)]) -> AuditReport {
        AuditReport {
            id,
            interval: 10,
            records: points
                .iter()
                .map(|(i, h)| AuditRecord {
                    index: *i,
                    state_hash: h.to_string(),
                    module_hash: "m".into(),
                    kind: "interval".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn names_the_minority_node() {
        let c = compare(&[
            report(1, &[(10, "a"), (20, "b")]),
            report(2, &[(10, "a"), (20, "x")]),
            report(3, &[(10, "a"), (20, "b"), (30, "c")]),
        ]);
        assert_eq!(c.common_indices, 2);
        assert_eq!(c.last_common, Some(20));
        assert_eq!(c.divergent_nodes(), BTreeSet::from([2]));
        assert_eq!(c.divergences[0].majority.as_deref(), Some("b"));
    }

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

    #[test]
    fn no_majority_names_everyone_and_agreement_names_no_one() {
        let c = compare(&[report(1, &[(10, "a")]), report(2, &[(10, "b")])]);
        assert_eq!(c.divergent_nodes(), BTreeSet::from([1, 2]));
        let c = compare(&[report(1, &[(10, "a")]), report(2, &[(10, "a"), (20, "z")])]);
        assert!(c.divergences.is_empty());
        assert_eq!(c.common_indices, 1);
    }
}

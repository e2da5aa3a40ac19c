//! Comparing the determinism-audit reports of several nodes.
//!
//! Every node records its state hash at the same log indices and serves
//! them at `GET /v1/audit` ([`AuditReport`]). [`compare`] lines the reports
//! up by index and names the nodes whose hash differs from the majority's.
//! It lives here, not in the server, so that `lockctl audit` (from outside)
//! and each node's background checker (from inside) judge alike without the
//! command line linking the server.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::AuditReport;

/// A node whose state hash differs from the others' at an index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Divergence {
    pub index: u64,
    pub node: u64,
    pub hash: String,
    /// The hash most nodes have, when more than half agree.
    pub majority: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
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
/// are named; with no strict majority, every node at that index is, but
/// only once every node that reported has reached that index: while one
/// of them still lags behind it, its hash may yet make a majority (a node
/// checking while it lags must not name a healthy peer), so the index
/// waits. A node that never gets there keeps such an index undecided;
/// one whose majority is clear is named at once.
pub fn compare(reports: &[AuditReport]) -> Comparison {
    let mut at: BTreeMap<u64, BTreeMap<u64, String>> = BTreeMap::new();
    for r in reports {
        for rec in &r.records {
            at.entry(rec.index)
                .or_default()
                .insert(r.id, rec.state_hash.clone());
        }
    }
    // The newest index each node has recorded (0: none yet).
    let reached = reports
        .iter()
        .map(|r| r.records.iter().map(|rec| rec.index).max().unwrap_or(0))
        .min()
        .unwrap_or(0);
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
        if majority.is_none() && index > reached {
            continue;
        }
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
    use crate::AuditRecord;

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
                    kind: crate::AuditKind::Interval,
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
    fn no_majority_names_everyone_and_agreement_names_no_one() {
        let c = compare(&[report(1, &[(10, "a")]), report(2, &[(10, "b")])]);
        assert_eq!(c.divergent_nodes(), BTreeSet::from([1, 2]));
        let c = compare(&[report(1, &[(10, "a")]), report(2, &[(10, "a"), (20, "z")])]);
        assert!(c.divergences.is_empty());
        assert_eq!(c.common_indices, 1);
    }

    /// The race a node's own checker met: it compares before it has
    /// recorded index 30 itself, so only two hashes stand there, and they
    /// differ. Nobody is named until it reaches 30; then the one odd node.
    #[test]
    fn a_node_behind_an_index_without_majority_keeps_it_undecided() {
        let lagging = report(1, &[(10, "a"), (20, "b")]);
        let others = [
            report(2, &[(10, "a"), (20, "b"), (30, "x")]),
            report(3, &[(10, "a"), (20, "b"), (30, "c")]),
        ];
        let c = compare(&[lagging, others[0].clone(), others[1].clone()]);
        assert!(c.divergences.is_empty(), "{:?}", c.divergences);
        let caught_up = report(1, &[(10, "a"), (20, "b"), (30, "c")]);
        let c = compare(&[caught_up, others[0].clone(), others[1].clone()]);
        assert_eq!(c.divergent_nodes(), BTreeSet::from([2]));
        // Where the majority is clear, a lagging node holds nothing back.
        let c = compare(&[
            report(1, &[(10, "a")]),
            report(2, &[(10, "a"), (20, "x")]),
            report(3, &[(10, "a"), (20, "b")]),
            report(4, &[(10, "a"), (20, "b")]),
        ]);
        assert_eq!(c.divergent_nodes(), BTreeSet::from([2]));
    }
}

//! The quorum pre-check's record: what every voter said of a module
//! before the leader proposed it (docs/writing-a-lock-module.md, "The
//! quorum pre-check").
//!
//! The leader asks each voter to load, compile and dry-run a candidate
//! against its own live state (the host's `modules::precheck`), then
//! writes every verdict through the log as one [`PrecheckRecord`], and
//! proposes the swap at a later index only if enough voters accepted.
//! Applying the record keeps it in the replicated state (status,
//! snapshots), and it decides one thing at the swap: a node whose load of
//! a module that the record says a quorum accepted fails, fails for a
//! reason of its own (its limits, its engine), so it stops applying
//! instead of rejecting the swap its peers made ([`crate::replica`],
//! "Cannot run").
//!
//! The record comes from a peer, so it is bounded at apply like any
//! entry: at most [`MAX_VERDICTS`] verdicts are kept, each reason cut to
//! [`crate::engine::MAX_REASON`] bytes — the same cut on every node.

use serde::{Deserialize, Serialize};

use crate::engine::ModuleHash;

/// Verdicts a record keeps (a cluster has far fewer voters).
pub const MAX_VERDICTS: usize = 64;

/// One voter's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeVerdict {
    pub node: u64,
    pub accepted: bool,
    /// Whether it answered: `false` when it could not be reached or did
    /// not answer in time (then `accepted` is `false` too).
    pub answered: bool,
    /// Why it refused, or why there is no answer; `None` when it
    /// accepted.
    pub reason: Option<String>,
}

/// Every voter's verdict on one module, as the leader wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecheckRecord {
    /// The module checked.
    pub module: ModuleHash,
    /// A refusal does not block it (`--quorum`): a majority accepting is
    /// enough. Otherwise a majority must accept *and* no voter may refuse
    /// (one that did not answer does not block).
    pub quorum: bool,
    /// Whether the leader goes on to propose the module.
    pub enacted: bool,
    /// One per voter, in node order.
    pub verdicts: Vec<NodeVerdict>,
}

/// A record as applied: with its index, within the bounds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecheckSeen {
    pub index: u64,
    pub record: PrecheckRecord,
}

impl PrecheckRecord {
    /// The record within the bounds every node applies alike.
    pub fn bounded(mut self) -> PrecheckRecord {
        self.verdicts.truncate(MAX_VERDICTS);
        for v in &mut self.verdicts {
            v.reason = v.reason.take().map(crate::engine::cut_reason);
        }
        self
    }

    /// Whether it lets the module in: a majority of the voters named
    /// accepted, and, unless `quorum`, none that answered refused.
    pub fn passes(&self) -> bool {
        let accepted = self.verdicts.iter().filter(|v| v.accepted).count();
        let refused = self.verdicts.iter().any(|v| v.answered && !v.accepted);
        accepted * 2 > self.verdicts.len() && (self.quorum || !refused)
    }

    /// Whether this record lets `module` in: it names it, passed, and
    /// the leader enacted it.
    pub fn admits(&self, module: &ModuleHash) -> bool {
        self.module == *module && self.enacted && self.passes()
    }

    /// The refusals, one line each (`node 3: why`).
    pub fn refusals(&self) -> Vec<String> {
        self.verdicts
            .iter()
            .filter(|v| !v.accepted)
            .map(|v| format!("node {}: {}", v.node, v.reason.as_deref().unwrap_or("")))
            .collect()
    }

    /// As status shows it.
    pub fn status(&self, index: u64) -> lockd_proto::ModulePrecheck {
        lockd_proto::ModulePrecheck {
            index,
            module_hash: self.module.to_string(),
            quorum: self.quorum,
            enacted: self.enacted,
            verdicts: self
                .verdicts
                .iter()
                .map(|v| lockd_proto::PrecheckVerdict {
                    node: v.node,
                    accepted: v.accepted,
                    answered: v.answered,
                    reason: v.reason.clone(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verdicts: `y` accepted, `n` refused, `-` no answer.
    fn record(quorum: bool, verdicts: &str) -> PrecheckRecord {
        PrecheckRecord {
            module: ModuleHash([7; 32]),
            quorum,
            enacted: true,
            verdicts: verdicts
                .chars()
                .enumerate()
                .map(|(i, c)| NodeVerdict {
                    node: i as u64 + 1,
                    accepted: c == 'y',
                    answered: c != '-',
                    reason: match c {
                        'n' => Some("too big".into()),
                        '-' => Some("unreachable".into()),
                        _ => None,
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn a_majority_accepts_and_a_refusal_blocks_unless_quorum() {
        assert!(record(false, "yyy").passes());
        assert!(record(false, "yy-").passes(), "no answer does not block");
        assert!(!record(false, "yyn").passes(), "a refusal blocks");
        assert!(record(true, "yyn").passes(), "unless a majority is enough");
        assert!(!record(true, "ynn").passes());
        assert!(!record(true, "y--").passes());
        assert!(!record(false, "yn").passes());
        assert!(!record(true, "y-").passes());
        assert!(!record(false, "").passes());
        assert!(!record(true, "").passes());
        assert_eq!(
            record(true, "yyn-").refusals(),
            ["node 3: too big", "node 4: unreachable"]
        );
    }

    #[test]
    fn a_record_admits_only_its_module_and_only_when_enacted() {
        let r = record(false, "yy");
        assert!(r.admits(&ModuleHash([7; 32])));
        assert!(!r.admits(&ModuleHash([8; 32])));
        let not_enacted = PrecheckRecord {
            enacted: false,
            ..r
        };
        assert!(!not_enacted.admits(&ModuleHash([7; 32])));
    }

    #[test]
    fn a_hostile_record_is_cut_to_the_bounds() {
        let mut r = record(true, &"n".repeat(100));
        r.verdicts[0].reason = Some("x".repeat(10_000));
        let b = r.bounded();
        assert_eq!(b.verdicts.len(), MAX_VERDICTS);
        assert!(b.verdicts[0]
            .reason
            .as_ref()
            .is_some_and(|r| r.len() < 1100));
    }
}

//! What each node applied, against what the clients were told.
//!
//! Every node's watch hub shows the simulation what it publishes
//! (`lockd::watch::Applied`: each applied range with its changes, each
//! start and each snapshot installed), and [`AppliedRecord`] keeps it per
//! node and per life (a life starts at each boot). Two checks come of it:
//!
//! - **applied alike**, per index: every node that applied an index, in
//!   any of its lives, made the same changes there (the audit points
//!   compare state hashes every ten entries; this compares each entry's
//!   outcome).
//! - **acknowledged**: every grant and release a client saw acknowledged
//!   is a change some node applied, and every node that finishes the run
//!   holds it: the last thing it did at that index was to apply it with
//!   that change, or to install a leader's snapshot past it; where its
//!   state at that index came from its own snapshot at boot, what it did
//!   in the life before decides. A write a majority acknowledged and a
//!   node later lost, or applied otherwise, shows here even when the
//!   final state happens to agree.
//!
//! World 0.1's releases name no token (`Released { token: 0 }`), so a
//! release is looked up by its token only where the module names one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use lockd::watch::{Applied, Observer};
use lockd_core::changes::{Change, ChangeKind};

use crate::jepsen::check::{Checker, Violation};
use crate::jepsen::history::{Call, Op, Ret};

/// One start of a node: what its state came from and what it applied.
#[derive(Default, Debug)]
struct Life {
    /// Its state at boot came from its own snapshot at this index.
    boot: u64,
    /// Each index it applied: when (the record's event count) and the
    /// changes made there.
    applied: BTreeMap<u64, (u64, Vec<Change>)>,
    /// Each snapshot installed from a leader: when, and its index.
    installs: Vec<(u64, u64)>,
}

impl Life {
    /// Whether this life holds `want` at `index`: `Some(true)` if the
    /// last thing it did at that index was to apply it, or to install a
    /// snapshot past it; `Some(false)` if it applied that index without
    /// it; `None` if it never touched the index (its state there came from
    /// its boot, if `index <= boot`).
    fn holds(&self, index: u64, want: impl Fn(&Change) -> bool) -> Option<bool> {
        let installed = self
            .installs
            .iter()
            .filter(|(_, at)| *at >= index)
            .map(|(when, _)| *when)
            .max();
        match (self.applied.get(&index), installed) {
            (Some((applied, _)), Some(installed)) if installed > *applied => Some(true),
            (Some((_, changes)), _) => Some(changes.iter().any(want)),
            (None, Some(_)) => Some(true),
            (None, None) => None,
        }
    }
}

/// Each node's lives, oldest first.
#[derive(Default, Debug)]
pub struct AppliedRecord {
    nodes: BTreeMap<u64, Vec<Life>>,
    /// Events seen so far: the order of what one node did.
    events: u64,
}

impl AppliedRecord {
    fn see(&mut self, node: u64, a: Applied<'_>) {
        self.events += 1;
        let when = self.events;
        let lives = self.nodes.entry(node).or_default();
        match a {
            Applied::Restart {
                applied,
                installed: false,
            } => lives.push(Life {
                boot: applied,
                ..Life::default()
            }),
            Applied::Restart {
                applied,
                installed: true,
            } => {
                if let Some(life) = lives.last_mut() {
                    life.installs.push((when, applied));
                }
            }
            Applied::Entries { from, to, changes } => {
                let Some(life) = lives.last_mut() else {
                    return;
                };
                for index in from..=to {
                    life.applied.insert(index, (when, Vec::new()));
                }
                for c in changes {
                    if let Some((_, at)) = life.applied.get_mut(&c.index) {
                        at.push(c.clone());
                    }
                }
            }
        }
    }

    /// Whether node `node` ends holding `want` at `index`: its last life,
    /// or, where that life's state came from its boot, the life before.
    fn ends_holding(&self, node: u64, index: u64, want: impl Fn(&Change) -> bool) -> bool {
        let Some(lives) = self.nodes.get(&node) else {
            return false;
        };
        for life in lives.iter().rev() {
            match life.holds(index, &want) {
                Some(held) => return held,
                None if index <= life.boot => continue,
                None => return false,
            }
        }
        false
    }

    /// The observer that records node `node`'s hub into `record`.
    pub fn observer(record: &Arc<Mutex<AppliedRecord>>, node: u64) -> Observer {
        let record = record.clone();
        Arc::new(move |a| {
            record
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .see(node, a)
        })
    }

    /// Both checks (see the module's docs); `finishing`: the nodes that
    /// must hold every acknowledged write at the end.
    pub fn check(&self, ops: &[Op], finishing: &[u64]) -> Vec<Violation> {
        let mut out = Vec::new();
        // Each index's changes, as the first node to apply it made them.
        let mut first: BTreeMap<u64, (u64, &Vec<Change>)> = BTreeMap::new();
        for (node, lives) in &self.nodes {
            for life in lives {
                for (index, (_, changes)) in &life.applied {
                    match first.get(index) {
                        None => {
                            first.insert(*index, (*node, changes));
                        }
                        Some((other, theirs)) if *theirs != changes && out.len() < 5 => {
                            out.push(Violation::new(
                                Checker::AppliedAlike,
                                format!(
                                    "index {index}: node {node} applied {changes:?}, node {other} {theirs:?}"
                                ),
                            ));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        // Where each change was applied.
        let mut at: BTreeMap<(&str, Kind), u64> = BTreeMap::new();
        for (index, (_, changes)) in &first {
            for c in changes.iter() {
                if let Some(kind) = Kind::of(&c.kind) {
                    at.entry((c.key.as_str(), kind)).or_insert(*index);
                }
            }
        }
        let bad = |what: String| Violation::new(Checker::Acknowledged, what);
        for op in ops {
            let kind = match (&op.call, &op.ret) {
                (Call::Acquire { .. }, Ret::Granted(t)) => Kind::Granted(*t),
                (Call::Release { token }, Ret::Released) => Kind::Released(*token),
                _ => continue,
            };
            let Some(index) = at.get(&(op.key.as_str(), kind)).copied() else {
                let untokened = matches!(kind, Kind::Released(_))
                    && at.contains_key(&(op.key.as_str(), Kind::Released(0)));
                if !untokened {
                    out.push(bad(format!(
                        "{}: the acknowledged {kind:?} (client {}, invoked at {:.0} ms) is in no node's applied history",
                        op.key, op.client, op.invoke
                    )));
                }
                continue;
            };
            for node in finishing {
                let want = |c: &Change| c.key == op.key && Kind::of(&c.kind) == Some(kind);
                if !self.ends_holding(*node, index, want) {
                    let last = self.nodes.get(node).and_then(|l| l.last());
                    out.push(bad(format!(
                        "node {node} ends without the acknowledged {kind:?} of {} at index {index} (its last life: {:?})",
                        op.key,
                        last.map(|l| (l.boot, &l.installs, l.applied.get(&index)))
                    )));
                }
            }
        }
        out
    }
}

/// A change a client can have been acknowledged, by its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Granted(u64),
    Released(u64),
}

impl Kind {
    fn of(k: &ChangeKind) -> Option<Kind> {
        match k {
            ChangeKind::Granted { token, .. } => Some(Kind::Granted(*token)),
            ChangeKind::Released { token } => Some(Kind::Released(*token)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(index: u64, key: &str, token: u64) -> Change {
        Change {
            index,
            key: key.into(),
            kind: ChangeKind::Granted {
                token,
                lease_ms: 800,
                mode: lockd_core::command::Mode::Exclusive,
                limit: 1,
                principal: String::new(),
                owner: String::new(),
            },
        }
    }

    fn granted(key: &str, token: u64) -> Op {
        Op {
            client: 1,
            key: key.into(),
            call: Call::acquire(800, 0),
            invoke: 0.0,
            complete: 1.0,
            ret: Ret::Granted(token),
        }
    }

    fn entries(r: &mut AppliedRecord, node: u64, from: u64, to: u64, changes: &[Change]) {
        r.see(node, Applied::Entries { from, to, changes });
    }

    fn boot(r: &mut AppliedRecord, node: u64, applied: u64) {
        r.see(
            node,
            Applied::Restart {
                applied,
                installed: false,
            },
        );
    }

    #[test]
    fn a_node_that_restarts_without_an_acknowledged_grant_is_caught() {
        let mut r = AppliedRecord::default();
        for node in 1..=3 {
            boot(&mut r, node, 0);
            entries(&mut r, node, 1, 2, &[grant(2, "k", 7)]);
        }
        let ops = [granted("k", 7)];
        assert!(r.check(&ops, &[1, 2, 3]).is_empty());
        // Node 3 starts again from index 1 and applies index 2 otherwise:
        // its last life lacks the grant (and its index 2 differs).
        boot(&mut r, 3, 1);
        entries(&mut r, 3, 2, 2, &[]);
        let v = r.check(&ops, &[1, 2, 3]);
        assert!(v.iter().any(
            |v| v.checker == Checker::Acknowledged && v.what.starts_with("node 3 ends without")
        ));
        assert!(v.iter().any(|v| v.checker == Checker::AppliedAlike));
    }

    #[test]
    fn a_node_short_of_an_acknowledged_index_is_caught_and_a_snapshot_covers_it() {
        let mut r = AppliedRecord::default();
        for node in 1..=3 {
            boot(&mut r, node, 0);
        }
        entries(&mut r, 1, 1, 2, &[grant(2, "k", 7)]);
        entries(&mut r, 2, 1, 2, &[grant(2, "k", 7)]);
        entries(&mut r, 3, 1, 2, &[]);
        let ops = [granted("k", 7)];
        let v = r.check(&ops, &[1, 2, 3]);
        assert!(
            v.iter().any(|v| v.what.starts_with("node 3 ends without")),
            "{v:?}"
        );
        // A snapshot past index 2 installed on node 3 holds it, even over
        // an index 2 applied otherwise before it.
        r.see(
            3,
            Applied::Restart {
                applied: 5,
                installed: true,
            },
        );
        let v = r.check(&ops, &[1, 2, 3]);
        assert!(
            v.iter().all(|v| v.checker == Checker::AppliedAlike),
            "{v:?}"
        );
    }

    #[test]
    fn a_node_booted_from_its_own_snapshot_holds_what_its_life_before_applied() {
        let mut r = AppliedRecord::default();
        boot(&mut r, 1, 0);
        entries(&mut r, 1, 1, 3, &[grant(2, "k", 7)]);
        boot(&mut r, 1, 3);
        entries(&mut r, 1, 4, 4, &[]);
        let ops = [granted("k", 7)];
        assert!(r.check(&ops, &[1]).is_empty());
        // A node whose first life never reached index 2, booted from a
        // snapshot at 3 it cannot have made: nothing holds the grant.
        boot(&mut r, 2, 0);
        entries(&mut r, 2, 1, 1, &[]);
        boot(&mut r, 2, 3);
        let v = r.check(&ops, &[1, 2]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.starts_with("node 2 ends without"), "{v:?}");
    }

    #[test]
    fn an_acknowledged_grant_no_node_applied_is_caught() {
        let mut r = AppliedRecord::default();
        boot(&mut r, 1, 0);
        entries(&mut r, 1, 1, 2, &[grant(2, "k", 7)]);
        let v = r.check(&[granted("k", 8)], &[1]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.contains("in no node's applied history"), "{v:?}");
    }
}

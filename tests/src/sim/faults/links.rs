//! [`Links`]: the network and the nodes as the faults left them, which
//! the checkers read to know when a leader could commit.

use std::collections::BTreeSet;

use super::host;

/// The network and the nodes as the faults left them, from `at` (ms) on.
#[derive(Clone, Debug, Default)]
pub struct Links {
    pub at: f64,
    /// Directed (from, to) host pairs that drop every message.
    pub cut: BTreeSet<(String, String)>,
    /// Host pairs (the smaller name first) that hold every message.
    pub held: BTreeSet<(String, String)>,
    pub crashed: BTreeSet<u64>,
}

impl Links {
    /// Whether `leader` can commit: it runs, and it exchanges messages
    /// both ways with enough running nodes to make a majority of `nodes`.
    /// Nodes in `stopped` (running, but their Raft stopped) count as
    /// down.
    pub fn quorum(&self, leader: u64, nodes: u64, stopped: &BTreeSet<u64>) -> bool {
        let down = |n: &u64| self.crashed.contains(n) || stopped.contains(n);
        if down(&leader) {
            return false;
        }
        let (l, ok) = (host(leader), |a: &String, b: &String| {
            let pair = if a < b {
                (a.clone(), b.clone())
            } else {
                (b.clone(), a.clone())
            };
            !self.cut.contains(&(a.clone(), b.clone()))
                && !self.cut.contains(&(b.clone(), a.clone()))
                && !self.held.contains(&pair)
        });
        let reached = (1..=nodes)
            .filter(|n| *n != leader && !down(n) && ok(&l, &host(*n)))
            .count() as u64;
        (reached + 1) * 2 > nodes
    }
}

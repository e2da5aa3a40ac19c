//! What the search may merge or leave out without changing its verdict:
//! each reduction here is exact (the reason is on each), and each exists
//! because a history of a real run was out of the search's reach without
//! it (docs/testing.md, the sweeps).

use super::Horizon;
use crate::jepsen::history::{Call, Op, Ret};

/// The only times a holder's bounds are compared with, so that two paths
/// whose holders differ by less than any comparison can tell meet in the
/// memo as one state. The verdict is exactly the same: each bound is moved
/// to the value that answers every comparison as it did.
pub(super) struct Grid {
    /// Every operation's latest point ([`Horizon::latest_point`]: its
    /// completion, or when an unknown one may still take effect), sorted:
    /// `may_end` is only compared as `latest >= may_end`.
    completes: Vec<f64>,
    /// Every operation's invoke, sorted: `must_end` is only compared as
    /// `point > must_end`, and a point is always some operation's invoke.
    invokes: Vec<f64>,
}

impl Grid {
    pub(super) fn new(ops: &[Op], horizon: &Horizon) -> Grid {
        let sorted = |f: &dyn Fn(&Op) -> f64| {
            let mut v: Vec<f64> = ops.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        Grid {
            completes: sorted(&|o| horizon.latest_point(o)),
            invokes: sorted(&|o| o.invoke),
        }
    }

    /// The earliest completion at or after `m` (none: never).
    pub(super) fn may_end(&self, m: f64) -> f64 {
        let i = self.completes.partition_point(|&c| c < m);
        self.completes.get(i).copied().unwrap_or(f64::INFINITY)
    }

    /// The latest invoke at or before `m` (none: before every point).
    pub(super) fn must_end(&self, m: f64) -> f64 {
        match self.invokes.partition_point(|&p| p <= m) {
            0 => f64::NEG_INFINITY,
            i => self.invokes[i - 1],
        }
    }
}

/// Leaves out the acquires of unknown outcome (lost grants included) that
/// no answer "held" can lie beside. Such an acquire, if placed, makes a
/// holder of unknown token that may end at once: it helps place an
/// answer "held" while it lasts and nothing else (a grant needs the key
/// free, a release its own token), and leaving it out only frees the key
/// and lowers the frontier, which never forbids a placement. So the
/// verdict is the same, and the search is spared every subset of them:
/// the space it walks grows with the number of unknown operations.
pub(super) fn drop_idle_unknown_acquires(
    ops: Vec<Op>,
    deadline: Vec<f64>,
    horizon: &Horizon,
) -> (Vec<Op>, Vec<f64>) {
    let held: Vec<(f64, f64)> = ops
        .iter()
        .filter(|o| matches!((&o.call, &o.ret), (Call::Acquire { .. }, Ret::Held)))
        .map(|o| (o.invoke, o.complete))
        .collect();
    ops.into_iter()
        .zip(deadline)
        .filter(|(o, _)| match (&o.call, &o.ret) {
            (Call::Acquire { lease_ms, .. }, Ret::Unknown) => {
                // Its holding starts after its invoke and is gone by its
                // latest end (as `step` arms it); a "held" beside it is
                // placed inside its own [invoke, complete].
                let gone = horizon.latest_end(horizon.armed_by(o), *lease_ms as f64);
                held.iter().any(|&(i, c)| c >= o.invoke && i <= gone)
            }
            _ => true,
        })
        .unzip()
}

/// Acquires of unknown outcome that are interchangeable: each leaves a
/// holder of unknown token whose latest end is the same on the [`Grid`],
/// and each can take effect at any time after its invoke, up to latest
/// points ([`Horizon::latest_point`]) that every known holder's earliest
/// end compares alike with (whether the holder before it may have ended
/// by then; seed 310025: two dead clients' acquires of one lease, the
/// earlier unable to wait as long as the later). Placing the
/// later of two such (invoked no earlier) while the earlier is not placed
/// is never needed: placing the earlier there instead, and the later
/// where the earlier went (if anywhere), leaves the same states with a
/// frontier no higher. So the search places them in invoke order, and
/// the subsets of them it walks shrink to their prefixes.
///
/// Not `exact`, the latest points are left out of the rule: a search
/// with those twins tries fewer orders, so a linearization it finds is
/// one, but not finding one proves nothing.
pub(super) fn twins(
    ops: &[Op],
    deadline: &[f64],
    horizon: &Horizon,
    grid: &Grid,
    exact: bool,
) -> Vec<Option<usize>> {
    // Every earliest end a holder of known token can have: its grant's
    // point (some operation's invoke) plus its lease, on the grid.
    let leases: std::collections::BTreeSet<u64> = ops
        .iter()
        .filter_map(|o| match (&o.call, &o.ret) {
            (Call::Acquire { lease_ms, .. }, Ret::Granted(_)) => Some(*lease_ms),
            _ => None,
        })
        .collect();
    let mut ends: Vec<f64> = ops
        .iter()
        .flat_map(|o| leases.iter().map(|l| grid.may_end(o.invoke + *l as f64)))
        .collect();
    ends.sort_by(f64::total_cmp);
    ends.dedup();
    // Two latest points past the same ends let the same holders end.
    let passes = |latest: f64| ends.partition_point(|&m| m <= latest);
    let mut last = std::collections::HashMap::new();
    (0..ops.len())
        .map(|i| match (&ops[i].call, &ops[i].ret) {
            (Call::Acquire { lease_ms, .. }, Ret::Unknown) if deadline[i].is_infinite() => {
                let o = &ops[i];
                let end = grid.must_end(horizon.latest_end(horizon.armed_by(o), *lease_ms as f64));
                let passed = if exact {
                    passes(horizon.latest_point(o))
                } else {
                    0
                };
                last.insert((*lease_ms, end.to_bits(), passed), i)
            }
            _ => None,
        })
        .collect()
}

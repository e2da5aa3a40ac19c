//! The latest a lease may end, from what the simulation saw.

use super::faults::Links;
use super::run::ELECTION_MS;
use crate::jepsen::lin::Horizon;

/// The latest a lease may end: its lease from its grant, plus what a
/// leader change adds (a new leader restarts every lease it inherits at
/// `now + lease + 1.5 × election timeout` once it has loaded its table)
/// and the time an `Expire` takes to commit on the simulated links.
///
/// The simulation knows what happened, so the bound is tight: a lease is
/// re-armed only by a real takeover (the window after it in which the new
/// leader loads its table), or outlives its time while the leader could not
/// commit its expiry (from when the faults cut the leader from a majority
/// until a takeover or the links heal). Nothing else stretches it, so a
/// lease that ends late is caught.
pub(super) fn horizon(takeovers: &[(f64, u64, u64)], timeline: &[Links], nodes: u64) -> Horizon {
    let settle = (ELECTION_MS * 3 / 2) as f64;
    let mut unstable: Vec<(f64, f64)> = takeovers
        .iter()
        .map(|&(at, _, _)| (at, at + settle))
        .collect();
    // Walk every change of the links or the leader, in order.
    let mut points: Vec<f64> = timeline.iter().map(|l| l.at).collect();
    points.extend(takeovers.iter().map(|t| t.0));
    points.sort_by(f64::total_cmp);
    let mut lost_since = None;
    for &t in &points {
        let leader = takeovers.iter().rev().find(|k| k.0 <= t).map(|k| k.1);
        let links = timeline.iter().rev().find(|l| l.at <= t);
        let ok = match (leader, links) {
            (Some(leader), Some(links)) => links.quorum(leader, nodes),
            _ => true,
        };
        match (ok, lost_since) {
            (false, None) => lost_since = Some(t),
            (true, Some(from)) => {
                unstable.push((from, t));
                lost_since = None;
            }
            _ => {}
        }
    }
    if let Some(from) = lost_since {
        unstable.push((from, f64::INFINITY));
    }
    unstable.sort_by(|a, b| a.0.total_cmp(&b.0));
    Horizon {
        slack_ms: settle + 200.0,
        unstable,
    }
}

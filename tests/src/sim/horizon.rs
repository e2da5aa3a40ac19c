//! The latest a lease may end, from what the simulation saw.

use std::collections::{BTreeMap, BTreeSet};

use super::faults::Links;
use super::nodes::Lead;
use super::progress::Sample;
use super::Timing;
use crate::jepsen::lin::Horizon;
use lockd::service::table::MAX_RETRY_DELAY;

/// The latest a lease may end: its lease from its grant, plus what a
/// leader change adds (a new leader restarts every lease it inherits at
/// `now + lease + 1.5 × election timeout` once it has loaded its table,
/// which it retries at least every `MAX_RETRY_DELAY` until it has a
/// quorum) and the time an `Expire` takes to commit on the simulated links.
///
/// The simulation knows what happened, so the bound is tight: a lease is
/// re-armed only by a real takeover (the window after it in which the new
/// leader loads its table), or outlives its time while the leader could not
/// commit its expiry (from when the faults cut the leader from a majority,
/// or it was deposed, until a takeover or the links heal). Nothing else
/// stretches it, so a lease that ends late is caught.
///
/// The leases' own margins are in the stretch: the leader times a lease 1 %
/// longer on its clock (the drift bound), and a clean run's clocks run up
/// to 0.9 % slow, so a lease of `L` may last about 2 % more of real time.
///
/// While the operator had a voter out (`voter_out`), a quorum was a
/// majority of the others, which the links' view does not follow: those
/// windows count as unstable too.
///
/// A node whose Raft stopped while its host runs (it cannot run the
/// module its cluster swapped in, say) is down for a quorum from its
/// last sample saying so until one says it runs again (`samples`): the
/// links' view sees a running host (seed 240465: with the refusing node
/// stopped and another cut off, the leader committed nothing for 5.7 s,
/// and an acquire its client had given up on was granted at the heal).
///
/// A leader whose quorum is back replicates again within
/// [`Timing::resume_ms`]
/// (docs/architecture.md, "Replication after a fault"): a connection the
/// fault left dead is dropped once quiet for the stall bound, and the next
/// try comes a heartbeat later. The spans without a quorum end that much
/// after the links heal.
pub(super) fn horizon(
    leads: &[Lead],
    timeline: &[Links],
    nodes: u64,
    voter_out: &[(f64, f64)],
    samples: &[Sample],
    timing: Timing,
) -> Horizon {
    // Each node's samples in time order: whether its Raft ran.
    let mut runs: Vec<(f64, u64, bool)> = samples.iter().map(|s| (s.at, s.node, s.up)).collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let stopped_at = |t: f64| -> BTreeSet<u64> {
        let mut last = BTreeMap::new();
        for &(_, node, up) in runs.iter().take_while(|r| r.0 <= t) {
            last.insert(node, up);
        }
        last.into_iter()
            .filter(|(_, up)| !up)
            .map(|(n, _)| n)
            .collect()
    };
    let settle = (timing.election_ms * 3 / 2) as f64;
    let mut unstable: Vec<(f64, f64)> = leads
        .iter()
        .filter(|k| k.leads)
        .map(|k| (k.at, k.at + settle))
        .collect();
    // Walk every change of the links or the leader, in order: the spans in
    // which no leader could commit.
    let mut points: Vec<f64> = timeline.iter().map(|l| l.at).collect();
    points.extend(leads.iter().map(|k| k.at));
    // Where a node's Raft stopped or ran again.
    let mut was = BTreeMap::new();
    for &(at, node, up) in &runs {
        if was.insert(node, up) != Some(up) {
            points.push(at);
        }
    }
    points.sort_by(f64::total_cmp);
    // A crash deposes a leader, though it reports nothing: a node that
    // restarts at once (a bounce, a power loss) comes back a follower,
    // and nothing commits until the next takeover.
    let crashes: Vec<(f64, u64)> = timeline
        .iter()
        .flat_map(|l| l.crashed.iter().map(move |n| (l.at, *n)))
        .collect();
    // A bounced node (crashed and restarted at once) is lost to its
    // leader at that instant: the leader's streams to it broke, and it
    // replicates to it again only within `resume_ms` (seed 337029: a
    // leader whose other follower's link was held could not commit an
    // expiry for 236 ms after a bounce). The span of that instant is
    // closed a millisecond later; the unstable window adds the resume.
    points.extend(crashes.iter().map(|&(at, _)| at + 1.0));
    points.sort_by(f64::total_cmp);
    let down_at = |t: f64| {
        let mut down = stopped_at(t);
        down.extend(crashes.iter().filter(|&&(at, _)| at == t).map(|&(_, n)| n));
        down
    };
    let cut_off = spans(points.iter().map(|&t| {
        // The latest takeover, unless its leader was deposed since.
        let took = leads.iter().rev().find(|k| k.leads && k.at <= t);
        let deposed = took.is_some_and(|k| {
            leads
                .iter()
                .any(|d| !d.leads && d.node == k.node && d.at >= k.at && d.at <= t)
                || crashes
                    .iter()
                    .any(|&(at, n)| n == k.node && at >= k.at && at <= t)
        });
        let links = timeline.iter().rev().find(|l| l.at <= t);
        let ok = match (took, links) {
            _ if deposed => false,
            (Some(k), Some(links)) => links.quorum(k.node, nodes, &down_at(t)),
            _ => true,
        };
        (t, !ok)
    }));
    unstable.extend(
        cut_off
            .into_iter()
            .map(|(from, to)| (from, to + timing.resume_ms())),
    );
    unstable.extend_from_slice(voter_out);
    unstable.sort_by(|a, b| a.0.total_cmp(&b.0));
    Horizon {
        slack_ms: EXPIRE_COMMIT_MS,
        // The window of a takeover already holds the new leader's restart
        // (`settle`); after it, its table loaded (retried at least every
        // `MAX_RETRY_DELAY`) and the expiry committed.
        rearm_ms: MAX_RETRY_DELAY.as_millis() as f64 + EXPIRE_COMMIT_MS,
        stretch: 0.02,
        unstable,
        retried_grants: false,
        first_try: Default::default(),
        held: held(timeline),
    }
}

/// How long a healthy leader may take from a lease's end on its clock to
/// the `Expire` applied and answered, ms: waiting for an in-flight slot
/// behind two entries, the commit (a follower's round trip, at most 10 ms
/// a message, and a synced batch, at most 12 ms) and the apply. Outside
/// a fault window nothing else may stretch a lease (the control
/// `late-expiry`, 400 ms late, is caught).
pub const EXPIRE_COMMIT_MS: f64 = 150.0;

/// [`Timing::resume_ms`] of the scripted runs' timing.
pub const RESUME_MS: f64 = Timing::SCRIPTED.resume_ms();

/// When some link held its messages (a paused node, a slow link): a
/// request caught there arrives when the hold ends, and an acquire its
/// client gave up on may be granted then (seed 3146: a request to a node
/// paused for 4.9 s was granted 1.9 s after its client's 3 s timeout, and
/// its holding outlived a leader change).
fn held(timeline: &[Links]) -> Vec<(f64, f64)> {
    spans(timeline.iter().map(|l| (l.at, !l.held.is_empty())))
}

/// The spans (from, to) in which a condition held, from its value at each
/// point of a timeline, in order; one still holding at the end is open.
fn spans(points: impl IntoIterator<Item = (f64, bool)>) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut since = None;
    for (t, on) in points {
        match (on, since) {
            (true, None) => since = Some(t),
            (false, Some(from)) => {
                out.push((from, t));
                since = None;
            }
            _ => {}
        }
    }
    if let Some(from) = since {
        out.push((from, f64::INFINITY));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(at: f64, crashed: &[u64]) -> Links {
        Links {
            at,
            cut: BTreeSet::new(),
            held: BTreeSet::new(),
            crashed: crashed.iter().copied().collect(),
        }
    }

    /// Node 3 leads; node 1 is crashed from 1 s to 5 s. With node 2's
    /// Raft stopped at 2 s (its host running), the leader has no quorum
    /// from 2 s until node 1 is back; without the stop, it has one
    /// throughout.
    #[test]
    fn a_node_whose_raft_stopped_counts_as_down() {
        let leads = [Lead {
            at: 0.0,
            node: 3,
            term: 1,
            leads: true,
        }];
        let timeline = [links(0.0, &[]), links(1000.0, &[1]), links(5000.0, &[])];
        let up = |at, node| Sample {
            up: true,
            ..Sample::down(at, node)
        };
        let stopped = [up(500.0, 2), Sample::down(2000.0, 2)];
        let cut_off = |samples: &[Sample]| -> Vec<(f64, f64)> {
            horizon(&leads, &timeline, 3, &[], samples, Timing::SCRIPTED)
                .unstable
                .into_iter()
                .filter(|&(from, _)| from > 0.0)
                .collect()
        };
        assert_eq!(cut_off(&stopped), [(2000.0, 5000.0 + RESUME_MS)]);
        assert_eq!(cut_off(&[up(500.0, 2)]), []);
        // Back once a sample says its Raft runs again.
        let back = [up(500.0, 2), Sample::down(2000.0, 2), up(3000.0, 2)];
        assert_eq!(cut_off(&back), [(2000.0, 3000.0 + RESUME_MS)]);
    }

    /// Seed 131's shape: the leader, node 3, is bounced at 4 s (crashed
    /// and restarted at once, as in a power loss) and node 1 takes over at
    /// 4.5 s. The leader could commit nothing from the bounce to the
    /// takeover, though the links never changed: a cut-off span.
    #[test]
    fn a_bounced_leader_commits_nothing_until_the_next_takeover() {
        let lead = |at, node, term| Lead {
            at,
            node,
            term,
            leads: true,
        };
        let leads = [lead(0.0, 3, 1), lead(4500.0, 1, 2)];
        let timeline = [links(0.0, &[]), links(4000.0, &[3]), links(4000.0, &[])];
        let unstable = horizon(&leads, &timeline, 3, &[], &[], Timing::SCRIPTED).unstable;
        assert!(
            unstable.contains(&(4000.0, 4500.0 + RESUME_MS)),
            "{unstable:?}"
        );
    }
}

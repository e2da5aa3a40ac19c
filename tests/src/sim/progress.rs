//! Whether the cluster made progress while it could: while a majority of
//! the nodes ran, on working disks, and could all talk to each other both
//! ways, a leader was elected among them and what they had in their logs
//! was committed, each within the bound (`Timing::progress_bound_ms`, five election timeouts).
//!
//! The linearizability checker catches a cluster that stalls only when a
//! lease happens to outlive its promise meanwhile, and the liveness check
//! looks only after the faults have healed; this one watches every span in
//! which a majority was healthy, from every node's own Raft metrics
//! ([`Sample`], recorded at each change by the node's host).
//!
//! A span begins when such a majority forms (a set of running nodes whose
//! links all work both ways and hold nothing; a node counts as running
//! once it reported since its last crash) and ends when none is left or
//! the nodes in such majorities change; while the operator has a voter out
//! (until its promotion back has settled: no joint configuration, and
//! committed; sweep seed 111323), membership, not the links, decides the
//! quorum, and those windows are left out. Within a
//! span, after the bound (`Timing::progress_bound_ms`, five election timeouts):
//! * some node of such a majority must have led within the last
//!   the bound (`Timing::progress_bound_ms`, five election timeouts);
//! * an entry in the log of a node of such a majority above everything any
//!   node applied must not wait more than the bound (`Timing::progress_bound_ms`, five election timeouts) for the applied
//!   index to move (committed, or replaced by a new leader's own entry),
//!   counting, while a member leads, the leader's log and those of the
//!   members that talk with it both ways (a member cut from the leader,
//!   though in a healthy majority with others, keeps an old term's tail
//!   until it talks with the leader again: simulation seed 105958);
//! * each other node of such a majority that talks with the leader both
//!   ways must reach the index the leader had applied within the bound (`Timing::progress_bound_ms`, five election timeouts)
//!   (replication to it resumed: with appends, or a snapshot).
//!
//! The bound counts what the service promises after a link comes back: a
//! connection the fault left dead is dropped once it has made no progress
//! for an election timeout, the next try comes a heartbeat later, and an
//! election takes up to about two timeouts when the first round splits
//! (docs/architecture.md, "Replication after a fault").

use lockd::raft::{Node, NodeId};
use openraft::{RaftMetrics, ServerState};

use super::faults::{host, Event, Fault, Links};
use crate::jepsen::check::{Checker, Violation};

/// One node's Raft metrics at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Simulated ms.
    pub at: f64,
    pub node: NodeId,
    /// Its Raft runs (not stopped, not shut down).
    pub up: bool,
    pub leads: bool,
    pub term: u64,
    pub applied: u64,
    pub last_log: u64,
}

impl Sample {
    pub fn of(at: f64, m: &RaftMetrics<NodeId, Node>) -> Sample {
        Sample {
            at,
            node: m.id,
            up: m.running_state.is_ok() && m.state != ServerState::Shutdown,
            leads: m.state == ServerState::Leader,
            term: m.current_term,
            applied: m.last_applied.map_or(0, |l| l.index),
            last_log: m.last_log_index.unwrap_or(0),
        }
    }

    /// The node's Raft stopped.
    pub fn down(at: f64, node: NodeId) -> Sample {
        Sample {
            at,
            node,
            up: false,
            leads: false,
            term: 0,
            applied: 0,
            last_log: 0,
        }
    }
}

/// Every node's latest sample, its last crash, and whether its disk is
/// broken now.
struct Nodes {
    latest: Vec<Option<Sample>>,
    crashed_at: Vec<Option<f64>>,
    crashed: Vec<bool>,
    broken: Vec<bool>,
    applied: u64,
}

impl Nodes {
    /// Its Raft runs: it reported since its last crash (or restart), and
    /// is not down now.
    fn running(&self, id: NodeId) -> Option<&Sample> {
        let i = id as usize - 1;
        let s = self.latest[i].as_ref()?;
        let since_crash = self.crashed_at[i].is_none_or(|c| s.at > c);
        (s.up && since_crash && !self.crashed[i]).then_some(s)
    }

    /// A fault began or healed: a crash or a stop takes the node down
    /// until it reports again; a broken disk leaves it running (until it writes)
    /// but not healthy, and its healing restarts it.
    fn fault(&mut self, e: &Event) {
        match e.fault {
            // A stop takes its node down like a crash (it stops serving
            // when asked, before its host ends).
            Fault::Crash(id) | Fault::Stop(id) => {
                let i = id as usize - 1;
                self.crashed[i] = !e.healed;
                if !e.healed {
                    self.crashed_at[i] = Some(e.at);
                }
            }
            Fault::Disk(id, _) => {
                let i = id as usize - 1;
                self.broken[i] = !e.healed;
                if e.healed {
                    self.crashed_at[i] = Some(e.at);
                }
            }
            _ => {}
        }
    }
}

/// The running nodes on working disks that belong to some majority whose
/// links all work both ways (ascending), if there is such a majority and
/// no other node leads (a leader cut from the others one way, or on a
/// broken disk until it writes, still holds its followers back: the
/// pre-vote refuses while they hear it).
fn healthy(links: &Links, nodes: &Nodes, n: u64) -> Option<Vec<NodeId>> {
    let up: Vec<NodeId> = (1..=n)
        .filter(|id| nodes.running(*id).is_some() && !nodes.broken[*id as usize - 1])
        .collect();
    let talk = |a: NodeId, b: NodeId| talk(links, a, b);
    let mut members = std::collections::BTreeSet::new();
    for mask in 1u32..(1 << up.len()) {
        let set: Vec<NodeId> = (0..up.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| up[i])
            .collect();
        let clique = set
            .iter()
            .enumerate()
            .all(|(i, a)| set[i + 1..].iter().all(|b| talk(*a, *b)));
        if clique && set.len() as u64 * 2 > n {
            members.extend(set);
        }
    }
    let outside_leads = (1..=n)
        .filter(|id| !members.contains(id))
        .any(|id| nodes.running(id).is_some_and(|s| s.leads));
    (!members.is_empty() && !outside_leads).then(|| members.into_iter().collect())
}

/// Whether nodes `a` and `b` exchange messages both ways.
fn talk(links: &Links, a: NodeId, b: NodeId) -> bool {
    let (ha, hb) = (host(a), host(b));
    let pair = if ha < hb {
        (ha.clone(), hb.clone())
    } else {
        (hb.clone(), ha.clone())
    };
    !links.cut.contains(&(ha.clone(), hb.clone()))
        && !links.cut.contains(&(hb, ha))
        && !links.held.contains(&pair)
}

/// A span with a healthy majority, as it goes.
struct Span {
    members: Vec<NodeId>,
    since: f64,
    /// When a member last led (or the span began).
    led: f64,
    /// Whether a member leads now.
    leading: bool,
    /// Since when an entry waits above the applied index.
    waiting: Option<f64>,
    /// Per member: since when it is behind the leader's applied index, and
    /// the index it must reach.
    behind: Vec<Option<(f64, u64)>>,
}

/// The progress violations of a run: `samples` in order, the nemesis'
/// `events` and `timeline`, `n` nodes, the operator's `excluded` windows,
/// the run's `end` (ms).
pub fn check(
    samples: &[Sample],
    events: &[Event],
    timeline: &[Links],
    n: u64,
    excluded: &[(f64, f64)],
    end: f64,
    bound_ms: f64,
) -> Vec<Violation> {
    let mut points: Vec<f64> = timeline.iter().map(|l| l.at).collect();
    points.extend(samples.iter().map(|s| s.at));
    points.extend(excluded.iter().flat_map(|&(a, b)| [a, b]));
    points.push(end);
    points.sort_by(f64::total_cmp);
    points.dedup();

    let mut nodes = Nodes {
        latest: vec![None; n as usize],
        crashed_at: vec![None; n as usize],
        crashed: vec![false; n as usize],
        broken: vec![false; n as usize],
        applied: 0,
    };
    let (mut next_sample, mut next_link, mut next_event) = (0, 0, 0);
    let mut links = Links::default();
    let mut span: Option<Span> = None;
    for &t in &points {
        // The state of the interval that ends at `t`, judged at `t`.
        if let Some(s) = &span {
            if let Some(v) = judge(s, t, bound_ms) {
                return vec![v];
            }
        }
        while next_link < timeline.len() && timeline[next_link].at <= t {
            links = timeline[next_link].clone();
            next_link += 1;
        }
        while next_event < events.len() && events[next_event].at <= t {
            nodes.fault(&events[next_event]);
            next_event += 1;
        }
        let applied_before = nodes.applied;
        while next_sample < samples.len() && samples[next_sample].at <= t {
            let s = samples[next_sample];
            nodes.applied = nodes.applied.max(s.applied);
            nodes.latest[s.node as usize - 1] = Some(s);
            next_sample += 1;
        }
        let out = excluded.iter().any(|&(a, b)| a <= t && t < b);
        let now = if out {
            None
        } else {
            healthy(&links, &nodes, n)
        };
        span = match (span.take(), now) {
            (Some(s), Some(m)) if s.members == m => Some(s),
            (_, Some(m)) => Some(Span {
                members: m,
                since: t,
                led: t,
                leading: false,
                waiting: None,
                behind: vec![None; n as usize],
            }),
            (_, None) => None,
        };
        if let Some(s) = &mut span {
            let members: Vec<&Sample> = s
                .members
                .iter()
                .filter_map(|id| nodes.running(*id))
                .collect();
            s.leading = members.iter().any(|m| m.leads);
            if s.leading {
                s.led = t;
            }
            let leader = members
                .iter()
                .filter(|m| m.leads)
                .max_by_key(|m| m.term)
                .map(|m| (m.node, m.applied));
            for m in &members {
                let i = m.node as usize - 1;
                s.behind[i] = match (leader, s.behind[i]) {
                    (Some((l, _)), _) if l == m.node || !talk(&links, l, m.node) => None,
                    (None, _) => None,
                    (Some((_, to)), None) if m.applied < to => Some((t, to)),
                    (Some(_), None) => None,
                    (Some((_, to)), Some((_, was))) if m.applied >= was => {
                        (m.applied < to).then_some((t, to))
                    }
                    (Some(_), kept) => kept,
                };
            }
            // An entry waits for the leader, or for any member while none
            // leads; not on a member cut from the leader (its stale tail
            // is replaced once they talk: the catch-up rule above).
            let waits = members.iter().any(|m| {
                m.last_log > nodes.applied
                    && leader.is_none_or(|(l, _)| l == m.node || talk(&links, l, m.node))
            });
            s.waiting = match (waits, s.waiting) {
                (false, _) => None,
                (true, Some(since)) if nodes.applied == applied_before => Some(since),
                (true, _) => Some(t),
            };
        }
    }
    Vec::new()
}

/// A violation if span `s`, still healthy at `t`, has gone too long
/// without a leader or with an entry waiting.
fn judge(s: &Span, t: f64, bound_ms: f64) -> Option<Violation> {
    let nodes = format!("{:?}", s.members);
    if !s.leading && t - s.led > bound_ms {
        return Some(Violation::new(
            Checker::Progress,
            format!(
                "nodes {nodes} could all talk and ran on working disks from {:.0} ms, but none led from {:.0} ms to {t:.0} ms",
                s.since, s.led
            ),
        ));
    }
    let late = s.behind.iter().enumerate().find_map(|(i, b)| {
        b.filter(|(since, _)| t - since > bound_ms)
            .map(|(since, to)| (i + 1, since, to))
    });
    if let Some((node, since, to)) = late {
        return Some(Violation::new(
            Checker::Progress,
            format!(
                "nodes {nodes} could all talk and ran on working disks from {:.0} ms, but node {node} stayed behind the leader's applied index {to} from {since:.0} ms to {t:.0} ms",
                s.since
            ),
        ));
    }
    let since = s.waiting?;
    (t - since > bound_ms).then(|| {
        Violation::new(
            Checker::Progress,
            format!(
                "nodes {nodes} could all talk and ran on working disks from {:.0} ms, but an entry waited uncommitted from {since:.0} ms to {t:.0} ms",
                s.since
            ),
        )
    })
}

//! The nemesis: faults injected into a running cluster, each recorded with
//! when it happened and what it did, so the checkers can bound leases by
//! the windows in which leadership may change and CI can assert which
//! faults a seed injected.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::history::History;
use super::rng::Rng;
use crate::cluster::Cluster;

/// Faults the nemesis may inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the leader, restart it after a while.
    KillLeader,
    /// SIGKILL a follower, restart it after a while.
    KillFollower,
    /// SIGSTOP the leader past the election timeout, then SIGCONT.
    PauseLeader,
    /// SIGSTOP a follower, then SIGCONT.
    PauseFollower,
    /// Several leader kills in a row while leases expire.
    LeaderStorm,
    /// Cut the leader off from every peer (clients still reach it).
    IsolateLeader,
    /// Split into a majority and a minority that holds the leader.
    MajorityMinority,
    /// Two sides that cannot see each other, and one node that sees both.
    Bridge,
}

impl Fault {
    pub fn is_partition(self) -> bool {
        PARTITIONS.contains(&self)
    }
}

/// Faults that need no separate hosts.
pub const ALL_FAULTS: [Fault; 5] = [
    Fault::KillLeader,
    Fault::KillFollower,
    Fault::PauseLeader,
    Fault::PauseFollower,
    Fault::LeaderStorm,
];

/// Network partitions (the cluster must run on separate hosts).
pub const PARTITIONS: [Fault; 3] = [Fault::IsolateLeader, Fault::MajorityMinority, Fault::Bridge];

/// One thing the nemesis did.
#[derive(Clone, Debug)]
pub struct Event {
    /// `None` for the hot upgrade.
    pub fault: Option<Fault>,
    /// Milliseconds since the run started (the history's clock).
    pub from: f64,
    pub to: f64,
    /// The highest term any node reported before and at the end of the
    /// fault (before healing): a partition that had an effect made some
    /// node stand for election.
    pub term_before: u64,
    pub term_after: u64,
    pub what: String,
}

/// The leader with the highest term any running node reports, as
/// `(term, id)`: a paused or cut-off old leader may still believe it leads.
pub fn leader_of(c: &Cluster) -> Option<(u64, u64)> {
    c.running()
        .into_iter()
        .filter_map(|i| c.status(i))
        .filter(|s| s.role == lockd_proto::Role::Leader)
        .map(|s| (s.term, s.id))
        .max()
}

fn max_term(c: &Cluster) -> u64 {
    max_term_of(c, &c.running())
}

fn max_term_of(c: &Cluster, nodes: &[u64]) -> u64 {
    nodes
        .iter()
        .filter_map(|i| c.status(*i))
        .map(|s| s.term)
        .max()
        .unwrap_or(0)
}

/// Each running node's role, term and leader, as one line.
fn views(c: &Cluster) -> String {
    c.running()
        .into_iter()
        .map(|i| match c.status(i) {
            Some(s) => format!("{i}: {:?} t{} l{:?}", s.role, s.term, s.leader),
            None => format!("{i}: no status"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the nemesis did, and the leaders it saw.
#[derive(Debug, Default)]
pub struct Log {
    pub events: Vec<Event>,
    /// `(term, id)` of the leader seen before each fault and at the end.
    pub leaders: Vec<(u64, u64)>,
}

impl Log {
    /// How many times the observed leader (or its term) changed.
    pub fn leader_changes(&self) -> usize {
        self.leaders.windows(2).filter(|w| w[0] != w[1]).count()
    }

    /// Windows in which leadership may have changed: each fault, and the
    /// elections after it (`settle_ms`).
    pub fn unstable(&self, settle_ms: f64) -> Vec<(f64, f64)> {
        let mut w: Vec<(f64, f64)> = self
            .events
            .iter()
            .filter(|e| e.fault.is_some())
            .map(|e| (e.from, e.to + settle_ms))
            .collect();
        w.sort_by(|a, b| a.0.total_cmp(&b.0));
        w
    }
}

/// Submit the upgrade to `module` (named `name`) until it is in: answered
/// "swapped", or "already the active module" (an earlier attempt committed
/// although its answer was lost). Marked as a rollback: the runs swap
/// across worlds either way (version 2 of world 0.1's module is below the
/// built-in module's version).
pub fn upgrade(c: &Cluster, module: &[u8], name: &str) -> Option<String> {
    for attempt in 1..=20 {
        let Some((_, leader)) = leader_of(c) else {
            std::thread::sleep(Duration::from_millis(300));
            continue;
        };
        match c.post_bytes(leader, "/v1/admin/upgrade?rollback=true", module) {
            Ok(r) if r.ok() => {
                return Some(format!(
                    "upgraded to {name} at index {} (attempt {attempt})",
                    r.body["index"]
                ))
            }
            Ok(r) if r.status == 409 && r.error().contains("already the active module") => {
                return Some(format!(
                    "upgrade to {name} was in already (attempt {attempt})"
                ))
            }
            _ => std::thread::sleep(Duration::from_millis(300)),
        }
    }
    None
}

/// Inject faults until `stop`. The faults come in rounds: each round
/// injects every configured fault once, in an order drawn from the seed,
/// so a run long enough for one round covers them all.
pub fn run(
    c: &mut Cluster,
    nodes: u64,
    faults: &[Fault],
    seed: u64,
    upgrade_at: Option<Duration>,
    history: &History,
    stop: &AtomicBool,
) -> Log {
    let mut rng = Rng::new(seed ^ 0xfa17);
    let mut log = Log::default();
    let pause = |ms: u64| std::thread::sleep(Duration::from_millis(ms));
    let mut upgrade_due = upgrade_at.map(|d| d.as_secs_f64() * 1e3);
    let mut round: Vec<Fault> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        pause(600 + rng.below(600));
        if upgrade_due.is_some_and(|at| history.now() >= at) {
            upgrade_due = None;
            let from = history.now();
            let what = upgrade(c, crate::fixtures::LOCK_SM_WORLD01_V2, "version 2")
                .unwrap_or_else(|| "UPGRADE FAILED after 20 attempts".into());
            log.events.push(Event {
                fault: None,
                from,
                to: history.now(),
                term_before: 0,
                term_after: 0,
                what,
            });
        }
        if stop.load(Ordering::Relaxed) || faults.is_empty() {
            if upgrade_due.is_some() {
                continue;
            }
            break;
        }
        let Some(leader_now) = leader_of(c) else {
            continue;
        };
        log.leaders.push(leader_now);
        if round.is_empty() {
            round = faults.to_vec();
            // Fisher–Yates, drawn from the seed; popped from the back.
            for i in (1..round.len()).rev() {
                round.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        let Some(fault) = round.pop() else { continue };
        let leader = leader_now.1;
        let follower = (1..=nodes)
            .filter(|i| *i != leader)
            .nth(rng.below(nodes - 1) as usize)
            .unwrap_or(leader);
        let from = history.now();
        let term_before = max_term(c);
        let (what, term_after) = match fault {
            Fault::KillLeader | Fault::KillFollower => {
                let victim = if fault == Fault::KillLeader {
                    leader
                } else {
                    follower
                };
                c.kill(victim);
                pause(500 + rng.below(1000));
                let term = max_term(c);
                c.spawn(victim);
                (format!("SIGKILL node {victim}, restarted"), term)
            }
            Fault::PauseLeader | Fault::PauseFollower => {
                let victim = if fault == Fault::PauseLeader {
                    leader
                } else {
                    follower
                };
                c.pause(victim);
                pause(1000 + rng.below(1000));
                c.resume(victim);
                (format!("SIGSTOP node {victim}, SIGCONT"), max_term(c))
            }
            Fault::IsolateLeader | Fault::MajorityMinority | Fault::Bridge => {
                let groups = partition_groups(fault, leader, nodes);
                c.partition(&groups);
                // Hold the cut until the side without the leader has stood
                // for election (an election can take a few timeouts on a
                // busy machine), then a while longer.
                let cut_off: Vec<u64> = groups
                    .iter()
                    .filter(|g| !g.contains(&leader))
                    .flatten()
                    .copied()
                    .collect();
                let stood = std::time::Instant::now() + Duration::from_secs(8);
                while max_term_of(c, &cut_off) <= term_before && std::time::Instant::now() < stood {
                    pause(100);
                }
                pause(500 + rng.below(1500));
                let term = max_term(c);
                let seen = views(c);
                c.heal();
                (
                    format!("partition {groups:?}, healed; at its end {seen}"),
                    term,
                )
            }
            Fault::LeaderStorm => {
                let mut killed = Vec::new();
                for _ in 0..3 {
                    let Some((_, l)) = leader_of(c) else { break };
                    c.kill(l);
                    pause(300);
                    c.spawn(l);
                    pause(700);
                    killed.push(l);
                }
                (
                    format!("leader storm: SIGKILL nodes {killed:?} in turn, each restarted"),
                    max_term(c),
                )
            }
        };
        log.events.push(Event {
            fault: Some(fault),
            from,
            to: history.now(),
            term_before,
            term_after,
            what,
        });
    }
    log
}

/// The groups a partition fault cuts the cluster into.
fn partition_groups(fault: Fault, leader: u64, nodes: u64) -> Vec<Vec<u64>> {
    let others: Vec<u64> = (1..=nodes).filter(|i| *i != leader).collect();
    match fault {
        Fault::IsolateLeader => vec![vec![leader], others],
        Fault::MajorityMinority => {
            // The leader and fewer than half of the rest.
            let minority = ((nodes - 1) / 2) as usize;
            let mut small = vec![leader];
            small.extend(others.iter().take(minority.saturating_sub(1)));
            let big: Vec<u64> = others
                .iter()
                .copied()
                .filter(|i| !small.contains(i))
                .collect();
            vec![small, big]
        }
        _ => {
            // others[0] bridges the leader's side and the rest.
            let bridge = others[0];
            let rest: Vec<u64> = others[1..].to_vec();
            vec![vec![leader, bridge], [vec![bridge], rest].concat()]
        }
    }
}

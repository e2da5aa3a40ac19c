//! A node's host in a run: the real node started on its data dir, its
//! leader takeovers recorded for the horizon, and its stops judged.
//!
//! A node may stop only when its disk broke under it (the nemesis
//! restarts it later on what the disk kept). Any other stop is a finding:
//! a node that cannot open its data again after a crash, or whose Raft
//! stops on a storage error, lost or damaged what it had acknowledged
//! (the durability checker); any other reason is the harness's. The node
//! then stays down and the run goes on, so the other checkers judge what
//! the clients saw too.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockd::config::NodeConfig;
use lockd::node::{Node, NodeError, Seams};
use lockd::raft::log_store::{SyncTime, Writer};
use openraft::error::Fatal;

use super::clock::Drifting;
use super::disk::SimDisk;
use super::run::sim_ms;
use crate::jepsen::check::{Checker, Violation};
use crate::jepsen::rng::Rng;

/// A node began or stopped leading, as it saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lead {
    /// Simulated ms.
    pub at: f64,
    pub node: u64,
    pub term: u64,
    /// Began (a takeover) or stopped (deposed; a crash is the nemesis's).
    pub leads: bool,
}

/// Every change of leadership the nodes saw, in order.
pub type Takeovers = Arc<Mutex<Vec<Lead>>>;
/// Every node's Raft metrics as they changed, in order (the progress
/// checker's input, `super::progress`).
pub type Samples = Arc<Mutex<Vec<super::progress::Sample>>>;
/// Stops no fault explains.
pub type Stops = Arc<Mutex<Vec<Violation>>>;
/// Each node's running instance's ear for a stop as on SIGTERM (the
/// nemesis's `Stop`): made anew by each instance.
pub type StopAsks = Arc<Mutex<std::collections::BTreeMap<u64, Arc<tokio::sync::Notify>>>>;

/// Ask node `id`'s running instance to stop as on SIGTERM (it hands over
/// if it leads); kept for it if it is not listening yet.
pub fn ask_to_stop(asks: &StopAsks, id: u64) {
    if let Some(ear) = asks.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
        ear.notify_one();
    }
}

/// What a node's host reports to, and the disk it runs on.
pub struct Watch {
    pub takeovers: Takeovers,
    pub samples: Samples,
    pub stops: Stops,
    pub disk: Arc<SimDisk>,
    pub latest: Latest,
    /// What the instances replaced so far went through (the latest ones
    /// are counted at the end, [`count_instance`]).
    pub coverage: Arc<Mutex<super::Coverage>>,
    pub stop_asks: StopAsks,
}

/// Add what one instance of a node counted since it started: the torn
/// tail its log cut on opening, the snapshots it built and installed.
pub fn count_instance(c: &mut super::Coverage, s: &lockd::api::services::Services) {
    let n = s.instance_counts();
    c.add("log.torn-tail-cut", n.torn_tails_cut);
    c.add("snapshot.built", n.snapshots_built);
    c.add("snapshot.installed", n.snapshots_installed);
    c.add("lock.phantom-release", n.phantom_releases);
}

/// Each node's latest started instance (its services), for what is read
/// from the nodes during and after the run (their logs, [`LogWitness`]).
pub type Latest = Arc<Mutex<std::collections::BTreeMap<u64, Arc<lockd::api::services::Services>>>>;

impl Watch {
    fn sample(&self, s: super::progress::Sample) {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(s);
    }

    fn stopped(&self, config: &NodeConfig, checker: Checker, what: String) {
        if self.disk.tripped(&config.data_dir) {
            return;
        }
        let v = Violation::new(checker, format!("node {} {what}", config.id));
        self.stops.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }
}

/// The software of node `config.id`'s host, its lease clock `drift_ppm`
/// fast. It never returns: a node that stops stays down until the nemesis
/// restarts its host. Asked to stop ([`ask_to_stop`]), it shuts down as
/// the binary does on SIGTERM.
pub async fn node(
    config: NodeConfig,
    mut seams: Seams,
    drift_ppm: i64,
    watch: Watch,
) -> turmoil::Result {
    let id = config.id;
    seams.lease_clock = Some(Arc::new(Drifting::start(drift_ppm)));
    let node = match Node::start_with(config.clone(), seams).await {
        Ok(node) => {
            let before = watch
                .latest
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, node.services.clone());
            let mut c = watch.coverage.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(before) = before {
                count_instance(&mut c, &before);
            }
            node
        }
        Err(e) => {
            let checker = match e {
                NodeError::Log(_)
                | NodeError::StateMachine(_)
                | NodeError::DataDir { .. }
                | NodeError::Cluster(_) => Checker::Durability,
                _ => Checker::Harness,
            };
            watch.stopped(&config, checker, format!("could not restart: {e}"));
            return down().await;
        }
    };
    let asked = Arc::new(tokio::sync::Notify::new());
    watch
        .stop_asks
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, asked.clone());
    let mut metrics = node.raft_metrics();
    // The term this node leads in, if it leads.
    let mut leading = None;
    loop {
        {
            let m = metrics.borrow_and_update();
            watch.sample(super::progress::Sample::of(sim_ms(), &m));
            let now = (m.current_leader == Some(id)).then_some(m.current_term);
            if now != leading {
                let (term, leads) = match (now, leading) {
                    (Some(term), _) => (term, true),
                    (None, Some(term)) => (term, false),
                    (None, None) => (0, false),
                };
                let mut t = watch.takeovers.lock().unwrap_or_else(|p| p.into_inner());
                t.push(Lead {
                    at: sim_ms(),
                    node: id,
                    term,
                    leads,
                });
                leading = now;
            }
        }
        let changed = tokio::select! {
            changed = metrics.changed() => changed,
            () = asked.notified() => {
                if leading.is_some() {
                    let mut c = watch.coverage.lock().unwrap_or_else(|p| p.into_inner());
                    c.add("fault.stop-leader", 1);
                }
                node.shutdown().await;
                watch.sample(super::progress::Sample::down(sim_ms(), id));
                return down().await;
            }
        };
        if changed.is_err() {
            watch.sample(super::progress::Sample::down(sim_ms(), id));
            let why = node.failed().await;
            let storage = matches!(metrics.borrow().running_state, Err(Fatal::StorageError(_)));
            let checker = if storage {
                Checker::Durability
            } else {
                Checker::Harness
            };
            watch.stopped(&config, checker, format!("stopped: {why}"));
            return down().await;
        }
    }
}

/// A node leads a term at most once: never again after a restart. A
/// leader's disk may lack entries a quorum committed (it replicates while
/// it syncs), so a restarted node must stand anew under a higher term
/// (`LogStore::forget_leadership`); resumed, it would write other entries
/// under log ids its followers already hold. (Two nodes may each lead in
/// one term: openraft's leader id is the term and the node, and votes are
/// ordered by both, docs/architecture.md.)
pub fn leads_each_term_once(takeovers: &[Lead]) -> Vec<Violation> {
    let mut times: std::collections::BTreeMap<(u64, u64), usize> = Default::default();
    for l in takeovers.iter().filter(|l| l.leads) {
        *times.entry((l.node, l.term)).or_default() += 1;
    }
    times
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((node, term), n)| {
            Violation::new(
                Checker::LeadsOnce,
                format!("node {node} took office in term {term} {n} times"),
            )
        })
        .collect()
}

/// Raft's log matching, watched through the run: every so often
/// ([`LogWitness::sample`]) the entries every node holds (in memory: all
/// after its last purge) are read, and two entries of one log id must hold
/// the same bytes, on two nodes or on one node at two moments, and two
/// logs that agree at an index must agree at every index below it that
/// both hold. Entries are purged after each snapshot, so a look at the end
/// alone would miss a mismatch that a later snapshot covered.
#[derive(Default)]
pub struct LogWitness {
    /// Each log id seen, the node it was first seen on and its bytes.
    seen: std::collections::BTreeMap<lockd::raft::LogId, (u64, Vec<u8>)>,
    found: Vec<Violation>,
    said: std::collections::BTreeSet<String>,
}

impl LogWitness {
    /// Read every node's log now and check it.
    pub fn sample(&mut self, latest: &Latest) {
        let logs: Vec<(u64, Log)> = latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, s)| {
                let log = s.log_entries().into_iter().map(|(l, b)| (l.index, (l, b)));
                (*id, log.collect())
            })
            .collect();
        let mut found = logs_match(&logs);
        for (node, log) in &logs {
            for (id, bytes) in log.values() {
                match self.seen.get(id) {
                    None => {
                        self.seen.insert(*id, (*node, bytes.clone()));
                    }
                    Some((first, b)) if b != bytes => found.push(Violation::new(
                        Checker::LogMatching,
                        format!(
                            "node {node} holds another entry under log id {id} than node {first} held"
                        ),
                    )),
                    Some(_) => {}
                }
            }
        }
        for v in found {
            if self.said.insert(v.what.clone()) {
                self.found.push(v);
            }
        }
    }

    /// What it found.
    pub fn finish(self) -> Vec<Violation> {
        self.found
    }
}

/// A node's log: by index, each entry's log id and bytes.
type Log = std::collections::BTreeMap<u64, (lockd::raft::LogId, Vec<u8>)>;

/// The logs given, by node, against each other ([`LogWitness`]).
fn logs_match(logs: &[(u64, Log)]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (i, (a, la)) in logs.iter().enumerate() {
        for (b, lb) in &logs[i + 1..] {
            // Down from the top: once the two agree on a log id, every
            // common index below must agree entirely.
            let mut agreed: Option<u64> = None;
            for (index, (id_a, bytes_a)) in la.iter().rev() {
                let Some((id_b, bytes_b)) = lb.get(index) else {
                    continue;
                };
                let what = if id_a == id_b && bytes_a != bytes_b {
                    Some(format!(
                        "nodes {a} and {b} hold different entries under log id {id_a}"
                    ))
                } else if id_a != id_b {
                    agreed.map(|at| {
                        format!(
                            "nodes {a} and {b} agree at index {at} but hold {id_a} and {id_b} at index {index}"
                        )
                    })
                } else {
                    None
                };
                if let Some(what) = what {
                    out.push(Violation::new(Checker::LogMatching, what));
                    break;
                }
                if id_a == id_b {
                    agreed.get_or_insert(*index);
                }
            }
        }
    }
    out
}

/// The log writer of node `id` in run `seed`: a task whose batches wait
/// for the simulated disk (`Writer::Task`), so that a leader's sync runs
/// beside its replication as in production and a crash can fall while a
/// batch waits. Of the batches, 14 in 20 are written at once, 5 wait one
/// to three ms, 1 a stall of 4 to 12 ms; drawn from the seed, one
/// sequence per node across its restarts.
pub fn log_writer(seed: u64, id: u64) -> Writer {
    let rng = Mutex::new(Rng::new(seed ^ 0xd15c ^ (id << 32)));
    let time: SyncTime = Arc::new(move || {
        let mut r = rng.lock().unwrap_or_else(|p| p.into_inner());
        let ms = match r.below(20) {
            0 => 4 + r.below(9),
            1..=5 => 1 + r.below(3),
            _ => 0,
        };
        Duration::from_millis(ms)
    });
    Writer::Task(time)
}

async fn down() -> turmoil::Result {
    std::future::pending::<()>().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(at: f64, node: u64, term: u64, leads: bool) -> Lead {
        Lead {
            at,
            node,
            term,
            leads,
        }
    }

    fn log(entries: &[(u64, u64, u64, u8)]) -> Log {
        entries
            .iter()
            .map(|&(term, node, index, byte)| {
                let id = openraft::LogId::new(openraft::CommittedLeaderId::new(term, node), index);
                (index, (id, vec![byte]))
            })
            .collect()
    }

    /// Its negative control: the same log id with other bytes, and logs
    /// that agree above a point where they differ, are caught; logs that
    /// part only at their tails are not.
    #[test]
    fn logs_that_do_not_match_are_caught() {
        let a = log(&[(1, 1, 1, 1), (1, 1, 2, 2), (2, 2, 3, 3)]);
        let tails = log(&[(1, 1, 1, 1), (1, 1, 2, 2), (3, 3, 3, 9)]);
        assert!(logs_match(&[(1, a.clone()), (2, tails)]).is_empty());
        let same_id = log(&[(1, 1, 1, 1), (1, 1, 2, 7)]);
        let v = logs_match(&[(1, a.clone()), (2, same_id)]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].checker, Checker::LogMatching);
        let below = log(&[(1, 1, 1, 1), (1, 3, 2, 2), (2, 2, 3, 3)]);
        let v = logs_match(&[(1, a), (2, below)]);
        assert!(v[0].what.contains("agree at index 3"), "{v:?}");
    }

    /// Its negative control, besides the simulation's restore-leader: a
    /// node taking office twice in one term is caught; two nodes in one
    /// term, or one node in the next term, are not.
    #[test]
    fn a_node_taking_office_twice_in_a_term_is_caught() {
        let fine = [
            lead(1.0, 1, 2, true),
            lead(3.0, 3, 2, true),
            lead(5.0, 1, 2, false),
            lead(9.0, 1, 3, true),
        ];
        assert!(leads_each_term_once(&fine).is_empty());
        let resumed = [lead(1.0, 1, 2, true), lead(4.0, 1, 2, true)];
        let v = leads_each_term_once(&resumed);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].checker, Checker::LeadsOnce);
    }
}

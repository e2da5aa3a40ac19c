//! The simulation's nemesis: faults drawn from the seed, several at once,
//! each healed later or at the end.
//!
//! A fault is one of: a partition between two nodes (both ways, or one
//! way), a node isolated from everyone (its peers and the clients), a node
//! cut from its peers only (the clients can still ask it), the clients cut
//! from one node, a link that holds every message until it is
//! released (a slow link: the messages arrive late, in a burst), a node
//! crashed and later restarted on what its disk kept (see [`super::disk`]:
//! unsynced writes lost, the last one torn), a node crashed and restarted
//! at once (a supervisor's restart: a leader is back before its followers
//! stand, its log without what its disk had not synced yet, though a
//! quorum may hold it), and a node's disk made full or failing, which
//! stops the node until it is restarted the same way on a mended disk,
//! a node paused (every link of it held), and a node stopped as on
//! SIGTERM (a leader hands over first) and restarted later. At most
//! [`MAX_ACTIVE`] are active at once; every [`STEP_MS`] range the nemesis
//! either heals one or adds one.
//!
//! The links are kept as one desired state (which directed pairs are cut,
//! which are held) and written to the network whole after each change, so
//! that healing one fault never heals another's link by accident.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::coverage::Coverage;
use super::disk::{Broken, SimDisk, ROOT};
use crate::jepsen::rng::Rng;

mod links;
pub use links::Links;

/// The clients' host.
pub const CLIENTS: &str = "clients";
/// Faults active at once, at most.
pub const MAX_ACTIVE: usize = 3;
/// The nemesis acts every this many ms (at random within the range).
pub const STEP_MS: (u64, u64) = (200, 1200);

/// One fault.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    Partition(u64, u64),
    OneWay {
        from: u64,
        to: u64,
    },
    Isolate(u64),
    /// Cut from the other nodes, still reachable by the clients: a
    /// deposed leader that clients can still ask.
    PeersCut(u64),
    ClientsCut(u64),
    Hold(u64, u64),
    Crash(u64),
    /// Crashed and restarted at once: recorded as a `Crash` that begins
    /// and heals at the same moment, never active.
    Bounce(u64),
    /// The node is paused: nothing in or out until it resumes, then
    /// everything at once (its timers still run: turmoil cannot stop one
    /// host's clock; its lease clock counts a pause as a real one would).
    Pause(u64),
    /// The node's disk breaks; the node stops at its next write or sync.
    Disk(u64, Broken),
    /// The node is asked to stop as on SIGTERM (a leader hands over to a
    /// successor first; every connection ends), and is restarted later on
    /// everything it wrote: a process that exits loses no written byte.
    Stop(u64),
    /// `count` nodes from node `from` on (wrapping) lose power at once
    /// and restart at once, each on what its disk synced: a majority, or
    /// the whole cluster. Recorded as a `Crash` of each that begins and
    /// heals at the same moment, never active.
    PowerLoss {
        from: u64,
        count: u64,
    },
}

impl Fault {
    /// Its coverage mark ([`super::coverage::MARKS`]).
    fn mark(&self) -> &'static str {
        match self {
            Fault::Partition(..) => "fault.partition",
            Fault::OneWay { .. } => "fault.one-way",
            Fault::Isolate(_) => "fault.isolate",
            Fault::PeersCut(_) => "fault.peers-cut",
            Fault::ClientsCut(_) => "fault.clients-cut",
            Fault::Hold(..) => "fault.hold",
            Fault::Crash(_) => "fault.crash",
            Fault::Bounce(_) => "fault.bounce",
            Fault::Pause(_) => "fault.pause",
            Fault::Stop(_) => "fault.stop",
            Fault::Disk(_, Broken::Full) => "fault.disk-full",
            Fault::Disk(_, Broken::SyncFails) => "fault.disk-sync-fails",
            Fault::PowerLoss { .. } => "fault.power-loss-majority",
        }
    }

    /// The node this fault takes down (until healed), if it does.
    fn down(&self) -> Option<u64> {
        match *self {
            Fault::Crash(id) | Fault::Disk(id, _) | Fault::Stop(id) => Some(id),
            _ => None,
        }
    }
}

/// What happened, and when (ms of simulated time).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub at: f64,
    pub fault: Fault,
    pub healed: bool,
}

/// The host name of node `id`.
pub fn host(id: u64) -> String {
    format!("n{id}")
}

/// The data directory of node `id` on the simulated disk.
pub fn node_dir(id: u64) -> PathBuf {
    PathBuf::from(ROOT).join(host(id))
}

/// The nemesis of one run.
pub struct Nemesis {
    rng: Rng,
    disk: Arc<SimDisk>,
    nodes: u64,
    active: Vec<Fault>,
    next_at: Duration,
    pub events: Vec<Event>,
    /// Every state of the links and nodes, in order.
    pub timeline: Vec<Links>,
    /// Links as last written: (from, to) host names.
    cut: BTreeSet<(String, String)>,
    held: BTreeSet<(String, String)>,
    /// Each kind of fault begun ([`super::coverage`]).
    pub coverage: Coverage,
    /// Where the node hosts listen for a stop ([`Fault::Stop`]).
    stop_asks: super::nodes::StopAsks,
}

impl Nemesis {
    pub fn new(
        seed: u64,
        nodes: u64,
        disk: Arc<SimDisk>,
        stop_asks: super::nodes::StopAsks,
    ) -> Nemesis {
        Nemesis {
            rng: Rng::new(seed ^ 0x5eed_fa17),
            disk,
            nodes,
            active: Vec::new(),
            next_at: Duration::from_millis(1000),
            events: Vec::new(),
            timeline: vec![Links::default()],
            cut: BTreeSet::new(),
            held: BTreeSet::new(),
            coverage: Coverage::default(),
            stop_asks,
        }
    }

    /// Act if it is time (`now` is the simulation's elapsed time).
    pub fn tick(&mut self, sim: &mut turmoil::Sim<'_>, now: Duration) {
        if now < self.next_at {
            return;
        }
        let (lo, hi) = STEP_MS;
        self.next_at = now + Duration::from_millis(lo + self.rng.below(hi - lo));
        let heal =
            !self.active.is_empty() && (self.active.len() >= MAX_ACTIVE || self.rng.below(3) == 0);
        if heal {
            let i = self.rng.below(self.active.len() as u64) as usize;
            let f = self.active.remove(i);
            self.end(sim, now, f);
        } else {
            match self.draw() {
                // Only while no node is down already.
                Fault::PowerLoss { from, count }
                    if self.active.iter().all(|a| a.down().is_none()) =>
                {
                    let ids: Vec<u64> = (0..count)
                        .map(|i| 1 + (from - 1 + i) % self.nodes)
                        .collect();
                    let mark = match count == self.nodes {
                        true => "fault.power-loss-all",
                        false => "fault.power-loss-majority",
                    };
                    self.coverage.add(mark, 1);
                    self.bounce(sim, now, &ids);
                }
                Fault::Bounce(id) if !self.takes_down_too_many(&Fault::Crash(id)) => {
                    self.coverage.add("fault.bounce", 1);
                    self.bounce(sim, now, &[id])
                }
                // Begin and end at once, or not at all: never active.
                Fault::PowerLoss { .. } | Fault::Bounce(_) => {}
                f if !self.active.contains(&f) && !self.takes_down_too_many(&f) => {
                    self.coverage.add(f.mark(), 1);
                    self.begin(sim, now, f)
                }
                _ => {}
            }
        }
    }

    /// Crash `ids` at once and restart them at once: recorded as a
    /// `Crash` of each that begins and heals at the same moment.
    fn bounce(&mut self, sim: &mut turmoil::Sim<'_>, now: Duration, ids: &[u64]) {
        for id in ids {
            self.begin(sim, now, Fault::Crash(*id));
        }
        for id in ids {
            let crash = Fault::Crash(*id);
            self.active.retain(|a| *a != crash);
            self.end(sim, now, crash);
        }
    }

    /// Heal everything: every link up, every crashed node restarted.
    pub fn heal(&mut self, sim: &mut turmoil::Sim<'_>, now: Duration) {
        while let Some(f) = self.active.pop() {
            self.end(sim, now, f);
        }
    }

    /// Whether any fault is active.
    pub fn quiet(&self) -> bool {
        self.active.is_empty()
    }

    fn draw(&mut self) -> Fault {
        let n = self.nodes;
        let a = 1 + self.rng.below(n);
        let b = 1 + (a + self.rng.below(n - 1)) % n;
        match self.rng.below(10) {
            0 => Fault::Partition(a.min(b), a.max(b)),
            1 => Fault::OneWay { from: a, to: b },
            2 => Fault::Isolate(a),
            3 => Fault::ClientsCut(a),
            4 => Fault::Hold(a.min(b), a.max(b)),
            5 => Fault::PeersCut(a),
            // One crash in three is a stop instead.
            6 if self.rng.below(3) == 0 => Fault::Stop(a),
            6 => Fault::Crash(a),
            7 => Fault::Pause(a),
            // One bounce in five is a power loss: a majority's, or all.
            8 if self.rng.below(5) == 0 => Fault::PowerLoss {
                from: a,
                count: match self.rng.below(2) {
                    0 => n,
                    _ => n / 2 + 1,
                },
            },
            8 => Fault::Bounce(a),
            _ if self.rng.below(2) == 0 => Fault::Disk(a, Broken::Full),
            _ => Fault::Disk(a, Broken::SyncFails),
        }
    }

    /// Never take down a majority at once (the run would only wait), nor
    /// a node that is down already.
    fn takes_down_too_many(&self, f: &Fault) -> bool {
        let Some(id) = f.down() else { return false };
        let down: BTreeSet<u64> = self.active.iter().filter_map(Fault::down).collect();
        down.contains(&id) || (down.len() as u64 + 1) * 2 >= self.nodes
    }

    fn begin(&mut self, sim: &mut turmoil::Sim<'_>, now: Duration, f: Fault) {
        match f {
            Fault::Crash(id) => {
                sim.crash(host(id));
                self.disk.crash(&node_dir(id), &mut self.rng);
            }
            Fault::Disk(id, how) => self.disk.break_disk(&node_dir(id), how),
            Fault::Stop(id) => super::nodes::ask_to_stop(&self.stop_asks, id),
            _ => {}
        }
        self.record(now, f.clone(), false);
        self.active.push(f);
        self.write_links(sim);
    }

    fn end(&mut self, sim: &mut turmoil::Sim<'_>, now: Duration, f: Fault) {
        match f {
            Fault::Crash(id) => sim.bounce(host(id)),
            // Whether or not the node met the broken disk, it restarts on
            // what the disk kept, mended.
            Fault::Disk(id, _) => {
                sim.crash(host(id));
                self.disk.crash(&node_dir(id), &mut self.rng);
                sim.bounce(host(id));
            }
            // Its host ends (if its stop has not ended it yet: a
            // supervisor's kill after the grace) and starts again; its
            // disk keeps every byte written.
            Fault::Stop(id) => {
                sim.crash(host(id));
                sim.bounce(host(id));
            }
            _ => {}
        }
        self.record(now, f, true);
        self.write_links(sim);
    }

    fn record(&mut self, now: Duration, fault: Fault, healed: bool) {
        self.events.push(Event {
            at: now.as_secs_f64() * 1e3,
            fault,
            healed,
        });
    }

    /// The links the active faults want, written to the network whole:
    /// each pair whose wanted state changed is released (held messages go
    /// on their way), then held, then cut one way or both, as wanted.
    fn write_links(&mut self, sim: &mut turmoil::Sim<'_>) {
        let mut cut = BTreeSet::new();
        let mut held = BTreeSet::new();
        let pair = |a: String, b: String| if a < b { (a, b) } else { (b, a) };
        let both = |set: &mut BTreeSet<(String, String)>, a: String, b: String| {
            set.insert((a.clone(), b.clone()));
            set.insert((b, a));
        };
        for f in &self.active {
            match *f {
                Fault::Partition(a, b) => both(&mut cut, host(a), host(b)),
                Fault::OneWay { from, to } => {
                    cut.insert((host(from), host(to)));
                }
                Fault::Isolate(a) => {
                    for b in (1..=self.nodes).filter(|b| *b != a) {
                        both(&mut cut, host(a), host(b));
                    }
                    both(&mut cut, host(a), CLIENTS.to_string());
                }
                Fault::PeersCut(a) => {
                    for b in (1..=self.nodes).filter(|b| *b != a) {
                        both(&mut cut, host(a), host(b));
                    }
                }
                Fault::ClientsCut(a) => both(&mut cut, host(a), CLIENTS.to_string()),
                Fault::Hold(a, b) => {
                    held.insert(pair(host(a), host(b)));
                }
                Fault::Pause(a) => {
                    for b in (1..=self.nodes).filter(|b| *b != a) {
                        held.insert(pair(host(a), host(b)));
                    }
                    held.insert(pair(host(a), CLIENTS.to_string()));
                }
                Fault::Crash(_)
                | Fault::Bounce(_)
                | Fault::Disk(..)
                | Fault::Stop(_)
                | Fault::PowerLoss { .. } => {}
            }
        }
        let changed: BTreeSet<(String, String)> = self
            .cut
            .symmetric_difference(&cut)
            .map(|(a, b)| pair(a.clone(), b.clone()))
            .chain(self.held.symmetric_difference(&held).cloned())
            .collect();
        for (a, b) in &changed {
            sim.release(a.as_str(), b.as_str());
            if held.contains(&(a.clone(), b.clone())) {
                sim.hold(a.as_str(), b.as_str());
            }
            for (from, to) in [(a, b), (b, a)] {
                if cut.contains(&(from.clone(), to.clone())) {
                    sim.partition_oneway(from.as_str(), to.as_str());
                }
            }
        }
        self.cut = cut;
        self.held = held;
        self.timeline.push(Links {
            at: self.events.last().map_or(0.0, |e| e.at),
            cut: self.cut.clone(),
            held: self.held.clone(),
            // A broken disk may stop its node at any moment: counted as
            // down from the start, which only widens the horizon.
            crashed: self.active.iter().filter_map(Fault::down).collect(),
        });
    }
}

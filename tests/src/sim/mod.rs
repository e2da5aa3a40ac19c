//! The deterministic simulation: a whole cluster of real nodes and their
//! clients in one thread, on simulated time, under one seed.
//!
//! Each node is the real [`lockd::node::Node`] (openraft, the log, the
//! lock service, the wasm engine, the API handlers)
//! started as a [turmoil](https://docs.rs/turmoil) host. What differs from
//! production sits behind seams that production fills with the real thing:
//!
//! * the network: `lockd_client::net`, here turmoil's TCP ([`net`]), which
//!   delays, holds, drops and partitions under the seed;
//! * the disk: `lockd_log::disk`, here a model in memory ([`disk`]) whose
//!   crashes lose what was not synced and tear the last write, and whose
//!   disks fill up or fail to sync;
//! * time: tokio's clock, which turmoil runs paused and advances step by
//!   step (every timer of the node, openraft's included, is tokio's); and
//!   the lease clock (`lockd::node::Seams::lease_clock`), here one per
//!   node that runs fast or slow within the drift bound ([`clock`]);
//! * randomness: openraft's election timeouts come from
//!   `lockd::raft::runtime`'s generator, seeded here; tokio's `select!`
//!   draws from the runtime's seed (`tokio_unstable`, see
//!   `.cargo/config.toml`), which turmoil derives from the simulation's;
//! * the log's writer: a task on the node's runtime instead of a thread
//!   of its own (`lockd::node::Seams`), so no thread's timing enters the
//!   run; its batches wait for the simulated disk for a time drawn from
//!   the seed, so a leader replicates while it syncs, as in production,
//!   and a crash can fall while a batch waits.
//!
//! The clients are the fault-injection runs' own ([`crate::jepsen`]):
//! workers on a fenced register, a keeper that renews one lock through
//! every fault, waiters after healing; and the same checkers judge the
//! history, with one difference: the simulation knows exactly when each
//! leader took over, so the linearizability search's upper bound on a
//! lease's end is re-armed only by a real takeover, and a lease that ends
//! too late is caught.
//!
//! Why turmoil rather than madsim: turmoil simulates the network and
//! time under an unchanged tokio, so the node's code and its dependencies
//! (openraft, hyper, axum, rustls) run as they are; madsim replaces tokio
//! itself at build time, which would mean a second build of everything.
//!
//! # Layout
//!
//! * [`net`]: turmoil's network behind the seam.
//! * [`disk`]: the simulated disk behind the seam.
//! * [`clock`]: each node's drifting lease clock behind the seam.
//! * [`log_trial`]: the log alone on that disk, crashed at random.
//! * [`faults`]: the nemesis (several faults at once, healed at random).
//! * [`control`]: the broken variants (negative controls), switched per
//!   run without a rebuild.
//! * `run`: one seed's run: the hosts, the steps, the checks.
//! * `nodes`: a node's host (takeovers recorded, stops judged).
//! * `clients`: the clients' host (workload, upgrade, waiters, final
//!   reads, convergence).
//! * `horizon`: the latest a lease may end, from what the run saw.
//! * [`progress`]: whether the cluster committed while it could.
//! * [`scenario`]: scripted runs, one fault placed on purpose;
//!   [`stale_leader`]: one more, a cut-off leader asked for a key;
//!   [`leader_bounce`]: a leader restarted after its followers committed
//!   what its disk had not written.
//! * [`operator`]: membership changes and shadows during the faults.
//! * [`coverage`]: what a run went through, counted.

pub mod applied;
mod clients;
pub mod clock;
pub mod control;
pub mod coverage;
pub mod disk;
mod engine;
pub mod faults;
pub mod horizon;
pub mod leader_bounce;
pub mod log_trial;
pub mod net;
mod nodes;
pub mod operator;
pub mod progress;
pub mod renewer;
mod run;
pub mod scenario;
pub mod stale_leader;
mod swaps;

use std::time::Duration;

pub use control::Control;
pub use coverage::Coverage;
pub use engine::{open_module_cache, MODULE_CACHE_VAR};
use run::{ELECTION_MS, HEARTBEAT_MS};

use crate::jepsen::check::Violation;

/// What one run does.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub nodes: u64,
    pub clients: usize,
    pub keys: usize,
    /// How long the faults go on (simulated time).
    pub duration: Duration,
    pub lease_ms: u64,
    /// Whether the nemesis acts at all.
    pub faults: bool,
    /// The longest a message takes on a healthy link, ms.
    pub max_latency_ms: u64,
    /// Entries applied since the last snapshot that trigger the next.
    pub snapshot_threshold: u64,
    /// The nodes' heartbeat and election timeout.
    pub timing: Timing,
    /// TLS on every connection (peers, clients) and authentication: the
    /// workers present the `worker` token, the operator the `admin`
    /// certificate (`crate::secure`).
    pub secure: bool,
    /// Clients of every kind (mutexes, readers and writers, semaphore
    /// slots, all retry-safe) on the 0.2 reference module, put in by a hot
    /// upgrade before the clients start; else mutexes on the built-in one.
    pub mixed: bool,
    /// With `mixed`: world 0.3's built-in module instead of the 0.2 one,
    /// and clients that also hold keys in sessions and campaign in
    /// elections (`crate::jepsen::sessions`).
    pub sessions: bool,
    /// Upgrade the module to version 2 (`guest-sm-world01-v2`, world 0.1) this
    /// long into the faults, retried until it is in; every node must end
    /// on it. Not with `mixed`.
    pub upgrade_at: Option<Duration>,
    /// With `upgrade_at`: upgrade to the chaos fixture instead (version 1
    /// and a trap on the key `chaos:trap`), and send grants of that key
    /// through the faults: none may be granted, and every node must
    /// record the same module failures (trap isolation).
    pub hostile: bool,
    /// With `upgrade_at`: not hostile, the upgrade goes to the 0.2
    /// reference module and, once in, the operator returns to the module
    /// before (`lockctl upgrade --rollback`) during the faults; hostile,
    /// the upgrade chooses `on_failure` `rollback`, so the cluster leaves
    /// the chaos module on its own once it is out of service. Either way
    /// every node must end on the built-in module.
    pub rollback: bool,
    /// With `upgrade_at`, not hostile, no rollback: this node runs with
    /// `--max-module-bytes` one byte below the upgrade's module, so it
    /// refuses it at the quorum pre-check and cannot run it. Either the
    /// module stays out (its refusal blocks it, or it leads and refuses
    /// the upload) and every node ends on the built-in module, or it goes
    /// in and this node stops before the swap, saying so, while the others
    /// converge on it.
    pub refusing: Option<u64>,
    /// With `refusing`: the upgrade asks for `quorum` (a refusal does not
    /// block it).
    pub quorum: bool,
    /// What the operator does this long into the faults: a voter removed
    /// and added back, or a shadow started and stopped.
    pub operation: Option<(Duration, operator::Operation)>,
    /// A broken variant to run instead of the correct service.
    pub control: Option<Control>,
    /// The nodes' log segment size (`--segment-bytes`): small in two
    /// seeds of three, so that logs rotate (each segment cut after its
    /// last record, its padding gone, before the next is made) and purge
    /// whole segments behind snapshots under the crashes.
    pub segment_bytes: u64,
    /// turmoil runs the hosts of each step in an order the seed draws
    /// (nodes and clients), instead of always the same: in one seed of
    /// two, so that a race between what two hosts do in one step is
    /// met both ways. The order comes from the simulation's own random
    /// numbers, so a seed still replays byte for byte.
    pub random_order: bool,
    /// One in this many rounds a worker's process dies mid-acquire or
    /// holding (0: never; [`crate::jepsen::RunConfig::crash_one_in`]):
    /// one in 20 in one seed of two.
    pub crash_one_in: u64,
    /// One in this many mutex rounds goes over HTTP (0: never;
    /// [`crate::jepsen::RunConfig::http_one_in`]): one in 4 in one seed of
    /// two.
    pub http_one_in: u64,
}

impl SimConfig {
    /// A run of `seed` with the defaults: 3 nodes (5 for one seed in
    /// four), clients, keys, leases and snapshots as the seed draws them
    /// ([`Knobs`]) and so are the Raft timings, 12 s of faults; every even seed mixed,
    /// one in two of them (those without an operator) on world 0.3 with
    /// sessions and elections;
    /// one odd seed in two upgrades the module during the faults (one of
    /// those in two to a module that traps on a key it is then sent; one
    /// in two of each kind returns to the module before, see
    /// [`SimConfig::rollback`]; one plain upgrade in two with a node that
    /// cannot run its module, see [`SimConfig::refusing`]); the
    /// operator removes a voter and adds it back in every five-node run,
    /// and runs a shadow of the active module in every other mixed run;
    /// log segments of 4 KiB, 64 KiB or the default 64 MiB by turns
    /// ([`SimConfig::segment_bytes`]); hosts run in a drawn order in
    /// one seed of two ([`SimConfig::random_order`]); workers' processes
    /// die now and then in one seed of two ([`SimConfig::crash_one_in`]),
    /// and a quarter of the mutex rounds go over HTTP in one seed of two
    /// ([`SimConfig::http_one_in`]).
    pub fn seed(seed: u64) -> SimConfig {
        let knobs = Knobs::draw(seed);
        SimConfig {
            seed,
            nodes: if seed % 4 == 3 { 5 } else { 3 },
            clients: knobs.clients,
            keys: knobs.keys,
            duration: Duration::from_secs(12),
            lease_ms: knobs.lease_ms,
            faults: true,
            max_latency_ms: 10,
            snapshot_threshold: knobs.snapshot_threshold,
            timing: knobs.timing,
            secure: knobs.secure,
            mixed: seed.is_multiple_of(2),
            sessions: seed.is_multiple_of(4),
            upgrade_at: (seed % 4 == 1).then(|| Duration::from_millis(2000 + seed % 7 * 1000)),
            hostile: seed % 8 == 5,
            rollback: seed % 16 >= 8,
            refusing: (seed % 32 == 17).then_some(1 + seed / 64 % 3),
            quorum: seed % 64 == 17,
            operation: operation(seed),
            control: None,
            segment_bytes: match seed / 3 % 3 {
                0 => 4 << 10,
                1 => 64 << 10,
                _ => lockd::config::NodeConfig::default().raft.segment_bytes,
            },
            random_order: seed / 9 % 2 == 1,
            crash_one_in: if seed / 5 % 2 == 1 { 20 } else { 0 },
            http_one_in: if seed / 11 % 2 == 1 { 4 } else { 0 },
        }
    }
}

/// The settings a seed draws for itself, each within its range, from a
/// generator of its own (so they vary independently of the seed's other
/// choices, which follow its residues): how many clients on how many
/// keys, how long their leases, how often snapshots. Seed 0 of the
/// generator's stream is never special: every seed draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// 2 to 6 workers.
    pub clients: usize,
    /// 1 to 4 keys (one key: every worker contends).
    pub keys: usize,
    /// 400, 800, 1 500 or 3 000 ms: from half an election timeout (a
    /// lease shorter than a takeover) to several.
    pub lease_ms: u64,
    /// A snapshot every 50, 100 or 400 applied entries.
    pub snapshot_threshold: u64,
    /// An election timeout of 200, 400 or 800 ms, a heartbeat of a fifth
    /// or an eighth of it.
    pub timing: Timing,
    /// In one run of four: TLS between everyone and authentication on.
    pub secure: bool,
}

/// The nodes' Raft timing in a run, and the bounds the checkers derive
/// from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub heartbeat_ms: u64,
    pub election_ms: u64,
}

impl Timing {
    /// What scripted runs use (their bounds were measured with it).
    pub const SCRIPTED: Timing = Timing {
        heartbeat_ms: HEARTBEAT_MS,
        election_ms: ELECTION_MS,
    };

    /// The longest replication to a follower whose link is back may take
    /// to resume, ms: the stall bound on a peer call (an election
    /// timeout, checked every eighth of it) and a heartbeat's backoff.
    pub const fn resume_ms(self) -> f64 {
        (self.election_ms * 9 / 8 + self.heartbeat_ms) as f64
    }

    /// How long a healthy majority may go without a leader, or with an
    /// entry waiting, ms: five election timeouts.
    pub const fn progress_bound_ms(self) -> f64 {
        (self.election_ms * 5) as f64
    }
}

impl Knobs {
    pub fn draw(seed: u64) -> Knobs {
        let mut rng = crate::jepsen::rng::Rng::new(seed ^ 0x6b6e_6f62);
        Knobs {
            clients: 2 + rng.below(5) as usize,
            keys: 1 + rng.below(4) as usize,
            lease_ms: [400, 800, 1500, 3000][rng.below(4) as usize],
            snapshot_threshold: [50, 100, 400][rng.below(3) as usize],
            timing: {
                let election_ms = [200, 400, 800][rng.below(3) as usize];
                Timing {
                    heartbeat_ms: election_ms / [5, 8][rng.below(2) as usize],
                    election_ms,
                }
            },
            secure: rng.below(4) == 0,
        }
    }
}

/// The operator's part in the run of `seed`, and when it begins.
fn operation(seed: u64) -> Option<(Duration, operator::Operation)> {
    let at = Duration::from_millis(1000 + seed % 5 * 1000);
    match seed % 4 {
        3 => Some((
            at,
            operator::Operation::Rejoin {
                node: 1 + seed / 4 % 5,
            },
        )),
        2 => Some((
            at,
            operator::Operation::Shadow {
                module: crate::fixtures::LOCK_SM_WORLD02,
            },
        )),
        _ => None,
    }
}

/// What one run saw.
#[derive(Debug)]
pub struct SimReport {
    pub seed: u64,
    pub ops: usize,
    pub granted: usize,
    /// Faults begun and healed.
    pub faults: usize,
    /// Leader takeovers the nodes reported.
    pub takeovers: usize,
    pub keeper_renewals: u64,
    /// Simulated time the run took.
    pub simulated: Duration,
    /// The history (operations, then faults), one line each: two runs of
    /// one seed produce the same bytes.
    pub history: String,
    pub violations: Vec<Violation>,
    /// What it went through ([`coverage`]).
    pub coverage: Coverage,
}

/// How a run's output names each violation: a line `violation [Checker]
/// what`. The simulate binary prints them; [`violations_in`] and
/// [`checker_of`] are the one reader of them back.
pub const VIOLATION_LINE: &str = "violation ";

/// The violations in a run's output (`[Checker] what`, one per line).
pub fn violations_in(out: &str) -> Vec<&str> {
    out.lines()
        .filter_map(|l| l.strip_prefix(VIOLATION_LINE))
        .collect()
}

/// The checker a violation from [`violations_in`] names.
pub fn checker_of(violation: &str) -> Option<&str> {
    violation.strip_prefix('[')?.split(']').next()
}

/// The command that replays the run of `seed`.
pub fn replay_command(seed: u64) -> String {
    format!("cargo run --release -p lockd-tests --bin simulate -- --seed {seed}")
}

/// Run one seed.
pub fn run(cfg: &SimConfig) -> SimReport {
    run::run(cfg)
}

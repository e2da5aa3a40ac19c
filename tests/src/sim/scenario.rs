//! Scripted runs: one fault, placed on purpose, and a figure measured.
//!
//! [`snapshot_into_partition`]: a leader starts sending a snapshot to a
//! follower on a connection a partition has just made dead; the partition
//! heals at once while the third node is cut off, so the leader and that
//! follower are the only majority. How soon after the heal does the
//! follower hold the leader's state and does a write commit? Before the
//! stall bound on peer calls, the send waited out a 10 s deadline on the
//! dead connection and nothing committed meanwhile (simulation seeds 33452
//! and 55569).
//!
//! [`scripted`] runs such a script beside three nodes, with [`Hands`] to
//! crash nodes and slow their disks; others are in [`super::stale_leader`]
//! and [`super::leader_bounce`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockd::node::Seams;
use lockd::raft::log_store::{SyncTime, Writer};
use lockd_client::admin::Http;
use lockd_proto::{Role, Status};

use super::engine::engine;
use super::faults::{host, node_dir};
use super::horizon::RESUME_MS;
use super::nodes::{node, Watch};
use super::run::{node_addr, node_config, sim_ms, simulation, HEARTBEAT_MS};
use super::{Control, SimConfig};
use crate::jepsen::workload::Target;

/// The longest the follower may take to catch up after the heal:
/// replication resumes within `RESUME_MS` (the dead connection is dropped
/// once quiet for the stall bound, then a heartbeat's backoff at most),
/// and the small snapshot's transfer, install and the write's commit take
/// a few round trips: three heartbeats' time.
pub const CATCH_UP_BOUND_MS: f64 = RESUME_MS + (HEARTBEAT_MS * 3) as f64;

/// How long the script waits for anything before it gives up (simulated).
const PATIENCE: Duration = Duration::from_secs(20);

/// What the run measured, ms of simulated time.
#[derive(Clone, Debug, Default)]
pub struct CatchUp {
    /// The leader, the follower the snapshot went to, the node cut off.
    pub nodes: (u64, u64, u64),
    pub healed_at: f64,
    /// The follower applied what the leader had applied at the heal.
    pub caught_up_at: Option<f64>,
    /// A write made after the heal was acknowledged.
    pub committed_at: Option<f64>,
    /// Why the script stopped early, if it did.
    pub error: Option<String>,
}

impl CatchUp {
    /// The follower's catch-up after the heal, ms, if it caught up.
    pub fn caught_up_ms(&self) -> Option<f64> {
        self.caught_up_at.map(|t| t - self.healed_at)
    }
}

/// Run the scenario (with `control`, a broken variant) and report it.
pub fn snapshot_into_partition(control: Option<Control>) -> CatchUp {
    let cfg = SimConfig {
        snapshot_threshold: 20,
        ..scripted_config(control)
    };
    let (mut out, error) = scripted(&cfg, |r, _| async move { script(&r).await });
    out.error = out.error.or(error);
    out
}

/// The configuration scripted runs share: three nodes of seed 2, none
/// refusing a module, with `control` (a broken variant) or none.
pub(super) fn scripted_config(control: Option<Control>) -> SimConfig {
    SimConfig {
        nodes: 3,
        refusing: None,
        control,
        // Their figures were measured with the default segments, 4
        // clients on 2 keys, leases of 800 ms and a snapshot every 100
        // entries.
        segment_bytes: lockd::config::NodeConfig::default().raft.segment_bytes,
        random_order: false,
        crash_one_in: 0,
        http_one_in: 0,
        clients: 4,
        keys: 2,
        lease_ms: 800,
        snapshot_threshold: 100,
        timing: super::Timing::SCRIPTED,
        secure: false,
        ..SimConfig::seed(2)
    }
}

/// What a script may do to the nodes beyond the network (which turmoil's
/// own functions reach): crash one and restart it at once, and set how
/// long each node's disk takes to sync a batch.
#[derive(Clone)]
pub(super) struct Hands {
    bounce: Arc<Mutex<Vec<u64>>>,
    sync_ms: Arc<Vec<AtomicU64>>,
}

impl Hands {
    fn new(nodes: u64) -> Hands {
        Hands {
            bounce: Arc::default(),
            sync_ms: Arc::new((0..=nodes).map(|_| AtomicU64::new(0)).collect()),
        }
    }

    /// Crash node `id` before the simulation's next step (what its disk
    /// had not synced is lost) and restart it at once.
    pub(super) fn bounce(&self, id: u64) {
        self.bounce
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id);
    }

    /// From its next batch on, node `id`'s disk takes `ms` to sync one.
    pub(super) fn set_sync_ms(&self, id: u64, ms: u64) {
        self.sync_ms[id as usize].store(ms, Ordering::Relaxed);
    }

    fn log_writer(&self, id: u64) -> Writer {
        let all = self.sync_ms.clone();
        let time: SyncTime =
            Arc::new(move || Duration::from_millis(all[id as usize].load(Ordering::Relaxed)));
        Writer::Task(time)
    }

    fn take_bounces(&self) -> Vec<u64> {
        std::mem::take(&mut *self.bounce.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Run the script `make` returns as the one client beside the nodes of
/// `cfg` (3), until it ends; what it wrote into its report, and why it or
/// the simulation stopped early, if it did.
pub(super) fn scripted<R, Fut>(
    cfg: &SimConfig,
    make: impl FnOnce(Arc<Mutex<R>>, Hands) -> Fut,
) -> (R, Option<String>)
where
    R: Clone + Default + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + 'static,
{
    let report = Arc::new(Mutex::new(R::default()));
    let hands = Hands::new(cfg.nodes);
    let script = make(report.clone(), hands.clone());
    let error = run_script(cfg, script, &hands);
    let out = report.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (out, error)
}

fn run_script(
    cfg: &SimConfig,
    script: impl std::future::Future<Output = Result<(), String>> + 'static,
    hands: &Hands,
) -> Option<String> {
    let (mut sim, disk) = simulation(cfg);
    for id in 1..=cfg.nodes {
        let config = node_config(cfg, id);
        let disk = disk.clone();
        let log_writer = hands.log_writer(id);
        sim.host(host(id), move || {
            let seams = Seams {
                log_writer: log_writer.clone(),
                engine: Some(engine()),
                lease_clock: None,
                applied: None,
            };
            let watch = Watch {
                takeovers: Arc::default(),
                samples: Arc::default(),
                stops: Arc::default(),
                disk: disk.clone(),
                latest: Arc::default(),
                coverage: Arc::default(),
                stop_asks: Arc::default(),
            };
            node(config.clone(), seams, 0, watch)
        });
    }
    let error = Arc::new(Mutex::new(None));
    let done = Arc::new(AtomicBool::new(false));
    let (e, d) = (error.clone(), done.clone());
    sim.client(super::faults::CLIENTS, async move {
        if let Err(why) = script.await {
            *e.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        }
        d.store(true, Ordering::Relaxed);
        Ok(())
    });
    let mut rng = crate::jepsen::rng::Rng::new(cfg.seed ^ 0xb0b0);
    while !done.load(Ordering::Relaxed) {
        for id in hands.take_bounces() {
            sim.crash(host(id));
            disk.crash(&node_dir(id), &mut rng);
            sim.bounce(host(id));
        }
        if let Err(why) = sim.step() {
            return Some(why.to_string());
        }
    }
    let why = error.lock().unwrap_or_else(|p| p.into_inner()).take();
    why
}

async fn script(report: &Mutex<CatchUp>) -> Result<(), String> {
    let target = Target {
        endpoints: (1..=3).map(node_addr).collect(),
        credentials: Default::default(),
        admin: None,
    };
    let client = target.client(Duration::from_secs(5), Duration::from_secs(1));
    let http = Http::with_timeout(Duration::from_secs(1));
    let leader = leader(&http).await?;
    let (l, f, o) = (leader, leader % 3 + 1, (leader + 1) % 3 + 1);
    report.lock().unwrap_or_else(|p| p.into_inner()).nodes = (l, f, o);

    // A first snapshot to the follower, so that its snapshot connection
    // is open before the next partition.
    turmoil::partition(host(l), host(f));
    behind(&client, &http, l, f, "first").await?;
    turmoil::repair(host(l), host(f));
    until("the first snapshot installed", || async {
        let s = status(&http, f).await.ok()?;
        (s.snapshots_installed >= 1).then_some(())
    })
    .await?;

    // The second goes into the partition, on that connection.
    turmoil::partition(host(l), host(f));
    behind(&client, &http, l, f, "second").await?;
    until("a snapshot send under way", || async {
        (in_flight(&http, l).await? >= 1).then_some(())
    })
    .await?;
    let target_index = status(&http, l).await?.applied_index;
    turmoil::partition(host(o), host(l));
    turmoil::partition(host(o), host(f));
    turmoil::repair(host(l), host(f));
    let healed = sim_ms();
    report.lock().unwrap_or_else(|p| p.into_inner()).healed_at = healed;

    let write = async {
        let key = "after-the-heal";
        let g = client
            .acquire(key, Duration::from_secs(5), Duration::ZERO)
            .await;
        g.map(|_| sim_ms()).map_err(|e| e.to_string())
    };
    let caught_up = until("the follower caught up", || async {
        let s = status(&http, f).await.ok()?;
        (s.applied_index >= target_index).then(sim_ms)
    });
    let (write, caught_up) = tokio::join!(write, caught_up);
    let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
    r.committed_at = write.ok();
    r.caught_up_at = caught_up.ok();
    Ok(())
}

/// Write until the leader `l` has purged its log past what follower `f`
/// holds (`f` is cut off from `l`), so that `l` must send it a snapshot.
async fn behind(
    client: &lockd_client::Client,
    http: &Http,
    l: u64,
    f: u64,
    which: &str,
) -> Result<(), String> {
    let follower_last = status(http, f).await?.last_log_index;
    for i in 0..400 {
        let purged = status(http, l).await?.purged_index.unwrap_or(0);
        if purged > follower_last {
            return Ok(());
        }
        let key = format!("{which}-{i}");
        let g = client
            .acquire(&key, Duration::from_secs(30), Duration::ZERO)
            .await
            .map_err(|e| format!("a write before the {which} snapshot: {e}"))?;
        client
            .release(&key, g.token())
            .await
            .map_err(|e| format!("a release before the {which} snapshot: {e}"))?;
    }
    Err(format!("the leader never purged past node {f}'s log"))
}

/// The node of the three that says it leads, once one does.
pub(super) async fn leader(http: &Http) -> Result<u64, String> {
    until("a leader", || async {
        for id in 1..=3 {
            if let Ok(s) = status(http, id).await {
                if s.role == Role::Leader {
                    return Some(id);
                }
            }
        }
        None
    })
    .await
}

pub(super) async fn status(http: &Http, id: u64) -> Result<Status, String> {
    http.get_json(&node_addr(id), "/v1/status")
        .await
        .map_err(|e| format!("status of node {id}: {e}"))
}

/// The leader's snapshot sends under way, from its metrics.
async fn in_flight(http: &Http, id: u64) -> Option<u64> {
    let text = http.get_text(&node_addr(id), "/metrics").await.ok()?;
    text.lines()
        .find(|l| l.starts_with("lockd_raft_snapshot_sends_in_flight"))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

/// Poll `what` every few ms of simulated time until it answers, for at
/// most [`PATIENCE`].
pub(super) async fn until<T, F, Fut>(what: &str, mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let give_up = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= give_up {
            return Err(format!("{what}: not within {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
}

//! One seed's run: the cluster and the clients as turmoil hosts, the
//! nemesis between steps, then heal, liveness, the final reads and the
//! checkers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockd::config::NodeConfig;
use lockd::node::{Node, Seams};
use lockd::raft::log_store::Writer;
use lockd_core::engine::WasmEngine;

use super::faults::{host, Links, Nemesis, CLIENTS};
use super::{SimConfig, SimReport};
use crate::jepsen::check::{self, Checker, Final, Violation};
use crate::jepsen::history::{History, Ret};
use crate::jepsen::lin::Horizon;
use crate::jepsen::register::FencedRegister;
use crate::jepsen::workload::{self, Keeper, Target};
use crate::jepsen::RunConfig;

/// How far simulated time moves per step: the granularity of message
/// delivery (timers inside a host fire at their exact times).
const TICK: Duration = Duration::from_millis(2);
/// Every node's port.
const PORT: u16 = 7000;
pub const HEARTBEAT_MS: u64 = 50;
pub const ELECTION_MS: u64 = 400;
/// After healing, the clients go on this long before they stop.
const SETTLE: Duration = Duration::from_secs(3);
/// The most simulated time a run may take before it is called stuck.
const LIMIT: Duration = Duration::from_secs(300);

/// Milliseconds of simulated time since the run started.
fn sim_ms() -> f64 {
    turmoil::sim_elapsed().map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

fn node_config(cfg: &SimConfig, id: u64, dir: &Path) -> NodeConfig {
    let addr = |i: u64| format!("{}:{PORT}", host(i));
    NodeConfig {
        id,
        addr: addr(id),
        listen: Some(format!("0.0.0.0:{PORT}")),
        data_dir: dir.join(host(id)),
        initial_cluster: (1..=cfg.nodes).map(|i| (i, addr(i))).collect(),
        heartbeat_ms: HEARTBEAT_MS,
        election_timeout_ms: ELECTION_MS,
        // Snapshots and log purges happen during the faults.
        snapshot_threshold: cfg.snapshot_threshold,
        keep_after_snapshot: 20,
        // The simulation's links are not a network anyone else is on.
        insecure: true,
        ..NodeConfig::default()
    }
}

thread_local! {
    /// One wasm engine for every node this thread simulates, with its
    /// compiled-module cache in a directory removed with the thread: the
    /// built-in module is compiled once per thread, not once per node.
    static ENGINE: (Arc<WasmEngine>, tempfile::TempDir) = {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let engine = WasmEngine::new(NodeConfig::default().engine, Some(dir.path().join("cache")))
            .expect("the wasm engine");
        (Arc::new(engine), dir)
    };
}

fn engine() -> Arc<WasmEngine> {
    ENGINE.with(|(e, _)| e.clone())
}

/// What the clients' host hands back.
#[derive(Default)]
struct Outcome {
    violations: Vec<Violation>,
    finals: BTreeMap<String, Final>,
    keeper_renewals: u64,
    served: usize,
}

/// Leader takeovers as the nodes saw them: (ms, node, term).
type Takeovers = Arc<Mutex<Vec<(f64, u64, u64)>>>;

pub fn run(cfg: &SimConfig) -> SimReport {
    super::net::install();
    super::control::set(cfg.control);
    lockd::raft::runtime::seed(cfg.seed);
    lockd_client::id::seed(cfg.seed);
    lockd::blocking::inline_on_this_thread(true);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut sim = turmoil::Builder::new()
        .simulation_duration(LIMIT)
        .tick_duration(TICK)
        // turmoil's accept queue and receive buffers, in segments: a held
        // link releases every connection attempt of its hold at once.
        .tcp_capacity(1 << 14)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(cfg.max_latency_ms))
        .rng_seed(cfg.seed)
        .build();
    let takeovers: Takeovers = Arc::default();
    for id in 1..=cfg.nodes {
        let config = node_config(cfg, id, dir.path());
        let takeovers = takeovers.clone();
        sim.host(host(id), move || {
            let (config, takeovers) = (config.clone(), takeovers.clone());
            async move {
                let seams = Seams {
                    log_writer: Writer::Inline,
                    engine: Some(engine()),
                };
                let node = Node::start_with(config, seams).await?;
                let mut metrics = node.raft_metrics();
                let mut term = 0;
                loop {
                    {
                        let m = metrics.borrow_and_update();
                        if m.current_leader == Some(id) && m.current_term != term {
                            term = m.current_term;
                            let mut t = takeovers.lock().unwrap_or_else(|p| p.into_inner());
                            t.push((sim_ms(), id, term));
                        }
                    }
                    if metrics.changed().await.is_err() {
                        let why = node.failed().await;
                        return Err(format!("node {id} stopped: {why}").into());
                    }
                }
            }
        });
    }

    let history = Arc::new(History::with_clock(sim_ms));
    let register = Arc::new(FencedRegister::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let outcome: Arc<Mutex<Outcome>> = Arc::default();
    let target = Target {
        endpoints: (1..=cfg.nodes)
            .map(|i| format!("{}:{PORT}", host(i)))
            .collect(),
        credentials: Default::default(),
    };
    sim.client(
        CLIENTS,
        clients(
            cfg.clone(),
            target,
            history.clone(),
            register.clone(),
            stop.clone(),
            outcome.clone(),
        ),
    );

    let mut nemesis = Nemesis::new(cfg.seed, cfg.nodes);
    let mut healed_at = None;
    let mut harness = Vec::new();
    loop {
        let now = sim.elapsed();
        match healed_at {
            None if now < cfg.duration => {
                if cfg.faults {
                    nemesis.tick(&mut sim, now);
                }
            }
            None => {
                nemesis.heal(&mut sim, now);
                healed_at = Some(now);
            }
            Some(at) if now >= at + SETTLE => stop.store(true, Ordering::Relaxed),
            Some(_) => {}
        }
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                harness.push(Violation::new(Checker::Harness, e.to_string()));
                break;
            }
        }
    }

    let mut out = std::mem::take(&mut *outcome.lock().unwrap_or_else(|p| p.into_inner()));
    let mut violations = harness;
    violations.append(&mut out.violations);
    let ops = history.ops();
    let regs = register.snapshot();
    let takeovers = takeovers.lock().unwrap_or_else(|p| p.into_inner()).clone();
    violations.extend(check::lost_updates(&regs));
    violations.extend(check::tokens(&ops));
    violations.extend(check::linearizable(
        &ops,
        &horizon(&takeovers, &nemesis.timeline, cfg.nodes),
    ));
    let holdings = history.holdings();
    violations.extend(check::holders(&holdings));
    violations.extend(check::no_denials(&ops));
    violations.extend(check::no_refusal_inside_lease(&ops));
    violations.extend(check::survived(&ops, &out.finals));
    if out.served != cfg.clients {
        violations.push(Violation::new(
            Checker::Liveness,
            format!(
                "after healing only {} of {} waiting clients were served",
                out.served, cfg.clients
            ),
        ));
    }
    let mut text = String::new();
    for op in &ops {
        text.push_str(&format!("{op:?}\n"));
    }
    for e in &nemesis.events {
        text.push_str(&format!("{e:?}\n"));
    }
    for (at, node, term) in &takeovers {
        text.push_str(&format!(
            "Takeover {{ at: {at}, node: {node}, term: {term} }}\n"
        ));
    }
    SimReport {
        seed: cfg.seed,
        ops: ops.len(),
        granted: ops
            .iter()
            .filter(|o| matches!(o.ret, Ret::Granted(_)))
            .count(),
        faults: nemesis.events.len(),
        takeovers: takeovers.len(),
        keeper_renewals: out.keeper_renewals,
        simulated: sim.elapsed(),
        history: text,
        violations,
    }
}

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
fn horizon(takeovers: &[(f64, u64, u64)], timeline: &[Links], nodes: u64) -> Horizon {
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

/// The clients' host: the keeper and the workers until `stop`, then the
/// waiters, the final reads and the convergence check.
async fn clients(
    cfg: SimConfig,
    target: Target,
    history: Arc<History>,
    register: Arc<FencedRegister>,
    stop: Arc<AtomicBool>,
    outcome: Arc<Mutex<Outcome>>,
) -> turmoil::Result {
    let run = RunConfig {
        nodes: cfg.nodes,
        clients: cfg.clients,
        keys: cfg.keys,
        seed: cfg.seed,
        lease_ms: cfg.lease_ms,
        secure: false,
        mixed: cfg.mixed,
        ..RunConfig::default()
    };
    let mut violations = Vec::new();
    if cfg.mixed {
        upgrade(&target, crate::fixtures::LOCK_SM_WORLD02).await?;
    }
    // Its lease outlasts every fault: several at once may leave the
    // cluster without a quorum for most of the faults' time. An acquire
    // whose outcome is unknown (the first elections are still settling)
    // may have left its key held: the next try takes another key.
    let mut keeper = Err(String::new());
    for attempt in 0..5 {
        let key = format!("keeper{attempt}");
        match Keeper::take_for(target.clone(), &key, cfg.duration * 4).await {
            Ok(k) => {
                keeper = Ok(k);
                break;
            }
            Err(e) => keeper = Err(format!("the keeper's lock, before any fault: {e}")),
        }
    }
    let keeper = keeper?;
    let upgraded = cfg.upgrade_at.map(|at| {
        let target = target.clone();
        tokio::spawn(async move {
            tokio::time::sleep(at).await;
            upgrade(&target, crate::fixtures::LOCK_SM_V2).await
        })
    });
    let keeper = tokio::spawn(keeper.hold(stop.clone()));
    let workers: Vec<_> = (0..cfg.clients)
        .map(|id| {
            tokio::spawn(workload::worker(
                id,
                run.clone(),
                target.clone(),
                history.clone(),
                register.clone(),
                stop.clone(),
            ))
        })
        .collect();
    for (id, w) in workers.into_iter().enumerate() {
        if let Err(e) = w.await {
            violations.push(Violation::new(
                Checker::Harness,
                format!("client {id} failed: {e}"),
            ));
        }
    }
    let keeper_renewals = match keeper.await {
        Ok((renewals, v)) => {
            violations.extend(v);
            renewals
        }
        Err(e) => {
            violations.push(Violation::new(
                Checker::Harness,
                format!("the keeper failed: {e}"),
            ));
            0
        }
    };
    if let Some(u) = upgraded {
        match u.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => violations.push(Violation::new(Checker::Harness, e)),
            Err(e) => violations.push(Violation::new(
                Checker::Harness,
                format!("the upgrade task failed: {e}"),
            )),
        }
    }
    let bound = Duration::from_millis(cfg.lease_ms * 2 + 4 * ELECTION_MS + 3000);
    let (served, v) = workload::waiters(
        cfg.clients,
        cfg.keys,
        target.clone(),
        history.clone(),
        bound,
    )
    .await;
    violations.extend(v);
    let finals = final_state(&target, &history).await;
    let module = match (cfg.mixed, cfg.upgrade_at) {
        (true, _) => Some(crate::fixtures::LOCK_SM_WORLD02),
        (false, Some(_)) => Some(crate::fixtures::LOCK_SM_V2),
        (false, None) => None,
    }
    .map(|m| lockd_core::engine::ModuleHash::of(m).to_string());
    violations.extend(converged(&target, module).await);
    *outcome.lock().unwrap_or_else(|p| p.into_inner()) = Outcome {
        violations,
        finals,
        keeper_renewals,
        served,
    };
    Ok(())
}

/// Put `module` in by a hot upgrade, retried through leader changes and
/// faults (each try may meet a node cut off, or a dying leader).
async fn upgrade(target: &Target, module: &[u8]) -> Result<(), String> {
    let client = target.client(Duration::from_secs(3), Duration::from_secs(2));
    let admin = lockd_client::admin::Admin::new(client, target.endpoints.clone());
    let mut last = String::new();
    for _ in 0..100 {
        match admin.upgrade(module.to_vec(), None, true).await {
            Ok(_) => return Ok(()),
            Err(e) if e.to_string().contains("already the active module") => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(format!("the upgrade did not go in: {last}"))
}

/// Each mutex key's holder, read through the leader after the run.
async fn final_state(target: &Target, history: &History) -> BTreeMap<String, Final> {
    let keys: std::collections::BTreeSet<String> = history
        .ops()
        .into_iter()
        .filter(|o| !o.call.is_shared_or_counted())
        .map(|o| o.key)
        .collect();
    let client = target.client(Duration::from_secs(10), Duration::from_secs(2));
    let mut out = BTreeMap::new();
    for key in keys {
        let at = history.now();
        let holder = client
            .get(&key)
            .await
            .map(|v| v.map(|v| v.token))
            .map_err(|e| e.to_string());
        out.insert(key, Final { at, holder });
    }
    out
}

/// Every node on the same applied index, state hash and module (`module`
/// when given), within a bound.
async fn converged(target: &Target, module: Option<String>) -> Vec<Violation> {
    let client = target.client(Duration::from_secs(2), Duration::from_secs(1));
    let mut last = String::new();
    for _ in 0..100 {
        let mut seen = Vec::new();
        for e in &target.endpoints {
            match client.status_of(e).await {
                Ok(s) => seen.push((
                    s.applied_index,
                    format!("{} module {}", s.state_hash, s.module_hash),
                    s.commit_index,
                )),
                Err(err) => last = format!("{e}: {err}"),
            }
        }
        if seen.len() == target.endpoints.len() {
            let (applied, hash, _) = &seen[0];
            let caught_up = seen.iter().all(|(a, _, c)| a == applied && c == applied);
            if caught_up {
                let wrong_module = module
                    .as_ref()
                    .filter(|m| !hash.ends_with(m.as_str()))
                    .map(|m| format!("the nodes run {hash}, not module {m}"));
                return match seen.iter().find(|(_, h, _)| h != hash) {
                    None => wrong_module
                        .map(|w| Violation::new(Checker::Convergence, w))
                        .into_iter()
                        .collect(),
                    Some(_) => vec![Violation::new(
                        Checker::Convergence,
                        format!("state hashes differ at applied index {applied}: {seen:?}"),
                    )],
                };
            }
            last = format!("not caught up: {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    vec![Violation::new(
        Checker::Convergence,
        format!("the nodes did not converge within 10 s: {last}"),
    )]
}

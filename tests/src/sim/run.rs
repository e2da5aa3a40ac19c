//! One seed's run: the cluster and the clients as turmoil hosts, the
//! nemesis between steps, then heal, liveness, the final reads and the
//! checkers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockd::config::NodeConfig;
use lockd::node::Seams;

use super::applied::AppliedRecord;
use super::clients::{clients, Outcome};
use super::engine::engine;
use super::faults::{host, node_dir, Nemesis, CLIENTS};
use super::horizon::horizon;
use super::nodes::{node, Samples, Stops, Takeovers, Watch};
use super::{SimConfig, SimReport};
use crate::jepsen::check::{self, Checker, Violation};
use crate::jepsen::history::{History, Ret};
use crate::jepsen::lin::Horizon;
use crate::jepsen::register::FencedRegister;
use crate::jepsen::workload::Target;

/// How far simulated time moves per step: the granularity of message
/// delivery (timers inside a host fire at their exact times).
const TICK: Duration = Duration::from_millis(2);
/// Every node's port.
const PORT: u16 = 7000;

/// Node `id`'s address on the simulated network.
pub(super) fn node_addr(id: u64) -> String {
    format!("{}:{PORT}", host(id))
}
/// The Raft timing of scripted runs ([`super::Timing::SCRIPTED`]); a
/// seed's run draws its own.
pub const HEARTBEAT_MS: u64 = 50;
pub const ELECTION_MS: u64 = 400;
/// After healing, the clients go on this long before they stop.
const SETTLE: Duration = Duration::from_secs(3);
/// The most simulated time a run may take before it is called stuck.
const LIMIT: Duration = Duration::from_secs(300);

/// Milliseconds of simulated time since the run started.
pub(super) fn sim_ms() -> f64 {
    turmoil::sim_elapsed().map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The nodes' logs are compared every this many steps (500 ms: an entry
/// stays in a log for seconds, until a snapshot 100 entries later).
const WITNESS_STEPS: u64 = 250;

/// Every node records its state hash every this many entries.
pub const AUDIT_INTERVAL: u64 = 10;

pub(super) fn node_config(cfg: &SimConfig, id: u64) -> NodeConfig {
    let defaults = NodeConfig::default();
    NodeConfig {
        id,
        addr: node_addr(id),
        listen: Some(format!("0.0.0.0:{PORT}")),
        data_dir: node_dir(id),
        initial_cluster: (1..=cfg.nodes).map(|i| (i, node_addr(i))).collect(),
        raft: lockd::config::settings::Raft {
            heartbeat_ms: cfg.timing.heartbeat_ms,
            election_timeout_ms: cfg.timing.election_ms,
            // Snapshots and log purges happen during the faults.
            snapshot_threshold: cfg.snapshot_threshold,
            keep_after_snapshot: 20,
            segment_bytes: cfg.segment_bytes,
            // Dense audit points, so that every node's state is compared
            // at many indexes (`clients::applied_alike`).
            audit_interval: AUDIT_INTERVAL,
            ..defaults.raft.clone()
        },
        limits: lockd::config::settings::Limits {
            max_module_bytes: match cfg.refusing {
                Some(node) if node == id => super::swaps::upgrade_module(cfg).len() - 1,
                _ => defaults.limits.max_module_bytes,
            },
            ..defaults.limits.clone()
        },
        // The simulation's links are not a network anyone else is on.
        insecure: true,
        // The module the seeds were found on: a 0.2 start adds an entry
        // and reshuffles every seed's schedule (the operators upgrade to
        // 0.2 themselves).
        initial_module: lockd_core::builtin::InitialModule::World01,
        ..defaults
    }
}

/// Each node's lease-clock drift, ppm: within the bound lease safety
/// assumes, from the seed; beyond it for the control that exceeds it.
fn drifts(cfg: &SimConfig) -> Vec<i64> {
    if cfg.control == Some(super::Control::FastClock) {
        return vec![super::clock::BEYOND; cfg.nodes as usize];
    }
    let mut rng = crate::jepsen::rng::Rng::new(cfg.seed ^ 0xc10c);
    let inside = super::clock::INSIDE as u64;
    (0..cfg.nodes)
        .map(|_| rng.below(2 * inside + 1) as i64 - inside as i64)
        .collect()
}

/// This thread made ready for a run of `cfg` (the seams, the faults, the
/// seeds), and the simulation to run it in.
pub(super) fn simulation<'a>(cfg: &SimConfig) -> (turmoil::Sim<'a>, Arc<super::disk::SimDisk>) {
    super::net::install();
    let disk = super::disk::install();
    super::control::set(cfg.control);
    lockd::raft::runtime::seed(cfg.seed);
    lockd_client::id::seed(cfg.seed);
    lockd::blocking::inline_on_this_thread(true);
    let mut builder = turmoil::Builder::new();
    if cfg.random_order {
        builder.enable_random_order();
    }
    let sim = builder
        .simulation_duration(LIMIT)
        .tick_duration(TICK)
        // turmoil's accept queue and receive buffers, in segments: a held
        // link releases every connection attempt of its hold at once.
        .tcp_capacity(1 << 14)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(cfg.max_latency_ms))
        .rng_seed(cfg.seed)
        .build();
    (sim, disk)
}

pub fn run(cfg: &SimConfig) -> SimReport {
    let (mut sim, disk) = simulation(cfg);
    // Certificates and the auth file, on the machine's disk (the node
    // reads them with std::fs, not through the simulated disk).
    let certs = cfg.secure.then(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let hosts: Vec<(u64, String)> = (1..=cfg.nodes).map(|id| (id, host(id))).collect();
        let secure = crate::secure::Secure::create(dir.path(), &hosts);
        (dir, secure)
    });
    let takeovers: Takeovers = Arc::default();
    let samples: Samples = Arc::default();
    let stops: Stops = Arc::default();
    let latest: super::nodes::Latest = Arc::default();
    let applied: Arc<Mutex<AppliedRecord>> = Arc::default();
    let coverage: Arc<Mutex<super::Coverage>> = Arc::default();
    let stop_asks: super::nodes::StopAsks = Arc::default();
    let drift = drifts(cfg);
    for id in 1..=cfg.nodes {
        let mut config = node_config(cfg, id);
        if let Some((_, s)) = &certs {
            config.tls = Some(lockd::config::TlsFiles {
                cert: s.dir.join(format!("node-{id}.pem")),
                key: s.dir.join(format!("node-{id}.key")),
                ca: s.ca(),
            });
            config.auth_file = Some(s.auth_file.clone());
            config.insecure = false;
        }
        let (takeovers, stops, disk) = (takeovers.clone(), stops.clone(), disk.clone());
        let latest = latest.clone();
        let applied = applied.clone();
        let samples = samples.clone();
        let coverage = coverage.clone();
        let stop_asks = stop_asks.clone();
        let ppm = drift[id as usize - 1];
        let log_writer = super::nodes::log_writer(cfg.seed, id);
        sim.host(host(id), move || {
            let seams = Seams {
                log_writer: log_writer.clone(),
                engine: Some(engine()),
                lease_clock: None,
                applied: Some(AppliedRecord::observer(&applied, id)),
            };
            let watch = Watch {
                takeovers: takeovers.clone(),
                samples: samples.clone(),
                stops: stops.clone(),
                disk: disk.clone(),
                latest: latest.clone(),
                coverage: coverage.clone(),
                stop_asks: stop_asks.clone(),
            };
            node(config.clone(), seams, ppm, watch)
        });
    }

    let history = Arc::new(History::with_clock(sim_ms));
    let unfenced = cfg.control == Some(super::Control::UnfencedDoubleGrant);
    let register = Arc::new(FencedRegister::new(unfenced));
    let stop = Arc::new(AtomicBool::new(false));
    let outcome: Arc<Mutex<Outcome>> = Arc::default();
    let target = Target {
        endpoints: (1..=cfg.nodes).map(node_addr).collect(),
        credentials: certs
            .as_ref()
            .map(|(_, s)| s.credentials(crate::secure::Who::Token("worker")))
            .unwrap_or_default(),
        admin: certs
            .as_ref()
            .map(|(_, s)| s.credentials(crate::secure::Who::Cert("admin"))),
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

    let mut nemesis = Nemesis::new(cfg.seed, cfg.nodes, disk.clone(), stop_asks);
    let mut healed_at = None;
    let mut harness = Vec::new();
    let mut witness = super::nodes::LogWitness::default();
    let mut steps: u64 = 0;
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
        steps += 1;
        if steps.is_multiple_of(WITNESS_STEPS) {
            witness.sample(&latest);
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
    violations.append(&mut stops.lock().unwrap_or_else(|p| p.into_inner()));
    violations.append(&mut out.violations);
    let ops = history.ops();
    let regs = register.snapshot();
    let takeovers = takeovers.lock().unwrap_or_else(|p| p.into_inner()).clone();
    violations.extend(super::progress::check(
        &samples.lock().unwrap_or_else(|p| p.into_inner()),
        &nemesis.events,
        &nemesis.timeline,
        cfg.nodes,
        &out.voter_out,
        sim.elapsed().as_secs_f64() * 1e3,
        cfg.timing.progress_bound_ms(),
    ));
    violations.extend(super::nodes::leads_each_term_once(&takeovers));
    witness.sample(&latest);
    violations.extend(witness.finish());
    violations.extend(check::lost_updates(&regs));
    violations.extend(check::tokens(&ops));
    violations.extend(check::linearizable(
        &ops,
        &Horizon {
            // Mixed runs' acquires carry request ids and are retried.
            retried_grants: cfg.mixed,
            first_try: history.first_tries(),
            ..horizon(
                &takeovers,
                &nemesis.timeline,
                cfg.nodes,
                &out.voter_out,
                &samples.lock().unwrap_or_else(|p| p.into_inner()),
                cfg.timing,
            )
        },
    ));
    let holdings = history.holdings();
    violations.extend(check::holders(&holdings));
    violations.extend(check::no_denials(&ops));
    violations.extend(check::no_refusal_inside_lease(&ops));
    violations.extend(check::survived(&ops, &out.finals));
    // Every node but one left to refuse its module ends caught up
    // (the convergence check waits for it).
    let finishing: Vec<u64> = (1..=cfg.nodes)
        .filter(|n| cfg.refusing != Some(*n))
        .collect();
    violations.extend(
        applied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(&ops, &finishing),
    );
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
    for (i, ppm) in drift.iter().enumerate() {
        text.push_str(&format!("Clock {{ node: {}, drift_ppm: {ppm} }}\n", i + 1));
    }
    for op in &ops {
        text.push_str(&format!("{op:?}\n"));
    }
    for e in &nemesis.events {
        text.push_str(&format!("{e:?}\n"));
    }
    for lead in &takeovers {
        text.push_str(&format!("{lead:?}\n"));
    }
    let coverage = {
        let mut c = std::mem::take(&mut *coverage.lock().unwrap_or_else(|p| p.into_inner()));
        c.merge(&nemesis.coverage);
        c.merge(&disk.coverage());
        for s in latest.lock().unwrap_or_else(|p| p.into_inner()).values() {
            super::nodes::count_instance(&mut c, s);
            let swapped = s.status().upgrades.iter().filter(|u| u.swapped()).count();
            c.add("module.swapped", swapped as u64);
        }
        c.add("run.secure", u64::from(cfg.secure));
        c.add("client.died", history.noted("client.died"));
        c.add("op.http", history.noted("op.http"));
        // The links and nodes as the faults left them when the swap was
        // answered.
        let at_swap = out
            .swapped_at
            .and_then(|t| nemesis.timeline.iter().rev().find(|l| l.at <= t));
        if at_swap.is_some_and(|l| !(l.cut.is_empty() && l.held.is_empty() && l.crashed.is_empty()))
        {
            c.add("module.swapped-under-fault", 1);
        }
        for (mark, n) in check::interesting(&ops, &holdings, &regs) {
            c.add(mark, n);
        }
        c.add("check.renewed-past-lease", out.renewed_past_lease);
        let leads = takeovers.iter().filter(|k| k.leads).count() as u64;
        c.add("raft.leader-change", leads.saturating_sub(1));
        for op in &ops {
            match op.ret {
                Ret::Granted(_) => c.add("op.granted", 1),
                Ret::Held => c.add("op.held", 1),
                Ret::Unknown => c.add("op.unknown", 1),
                _ => {}
            }
        }
        c
    };
    SimReport {
        seed: cfg.seed,
        ops: ops.len(),
        granted: ops
            .iter()
            .filter(|o| matches!(o.ret, Ret::Granted(_)))
            .count(),
        faults: nemesis.events.len(),
        takeovers: takeovers.iter().filter(|k| k.leads).count(),
        keeper_renewals: out.keeper_renewals,
        simulated: sim.elapsed(),
        history: text,
        violations,
        coverage,
    }
}

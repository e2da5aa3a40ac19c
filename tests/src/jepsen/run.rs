//! A run: cluster, clients, nemesis, heal, checks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::check::{self, Checker, Final, Violation};
use super::config::{Report, RunConfig};
use super::history::{History, LockMode, Ret};
use super::keeper::{self, Keeper};
use super::lin::Horizon;
use super::nemesis;
use super::register::FencedRegister;
use super::workload::{self, Target};
use crate::cluster::{Cluster, ELECTION_MS};
use crate::secure::Who;

/// Elections after a fault heals: a restarted node that stands, a resumed
/// leader stepping down. Leadership may change this long after a fault.
const SETTLE_MS: f64 = (4 * ELECTION_MS) as f64;

/// The bound on lease ends: a new leader restarts a lease at `now + lease +
/// 1.5 × election timeout`, after an election of up to twice the timeout,
/// and an `Expire` on a busy two-core machine may take a second to commit.
/// What a lease may outlast its time by, ms: the process runs know only
/// their own fault windows, not every takeover.
const SLACK_MS: f64 = (ELECTION_MS * 3 / 2 + 2 * ELECTION_MS + 1000) as f64;

fn horizon(log: &nemesis::Log, mixed: bool) -> Horizon {
    Horizon {
        slack_ms: SLACK_MS,
        // The process runs' one bound, after a fault window as outside.
        rearm_ms: SLACK_MS,
        unstable: log.unstable(SETTLE_MS),
        // The leader's drift margin; the machine's clock is one clock.
        stretch: 0.01,
        // Mixed runs' acquires carry request ids and are retried; the
        // seed's acquire is not retried once its outcome is unknown.
        retried_grants: mixed,
        // Every acquire's lost grant modelled (no reduction needed here).
        first_try: Default::default(),
        // A paused node's requests arrive when it resumes: inside its
        // fault window, which `unstable` already counts.
        held: Vec::new(),
    }
}

fn start(cfg: &RunConfig) -> Cluster {
    if cfg.hosts {
        assert!(
            cfg.server.is_none(),
            "a broken server runs on loopback only"
        );
        return Cluster::start_hosts(cfg.nodes, &[], cfg.secure)
            .expect("separate hosts (network namespaces; needs root)");
    }
    let mut c = if cfg.secure {
        Cluster::configure_secure(cfg.nodes, &[])
    } else {
        Cluster::configure(cfg.nodes, &[])
    };
    if let Some(server) = &cfg.server {
        for node in c.nodes.values_mut() {
            node.bin = Some(server.bin.clone());
            node.env = server.env.clone();
        }
    }
    for id in 1..=cfg.nodes {
        c.spawn(id);
    }
    c
}

/// Read each key's holder on the leader, retrying a few times through a
/// leader change; an error that persists is kept (and fails the run).
fn final_state(
    c: &Cluster,
    keys: impl Iterator<Item = String>,
    history: &History,
) -> BTreeMap<String, Final> {
    keys.map(|key| {
        let at = history.now();
        let deadline = Instant::now() + Duration::from_secs(10);
        let holder = loop {
            let r = nemesis::leader_of(c)
                .ok_or_else(|| "no leader".to_string())
                .and_then(|(_, l)| c.lock(l, &key));
            match r {
                Ok(r) if r.ok() && r.body["held"] == false => break Ok(None),
                Ok(r) if r.ok() => match r.body["token"].as_u64() {
                    Some(t) => break Ok(Some(t)),
                    None => break Err(format!("held without a token: {r:?}")),
                },
                other if Instant::now() > deadline => break Err(format!("{other:?}")),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        (key, Final { at, holder })
    })
    .collect()
}

/// Run the workload with faults, heal, and check everything.
pub fn run(cfg: RunConfig) -> Report {
    let mut c = start(&cfg);
    c.wait_leader(Duration::from_secs(30));
    let target = Target {
        endpoints: c.endpoints(),
        credentials: c.client_options(Who::Token("worker")).credentials,
        admin: None,
    };
    let history = Arc::new(History::new());
    let register = Arc::new(FencedRegister::new(cfg.unfenced_register));
    let stop = Arc::new(AtomicBool::new(false));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    assert!(
        !(cfg.mixed && cfg.upgrade_at.is_some()),
        "a mixed run needs world 0.2; the upgrade at a time is to a module of world 0.1"
    );
    if cfg.mixed {
        nemesis::upgrade(&c, crate::fixtures::LOCK_SM_WORLD02, "the 0.2 module")
            .expect("the 0.2 module goes in before the clients start");
    }
    let keeper = rt
        .block_on(Keeper::take(target.clone()))
        .expect("the keeper's lock, before any fault");
    let keeper = rt.spawn(keeper.hold(stop.clone()));
    let tasks: Vec<_> = (0..cfg.clients)
        .map(|id| {
            rt.spawn(workload::worker(
                id,
                cfg.clone(),
                target.clone(),
                history.clone(),
                register.clone(),
                stop.clone(),
            ))
        })
        .collect();
    let nemesis_stop = Arc::new(AtomicBool::new(false));
    let mut log = {
        let ns = nemesis_stop.clone();
        let d = cfg.duration;
        std::thread::spawn(move || {
            std::thread::sleep(d);
            ns.store(true, Ordering::Relaxed);
        });
        nemesis::run(
            &mut c,
            cfg.nodes,
            &cfg.faults,
            cfg.seed,
            cfg.upgrade_at,
            &history,
            &nemesis_stop,
        )
    };
    // Heal: every link up, every node running and unpaused (the nemesis
    // always resumes and restarts what it hurt), then let the clients see a
    // healthy cluster.
    c.heal();
    for id in c.nodes.keys().copied().collect::<Vec<_>>() {
        if !c.nodes[&id].is_running() {
            c.spawn(id);
        }
    }
    c.wait_leader(Duration::from_secs(30));
    log.leaders.extend(nemesis::leader_of(&c));
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    let mut violations: Vec<Violation> = Vec::new();
    // A client task that panicked is a broken run, not a quiet one.
    rt.block_on(async {
        for (id, t) in tasks.into_iter().enumerate() {
            if let Err(e) = t.await {
                violations.push(Violation::new(
                    Checker::Harness,
                    format!("client {id} failed: {e}"),
                ));
            }
        }
    });
    let keeper_renewals = keeper::keeper_outcome(rt.block_on(keeper), &mut violations);
    // 5. After healing, every client that waits is served within a bound.
    let bound = Duration::from_millis(cfg.lease_ms * 2 + 4 * ELECTION_MS + 3000);
    let (served, v) = rt.block_on(workload::waiters(
        cfg.clients,
        cfg.keys,
        target.clone(),
        history.clone(),
        bound,
    ));
    violations.extend(v);
    if served != cfg.clients {
        violations.push(Violation::new(
            Checker::Liveness,
            format!(
                "after healing only {served} of {} waiting clients were served within {bound:?}",
                cfg.clients
            ),
        ));
    }

    let ops = history.ops();
    let regs = register.snapshot();
    violations.extend(check::lost_updates(&regs));
    violations.extend(check::tokens(&ops));
    violations.extend(check::linearizable(&ops, &horizon(&log, cfg.mixed)));
    let holdings = history.holdings();
    violations.extend(check::holders(&holdings));
    violations.extend(check::no_denials(&ops));
    violations.extend(check::no_refusal_inside_lease(&ops));
    c.wait_leader(Duration::from_secs(30));
    // The final reads compare one holder's token: mutex keys only.
    let keys = check::mutex_keys(&ops);
    let ledger_keys = keys.iter().filter(|k| k.starts_with("ledger/")).count();
    let finals = final_state(&c, keys.into_iter(), &history);
    violations.extend(check::survived(&ops, &finals));
    violations.extend(converged(&c, &cfg));
    Report {
        ops: ops.len(),
        granted: ops
            .iter()
            .filter(|o| matches!(o.ret, Ret::Granted(_)))
            .count(),
        leader_changes: log.leader_changes(),
        faults: log.events,
        rejected_stale: regs.iter().map(|r| r.2).sum(),
        keeper_renewals,
        ledger_keys,
        most_readers: check::most_at_once(&holdings, |h| h.mode == LockMode::Shared),
        most_slots: check::most_at_once(&holdings, |h| {
            h.mode == LockMode::Exclusive && h.limit > 1
        }),
        violations,
    }
}

/// Every node on the same state (and, after an upgrade, on its module).
fn converged(c: &Cluster, cfg: &RunConfig) -> Vec<Violation> {
    let s = c.wait_converged(Duration::from_secs(30));
    let (expected, name) = match (cfg.upgrade_at, cfg.mixed) {
        (Some(_), _) => (Some(crate::fixtures::LOCK_SM_WORLD01_V2), "version 2"),
        (None, true) => (Some(crate::fixtures::LOCK_SM_WORLD02), "the 0.2 module"),
        (None, false) => (None, ""),
    };
    let expected = expected.map(|m| lockd_core::engine::ModuleHash::of(m).to_string());
    let mut out = Vec::new();
    for id in c.running() {
        let Some(st) = c.status(id) else {
            out.push(Violation::new(
                Checker::Convergence,
                format!("node {id} gave no status after the run"),
            ));
            continue;
        };
        if st.state_hash != s.state_hash {
            out.push(Violation::new(
                Checker::Convergence,
                format!("node {id} state hash differs after the run"),
            ));
        }
        if expected.as_ref().is_some_and(|m| &st.module_hash != m) {
            out.push(Violation::new(
                Checker::Convergence,
                format!(
                    "node {id} runs module {} after the upgrade to {name}",
                    st.module_hash
                ),
            ));
        }
    }
    out
}

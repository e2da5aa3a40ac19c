//! The clients' host of a run: the keeper and the workers through the
//! faults, a module upgrade when the run has one, then the waiters, the
//! final reads and the convergence check.

use lockd_proto::OnModuleFailure;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::swaps::{
    mixed_module, roll_back, traps, upgrade, upgrade_module, upgrade_refused_by, Swap,
};
use super::SimConfig;
use crate::jepsen::check::{Checker, Final, Violation};
use crate::jepsen::history::History;
use crate::jepsen::keeper::{self, Keeper};
use crate::jepsen::register::FencedRegister;
use crate::jepsen::workload::{self, Target};
use crate::jepsen::RunConfig;

/// What the clients' host hands back.
#[derive(Default)]
pub(super) struct Outcome {
    pub(super) violations: Vec<Violation>,
    pub(super) finals: BTreeMap<String, Final>,
    pub(super) keeper_renewals: u64,
    /// The renewer's keepalives acknowledged past its grant's own lease.
    pub(super) renewed_past_lease: u64,
    pub(super) served: usize,
    /// When the operator had a voter out (history time, ms).
    pub(super) voter_out: Vec<(f64, f64)>,
    /// When the upgrade of a run with `upgrade_at` was answered as swapped
    /// in (history time, ms), if it was.
    pub(super) swapped_at: Option<f64>,
}

/// The clients' host: the keeper and the workers until `stop`, then the
/// waiters, the final reads and the convergence check.
pub(super) async fn clients(
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
        sessions: cfg.mixed && cfg.sessions,
        crash_one_in: cfg.crash_one_in,
        http_one_in: cfg.http_one_in,
        ..RunConfig::default()
    };
    let mut violations = Vec::new();
    if cfg.mixed {
        upgrade(&target, mixed_module(&cfg), OnModuleFailure::Refuse).await?;
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
    let swapped_at = Arc::new(Mutex::new(None));
    let upgraded = cfg.upgrade_at.map(|at| {
        let (swapped_at, history) = (swapped_at.clone(), history.clone());
        let target = target.clone();
        let stop = stop.clone();
        let module = upgrade_module(&cfg);
        let (hostile, rollback) = (cfg.hostile, cfg.rollback);
        let (refusing, quorum) = (cfg.refusing, cfg.quorum);
        tokio::spawn(async move {
            tokio::time::sleep(at).await;
            let on_failure = match hostile && rollback {
                true => OnModuleFailure::Rollback,
                false => OnModuleFailure::Refuse,
            };
            let refusing = refusing.map(|node| (node, quorum));
            if let Swap::Kept(why) =
                upgrade_refused_by(&target, module, on_failure, refusing).await?
            {
                tracing::info!(%why, "clients: the module was kept out");
                return Ok(Some(lockd_core::builtin::LOCK_SM));
            }
            *swapped_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(history.now());
            if hostile {
                return traps(&target, &stop, rollback).await.map(Some);
            }
            if rollback {
                // The operator's pace (simulated time), then back.
                tokio::time::sleep(Duration::from_secs(2)).await;
                roll_back(&target, module).await?;
                return Ok(Some(lockd_core::builtin::LOCK_SM));
            }
            Ok::<_, String>(None)
        })
    });
    let operated = cfg.operation.map(|(at, op)| {
        let target = target.clone();
        let history = history.clone();
        tokio::spawn(async move {
            tokio::time::sleep(at).await;
            super::operator::operate(op, &target, &history).await
        })
    });
    let keeper = tokio::spawn(keeper.hold(stop.clone()));
    let renewer = tokio::spawn(super::renewer::renew(
        target.clone(),
        cfg.lease_ms,
        history.clone(),
        stop.clone(),
    ));
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
    tracing::info!("clients: the workers stopped");
    let keeper_renewals = keeper::keeper_outcome(keeper.await, &mut violations);
    let renewed_past_lease = match renewer.await {
        Ok(r) => {
            violations.extend(r.violations);
            r.past_first_lease
        }
        Err(e) => {
            violations.push(Violation::new(
                Checker::Harness,
                format!("the renewer failed: {e}"),
            ));
            0
        }
    };
    // The module the run ends on: the one the operator replaced a module
    // out of service with, if it did.
    let mut replaced = None;
    if let Some(u) = upgraded {
        match u.await {
            Ok(Ok(r)) => replaced = r,
            Ok(Err(e)) => violations.push(Violation::new(Checker::Harness, e)),
            Err(e) => violations.push(Violation::new(
                Checker::Harness,
                format!("the upgrade task failed: {e}"),
            )),
        }
    }
    let mut voter_out = Vec::new();
    if let Some(o) = operated {
        match o.await {
            Ok(Ok(window)) => voter_out.extend(window),
            Ok(Err(e)) => violations.push(Violation::new(Checker::Harness, e)),
            Err(e) => violations.push(Violation::new(
                Checker::Harness,
                format!("the operator task failed: {e}"),
            )),
        }
    }
    tracing::info!("clients: the waiters");
    let bound = Duration::from_millis(cfg.lease_ms * 2 + 4 * cfg.timing.election_ms + 3000);
    let (served, v) = workload::waiters(
        cfg.clients,
        cfg.keys,
        target.clone(),
        history.clone(),
        bound,
    )
    .await;
    violations.extend(v);
    tracing::info!(served, "clients: the final reads");
    let finals = final_state(&target, &history).await;
    tracing::info!("clients: convergence");
    let module = match (cfg.mixed, cfg.upgrade_at) {
        _ if replaced.is_some() => replaced,
        (true, _) => Some(mixed_module(&cfg)),
        (false, Some(_)) => Some(upgrade_module(&cfg)),
        (false, None) => None,
    }
    .map(|m| lockd_core::engine::ModuleHash::of(m).to_string());
    violations.extend(converged(&target, module, cfg.refusing).await);
    violations.extend(applied_alike(&target).await);
    *outcome.lock().unwrap_or_else(|p| p.into_inner()) = Outcome {
        violations,
        finals,
        keeper_renewals,
        renewed_past_lease,
        served,
        voter_out,
        swapped_at: *swapped_at.lock().unwrap_or_else(|p| p.into_inner()),
    };
    Ok(())
}

/// The built-in module's hash, hex.
fn builtin_hash() -> String {
    lockd_core::engine::ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string()
}

/// Each mutex key's holder, read through the leader after the run.
async fn final_state(target: &Target, history: &History) -> BTreeMap<String, Final> {
    // A semaphore's key was once read here through its releases (seed
    // 302318: two holders left by workers that died, one token read).
    let keys = crate::jepsen::check::mutex_keys(&history.ops());
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

/// Every node's state hash at each index it recorded (the determinism
/// audit's points: every [`super::run::AUDIT_INTERVAL`] entries, after
/// upgrades and snapshot installs) against the others' at the same index:
/// a replica that parted from the others and was later mended (a snapshot
/// installed over it) agrees at the end, but not here. A node that
/// restarted keeps only the points since its restart.
async fn applied_alike(target: &Target) -> Vec<Violation> {
    let client = target.admin_client(Duration::from_secs(2), Duration::from_secs(1));
    let admin = lockd_client::admin::Admin::new(client, target.endpoints.clone());
    let mut reports = Vec::new();
    for e in &target.endpoints {
        match admin.audit_report(e).await {
            Ok(r) => reports.push(r),
            Err(err) => {
                return vec![Violation::new(
                    Checker::AppliedAlike,
                    format!("the audit points of {e} could not be read: {err}"),
                )]
            }
        }
    }
    let compared = lockd_proto::audit::compare(&reports);
    if compared.common_indices == 0 {
        return vec![Violation::new(
            Checker::AppliedAlike,
            "no index was recorded by two nodes: nothing compared",
        )];
    }
    // The first index each node parted at, and how many it parted at.
    let mut first: BTreeMap<u64, (&lockd_proto::audit::Divergence, usize)> = BTreeMap::new();
    for d in &compared.divergences {
        first.entry(d.node).or_insert((d, 0)).1 += 1;
    }
    first
        .values()
        .map(|(d, n)| {
            Violation::new(
                Checker::AppliedAlike,
                format!(
                    "node {} applied state {} at index {}, the others {:?} ({n} indexes differ)",
                    d.node, d.hash, d.index, d.majority
                ),
            )
        })
        .collect()
}

/// Every node on the same applied index, state hash and module (`module`
/// when given), within a bound. But for `refusing` (see
/// [`SimConfig::refusing`]) once the cluster runs a module it cannot: it
/// must say so (`module_cannot_run`, naming that module), and is left out.
/// No other node may say it cannot run a module.
async fn converged(
    target: &Target,
    module: Option<String>,
    refusing: Option<u64>,
) -> Vec<Violation> {
    let client = target.client(Duration::from_secs(2), Duration::from_secs(1));
    // The module went in (not the built-in one it started on).
    let swapped = module.as_ref().is_some_and(|m| *m != builtin_hash());
    let mut last = String::new();
    for _ in 0..100 {
        let (mut seen, mut left_out) = (Vec::new(), 0);
        for (node, e) in (1u64..).zip(&target.endpoints) {
            let status = client.status_of(e).await;
            if let Ok(s) = &status {
                if let Some(c) = &s.module_cannot_run {
                    if refusing == Some(node) && module.as_ref() == Some(&c.module_hash) {
                        left_out += 1;
                        continue;
                    }
                    return vec![Violation::new(
                        Checker::Convergence,
                        format!("node {node} cannot run a module: {c:?}"),
                    )];
                }
            }
            match status {
                // The module failures are replicated state: equal too.
                Ok(s) => seen.push((
                    s.applied_index,
                    format!(
                        "{} failures {:?} module {}",
                        s.state_hash,
                        (s.module_failures_total, s.module_failures),
                        s.module_hash
                    ),
                    s.commit_index,
                )),
                Err(err) => last = format!("{e}: {err}"),
            }
        }
        // The module went in, and the refusing node applied as far as
        // the others, running it: it ignored its own bound.
        let over_bound = refusing.filter(|_| left_out == 0 && swapped);
        if seen.len() + left_out == target.endpoints.len() {
            let (applied, hash, _) = &seen[0];
            let caught_up = seen.iter().all(|(a, _, c)| a == applied && c == applied);
            if let (true, Some(node)) = (caught_up, over_bound) {
                return vec![Violation::new(
                    Checker::Convergence,
                    format!("node {node} runs a module over its own --max-module-bytes: {seen:?}"),
                )];
            }
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

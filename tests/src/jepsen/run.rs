//! A run: cluster, clients, nemesis, heal, checks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockd_client::proto::WireError;
use lockd_client::{Client, ClientError, ClientOptions};

use super::check;
use super::history::{Call, History, Holding, Op, Ret};
use super::register::FencedRegister;
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

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub nodes: u64,
    pub clients: usize,
    pub keys: usize,
    pub duration: Duration,
    pub seed: u64,
    pub lease_ms: u64,
    /// One in this many holders pauses past its lease before writing.
    pub pause_one_in: u64,
    pub faults: Vec<Fault>,
    /// Test-only: a register that does not check tokens.
    pub unfenced_register: bool,
    /// Run each node in its own network namespace (needed for partitions).
    pub hosts: bool,
    /// Upgrade the lock module to version 2 (`guest-sm-v2`) this long into
    /// the run, between faults; retried until it is in (the request may
    /// meet a dying leader). The run then also checks that every node ends
    /// on version 2.
    pub upgrade_at: Option<Duration>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            nodes: 3,
            clients: 6,
            keys: 2,
            duration: Duration::from_secs(12),
            seed: 1,
            lease_ms: 800,
            pause_one_in: 8,
            faults: ALL_FAULTS.to_vec(),
            unfenced_register: false,
            hosts: false,
            upgrade_at: None,
        }
    }
}

#[derive(Debug)]
pub struct Report {
    pub ops: usize,
    pub granted: usize,
    pub faults: Vec<String>,
    pub rejected_stale: u64,
    pub violations: Vec<String>,
}

/// A small deterministic generator (xorshift): runs are reproducible by seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

fn ret_of(e: &ClientError) -> Ret {
    match e {
        ClientError::Rejected(WireError::Held(_)) => Ret::Held,
        ClientError::Rejected(WireError::NotHeld(_) | WireError::WrongToken(_)) => Ret::Refused,
        _ => Ret::Unknown,
    }
}

async fn client_loop(
    id: usize,
    cfg: RunConfig,
    endpoints: Vec<String>,
    history: Arc<History>,
    register: Arc<FencedRegister>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng::new(cfg.seed * 1000 + id as u64);
    let opts = ClientOptions {
        retry_for: Duration::from_secs(3),
        request_timeout: Duration::from_secs(3),
        ..Default::default()
    };
    let client = Client::with_options(endpoints, opts);
    while !stop.load(Ordering::Relaxed) {
        let key = format!("j{}", rng.below(cfg.keys as u64));
        let wait_ms = if rng.below(2) == 0 { 0 } else { 1500 };
        let invoke = history.now();
        let r = client
            .acquire(
                &key,
                Duration::from_millis(cfg.lease_ms),
                Duration::from_millis(wait_ms),
            )
            .await;
        let call = Call::Acquire {
            lease_ms: cfg.lease_ms,
            wait_ms,
        };
        let ret = match &r {
            Ok(g) => Ret::Granted(g.token()),
            Err(e) => ret_of(e),
        };
        history.record(Op {
            client: id,
            key: key.clone(),
            call,
            invoke,
            complete: history.now(),
            ret,
        });
        let Ok(guard) = r else {
            tokio::time::sleep(Duration::from_millis(rng.below(50))).await;
            continue;
        };
        let token = guard.token();
        let from = history.now();
        if let Some(v) = register.read(&key, token) {
            // A holder that stalls past its lease (a GC pause, a stopped VM).
            if rng.below(cfg.pause_one_in) == 0 {
                tokio::time::sleep(Duration::from_millis(cfg.lease_ms * 3 / 2)).await;
            } else {
                tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
            }
            register.write(&key, id, token, v);
        }
        let invoke = history.now();
        history.record_holding(Holding {
            client: id,
            key: key.clone(),
            token,
            from,
            until: invoke.min(history.at(guard.deadline().into_std())),
        });
        let r = client.release(&key, token).await;
        let ret = match &r {
            Ok(()) => Ret::Released,
            Err(e) => ret_of(e),
        };
        history.record(Op {
            client: id,
            key,
            call: Call::Release { token },
            invoke,
            complete: history.now(),
            ret,
        });
        std::mem::forget(guard); // released above (or lost); no drop action
    }
}

fn leader_of(c: &Cluster) -> Option<u64> {
    c.running()
        .into_iter()
        .filter_map(|i| c.status(i))
        .find(|s| s.role == lockd_client::proto::Role::Leader)
        .map(|s| s.id)
}

/// Submit the upgrade to version 2 until it is in: answered "swapped", or
/// "already the active module" (an earlier attempt committed although its
/// answer was lost). Returns what happened, or `None` after 20 attempts.
fn upgrade(c: &Cluster) -> Option<String> {
    for attempt in 1..=20 {
        let via = leader_of(c).or_else(|| c.running().first().copied())?;
        match c.post_bytes(via, "/v1/admin/upgrade", crate::fixtures::LOCK_SM_V2) {
            Ok(r) if r.status == 200 => {
                return Some(format!(
                    "upgraded to version 2 at index {} (attempt {attempt})",
                    r.body["index"]
                ))
            }
            Ok(r) if r.status == 409 && r.error().contains("already the active module") => {
                return Some(format!(
                    "upgrade to version 2 was in already (attempt {attempt})"
                ))
            }
            _ => std::thread::sleep(Duration::from_millis(300)),
        }
    }
    None
}

/// Inject faults until `stop`; returns what was done.
fn nemesis(c: &mut Cluster, cfg: &RunConfig, stop: &AtomicBool) -> Vec<String> {
    let mut rng = Rng::new(cfg.seed ^ 0xfa17);
    let mut log = Vec::new();
    let t0 = Instant::now();
    let pause = |ms: u64| std::thread::sleep(Duration::from_millis(ms));
    let mut upgrade_due = cfg.upgrade_at;
    while !stop.load(Ordering::Relaxed) {
        pause(600 + rng.below(600));
        if upgrade_due.is_some_and(|at| t0.elapsed() >= at) {
            upgrade_due = None;
            let at = t0.elapsed().as_millis();
            match upgrade(c) {
                Some(what) => log.push(format!("{at} ms: {what}")),
                None => log.push(format!("{at} ms: UPGRADE FAILED after 20 attempts")),
            }
        }
        if stop.load(Ordering::Relaxed) || cfg.faults.is_empty() {
            if upgrade_due.is_some() {
                continue;
            }
            break;
        }
        let fault = cfg.faults[rng.below(cfg.faults.len() as u64) as usize];
        let Some(leader) = leader_of(c) else { continue };
        let follower = (1..=cfg.nodes)
            .filter(|i| *i != leader)
            .nth(rng.below(cfg.nodes - 1) as usize)
            .unwrap_or(leader);
        let at = t0.elapsed().as_millis();
        match fault {
            Fault::KillLeader | Fault::KillFollower => {
                let victim = if fault == Fault::KillLeader {
                    leader
                } else {
                    follower
                };
                c.kill(victim);
                pause(500 + rng.below(1000));
                c.spawn(victim);
                log.push(format!(
                    "{at} ms: SIGKILL node {victim} ({fault:?}), restarted"
                ));
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
                log.push(format!(
                    "{at} ms: SIGSTOP node {victim} ({fault:?}), SIGCONT"
                ));
            }
            Fault::IsolateLeader | Fault::MajorityMinority | Fault::Bridge => {
                let others: Vec<u64> = (1..=cfg.nodes).filter(|i| *i != leader).collect();
                let groups: Vec<Vec<u64>> = match fault {
                    Fault::IsolateLeader => vec![vec![leader], others.clone()],
                    Fault::MajorityMinority => {
                        // The leader and fewer than half of the rest.
                        let minority = ((cfg.nodes - 1) / 2) as usize;
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
                };
                c.partition(&groups);
                pause(1500 + rng.below(1500));
                c.heal();
                log.push(format!("{at} ms: partition {groups:?} ({fault:?}), healed"));
            }
            Fault::LeaderStorm => {
                for _ in 0..3 {
                    let Some(l) = leader_of(c) else { break };
                    c.kill(l);
                    pause(300);
                    c.spawn(l);
                    pause(700);
                    log.push(format!(
                        "{at} ms: leader storm: SIGKILL node {l}, restarted"
                    ));
                }
            }
        }
    }
    log
}

/// Run the workload with faults, heal, and check everything.
pub fn run(cfg: RunConfig) -> Report {
    let mut c = if cfg.hosts {
        Cluster::start_hosts(cfg.nodes, &[])
            .expect("separate hosts (network namespaces; needs root)")
    } else {
        Cluster::start(cfg.nodes, &[])
    };
    c.wait_leader(Duration::from_secs(30));
    let endpoints = c.endpoints();
    let history = Arc::new(History::new());
    let register = Arc::new(FencedRegister::new(cfg.unfenced_register));
    let stop = Arc::new(AtomicBool::new(false));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tasks: Vec<_> = (0..cfg.clients)
        .map(|id| {
            rt.spawn(client_loop(
                id,
                cfg.clone(),
                endpoints.clone(),
                history.clone(),
                register.clone(),
                stop.clone(),
            ))
        })
        .collect();
    let nemesis_stop = Arc::new(AtomicBool::new(false));
    let faults = {
        let ns = nemesis_stop.clone();
        let d = cfg.duration;
        std::thread::spawn(move || {
            std::thread::sleep(d);
            ns.store(true, Ordering::Relaxed);
        });
        nemesis(&mut c, &cfg, &nemesis_stop)
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
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    // A client task that panicked is a broken run, not a quiet one.
    let mut violations: Vec<String> = rt.block_on(async {
        let mut panics = Vec::new();
        for (id, t) in tasks.into_iter().enumerate() {
            if let Err(e) = t.await {
                panics.push(format!("client {id} failed: {e}"));
            }
        }
        panics
    });
    // 5. After healing, every client that waits is served within a bound.
    let bound = Duration::from_millis(cfg.lease_ms * 2 + 4 * crate::cluster::ELECTION_MS + 3000);
    let served = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let mut waits = Vec::new();
        for id in 0..cfg.clients {
            let (endpoints, served, history) = (endpoints.clone(), served.clone(), history.clone());
            let key = format!("j{}", id % cfg.keys);
            waits.push(tokio::spawn(async move {
                let client = Client::new(endpoints);
                let invoke = history.now();
                let t = Instant::now();
                let r = client
                    .acquire(&key, Duration::from_millis(200), bound)
                    .await;
                let ret = match &r {
                    Ok(g) => Ret::Granted(g.token()),
                    Err(e) => ret_of(e),
                };
                history.record(Op {
                    client: 1000 + id,
                    key: key.clone(),
                    call: Call::Acquire {
                        lease_ms: 200,
                        wait_ms: bound.as_millis() as u64,
                    },
                    invoke,
                    complete: history.now(),
                    ret,
                });
                if let Ok(g) = r {
                    if t.elapsed() <= bound {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    let token = g.token();
                    let from = history.now();
                    let invoke = history.now();
                    history.record_holding(Holding {
                        client: 1000 + id,
                        key: key.clone(),
                        token,
                        from,
                        until: invoke.min(history.at(g.deadline().into_std())),
                    });
                    let r = g.release().await;
                    let ret = if r.is_ok() {
                        Ret::Released
                    } else {
                        Ret::Unknown
                    };
                    history.record(Op {
                        client: 1000 + id,
                        key,
                        call: Call::Release { token },
                        invoke,
                        complete: history.now(),
                        ret,
                    });
                }
            }));
        }
        for (id, w) in waits.into_iter().enumerate() {
            if let Err(e) = w.await {
                violations.push(format!("waiting client {id} failed: {e}"));
            }
        }
    });
    let served = served.load(Ordering::Relaxed) as usize;
    if served != cfg.clients {
        violations.push(format!(
            "after healing only {served} of {} waiting clients were served within {bound:?}",
            cfg.clients
        ));
    }

    let ops = history.ops();
    let regs = register.snapshot();
    violations.extend(check::lost_updates(&regs));
    violations.extend(check::tokens(&ops));
    violations.extend(check::linearizable(&ops));
    violations.extend(check::mutual_exclusion(&history.holdings()));
    violations.extend(check::no_refusal_inside_lease(&ops));
    let leader = c.wait_leader(Duration::from_secs(30));
    let finals: BTreeMap<String, Option<u64>> = (0..cfg.keys)
        .map(|k| {
            let key = format!("j{k}");
            let r = c.lock(leader, &key).expect("final read");
            (key, r.body["token"].as_u64())
        })
        .collect();
    violations.extend(check::survived(&ops, &finals));
    let s = c.wait_converged(Duration::from_secs(30));
    let v2 = lockd::engine::ModuleHash::of(crate::fixtures::LOCK_SM_V2).to_string();
    for id in c.running() {
        let st = c.status(id).expect("status");
        if st.state_hash != s.state_hash {
            violations.push(format!("node {id} state hash differs after the run"));
        }
        if cfg.upgrade_at.is_some() && st.module_hash != v2 {
            violations.push(format!(
                "node {id} runs module {} after the upgrade to version 2",
                st.module_hash
            ));
        }
    }
    Report {
        ops: ops.len(),
        granted: ops
            .iter()
            .filter(|o| matches!(o.ret, Ret::Granted(_)))
            .count(),
        faults,
        rejected_stale: regs.iter().map(|r| r.2).sum(),
        violations,
    }
}

//! The drivers: the same loop against lockd (native protocol, the
//! `lockd-client` crate; and its HTTP/JSON routes, as curl, the Python
//! client or any HTTP library calls them), against etcd (its v3 gRPC lock
//! API) and against ZooKeeper (the Curator lock recipe, see
//! [`crate::zk_drive`]), one connection per client.
//!
//! A cycle is acquire + release. Uncontended, each client has its own key;
//! contended, all clients want one key and every cycle is a handoff. Only
//! the acquire is timed (from sending to holding the lock).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::LockOptions;

use crate::plan::{done, ClientRun, Keys, Plan, Progress};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    Lockd,
    /// lockd's HTTP/JSON lock routes, on the same cluster as [`System::Lockd`].
    LockdHttp,
    Etcd,
    Zookeeper,
}

impl System {
    /// Every system, in the report's order.
    pub const ALL: [System; 4] = [
        System::Lockd,
        System::LockdHttp,
        System::Etcd,
        System::Zookeeper,
    ];

    pub fn name(self) -> &'static str {
        match self {
            System::Lockd => "lockd",
            System::LockdHttp => "lockd-http",
            System::Etcd => "etcd",
            System::Zookeeper => "zookeeper",
        }
    }

    /// The name in prose and in the report's headings.
    pub fn display(self) -> &'static str {
        match self {
            System::Zookeeper => "ZooKeeper",
            System::LockdHttp => "lockd HTTP",
            s => s.name(),
        }
    }

    /// Whether this is lockd (over either protocol).
    pub fn is_lockd(self) -> bool {
        matches!(self, System::Lockd | System::LockdHttp)
    }

    /// The system called `name` (as [`System::name`] spells it; `zk` too).
    pub fn parse(name: &str) -> Option<System> {
        match name.trim() {
            "zk" => Some(System::Zookeeper),
            n => System::ALL.into_iter().find(|s| s.name() == n),
        }
    }
}

/// How the clients reach their cluster: in the clear (the default), or
/// with TLS and credentials (lockd: a client certificate; etcd: its
/// client TLS options, a client certificate too).
#[derive(Clone, Default)]
pub struct Security {
    pub lockd: lockd_client::Credentials,
    pub etcd: Option<etcd_client::TlsOptions>,
}

/// Run `clients` clients against `endpoints` for `length`, the clock
/// started once every client has connected (at a thousand clients the
/// connecting takes a while, for every system): what each did, and how
/// long they ran.
pub async fn run_timed(
    system: System,
    endpoints: Vec<String>,
    security: Security,
    clients: usize,
    contended: bool,
    length: Duration,
) -> (Vec<ClientRun>, Duration) {
    let ready = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let plan = Plan {
        i: 0,
        contended,
        // Until the clock starts: a day, never reached.
        until: Instant::now() + Duration::from_secs(86_400),
        stop: Arc::new(AtomicBool::new(false)),
        progress: Progress::new(),
        start: Some((ready.clone(), length)),
    };
    let tasks = spawn_clients(system, endpoints, security, clients, plan).await;
    ready.wait().await;
    let started = Instant::now();
    let runs = finish(tasks).await;
    (runs, started.elapsed())
}

/// Run `clients` clients against `endpoints` until `stop` (or `until`).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    system: System,
    endpoints: Vec<String>,
    security: Security,
    clients: usize,
    contended: bool,
    until: Instant,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> Vec<ClientRun> {
    let plan = Plan {
        i: 0,
        contended,
        until,
        stop,
        progress,
        start: None,
    };
    finish(spawn_clients(system, endpoints, security, clients, plan).await).await
}

/// What every client did, once all have ended.
async fn finish(tasks: Vec<tokio::task::JoinHandle<ClientRun>>) -> Vec<ClientRun> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("a benchmark client task panicked"));
    }
    out
}

/// Start `clients` clients, each with `plan` under its own number.
async fn spawn_clients(
    system: System,
    endpoints: Vec<String>,
    security: Security,
    clients: usize,
    plan: Plan,
) -> Vec<tokio::task::JoinHandle<ClientRun>> {
    // HTTP clients go to the leader, as etcd's and ZooKeeper's do (their
    // best case): found once, before the clock starts.
    let leader = if system == System::LockdHttp {
        leader_addr(&endpoints, &security).await
    } else {
        None
    };
    let mut tasks = Vec::new();
    for i in 0..clients {
        let (endpoints, security, leader) = (endpoints.clone(), security.clone(), leader.clone());
        let plan = plan.for_client(i);
        tasks.push(tokio::spawn(async move {
            match system {
                System::LockdHttp => {
                    let leader = leader.unwrap_or_else(|| endpoints[0].clone());
                    http_client_loop(leader, security, plan).await
                }
                System::Lockd => {
                    let client = lockd_client::Client::with_options(
                        endpoints,
                        lockd_client::ClientOptions {
                            credentials: security.lockd,
                            ..Default::default()
                        },
                    );
                    lockd_client_loop(client, plan).await
                }
                System::Etcd => {
                    let options = security
                        .etcd
                        .map(|t| etcd_client::ConnectOptions::new().with_tls(t));
                    etcd_client_loop(endpoints, options, plan).await
                }
                System::Zookeeper => crate::zk_drive::client_loop(endpoints, plan).await,
            }
        }));
    }
    tasks
}

async fn lockd_client_loop(client: lockd_client::Client, mut plan: Plan) -> ClientRun {
    let mut keys = Keys::new(plan.i, plan.contended);
    let mut key = keys.current();
    // Connected before the clock starts.
    let _ = client.get(&key).await;
    plan.begin().await;
    let wait = if plan.contended {
        Duration::from_secs(10)
    } else {
        Duration::ZERO
    };
    let mut r = ClientRun::default();
    while !done(plan.until, &plan.stop) {
        let start = Instant::now();
        match client.acquire(&key, Duration::from_secs(10), wait).await {
            Ok(g) => {
                r.acquired(start, &plan.progress);
                match g.release().await {
                    Ok(()) => r.cycles += 1,
                    Err(e) => {
                        r.fail(e.to_string(), false);
                        // The lock may still be held: move on.
                        key = keys.next();
                    }
                }
            }
            Err(e) => {
                r.fail(e.to_string(), true);
                if !e.is_held() {
                    key = keys.next();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    r
}

/// The leader's address, as the admin client finds it.
async fn leader_addr(endpoints: &[String], security: &Security) -> Option<String> {
    let native = lockd_client::Client::with_options(
        endpoints.to_vec(),
        lockd_client::ClientOptions {
            credentials: security.lockd.clone(),
            ..Default::default()
        },
    );
    lockd_client::admin::Admin::new(native, endpoints.to_vec())
        .leader_addr()
        .await
        .ok()
}

/// `POST /v1/locks/{key}/acquire`, then `…/release` with the token, on a
/// kept-alive connection of the client's own, as an HTTP library keeps it.
async fn http_client_loop(leader: String, security: Security, mut plan: Plan) -> ClientRun {
    let http = lockd_client::admin::Http::kept_alive(Duration::from_secs(30), security.lockd);
    // Connected (and kept alive) before the clock starts.
    let _ = http.get_text(&leader, "/healthz").await;
    plan.begin().await;
    let mut keys = Keys::new(plan.i, plan.contended);
    // The routes of the current key, made again only when the key changes.
    let routes = |key: &str| {
        (
            format!("/v1/locks/{key}/acquire"),
            format!("/v1/locks/{key}/release"),
        )
    };
    let (mut acquire, mut release) = routes(&keys.current());
    let wait_ms: u64 = if plan.contended { 10_000 } else { 0 };
    let acquire_body = serde_json::json!({"lease_ms": 10_000, "wait_ms": wait_ms});
    let mut r = ClientRun::default();
    while !done(plan.until, &plan.stop) {
        let start = Instant::now();
        let answer = http.post_json(&leader, &acquire, &acquire_body).await;
        let token = match answer {
            Ok((status, body)) if status.is_success() => {
                serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["token"].as_u64())
                    .ok_or_else(|| (format!("acquire: no token in {status}"), true))
            }
            Ok((status, body)) => Err((
                format!("acquire: {status}: {}", String::from_utf8_lossy(&body)),
                // 409: the lock is held (an acquire that did not wait):
                // keep the key.
                status.as_u16() != 409,
            )),
            Err(e) => Err((format!("acquire: {e}"), true)),
        };
        match token {
            Ok(token) => {
                r.acquired(start, &plan.progress);
                let released = http
                    .post_json(&leader, &release, &serde_json::json!({"token": token}))
                    .await;
                let failed = match released {
                    Ok((status, _)) if status.is_success() => None,
                    Ok((status, _)) => Some(status.to_string()),
                    Err(e) => Some(e.to_string()),
                };
                match failed {
                    None => r.cycles += 1,
                    Some(e) => {
                        r.fail(format!("release: {e}"), false);
                        (acquire, release) = routes(&keys.next());
                    }
                }
            }
            Err((error, move_on)) => {
                r.fail(error, true);
                if move_on {
                    (acquire, release) = routes(&keys.next());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    r
}

async fn etcd_client_loop(
    endpoints: Vec<String>,
    options: Option<etcd_client::ConnectOptions>,
    mut plan: Plan,
) -> ClientRun {
    let mut r = ClientRun::default();
    let mut keys = Keys::new(plan.i, plan.contended);
    let mut name = keys.current();
    let mut client = None;
    let mut lease = 0;
    while !done(plan.until, &plan.stop) {
        if client.is_none() {
            // One connection and one lease per client, as etcd's own
            // concurrency package does.
            let setup = async {
                let mut c = etcd_client::Client::connect(&endpoints, options.clone()).await?;
                let l = c.lease_grant(60, None).await?.id();
                Ok::<_, etcd_client::Error>((c, l))
            };
            let set_up = setup.await;
            // The clock starts once every client has tried its first.
            plan.begin().await;
            match set_up {
                Ok((c, l)) => {
                    client = Some(c);
                    lease = l;
                }
                Err(e) => {
                    r.fail(format!("setup: {e}"), true);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        }
        let Some(c) = client.as_mut() else { continue };
        let start = Instant::now();
        let locked = tokio::time::timeout(
            Duration::from_secs(10),
            c.lock(name.as_str(), Some(LockOptions::new().with_lease(lease))),
        )
        .await;
        let failed = match locked {
            Ok(Ok(resp)) => {
                r.acquired(start, &plan.progress);
                match c.unlock(resp.key().to_vec()).await {
                    Ok(_) => {
                        r.cycles += 1;
                        None
                    }
                    Err(e) => Some((e.to_string(), false)),
                }
            }
            Ok(Err(e)) => Some((format!("lock: {e}"), true)),
            Err(_) => Some(("lock timed out after 10 s".to_string(), false)),
        };
        // Any failure: a new connection, lease and key.
        if let Some((error, log)) = failed {
            r.fail(error, log);
            client = None;
            name = keys.next();
        }
    }
    r
}

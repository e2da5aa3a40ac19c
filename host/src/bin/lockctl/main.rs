//! `lockctl`: the command line of lockd.
//!
//! ```text
//! lockctl [--endpoints ADDR[,ADDR…]] [--json] acquire KEY --lease 10s [--wait 5s] [--hold]
//! lockctl release KEY --token T
//! lockctl keepalive KEY --token T
//! lockctl get KEY
//! lockctl status
//! lockctl members [list] | members add ID ADDR | members promote ID | members remove ID
//! lockctl bench --clients 64 [--contended] [--seconds 5]
//! lockctl upgrade FILE.wasm [--replaces HASH] [--no-precheck]   # swap the lock module
//! lockctl upgrade --shadow FILE.wasm | upgrade --promote | upgrade --abort
//! lockctl audit                                                  # determinism check
//! ```
//!
//! Exit status: 0 done; 1 error; 2 the lock is held (acquire after its wait,
//! release or keepalive by a non-holder, …): scripts can tell "busy" from
//! "broken"; 3 a lock held with `acquire --hold` was lost. A lock taken by `acquire` stays held after lockctl exits, until
//! released or its lease ends.

mod bench;

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use lockd_client::proto::{Status, WireError};
use lockd_client::{Client, ClientError};
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "lockctl",
    version,
    about = "Command line of the lockd lock service"
)]
struct Cli {
    /// Nodes of the cluster (any of them; requests find the leader).
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:7400"
    )]
    endpoints: Vec<String>,
    /// Machine-readable output.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Take a lock; prints its fencing token.
    Acquire {
        key: String,
        /// Lease, e.g. 10s, 500ms, 2m.
        #[arg(long, value_parser = parse_duration)]
        lease: Duration,
        /// Wait this long for a held lock (default: try once).
        #[arg(long, value_parser = parse_duration, default_value = "0ms")]
        wait: Duration,
        /// Keep holding: renew the lease in the background until Ctrl-C or
        /// SIGTERM, then release. Exits with status 3 if the lock is lost.
        #[arg(long)]
        hold: bool,
    },
    /// Release a lock held with TOKEN.
    Release {
        key: String,
        #[arg(long)]
        token: u64,
    },
    /// Renew the lease of TOKEN.
    Keepalive {
        key: String,
        #[arg(long)]
        token: u64,
    },
    /// Who holds KEY (linearizable read).
    Get { key: String },
    /// Status of every endpoint.
    Status,
    /// Show or change the membership.
    Members {
        #[command(subcommand)]
        op: Option<MembersOp>,
    },
    /// Replace the lock module through the log; with --shadow, run it
    /// beside the active one first (then --promote or --abort).
    Upgrade {
        /// The component file (a lock-sm component).
        file: Option<std::path::PathBuf>,
        /// Start FILE as a shadow module: fed every committed batch, its
        /// differences counted in `status`, no effect on locks.
        #[arg(long)]
        shadow: bool,
        /// Upgrade to the running shadow module.
        #[arg(long, conflicts_with_all = ["shadow", "abort", "file"])]
        promote: bool,
        /// Stop the running shadow module.
        #[arg(long, conflicts_with_all = ["shadow", "promote", "file"])]
        abort: bool,
        /// The module hash this upgrade replaces (default: the active one).
        #[arg(long)]
        replaces: Option<String>,
        /// Skip the leader's dry run; every node still checks at apply.
        #[arg(long)]
        no_precheck: bool,
    },
    /// Compare the state hashes recorded by every node; name any that differs.
    Audit,
    /// Lock cycles per second and acquire latency.
    Bench {
        #[arg(long, default_value_t = 1)]
        clients: usize,
        /// All clients on one key (every cycle is a handoff).
        #[arg(long)]
        contended: bool,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        #[arg(long, value_parser = parse_duration, default_value = "10s")]
        lease: Duration,
    },
}

#[derive(Subcommand)]
enum MembersOp {
    List,
    /// Add node ID at ADDR as a learner (started with `lockd serve --join`).
    Add {
        id: u64,
        addr: String,
    },
    /// Make learner ID a voter.
    Promote {
        id: u64,
    },
    /// Remove node ID.
    Remove {
        id: u64,
    },
}

/// The first 16 characters of a hash a node reported (char-safe: the text
/// may be an error message instead of hex).
fn short(s: &str) -> &str {
    s.char_indices().nth(16).map_or(s, |(i, _)| &s[..i])
}

/// `10s`, `500ms`, `2m`, `1h`, or a bare number of milliseconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 10s, 500ms, 2m"))?;
    let scale: u64 = match unit {
        "" | "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}; use ms, s, m or h"
            ))
        }
    };
    let ms = n
        .checked_mul(scale)
        .ok_or_else(|| format!("{s:?} is too long a duration"))?;
    Ok(Duration::from_millis(ms))
}

/// Exit status 2 for "the lock is not yours / is busy", 1 for the rest.
struct Failure(anyhow::Error, i32);

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure(e, 1)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        let code = match &e {
            ClientError::Rejected(
                WireError::Held(_) | WireError::NotHeld(_) | WireError::WrongToken(_),
            ) => 2,
            _ => 1,
        };
        Failure(anyhow!(e), code)
    }
}

fn print(json_out: bool, value: serde_json::Value, human: String) {
    if json_out {
        println!("{value}");
    } else {
        println!("{human}");
    }
}

async fn statuses(
    client: &Client,
    endpoints: &[String],
) -> Vec<(String, Result<Status, ClientError>)> {
    let mut out = Vec::new();
    for e in endpoints {
        out.push((e.clone(), client.status_of(e).await));
    }
    out
}

/// POST an admin request to the leader's HTTP API.
async fn admin(
    client: &Client,
    endpoints: &[String],
    path: &str,
    body: serde_json::Value,
) -> Result<serde_json::Value> {
    admin_bytes(
        client,
        endpoints,
        path,
        "application/json",
        bytes::Bytes::from(body.to_string()),
    )
    .await
}

/// POST raw bytes to the leader's HTTP API.
async fn admin_bytes(
    client: &Client,
    endpoints: &[String],
    path: &str,
    content_type: &str,
    body: bytes::Bytes,
) -> Result<serde_json::Value> {
    let mut leader_addr = None;
    for (_, s) in statuses(client, endpoints).await {
        if let Ok(s) = s {
            if let Some(l) = s.leader {
                leader_addr = s.members.iter().find(|m| m.id == l).map(|m| m.addr.clone());
                break;
            }
        }
    }
    let addr = leader_addr.ok_or_else(|| anyhow!("no endpoint knows a leader"))?;
    let http: HttpClient<_, Full<bytes::Bytes>> = HttpClient::builder(TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let req = hyper::Request::post(format!("http://{addr}{path}"))
        .header("content-type", content_type)
        .body(Full::new(body))?;
    let resp = http
        .request(req)
        .await
        .with_context(|| format!("POST {path} to the leader at {addr}"))?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await?.to_bytes();
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    if !status.is_success() {
        bail!("{}", value["error"].as_str().unwrap_or("request failed"));
    }
    Ok(value)
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let client = Client::new(cli.endpoints.clone());
    let j = cli.json;
    match cli.command {
        Cmd::Acquire {
            key,
            lease,
            wait,
            hold,
        } => {
            let mut g = client.acquire(&key, lease, wait).await?;
            print(
                j,
                json!({ "key": key, "token": g.token(), "lease_ms": g.lease().as_millis() as u64 }),
                format!(
                    "acquired {key} token {} lease {} ms",
                    g.token(),
                    g.lease().as_millis()
                ),
            );
            if hold {
                use std::io::Write as _;
                let _ = std::io::stdout().flush();
                g.keep_alive();
                loop {
                    tokio::select! {
                        _ = lockd::shutdown::signal() => {
                            g.release().await?;
                            return Ok(());
                        }
                        _ = tokio::time::sleep(Duration::from_millis(50)) => {
                            if !g.is_valid() {
                                return Err(Failure(anyhow!("lost lock {key} (token {}): its lease ran out or it was taken", g.token()), 3));
                            }
                        }
                    }
                }
            }
        }
        Cmd::Release { key, token } => {
            client.release(&key, token).await?;
            print(
                j,
                json!({ "key": key, "released": true }),
                format!("released {key}"),
            );
        }
        Cmd::Keepalive { key, token } => {
            let lease = client.keepalive(&key, token).await?;
            print(
                j,
                json!({ "key": key, "lease_ms": lease.as_millis() as u64 }),
                format!("{key} renewed for {} ms", lease.as_millis()),
            );
        }
        Cmd::Get { key } => {
            let v = client.get(&key).await?;
            match v {
                Some(v) => print(
                    j,
                    json!({ "key": key, "held": true, "token": v.token, "lease_ms": v.lease_ms }),
                    format!("{key}: held, token {} lease {} ms", v.token, v.lease_ms),
                ),
                None => print(
                    j,
                    json!({ "key": key, "held": false }),
                    format!("{key}: free"),
                ),
            }
        }
        Cmd::Status => {
            let all = statuses(&client, &cli.endpoints).await;
            if j {
                let v: Vec<serde_json::Value> = all
                    .iter()
                    .map(|(e, s)| match s {
                        Ok(s) => serde_json::to_value(s).unwrap_or_default(),
                        Err(err) => json!({ "endpoint": e, "error": err.to_string() }),
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(v));
            } else {
                println!(
                    "{:<22} {:>3} {:<9} {:>6} {:>6} {:>9} {:>9} {:>6}  {:<16} {:<16}",
                    "ENDPOINT",
                    "ID",
                    "ROLE",
                    "LEADER",
                    "TERM",
                    "COMMIT",
                    "APPLIED",
                    "LOCKS",
                    "STATE HASH",
                    "MODULE"
                );
                for (e, s) in &all {
                    match s {
                        Ok(s) => println!(
                            "{:<22} {:>3} {:<9} {:>6} {:>6} {:>9} {:>9} {:>6}  {:<16} {:<16}",
                            e,
                            s.id,
                            s.role,
                            s.leader
                                .map(|l| l.to_string())
                                .unwrap_or_else(|| "-".into()),
                            s.term,
                            s.commit_index,
                            s.applied_index,
                            s.locks_held,
                            short(&s.state_hash),
                            short(&s.module_hash),
                        ),
                        Err(err) => println!("{e:<22} unreachable: {err}"),
                    }
                }
                for s in all.iter().filter_map(|(_, s)| s.as_ref().ok()) {
                    println!(
                        "node {}: module {} since index {}",
                        s.id, s.module_version, s.module_since_index
                    );
                    if let Some(u) = s.upgrades.last() {
                        println!(
                            "node {}: last upgrade entry at index {}: {}{}",
                            s.id,
                            u.index,
                            u.result,
                            u.reason
                                .as_deref()
                                .map(|r| format!(" ({r})"))
                                .unwrap_or_default()
                        );
                    }
                    if let Some(sh) = &s.shadow {
                        println!(
                            "node {}: shadow {} ({}) since index {}: {} commands compared, {} outcome diffs, {} of {} state hashes differ{}",
                            s.id,
                            short(&sh.module_hash),
                            sh.module_version,
                            sh.since_index,
                            sh.commands_compared,
                            sh.outcome_diffs,
                            sh.hash_diffs,
                            sh.hash_checks,
                            sh.failed
                                .as_deref()
                                .map(|f| format!("; FAILED: {f}"))
                                .unwrap_or_default()
                        );
                    }
                    if s.audit_divergences > 0 {
                        println!(
                            "node {}: DETERMINISM AUDIT found {} divergence(s); run `lockctl audit`",
                            s.id, s.audit_divergences
                        );
                    }
                }
            }
            if all.iter().all(|(_, s)| s.is_err()) {
                return Err(Failure(anyhow!("no endpoint answered"), 1));
            }
        }
        Cmd::Members { op } => {
            let value = match op {
                None | Some(MembersOp::List) => {
                    let all = statuses(&client, &cli.endpoints).await;
                    let s = all
                        .into_iter()
                        .find_map(|(_, s)| s.ok())
                        .ok_or_else(|| anyhow!("no endpoint answered"))?;
                    serde_json::to_value(&s.members).map_err(anyhow::Error::from)?
                }
                Some(MembersOp::Add { id, addr }) => {
                    admin(
                        &client,
                        &cli.endpoints,
                        "/v1/members/add",
                        json!({ "id": id, "addr": addr }),
                    )
                    .await?
                }
                Some(MembersOp::Promote { id }) => {
                    admin(
                        &client,
                        &cli.endpoints,
                        "/v1/members/promote",
                        json!({ "id": id }),
                    )
                    .await?
                }
                Some(MembersOp::Remove { id }) => {
                    admin(
                        &client,
                        &cli.endpoints,
                        "/v1/members/remove",
                        json!({ "id": id }),
                    )
                    .await?
                }
            };
            if j {
                println!("{value}");
            } else {
                for m in value.as_array().into_iter().flatten() {
                    println!(
                        "{:>3} {:<22} {}",
                        m["id"],
                        m["addr"].as_str().unwrap_or(""),
                        if m["voter"] == true {
                            "voter"
                        } else {
                            "learner"
                        }
                    );
                }
            }
        }
        Cmd::Upgrade {
            file,
            shadow,
            promote,
            abort,
            replaces,
            no_precheck,
        } => {
            let (path, body) = if promote {
                ("/v1/admin/shadow/promote".to_string(), bytes::Bytes::new())
            } else if abort {
                ("/v1/admin/shadow/abort".to_string(), bytes::Bytes::new())
            } else {
                let file = file.ok_or_else(|| {
                    anyhow!("give the component file (or --promote / --abort)")
                })?;
                let module = std::fs::read(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                let mut query = Vec::new();
                if let Some(r) = &replaces {
                    if shadow {
                        return Err(anyhow!("--replaces applies to upgrades, not --shadow").into());
                    }
                    query.push(format!("replaces={r}"));
                }
                if no_precheck {
                    query.push("precheck=false".into());
                }
                let route = if shadow {
                    "/v1/admin/shadow"
                } else {
                    "/v1/admin/upgrade"
                };
                let path = if query.is_empty() {
                    route.to_string()
                } else {
                    format!("{route}?{}", query.join("&"))
                };
                (path, bytes::Bytes::from(module))
            };
            let r = admin_bytes(&client, &cli.endpoints, &path, "application/wasm", body).await?;
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            let human = match s("result").as_str() {
                "swapped" => format!(
                    "upgraded at index {}: module {} ({}) replaced {}",
                    r["index"],
                    s("module_hash"),
                    s("version"),
                    s("replaces")
                ),
                "shadow-started" => format!(
                    "shadow module {} ({}) started at index {}; watch `lockctl status`",
                    s("module_hash"),
                    s("version"),
                    r["index"]
                ),
                "shadow-stopped" => format!(
                    "shadow module {} stopped at index {}",
                    s("module_hash"),
                    r["index"]
                ),
                other => format!("{other}: {r}"),
            };
            print(j, r.clone(), human);
        }
        Cmd::Audit => {
            let all = statuses(&client, &cli.endpoints).await;
            let members = all
                .iter()
                .find_map(|(_, s)| s.as_ref().ok())
                .map(|s| s.members.clone())
                .ok_or_else(|| anyhow!("no endpoint answered"))?;
            let mut reports = Vec::new();
            let mut unreachable = Vec::new();
            for m in &members {
                match lockd::transport::http::get_json::<lockd_client::proto::AuditReport>(
                    &m.addr,
                    "/v1/audit",
                )
                .await
                {
                    Ok(r) => reports.push(r),
                    Err(e) => unreachable.push((m.id, e)),
                }
            }
            let c = lockd::upgrade::audit::compare(&reports);
            let nodes: Vec<u64> = reports.iter().map(|r| r.id).collect();
            let value = json!({
                "nodes": nodes,
                "unreachable": unreachable.iter().map(|(id, e)| json!({"id": id, "error": e})).collect::<Vec<_>>(),
                "common_indices": c.common_indices,
                "last_common": c.last_common,
                "divergences": c.divergences,
                "divergent_nodes": c.divergent_nodes(),
            });
            let mut human = format!(
                "audit: nodes {nodes:?} answered; {} common indices (last {})",
                c.common_indices,
                c.last_common.map_or("-".into(), |l| l.to_string())
            );
            for (id, e) in &unreachable {
                human.push_str(&format!("\nnode {id} unreachable: {e}"));
            }
            if c.divergences.is_empty() {
                human.push_str("; no divergence");
            }
            for d in &c.divergences {
                human.push_str(&format!(
                    "\nDIVERGENCE at index {}: node {} has state hash {}, {}",
                    d.index,
                    d.node,
                    d.hash,
                    match &d.majority {
                        Some(m) => format!("the majority has {m}"),
                        None => "and no hash has a majority".into(),
                    }
                ));
            }
            print(j, value, human);
            if !c.divergences.is_empty() {
                return Err(Failure(
                    anyhow!(
                        "the determinism audit found divergent node(s) {:?}",
                        c.divergent_nodes()
                    ),
                    1,
                ));
            }
        }
        Cmd::Bench {
            clients,
            contended,
            seconds,
            lease,
        } => {
            if clients == 0 {
                return Err(anyhow!("--clients must be at least 1").into());
            }
            let r = bench::run(
                &cli.endpoints,
                clients,
                contended,
                Duration::try_from_secs_f64(seconds)
                    .map_err(|e| anyhow!("--seconds {seconds}: {e}"))?,
                lease,
            )
            .await;
            if j {
                println!(
                    "{}",
                    serde_json::to_string(&r).map_err(anyhow::Error::from)?
                );
            } else {
                println!(
                    "| clients | keys | cycles/s | acquire p50 ms | p99 ms | p999 ms | errors |"
                );
                println!("|---:|---|---:|---:|---:|---:|---:|");
                println!(
                    "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
                    r.clients,
                    if r.contended { "one shared" } else { "own" },
                    r.cycles_per_sec,
                    r.acquire_p50_ms,
                    r.acquire_p99_ms,
                    r.acquire_p999_ms,
                    r.errors
                );
            }
        }
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lockctl: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(Failure(e, code)) = rt.block_on(run(cli)) {
        eprintln!("lockctl: {e:#}");
        std::process::exit(code);
    }
}

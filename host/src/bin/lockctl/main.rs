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

/// `10s`, `500ms`, `2m`, `1h`, or a bare number of milliseconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 10s, 500ms, 2m"))?;
    let ms = match unit {
        "" | "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}; use ms, s, m or h"
            ))
        }
    };
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
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(body.to_string())))?;
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
                            &s.state_hash[..16.min(s.state_hash.len())],
                            &s.module_hash[..16.min(s.module_hash.len())],
                        ),
                        Err(err) => println!("{e:<22} unreachable: {err}"),
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
                Duration::from_secs_f64(seconds),
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

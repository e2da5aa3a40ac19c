//! `lockctl bench --clients N [--contended] [--seconds S] [--lease D]
//! [--mode exclusive|shared] [--limit N]`: lock cycles (acquire + release)
//! against a cluster; prints cycles per second and acquire latency as a
//! Markdown table row (or JSON). With `--limit N` each key is a semaphore
//! of N slots (or N readers with `--mode shared`), which needs a lock
//! module of world 0.2; contended, every cycle is then a handoff of a slot.
//! With `--http` the clients use the HTTP/JSON routes instead of the
//! native protocol, each over its own kept-alive connection to the leader
//! (so both protocols meet the same node and the same work).

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use lockd_client::admin::{Admin, Http};
use lockd_client::proto::LockMode;
use lockd_client::{AcquireOptions, Client};
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use crate::output::Failure;

#[derive(Serialize)]
pub struct BenchReport {
    pub protocol: &'static str,
    pub clients: usize,
    pub contended: bool,
    pub mode: &'static str,
    pub limit: u32,
    pub seconds: f64,
    pub cycles: u64,
    pub cycles_per_sec: f64,
    pub acquire_p50_ms: f64,
    pub acquire_p99_ms: f64,
    pub acquire_p999_ms: f64,
    pub errors: u64,
}

/// What one benchmark row runs.
pub struct Workload {
    pub clients: usize,
    pub contended: bool,
    pub seconds: f64,
    pub lease: Duration,
    pub mode: LockMode,
    pub limit: u32,
    pub http: bool,
}

pub async fn run(
    endpoints: &[String],
    creds: &lockd_client::Credentials,
    j: bool,
    w: Workload,
) -> Result<(), Failure> {
    if w.clients == 0 {
        return Err(anyhow!("--clients must be at least 1").into());
    }
    let dur = Duration::try_from_secs_f64(w.seconds)
        .map_err(|e| anyhow!("--seconds {}: {e}", w.seconds))?;
    let r = if w.http {
        measure_http(endpoints, creds, &w, dur).await?
    } else {
        measure(endpoints, creds, &w, dur).await
    };
    if j {
        println!(
            "{}",
            serde_json::to_string(&r).map_err(anyhow::Error::from)?
        );
    } else {
        println!("| clients | keys | cycles/s | acquire p50 ms | p99 ms | p999 ms | errors |");
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
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

/// `clients` clients, each with its own connection, cycle for `dur`: on its
/// own key, or all on one key (`contended`: every cycle is a handoff).
async fn measure(
    endpoints: &[String],
    creds: &lockd_client::Credentials,
    w: &Workload,
    dur: Duration,
) -> BenchReport {
    let (clients, contended, lease) = (w.clients, w.contended, w.lease);
    // The seed's lock goes as it always did; options need world 0.2.
    let plain = w.mode == LockMode::Exclusive && w.limit == 1;
    let (mode, limit) = (w.mode, w.limit);
    // The clock starts once every client has connected (thousands of
    // clients take a while to), for all of them at once.
    let ready = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = Client::with_options(
            endpoints.to_vec(),
            lockd_client::ClientOptions {
                credentials: creds.clone(),
                // Each grant is released at once: no renewals to measure.
                keepalive: false,
                ..Default::default()
            },
        );
        let key = if contended {
            "bench/shared".to_string()
        } else {
            format!("bench/{c}")
        };
        let ready = ready.clone();
        tasks.push(tokio::spawn(async move {
            // Connect before the clock starts.
            let _ = client.get(&key).await;
            ready.wait().await;
            let start = Instant::now();
            let (mut lat, mut errors) = (Vec::new(), 0u64);
            while start.elapsed() < dur {
                let t = Instant::now();
                let wait = if contended {
                    Duration::from_secs(10)
                } else {
                    Duration::ZERO
                };
                let acquired = if plain {
                    // The protocol's first acquire (no request id).
                    client.acquire_once(&key, lease, wait).await
                } else {
                    let opts = AcquireOptions {
                        mode,
                        limit,
                        ..AcquireOptions::exclusive(lease)
                    }
                    .wait(wait);
                    client.acquire_with(&key, opts).await
                };
                match acquired {
                    Ok(g) => {
                        lat.push(t.elapsed());
                        if g.release().await.is_err() {
                            errors += 1;
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    ready.wait().await;
    let start = Instant::now();
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        if let Ok((l, e)) = t.await {
            lat.extend(l);
            errors += e;
        }
    }
    report("native", w, start, lat, errors)
}

/// The report of a run that started at `start`.
fn report(
    protocol: &'static str,
    w: &Workload,
    start: Instant,
    mut lat: Vec<Duration>,
    errors: u64,
) -> BenchReport {
    let secs = start.elapsed().as_secs_f64();
    lat.sort();
    BenchReport {
        protocol,
        clients: w.clients,
        contended: w.contended,
        mode: w.mode.as_str(),
        limit: w.limit,
        seconds: secs,
        cycles: lat.len() as u64,
        cycles_per_sec: lat.len() as f64 / secs,
        acquire_p50_ms: percentile(&lat, 0.50),
        acquire_p99_ms: percentile(&lat, 0.99),
        acquire_p999_ms: percentile(&lat, 0.999),
        errors,
    }
}

/// [`measure`] over HTTP/JSON: `POST /v1/locks/{key}/acquire`, then
/// `…/release` with the token, each client on a kept-alive connection of
/// its own to the leader.
async fn measure_http(
    endpoints: &[String],
    creds: &lockd_client::Credentials,
    w: &Workload,
    dur: Duration,
) -> Result<BenchReport, Failure> {
    let native = Client::with_options(
        endpoints.to_vec(),
        lockd_client::ClientOptions {
            credentials: creds.clone(),
            ..Default::default()
        },
    );
    let leader = Admin::new(native, endpoints.to_vec())
        .leader_addr()
        .await
        .map_err(|e| anyhow!("finding the leader: {e}"))?;
    let wait_ms: u64 = if w.contended { 10_000 } else { 0 };
    let mut body = json!({"lease_ms": w.lease.as_millis() as u64, "wait_ms": wait_ms});
    if !(w.mode == LockMode::Exclusive && w.limit == 1) {
        body["mode"] = json!(w.mode.as_str());
        body["limit"] = json!(w.limit);
    }
    let ready = Arc::new(tokio::sync::Barrier::new(w.clients + 1));
    let mut tasks = Vec::new();
    for c in 0..w.clients {
        let http = Http::kept_alive(Duration::from_secs(30), creds.clone());
        let key = if w.contended {
            "bench/shared".to_string()
        } else {
            format!("bench/{c}")
        };
        let (leader, body, ready) = (leader.clone(), body.clone(), ready.clone());
        tasks.push(tokio::spawn(async move {
            let acquire = format!("/v1/locks/{key}/acquire");
            let release = format!("/v1/locks/{key}/release");
            // Connect before the clock starts.
            let _ = http.get_text(&leader, "/healthz").await;
            ready.wait().await;
            let start = Instant::now();
            let (mut lat, mut errors) = (Vec::new(), 0u64);
            while start.elapsed() < dur {
                let t = Instant::now();
                let token = match http.post_json(&leader, &acquire, &body).await {
                    Ok((s, b)) if s.is_success() => serde_json::from_slice::<serde_json::Value>(&b)
                        .ok()
                        .and_then(|v| v["token"].as_u64()),
                    _ => None,
                };
                let Some(token) = token else {
                    errors += 1;
                    continue;
                };
                lat.push(t.elapsed());
                match http
                    .post_json(&leader, &release, &json!({"token": token}))
                    .await
                {
                    Ok((s, _)) if s.is_success() => {}
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    ready.wait().await;
    let start = Instant::now();
    let (mut lat, mut errors) = (Vec::new(), 0);
    for t in tasks {
        if let Ok((l, e)) = t.await {
            lat.extend(l);
            errors += e;
        }
    }
    Ok(report("http", w, start, lat, errors))
}

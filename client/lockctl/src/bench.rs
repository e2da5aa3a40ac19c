//! `lockctl bench --clients N [--contended] [--seconds S] [--lease D]`:
//! lock cycles (acquire + release) against a cluster; prints cycles per
//! second and acquire latency as a Markdown table row (or JSON).

use std::time::Duration;

use anyhow::anyhow;
use lockd_client::Client;
use serde::Serialize;
use tokio::time::Instant;

use crate::output::Failure;

#[derive(Serialize)]
pub struct BenchReport {
    pub clients: usize,
    pub contended: bool,
    pub seconds: f64,
    pub cycles: u64,
    pub cycles_per_sec: f64,
    pub acquire_p50_ms: f64,
    pub acquire_p99_ms: f64,
    pub acquire_p999_ms: f64,
    pub errors: u64,
}

pub async fn run(
    endpoints: &[String],
    j: bool,
    clients: usize,
    contended: bool,
    seconds: f64,
    lease: Duration,
) -> Result<(), Failure> {
    if clients == 0 {
        return Err(anyhow!("--clients must be at least 1").into());
    }
    let dur =
        Duration::try_from_secs_f64(seconds).map_err(|e| anyhow!("--seconds {seconds}: {e}"))?;
    let r = measure(endpoints, clients, contended, dur, lease).await;
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
    clients: usize,
    contended: bool,
    dur: Duration,
    lease: Duration,
) -> BenchReport {
    let start = Instant::now() + Duration::from_millis(200);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = Client::new(endpoints.to_vec());
        let key = if contended {
            "bench/shared".to_string()
        } else {
            format!("bench/{c}")
        };
        tasks.push(tokio::spawn(async move {
            // Connect before the clock starts.
            let _ = client.get(&key).await;
            tokio::time::sleep_until(start).await;
            let (mut lat, mut errors) = (Vec::new(), 0u64);
            while start.elapsed() < dur {
                let t = Instant::now();
                let wait = if contended {
                    Duration::from_secs(10)
                } else {
                    Duration::ZERO
                };
                match client.acquire(&key, lease, wait).await {
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
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        if let Ok((l, e)) = t.await {
            lat.extend(l);
            errors += e;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort();
    BenchReport {
        clients,
        contended,
        seconds: secs,
        cycles: lat.len() as u64,
        cycles_per_sec: lat.len() as f64 / secs,
        acquire_p50_ms: percentile(&lat, 0.50),
        acquire_p99_ms: percentile(&lat, 0.99),
        acquire_p999_ms: percentile(&lat, 0.999),
        errors,
    }
}

//! `lockctl health [--ready]`: each endpoint's liveness or readiness, one
//! line each (or a JSON array); fails (status 1) unless every endpoint is
//! healthy, so it serves as a container or supervisor healthcheck.

use anyhow::anyhow;
use lockd_client::admin::{Admin, Probe};
use serde_json::json;

use crate::output::Failure;

pub async fn run(admin: &Admin, j: bool, ready: bool) -> Result<(), Failure> {
    let probes = admin.probe(ready).await;
    let what = if ready { "ready" } else { "alive" };
    let mut bad = 0;
    let mut rows = Vec::new();
    for (endpoint, probe) in &probes {
        let (ok, detail) = match probe {
            Probe::Healthy(v) => (true, v.clone()),
            Probe::Unhealthy { status, body } => (false, json!({ "status": status, "body": body })),
            Probe::Unreachable(e) => (false, json!({ "error": e.to_string() })),
        };
        if !ok {
            bad += 1;
        }
        if j {
            rows.push(json!({ "endpoint": endpoint, "ok": ok, "answer": detail }));
        } else {
            println!("{}", line(endpoint, what, probe));
        }
    }
    if j {
        println!("{}", serde_json::Value::Array(rows));
    }
    if bad > 0 {
        return Err(Failure(
            anyhow!("{bad} of {} endpoints not {what}", probes.len()),
            1,
        ));
    }
    Ok(())
}

fn line(endpoint: &str, what: &str, probe: &Probe) -> String {
    match probe {
        Probe::Healthy(_) => format!("{endpoint}: {what}"),
        Probe::Unhealthy { status, body } => {
            let reasons = body["reasons"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_else(|| body.to_string());
            format!("{endpoint}: not {what} ({status}): {reasons}")
        }
        Probe::Unreachable(e) => format!("{endpoint}: no answer: {e}"),
    }
}

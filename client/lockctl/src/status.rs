//! `lockctl status`: the status of every endpoint, as a table (or a JSON
//! array, one object per endpoint), then each node's module, last upgrade,
//! trusted module keys, shadow module and audit alarms. Fails only when no endpoint answers.

use anyhow::anyhow;
use lockd_client::admin::Admin;
use serde_json::json;

use crate::output::{short, Failure};

pub async fn run(admin: &Admin, j: bool) -> Result<(), Failure> {
    let all = admin.statuses().await;
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
                // A node that answered "no" is reachable: say what it said.
                Err(err @ lockd_client::ClientError::Rejected { .. }) => {
                    println!("{e:<22} refused: {err}")
                }
                Err(err) => println!("{e:<22} unreachable: {err}"),
            }
        }
        for s in all.iter().filter_map(|(_, s)| s.as_ref().ok()) {
            // The world first: the version string counts releases.
            println!(
                "node {}: module {}{} since index {}",
                s.id,
                world(s.module_world.as_deref()),
                s.module_version,
                s.module_since_index
            );
            if let Some(c) = &s.cluster_id {
                println!("node {}: cluster {c}", s.id);
            }
            if let Some(f) = &s.first_module_hash {
                println!("node {}: cluster started with module {}", s.id, short(f));
            }
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
            match s.trusted_module_keys.as_slice() {
                [] => {}
                keys => println!(
                    "node {}: upgrades must be signed by one of {} trusted module key(s): {}",
                    s.id,
                    keys.len(),
                    keys.iter().map(|k| short(k)).collect::<Vec<_>>().join(", ")
                ),
            }
            if let Some(sh) = &s.shadow {
                println!(
                    "node {}: shadow {} ({}{}) since index {}: {} commands compared, {} outcome diffs, {} of {} state hashes differ{}",
                    s.id,
                    short(&sh.module_hash),
                    world(sh.module_world.as_deref()),
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
    Ok(())
}

/// "world 0.3, " (nothing from a node of an earlier build, which does not
/// say).
fn world(number: Option<&str>) -> String {
    number.map(|w| format!("world {w}, ")).unwrap_or_default()
}

//! The operator, during the faults: a voter removed and added back, or a
//! shadow of the active module started and stopped.
//!
//! Each step is retried through the faults as an operator would, and each
//! try starts from what the leader reports (the membership, whether a
//! shadow runs), so a step whose answer was lost is never done twice.
//! While a voter is out, a quorum is a majority of the others, which the
//! horizon's view of the links does not know: the time from the removal's
//! first try to the promotion's answer is a window in which a lease may
//! outlive its time, like a fault's. The window ends once the promotion
//! has settled (no joint configuration, committed), not when the leader
//! first names the node a voter.

use std::time::Duration;

use lockd_client::admin::Admin;

use crate::jepsen::history::History;
use crate::jepsen::workload::Target;

/// What the operator does, and when.
#[derive(Clone, Copy, Debug)]
pub enum Operation {
    /// Remove voter `node` and add it back (a learner, then promoted).
    Rejoin { node: u64 },
    /// Start the active module as a shadow, then stop it: every node runs
    /// it beside the active one on every entry meanwhile.
    Shadow { module: &'static [u8] },
}

/// How many times a step is tried, `PAUSE` apart.
const TRIES: usize = 100;
const PAUSE: Duration = Duration::from_millis(300);

/// Carry out `op`; the window (history time, ms) in which a voter was out.
pub(super) async fn operate(
    op: Operation,
    target: &Target,
    history: &History,
) -> Result<Option<(f64, f64)>, String> {
    let client = target.admin_client(Duration::from_secs(3), Duration::from_secs(2));
    let admin = Admin::new(client, target.endpoints.clone());
    match op {
        Operation::Rejoin { node } => {
            let from = history.now();
            rejoin(&admin, node).await?;
            Ok(Some((from, history.now())))
        }
        Operation::Shadow { module } => {
            shadow(&admin, module).await?;
            Ok(None)
        }
    }
}

/// Where `node` stands in the leader's membership.
#[derive(Debug, PartialEq)]
enum Standing {
    Voter,
    /// A voter in a change not yet settled (joint, or not committed): the
    /// quorum is not yet a majority of all (sweep seed 111323).
    Joining,
    Learner,
    Out,
}

async fn standing(admin: &Admin, node: u64) -> Result<Standing, String> {
    let status = admin.leader_status().await.map_err(|e| e.to_string())?;
    Ok(match status.members.iter().find(|m| m.id == node) {
        Some(m) if m.voter && !status.membership_settled() => Standing::Joining,
        Some(m) if m.voter => Standing::Voter,
        Some(_) => Standing::Learner,
        None => Standing::Out,
    })
}

async fn rejoin(admin: &Admin, node: u64) -> Result<(), String> {
    let addr = super::run::node_addr(node);
    let mut removed = false;
    let mut last = String::new();
    for _ in 0..TRIES {
        let step = match standing(admin, node).await {
            Err(e) => Err(e),
            Ok(Standing::Voter) if removed => return Ok(()),
            Ok(Standing::Voter) => admin.remove_member(node).await.map_err(|e| e.to_string()),
            // Asking again finishes a change its leader left joint.
            Ok(Standing::Joining) => admin.promote_member(node).await.map_err(|e| e.to_string()),
            Ok(Standing::Out) => {
                removed = true;
                admin
                    .add_member(node, &addr)
                    .await
                    .map_err(|e| e.to_string())
            }
            Ok(Standing::Learner) => {
                removed = true;
                admin.promote_member(node).await.map_err(|e| e.to_string())
            }
        };
        if let Err(e) = step {
            tracing::info!(node, error = %e, "operator: a membership step did not go in; again");
            last = e;
            tokio::time::sleep(PAUSE).await;
        }
    }
    Err(format!(
        "operator: node {node} was not removed and added back: {last}"
    ))
}

async fn shadow(admin: &Admin, module: &'static [u8]) -> Result<(), String> {
    let mut started = false;
    let mut last = String::new();
    for _ in 0..TRIES {
        let running = admin
            .leader_status()
            .await
            .map(|s| s.shadow.is_some())
            .map_err(|e| e.to_string());
        let step = match running {
            Err(e) => Err(e),
            Ok(false) if started => return Ok(()),
            Ok(false) => admin
                .start_shadow(module.to_vec(), true)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Ok(true) => {
                started = true;
                // Let it run beside the active module for a while.
                tokio::time::sleep(Duration::from_secs(1)).await;
                admin
                    .abort_shadow()
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        };
        if let Err(e) = step {
            tracing::info!(error = %e, "operator: a shadow step did not go in; again");
            last = e;
            tokio::time::sleep(PAUSE).await;
        }
    }
    Err(format!(
        "operator: the shadow was not started and stopped: {last}"
    ))
}

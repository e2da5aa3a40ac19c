//! The module changes of a run: the module a mixed run puts in, the
//! upgrade of a run with `upgrade_at`, the operator's rollback, and the
//! trapping grants of a hostile run until its module is out of service.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use lockd_client::admin::UpgradeHow;
use lockd_core::engine::ModuleHash;
use lockd_proto::OnModuleFailure;

use super::SimConfig;
use crate::jepsen::workload::Target;

/// The module a mixed run puts in before its clients start: with
/// sessions and elections, world 0.4's (0.3's and the election policy, so
/// campaigns' priorities are picked under the faults too).
pub(super) fn mixed_module(cfg: &SimConfig) -> &'static [u8] {
    if cfg.sessions {
        crate::fixtures::LOCK_SM_WORLD04
    } else {
        crate::fixtures::LOCK_SM_WORLD02
    }
}

/// The module a run with `upgrade_at` upgrades to.
pub(super) fn upgrade_module(cfg: &SimConfig) -> &'static [u8] {
    match (cfg.hostile, cfg.rollback) {
        (true, _) => crate::fixtures::CHAOS_GUEST,
        // What 0.1 can be returned to from (a downgrade of its state).
        (false, true) => crate::fixtures::LOCK_SM_WORLD02,
        (false, false) => crate::fixtures::LOCK_SM_WORLD01_V2,
    }
}

/// Grants of the key the chaos module traps on, through the faults and
/// on after them until the module is out of service: each is refused
/// (`module_failed`, or an error of the faults); one granted is a
/// violation. Once every grant is refused as out of service (the module
/// failed too often), the operator's move: a rollback to the module
/// before, which is returned. With `fell_back` (the upgrade chose
/// `on_failure` `rollback`) the cluster makes that move itself: a grant
/// of the key is then expected once status records the fall back, and
/// out of service is a violation. Every hostile run so checks that a
/// module that keeps failing is taken out of service, and that the way
/// back brings the cluster back.
pub(super) async fn traps(
    target: &Target,
    stop: &AtomicBool,
    fell_back: bool,
) -> Result<&'static [u8], String> {
    /// Tries after the faults: the trapping grants are log entries of
    /// their own, so the next index the threshold is judged at comes.
    const AFTER: usize = 300;
    let client = target.client(Duration::from_secs(2), Duration::from_secs(1));
    let (mut refused, mut after) = (0, 0);
    while after < AFTER {
        match client
            .acquire_once("chaos:trap", Duration::from_secs(1), Duration::ZERO)
            .await
        {
            Ok(g) => {
                let token = g.token();
                if fell_back && has_fallen_back(target).await? {
                    tracing::info!(refused, token, "clients: the cluster fell back on its own");
                    return Ok(lockd_core::builtin::LOCK_SM);
                }
                return Err(format!(
                    "a grant the module traps on was granted: token {token}"
                ));
            }
            Err(e) if e.code() == Some(lockd_proto::ErrorCode::ModuleFailed) => {
                refused += 1;
                if e.to_string().contains("out of service") {
                    if fell_back {
                        return Err(format!(
                            "out of service where the cluster should have fallen back: {e}"
                        ));
                    }
                    tracing::info!(
                        refused,
                        "clients: the module is out of service; rolling back"
                    );
                    roll_back(target, crate::fixtures::CHAOS_GUEST).await?;
                    return Ok(lockd_core::builtin::LOCK_SM);
                }
            }
            Err(_) => {}
        }
        // The client's pace (simulated time), not a wait for a condition:
        // slow through the faults, quick after them.
        let pace = if stop.load(std::sync::atomic::Ordering::Relaxed) {
            after += 1;
            50
        } else {
            700
        };
        tokio::time::sleep(Duration::from_millis(pace)).await;
    }
    Err(format!(
        "the module failed {refused} trapping grants and was not taken out of service"
    ))
}

fn admin(target: &Target) -> lockd_client::admin::Admin {
    let client = target.admin_client(Duration::from_secs(3), Duration::from_secs(2));
    lockd_client::admin::Admin::new(client, target.endpoints.clone())
}

/// Put `module` in by a hot upgrade, retried through leader changes and
/// faults (each try may meet a node cut off, or a dying leader).
pub(super) async fn upgrade(
    target: &Target,
    module: &[u8],
    on_failure: OnModuleFailure,
) -> Result<(), String> {
    match upgrade_refused_by(target, module, on_failure, None).await? {
        Swap::In => Ok(()),
        Swap::Kept(why) => Err(format!("the upgrade was refused: {why}")),
    }
}

/// How an upgrade ended.
#[derive(Debug)]
pub(super) enum Swap {
    In,
    /// Kept out for good, by the node that cannot run it (`refusing`).
    Kept(String),
}

/// [`upgrade`], with `refusing` the node that cannot run `module` (see
/// [`SimConfig::refusing`]) and whether the upgrade asks for `quorum`: its
/// refusal at the pre-check (not with `quorum`), or its refusal of the
/// upload while it leads, keeps the module out for good.
pub(super) async fn upgrade_refused_by(
    target: &Target,
    module: &[u8],
    on_failure: OnModuleFailure,
    refusing: Option<(u64, bool)>,
) -> Result<Swap, String> {
    let admin = admin(target);
    let mut last = String::new();
    for _ in 0..100 {
        let how = UpgradeHow {
            on_failure,
            quorum: refusing.is_some_and(|(_, quorum)| quorum),
            ..UpgradeHow::default()
        };
        match admin.upgrade_how(module.to_vec(), how).await {
            Ok(_) => return Ok(Swap::In),
            Err(e) if e.to_string().contains("already the active module") => return Ok(Swap::In),
            Err(lockd_client::admin::AdminError::Refused { status, message })
                if kept_out(status.as_u16(), &message, refusing) =>
            {
                return Ok(Swap::Kept(message))
            }
            Err(e) => last = e.to_string(),
        }
        tracing::info!(error = %last, "clients: the upgrade did not go in; again");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(format!("the upgrade did not go in: {last}"))
}

/// Whether a refusal is the refusing node's own, for good: it leads and
/// refuses the upload (413), or it refused at the pre-check and a refusal
/// blocks (no `quorum`).
fn kept_out(status: u16, message: &str, refusing: Option<(u64, bool)>) -> bool {
    let Some((node, quorum)) = refusing else {
        return false;
    };
    let bound = "(--max-module-bytes)";
    match status {
        413 => true,
        409 => !quorum && message.contains(&format!("node {node}: ")) && message.contains(bound),
        _ => false,
    }
}

/// Return from `from` to the module before (the built-in one), retried
/// as [`upgrade`]. A try whose answer was lost may have gone in: a later
/// try then finds no way back, and the leader's upgrade records show the
/// swap from `from` (a module hash alone could be a lagging node's).
pub(super) async fn roll_back(target: &Target, from: &[u8]) -> Result<(), String> {
    let admin = admin(target);
    let (from, to) = (
        ModuleHash::of(from).to_string(),
        ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string(),
    );
    let mut last = String::new();
    for _ in 0..100 {
        match admin.rollback(true).await {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        if let Ok(s) = admin.leader_status().await {
            let done = s
                .upgrades
                .iter()
                .any(|u| u.swapped() && u.replaces == from && u.module_hash == to);
            if done {
                return Ok(());
            }
        }
        tracing::info!(error = %last, "clients: the rollback did not go in; again");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(format!("the rollback did not go in: {last}"))
}

/// Whether the leader's status records that the cluster left a module
/// out of service for the one before. Asked until a leader answers that
/// has applied as far (a new leader may not have yet).
async fn has_fallen_back(target: &Target) -> Result<bool, String> {
    let admin = admin(target);
    let mut last = String::new();
    for _ in 0..50 {
        match admin.leader_status().await {
            Ok(s)
                if s.module_way_back
                    .as_ref()
                    .is_some_and(|w| w.fell_back.as_ref().is_some_and(|f| f.swapped)) =>
            {
                return Ok(true)
            }
            Ok(s) => last = format!("module {}, way back {:?}", s.module_hash, s.module_way_back),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::info!(%last, "clients: no fall back recorded");
    Ok(false)
}

//! Reads on the leader that see everything it ever acknowledged.
//!
//! openraft's read-index is the later of the leader's first entry of its
//! term and the commit index it knows. A leader that restarted without
//! losing its term (openraft 0.9 restores one at once) knew no commit
//! index until its followers answered — the commit index is not persisted:
//! safety does not need it, and it would cost a write per commit — and its
//! term's first entry was old. So read-index alone could return while the
//! node had applied only its snapshot, and the leader then answered from a
//! lock table that lacked locks it had granted just before the crash: a
//! holder's release refused as "not held" inside its lease. A restarted
//! leader is no longer restored (`raft::log_store`, `forget_leadership`),
//! so a leader's first entry is always of its own term; the wait below is
//! kept as the guard that does not depend on that.
//!
//! Everything a leader acknowledged is in its log (appended before it was
//! replicated), and a leader commits every entry of its log. So a read
//! also waits until this node has applied its log as far as the log
//! reached when the read began: one commit at most under load, nothing
//! when idle.

use std::time::Duration;

use super::error::ServiceError;
use lockd_replication::state_machine::StateMachineStore;
use lockd_replication::{NodeId, Raft};

/// How long a confirmed leader may take to apply its own log.
const APPLY_LIMIT: Duration = Duration::from_secs(10);

/// Confirm leadership with a quorum (read-index) and wait until the local
/// log, as far as it reached when called, is applied.
pub(crate) async fn confirm(raft: &Raft, id: NodeId) -> Result<(), ServiceError> {
    let last = raft.metrics().borrow().last_log_index;
    raft.ensure_linearizable().await.map_err(|e| {
        ServiceError::from_raft(id, e, |e| {
            format!("node {id} could not confirm its leadership with a quorum: {e}")
        })
    })?;
    if let Some(last) = last {
        raft.wait(Some(APPLY_LIMIT))
            .applied_index_at_least(Some(last), "read barrier")
            .await
            .map_err(|e| {
                ServiceError::Unavailable(format!(
                    "node {id} has not applied its log up to index {last} within {} s: {e}",
                    APPLY_LIMIT.as_secs()
                ))
            })?;
    }
    Ok(())
}

/// How long a request the active module would refuse waits for this node
/// to confirm it leads before the refusal stands, and a new cluster's
/// first requests for its first module. Longer than a keepalive's bound:
/// on a new cluster the first requests may come while its first leader
/// commits its first entries, which under load takes more than an
/// election's time; they wait for that rather than fail.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// On a new cluster whose first module is not applied yet (a request that
/// came first), confirm leadership and wait for it, within
/// [`SETTLE_LIMIT`] each; at once otherwise.
pub(crate) async fn cluster_module(
    raft: &Raft,
    sm: &StateMachineStore,
    id: NodeId,
) -> Result<(), ServiceError> {
    if sm.genesis_needed().is_none() {
        return Ok(());
    }
    confirm_within(raft, id, SETTLE_LIMIT).await?;
    if first_module(raft, sm, SETTLE_LIMIT).await {
        Ok(())
    } else {
        Err(ServiceError::Unavailable(format!(
            "node {id}: the cluster's first module is not applied yet"
        )))
    }
}

/// [`confirm`], or unavailable when it takes longer than `limit`.
pub(crate) async fn confirm_within(
    raft: &Raft,
    id: NodeId,
    limit: Duration,
) -> Result<(), ServiceError> {
    tokio::time::timeout(limit, confirm(raft, id))
        .await
        .unwrap_or_else(|_| {
            Err(ServiceError::Unavailable(format!(
                "node {id} could not confirm its leadership with a quorum within {} ms",
                limit.as_millis()
            )))
        })
}

/// A new cluster's first leader records the cluster's first module after
/// its read barrier; until that entry applies, this node runs the index-0
/// module, which is not the cluster's. Waits for it, at most `within`;
/// whether it is recorded.
pub(crate) async fn first_module(raft: &Raft, sm: &StateMachineStore, within: Duration) -> bool {
    let sm = sm.clone();
    raft.wait(Some(within))
        .metrics(move |_| sm.genesis_needed().is_none(), "first module")
        .await
        .is_ok()
}

//! What a refusal waits for before it stands: the active module's support
//! of a request's mode and limit, checked again after the read barrier,
//! and leadership confirmed with a quorum.

use std::time::Duration;

use super::LockService;
use crate::barrier;
use crate::error::ServiceError;
use crate::table::Spec;

impl LockService {
    /// Whether the active module supports `spec`'s mode and limit. The
    /// module this node has applied may lag its log: a leader just elected,
    /// or restarted, applies an upgrade entry it already has only after it
    /// takes requests, and would refuse what the committed module grants.
    /// So a refusal stands only after the read barrier (leadership
    /// confirmed, the log applied as far as it reached); the barrier costs
    /// nothing on the path that is supported.
    pub(super) async fn check_supported(&self, key: &str, spec: &Spec) -> Result<(), ServiceError> {
        self.refusal_stands(|s| s.unsupported(key, spec)).await
    }

    /// `check` of the active module, and when it refuses, again after the
    /// read barrier (within [`barrier::SETTLE_LIMIT`]) and the cluster's first
    /// module (within an election's time): a refusal stands only then.
    /// Free on the path that passes.
    pub(crate) async fn refusal_stands(
        &self,
        check: impl Fn(&Self) -> Result<(), ServiceError>,
    ) -> Result<(), ServiceError> {
        if check(self).is_ok() {
            return Ok(());
        }
        self.confirm_leading_within(barrier::SETTLE_LIMIT).await?;
        barrier::first_module(&self.raft, &self.sm, self.election_max).await;
        check(self)
    }

    /// Confirm with a quorum that this node still leads and has applied
    /// what it committed, within an election's time: a keepalive's answer,
    /// which its lease is waiting for.
    pub(crate) async fn confirm_leading(&self) -> Result<(), ServiceError> {
        self.confirm_leading_within(self.election_max).await
    }

    async fn confirm_leading_within(&self, limit: Duration) -> Result<(), ServiceError> {
        barrier::confirm_within(&self.raft, self.id, limit).await
    }

    /// The active module's `features` against `spec`'s mode and limit.
    fn unsupported(&self, key: &str, spec: &Spec) -> Result<(), ServiceError> {
        let internal =
            |e: lockd_core::engine::EngineError| ServiceError::StateMachine(e.to_string());
        let features = self.sm.features().map_err(internal)?;
        let why = if !features.modes.contains(&spec.mode) {
            format!("it has no {} locks", spec.mode.as_str())
        } else if spec.limit > features.max_limit {
            format!(
                "limit {} is above its largest, {}",
                spec.limit, features.max_limit
            )
        } else {
            return Ok(());
        };
        let version = self.sm.version().map_err(internal)?;
        Err(ServiceError::Unsupported {
            key: key.to_string(),
            reason: format!(
                "{why} (active module: {version}, world {})",
                features.world_id
            ),
        })
    }
}
